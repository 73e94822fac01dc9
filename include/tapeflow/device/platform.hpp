// SPDX-License-Identifier: Apache-2.0
// The one platform header of the device side. Device code and the GPU backend are written against
// the CUDA runtime's names; on AMD (hipcc, __HIP_PLATFORM_AMD__ or TAPEFLOW_HIP) this header maps
// each name tapeflow uses to its HIP twin, so the same sources build for both. It also defines the
// checked-call macros every CUDA/HIP call and launch in tapeflow goes through, and the few
// functions that differ per platform beyond the runtime's names: the launch, the lane mask, the
// block's dynamic shared memory, the device whose kernel facts launches cache.
//
// The emulated device (emulator/, docs/emulation.md) is a platform that looks like CUDA: its build
// finds the emulator's <cuda_runtime.h>, libcu++, CUB, Thrust and cuBLAS subsets under their own
// headers' names, and this header's one switch (at its end) takes its platform functions.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#if defined(__HIP_PLATFORM_AMD__) || defined(TAPEFLOW_HIP)
#include <hip/hip_runtime.h>

#define TAPEFLOW_PLATFORM_HIP 1

#define cudaDeviceAttr hipDeviceAttribute_t
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceProp hipDeviceProp_t
#define cudaDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define cudaDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define cudaDevAttrMaxSharedMemoryPerBlock hipDeviceAttributeMaxSharedMemoryPerBlock
#define cudaDevAttrMaxSharedMemoryPerMultiprocessor hipDeviceAttributeMaxSharedMemoryPerMultiprocessor
#define cudaDevAttrMaxThreadsPerBlock hipDeviceAttributeMaxThreadsPerBlock
#define cudaDevAttrMaxThreadsPerMultiProcessor hipDeviceAttributeMaxThreadsPerMultiProcessor
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrWarpSize hipDeviceAttributeWarpSize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaError_t hipError_t
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEvent_t hipEvent_t
#define cudaFreeAsync hipFreeAsync
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaFreeHost hipHostFree
#define cudaDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraph_t hipGraph_t
#define cudaMallocAsync hipMallocAsync
#define cudaMallocHost(ptr, bytes) hipHostMalloc((ptr), (bytes), hipHostMallocDefault)
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define cudaMemPoolGetAttribute hipMemPoolGetAttribute
#define cudaMemPoolSetAttribute hipMemPoolSetAttribute
#define cudaMemPool_t hipMemPool_t
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemsetAsync hipMemsetAsync
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamEndCapture hipStreamEndCapture
#if !defined(cudaStreamNonBlocking)  // a macro of CUDA's: HIP on NVIDIA defines hipStreamNonBlocking as it
#define cudaStreamNonBlocking hipStreamNonBlocking
#endif
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess
#else
#include <cuda_runtime.h>
#endif

namespace tapeflow::detail {
/// cudaGraphInstantiate's three-argument form (HIP 5 keeps CUDA 10's five).
inline cudaError_t graph_instantiate(cudaGraphExec_t* exec, cudaGraph_t graph)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
#else
  return cudaGraphInstantiate(exec, graph, 0);
#endif
}
}  // namespace tapeflow::detail

namespace tapeflow {
/// The backend this translation unit's device code runs on.
#if defined(TAPEFLOW_PLATFORM_HIP)
inline constexpr backend gpu_backend = backend::hip;
#else
inline constexpr backend gpu_backend = backend::cuda;
#endif
}  // namespace tapeflow

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace tapeflow::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, char const* call, char const* file, int line)
{
  std::string const name = cudaGetErrorName(status);
  std::string const what = where(file, line) + "CUDA error " + name + " (" + cudaGetErrorString(status) +
                           ") in " + call;
  if (status == cudaErrorMemoryAllocation) { throw out_of_memory(what, 0); }
  throw platform_error(what, name, static_cast<int>(status));
}

}  // namespace tapeflow::detail

/// Calls a CUDA runtime function and throws tapeflow::platform_error (out_of_memory for
/// cudaErrorMemoryAllocation) with file:line and the error's name when it fails. A non-sticky
/// error is cleared first so the runtime stays usable.
#define TAPEFLOW_CUDA_TRY(call)                                                       \
  do {                                                                                \
    cudaError_t const tapeflow_status_ = (call);                                      \
    if (tapeflow_status_ != cudaSuccess) {                                            \
      static_cast<void>(cudaGetLastError());                                          \
      ::tapeflow::detail::throw_cuda_error(tapeflow_status_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

/// Checks the launch that precedes it (configuration and launch errors).
#define TAPEFLOW_CHECK_LAUNCH() TAPEFLOW_CUDA_TRY(cudaGetLastError())

/// For noexcept paths (destructors, deallocation): a failure is reported on stderr, not thrown.
#define TAPEFLOW_ASSERT_CUDA_SUCCESS(call)                                                        \
  do {                                                                                            \
    cudaError_t const tapeflow_status_ = (call);                                                  \
    if (tapeflow_status_ != cudaSuccess) {                                                        \
      static_cast<void>(cudaGetLastError());                                                      \
      std::fprintf(stderr, "tapeflow: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
                   cudaGetErrorName(tapeflow_status_));                                           \
    }                                                                                             \
  } while (0)

namespace tapeflow {
/// The CUDA stream behind a view.
[[nodiscard]] inline cudaStream_t to_native(stream_view stream) noexcept
{
  return static_cast<cudaStream_t>(stream.native());
}
}  // namespace tapeflow

// What differs per platform beyond the runtime's names, one function each: the emulated device's,
// or CUDA's and HIP's here. TAPEFLOW_DEVICE_BULK_COPY: the code being compiled has sm_90's
// bulk-copy engine.
#if defined(TAPEFLOW_EMULATED)
#include <tapeflow/emulated/platform.hpp>
#else
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TAPEFLOW_DEVICE_BULK_COPY 1
#endif

namespace tapeflow::device {

#if defined(__CUDACC__) || defined(__HIPCC__)
/// The block's dynamic shared memory (the launch's shared-memory bytes), 16-byte aligned.
template <class T>
__device__ inline T* dynamic_shared() noexcept
{
  extern __shared__ __align__(16) unsigned char tapeflow_dynamic_smem[];
  return reinterpret_cast<T*>(tapeflow_dynamic_smem);
}
#endif

namespace detail {

#if defined(__CUDACC__) || defined(__HIPCC__)
/// `kernel<<<grid, block, smem_bytes, stream>>>(args...)`: the arguments convert to the kernel's
/// parameter types as in any launch. A bad shape sets the last error.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream,
                   Args&&... args)
{
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
}
#endif

#if defined(__CUDACC__) && !defined(__HIP_PLATFORM_AMD__)
/// The lanes of the calling thread's warp below it (%lanemask_lt): CUDA's warps, HIP on NVIDIA too.
__device__ inline unsigned lane_mask_lt() noexcept
{
  unsigned lower = 0;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lower));
  return lower;
}
#endif

/// The current device, as far as what it reports about kernels goes: its ordinal.
inline std::uint64_t current_device()
{
  int ordinal = 0;
  TAPEFLOW_CUDA_TRY(cudaGetDevice(&ordinal));
  return static_cast<std::uint64_t>(ordinal);
}

}  // namespace detail
}  // namespace tapeflow::device
#endif
