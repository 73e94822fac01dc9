// SPDX-License-Identifier: Apache-2.0
// The GPU backend's host side: stream-ordered device memory, copies, streams, events, graphs and
// device limits. Written against the CUDA runtime; compiled as the HIP backend through the
// platform header when the build targets AMD. Kernels live with their workloads (kernels/).
#include "backend/backend_ops.hpp"

#include <tapeflow/device/platform.hpp>
#include <tapeflow/error.hpp>

#include <algorithm>
#include <mutex>
#include <vector>

namespace tapeflow::detail {
namespace {

#if defined(TAPEFLOW_PLATFORM_HIP)
constexpr char const* platform_name = "HIP";
#else
constexpr char const* platform_name = "CUDA";
#endif

struct device_census {
  int count{0};
  bool unusable{false};
  std::string reason;
};

std::string platform_name_version(int version)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  return "HIP " + std::to_string(version);
#else
  return "CUDA " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
#endif
}

device_census const& census() noexcept
{
  static device_census const result = [] {
    device_census c;
    cudaError_t const status = cudaGetDeviceCount(&c.count);
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      c.count = 0;
      // No driver at all reads as "insufficient driver" too: the installed driver's version
      // (0 when there is none) tells a machine without a GPU from one whose driver is too old.
      int driver_version = 0;
      bool const driver_installed = cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version > 0;
      static_cast<void>(cudaGetLastError());
      count_failure const failure = status == cudaErrorNoDevice             ? count_failure::no_device
                                    : status == cudaErrorInsufficientDriver ? count_failure::insufficient_driver
                                                                            : count_failure::other;
      c.unusable = count_failure_means_unusable(failure, driver_installed);
      c.reason = std::string{c.unusable ? "an unusable " : "no "} + platform_name +
                 " device: device count query returned " + cudaGetErrorName(status) + " (" +
                 cudaGetErrorString(status) + ")" +
                 (driver_installed ? ", with a driver for " + platform_name_version(driver_version) + " installed"
                                   : std::string{", and no driver is installed"});
    } else if (c.count == 0) {
      c.reason = std::string{"no "} + platform_name + " device: the driver reports 0 devices";
    }
    return c;
  }();
  return result;
}

int cuda_device_count() noexcept { return census().count; }

bool cuda_device_unusable() noexcept { return census().unusable; }

std::string cuda_unavailable_reason() { return census().reason; }

device_limits read_limits(int ordinal)
{
  auto attribute = [ordinal](cudaDeviceAttr attr) {
    int value = 0;
    TAPEFLOW_CUDA_TRY(cudaDeviceGetAttribute(&value, attr, ordinal));
    return value;
  };
  cudaDeviceProp props{};
  TAPEFLOW_CUDA_TRY(cudaGetDeviceProperties(&props, ordinal));
  device_limits limits;
  limits.kind = gpu_backend;
  limits.ordinal = ordinal;
  limits.name = props.name;
  limits.multiprocessors = attribute(cudaDevAttrMultiProcessorCount);
  limits.shared_mem_per_block = static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlock));
#if defined(TAPEFLOW_PLATFORM_HIP)
  limits.shared_mem_per_block_optin = limits.shared_mem_per_block;  // the attribute is CUDA's only
#else
  limits.shared_mem_per_block_optin = static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
#endif
  limits.shared_mem_per_multiprocessor =
    static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  limits.max_threads_per_block = attribute(cudaDevAttrMaxThreadsPerBlock);
  limits.max_threads_per_multiprocessor = attribute(cudaDevAttrMaxThreadsPerMultiProcessor);
  limits.warp_size = attribute(cudaDevAttrWarpSize);
  limits.global_mem_bytes = props.totalGlobalMem;
#if defined(TAPEFLOW_PLATFORM_HIP)
  limits.compute_capability = 0;  // HIP's major and minor are the AMD architecture's (9.0: gfx90a)
  limits.async_copy = false;  // no hardware async copy: register double-buffering
  limits.bulk_copy = false;
#else
  limits.compute_capability =
    attribute(cudaDevAttrComputeCapabilityMajor) * 10 + attribute(cudaDevAttrComputeCapabilityMinor);
  limits.async_copy = limits.compute_capability >= 80;
  limits.bulk_copy = limits.compute_capability >= 90;
#endif
  return limits;
}

device_limits cuda_limits(int ordinal)
{
  // Attribute queries are cheap but not free; planners ask for every chain.
  static std::mutex mutex;
  static std::vector<std::pair<int, device_limits>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto const& [o, l] : cache) {
    if (o == ordinal) { return l; }
  }
  cache.emplace_back(ordinal, read_limits(ordinal));
  return cache.back().second;
}

/// cudaMallocAsync draws from the device's default memory pool, whose release threshold is 0 by
/// default: at every synchronisation the pool hands all its unused memory back to the driver, and
/// the next allocations map it again (about 25 GiB a run for the big benchmarks, a timed forward
/// at a time). tapeflow sets it to the largest value once per device, so that freed memory stays
/// in the pool for the process's next allocations; chains keep their own tape memory anyway
/// (buffer_pool), this covers every other buffer. `cudaMemPoolTrimTo(pool, 0)` gives it back.
void keep_pool_memory()
{
  int device = 0;
  TAPEFLOW_CUDA_TRY(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::vector<int> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done.begin(), done.end(), device) != done.end()) { return; }
  cudaMemPool_t pool = nullptr;
  TAPEFLOW_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device));
  unsigned long long threshold = ~0ULL;
  TAPEFLOW_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  done.push_back(device);
}

void* cuda_allocate(std::size_t bytes, stream_view stream)
{
  keep_pool_memory();
  void* ptr = nullptr;
  cudaError_t const status = cudaMallocAsync(&ptr, bytes, to_native(stream));
  if (status == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError());
    TAPEFLOW_FAIL_BYTES(out_of_memory,
                  std::string{platform_name} + " device allocation of " + std::to_string(bytes) + " bytes failed (out of memory)",
                  bytes);
  }
  TAPEFLOW_CUDA_TRY(status);
  return ptr;
}

void cuda_deallocate(void* ptr, std::size_t, stream_view stream) noexcept
{
  TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaFreeAsync(ptr, to_native(stream)));
}

cudaMemcpyKind to_cuda(copy_kind kind) noexcept
{
  switch (kind) {
    case copy_kind::host_to_device: return cudaMemcpyHostToDevice;
    case copy_kind::device_to_host: return cudaMemcpyDeviceToHost;
    case copy_kind::device_to_device: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

void cuda_copy(void* dst, void const* src, std::size_t bytes, copy_kind kind, stream_view stream)
{
  if (bytes == 0) { return; }
  TAPEFLOW_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, to_cuda(kind), to_native(stream)));
}

void cuda_fill(void* dst, unsigned char value, std::size_t bytes, stream_view stream)
{
  if (bytes == 0) { return; }
  TAPEFLOW_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, to_native(stream)));
}

void cuda_synchronize(stream_view stream) { TAPEFLOW_CUDA_TRY(cudaStreamSynchronize(to_native(stream))); }

void* cuda_create_stream()
{
  cudaStream_t stream = nullptr;
  TAPEFLOW_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void cuda_destroy_stream(void* native) noexcept
{
  TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(static_cast<cudaStream_t>(native)));
}

void* cuda_allocate_host(std::size_t bytes)
{
  void* ptr = nullptr;
  cudaError_t const status = cudaMallocHost(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError());
    TAPEFLOW_FAIL_BYTES(out_of_memory,
                        "pinned host allocation of " + std::to_string(bytes) + " bytes failed (out of memory)",
                        bytes);
  }
  TAPEFLOW_CUDA_TRY(status);
  return ptr;
}

void cuda_deallocate_host(void* ptr, std::size_t) noexcept { TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaFreeHost(ptr)); }

cudaEvent_t as_event(void* e) noexcept { return static_cast<cudaEvent_t>(e); }

void* cuda_create_event()
{
  cudaEvent_t event = nullptr;
  TAPEFLOW_CUDA_TRY(cudaEventCreate(&event));
  return event;
}

void cuda_destroy_event(void* e) noexcept { TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaEventDestroy(as_event(e))); }

void cuda_record_event(void* e, stream_view stream)
{
  TAPEFLOW_CUDA_TRY(cudaEventRecord(as_event(e), to_native(stream)));
}

void cuda_wait_event(stream_view stream, void* e)
{
  TAPEFLOW_CUDA_TRY(cudaStreamWaitEvent(to_native(stream), as_event(e), 0));
}

void cuda_synchronize_event(void* e) { TAPEFLOW_CUDA_TRY(cudaEventSynchronize(as_event(e))); }

float cuda_elapsed_ms(void* start, void* stop)
{
  TAPEFLOW_CUDA_TRY(cudaEventSynchronize(as_event(stop)));
  float ms = 0;
  TAPEFLOW_CUDA_TRY(cudaEventElapsedTime(&ms, as_event(start), as_event(stop)));
  return ms;
}

void cuda_capture_begin(stream_view stream)
{
  TAPEFLOW_CUDA_TRY(cudaStreamBeginCapture(to_native(stream), cudaStreamCaptureModeThreadLocal));
}

void* cuda_capture_end(stream_view stream)
{
  cudaGraph_t graph = nullptr;
  TAPEFLOW_CUDA_TRY(cudaStreamEndCapture(to_native(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  cudaError_t const status = graph_instantiate(&exec, graph);
  TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(graph));
  TAPEFLOW_CUDA_TRY(status);
  return exec;
}

void cuda_graph_launch(void* graph, stream_view stream)
{
  TAPEFLOW_CUDA_TRY(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), to_native(stream)));
}

void cuda_graph_destroy(void* graph) noexcept
{
  TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)));
}

}  // namespace

#if defined(TAPEFLOW_PLATFORM_HIP)
backend_ops const& hip_backend_ops() noexcept
#else
backend_ops const& cuda_backend_ops() noexcept
#endif
{
  static backend_ops const table{gpu_backend,          cuda_device_count,    cuda_unavailable_reason, cuda_device_unusable,
                                 cuda_limits,          cuda_allocate,        cuda_deallocate,
                                 cuda_copy,            cuda_fill,            cuda_synchronize,
                                 cuda_create_stream,   cuda_destroy_stream,  cuda_allocate_host,
                                 cuda_deallocate_host, cuda_create_event,    cuda_destroy_event,
                                 cuda_record_event,    cuda_wait_event,      cuda_synchronize_event,
                                 cuda_elapsed_ms,      cuda_capture_begin,   cuda_capture_end,
                                 cuda_graph_launch,    cuda_graph_destroy};
  return table;
}

}  // namespace tapeflow::detail
