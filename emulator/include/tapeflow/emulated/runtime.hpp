// SPDX-License-Identifier: Apache-2.0
// The emulated device: the subset of the CUDA runtime API tapeflow uses, implemented on the CPU
// (emulator/src/). A build with TAPEFLOW_EMULATED compiles the CUDA backend, every kernel and the
// GPU tests against this header, as the emulator's <cuda_runtime.h>: kernels run as blocks of
// cooperatively scheduled fibers, streams are queues run in order (lazily by default: work runs
// only when something waits for it), copies and fills run on the host. docs/emulation.md gives
// the model and its limits.
//
// Names and signatures follow the CUDA runtime so that the backend's sources compile unchanged;
// everything here is host code of the emulator, not CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

/// The runtime API the emulator follows: CUDA 12.3's (cudaFuncGetName, the three-argument
/// cudaGraphInstantiate).
#define CUDART_VERSION 12030

// ---------------------------------------------------------------------------------------------
// Vector types and launch shapes, as in CUDA's vector_types.h.
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) noexcept : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) noexcept : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const noexcept { return {x, y, z}; }
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
struct alignas(8) float2 {
  float x, y;
};

// ---------------------------------------------------------------------------------------------
// Errors.
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorUnknown = 999,
};

[[nodiscard]] char const* cudaGetErrorName(cudaError_t error) noexcept;
/// The error's description; for an error raised by a kernel (a trap, a deadlocked barrier) it
/// names the kernel launch, the block and the thread.
[[nodiscard]] char const* cudaGetErrorString(cudaError_t error) noexcept;
/// Returns and clears this host thread's last launch error.
cudaError_t cudaGetLastError() noexcept;
cudaError_t cudaPeekAtLastError() noexcept;

// ---------------------------------------------------------------------------------------------
// Device.
enum cudaDeviceAttr : int {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int multiProcessorCount;
  int major;
  int minor;
};

cudaError_t cudaGetDeviceCount(int* count) noexcept;
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int device) noexcept;
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) noexcept;
cudaError_t cudaDriverGetVersion(int* version) noexcept;
cudaError_t cudaDeviceSynchronize() noexcept;
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) noexcept;

struct cudaFuncAttributes {
  int binaryVersion;
  int ptxVersion;
  int maxThreadsPerBlock;
  int numRegs;
  std::size_t sharedSizeBytes;
  int maxDynamicSharedSizeBytes;
};
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void const* function) noexcept;
enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
/// Raises (or lowers) the dynamic shared memory a kernel's launches may ask for, up to the
/// device's opt-in limit (cudaErrorInvalidValue past it); without it a launch may ask for what a
/// block gets without opting in.
cudaError_t cudaFuncSetAttribute(void const* function, cudaFuncAttribute attribute, int value) noexcept;
/// The kernel's (mangled) symbol where the dynamic linker knows it; cudaErrorInvalidDeviceFunction
/// otherwise (a symbol the executable does not export).
cudaError_t cudaFuncGetName(char const** name, void const* function) noexcept;
template <class... Params>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void (*function)(Params...)) noexcept
{
  return cudaFuncGetAttributes(attributes, reinterpret_cast<void const*>(function));
}
/// Blocks of `function` one multiprocessor runs at once with `block_size` threads and
/// `dynamic_smem` bytes of dynamic shared memory: the least that its warps, its shared memory (each
/// block also holding the 1 KiB the driver keeps for it), its registers (as the settings'
/// kernel_registers= plays them, allocated 256 to a warp) and 32 blocks allow; 0 for a launch the
/// kernel cannot take (more threads than it runs, more shared memory than it may ask for).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void const* function, int block_size,
                                                          std::size_t dynamic_smem) noexcept;
template <class... Params>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void (*function)(Params...), int block_size,
                                                          std::size_t dynamic_smem) noexcept
{
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<void const*>(function), block_size,
                                                       dynamic_smem);
}

// ---------------------------------------------------------------------------------------------
// Streams, events, graphs.
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;

inline constexpr unsigned cudaStreamDefault = 0;
inline constexpr unsigned cudaStreamNonBlocking = 1;
enum cudaStreamCaptureMode : int {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) noexcept;
cudaError_t cudaStreamDestroy(cudaStream_t stream) noexcept;
cudaError_t cudaStreamSynchronize(cudaStream_t stream) noexcept;
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) noexcept;
cudaError_t cudaEventCreate(cudaEvent_t* event) noexcept;
cudaError_t cudaEventDestroy(cudaEvent_t event) noexcept;
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) noexcept;
cudaError_t cudaEventSynchronize(cudaEvent_t event) noexcept;
cudaError_t cudaEventQuery(cudaEvent_t event) noexcept;
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) noexcept;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) noexcept;
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) noexcept;
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) noexcept;
cudaError_t cudaGraphDestroy(cudaGraph_t graph) noexcept;
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) noexcept;
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) noexcept;

// ---------------------------------------------------------------------------------------------
// Memory.
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) noexcept;
cudaError_t cudaFree(void* ptr) noexcept;
cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) noexcept;
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) noexcept;
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) noexcept;
cudaError_t cudaFreeHost(void* ptr) noexcept;
cudaError_t cudaMemcpy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind) noexcept;
cudaError_t cudaMemcpyAsync(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr) noexcept;
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) noexcept;
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream = nullptr) noexcept;

// The stream-ordered allocator's pool: one default pool, whose release threshold (the bytes it
// keeps when a stream synchronises, instead of handing them back to the driver) can be set and
// read. cudaMallocAsync itself does not model the pool's reuse.
struct CUmemPoolHandle_st;
using cudaMemPool_t = CUmemPoolHandle_st*;
enum cudaMemPoolAttr : int {
  cudaMemPoolAttrReleaseThreshold = 4,
};
cudaError_t cudaGetDevice(int* device) noexcept;
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) noexcept;
/// `value` points at an unsigned long long (cuuint64_t), as in CUDA.
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept;
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept;

// ---------------------------------------------------------------------------------------------
// What the emulator adds: kernel launches and host work ordered on a stream, and its settings.
namespace tapeflow::emu {

/// The body of one block's thread: calls the kernel with its arguments.
using kernel_body = std::function<void()>;

/// Enqueues a kernel launch on `stream` (checked like a CUDA launch: a bad shape sets the last
/// error and runs nothing).
void launch_kernel(void const* function, dim3 grid, dim3 block, std::size_t dynamic_smem_bytes, cudaStream_t stream,
                   kernel_body body);

/// Enqueues host work on `stream`, run in stream order like a kernel (the emulated CUB and
/// cuBLAS routines are such work).
void enqueue_host(cudaStream_t stream, std::function<void()> work);

/// The emulator's settings, from the environment variable TAPEFLOW_EMULATOR (a comma-separated
/// list: `schedule=sequential|random`, `seed=N`, `threads=N`, `streams=lazy|eager`,
/// `memory=BYTES`, `stack=BYTES`) and overridable in-process by tests.
struct settings {
  bool random_schedule{false};     ///< interleave fibers in a seeded random order at every yield point
  std::uint64_t seed{1};           ///< the random schedule's seed
  unsigned threads{0};             ///< host threads that run blocks (0: hardware concurrency, at most 4)
  bool lazy_streams{true};         ///< stream work runs when something waits for it, not when enqueued
  std::size_t memory_bytes{std::size_t{4} << 30};  ///< the device's memory
  std::size_t stack_bytes{0};      ///< per fiber (0: 64 KiB, 512 KiB under AddressSanitizer)
  /// What cudaFuncGetAttributes reports for every kernel, to play binaries and kernels the device
  /// cannot take as they are: the virtual architecture the loaded code was compiled for (ptxVersion;
  /// 80: a binary built for sm_80 only, whose compute_80 PTX the driver compiles for this sm_90
  /// device, so binaryVersion stays 90), and the kernel's own thread limit (0: the device's 1024;
  /// lower: a kernel that needs many registers), and the registers a thread of every kernel holds
  /// (0: registers bound no launch; cudaOccupancyMaxActiveBlocksPerMultiprocessor counts them).
  int kernel_virtual_arch{90};
  int kernel_max_threads{0};
  int kernel_registers{0};
};
[[nodiscard]] settings current_settings();
/// Counts configure() calls: host code that caches what the device reports about kernels keys
/// its cache by this too (a reconfigured emulator is, for that, another device).
[[nodiscard]] std::uint64_t configuration_epoch() noexcept;
/// Replaces the settings (runs every stream's queued work first) and restarts the launch count the
/// random schedule's seeds derive from; returns the previous settings.
settings configure(settings const& next);

/// Clears the device's sticky error (left by a trap, a deadlock or an exception in a kernel), so
/// that a test can go on after checking one; queued work is dropped, memory is kept. The
/// emulator's own: a CUDA context cannot recover from such an error.
void clear_error();

/// Counters for tests and docs: launches, blocks, fiber switches.
struct counters {
  std::uint64_t launches{0};
  std::uint64_t blocks{0};
  std::uint64_t switches{0};
};
[[nodiscard]] counters current_counters() noexcept;

}  // namespace tapeflow::emu
