// SPDX-License-Identifier: Apache-2.0
// The emulated device's runtime: memory, streams, events, graphs and launches, with the CUDA
// runtime's names (emulator/include/tapeflow/emulated/runtime.hpp).
//
// Streams are queues of work run in order. Under the default lazy setting, work runs only when
// something waits for it — a synchronize, an event wait, a synchronous copy — which is a legal
// CUDA schedule and the one that turns a missing wait into a wrong result: a host that reads a
// pinned buffer before waiting for the copy into it reads stale bytes. Every API call takes one
// process-wide (recursive) lock; kernels run their blocks outside any lock.
#include "emulator.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tapeflow::emu::detail {
namespace {

using work = std::function<void()>;
using clock = std::chrono::steady_clock;

struct stream_state;

struct graph_ops {
  std::vector<work> ops;
};

struct stream_state {
  std::deque<work> queue;
  std::uint64_t enqueued{0};
  std::uint64_t executed{0};
  std::shared_ptr<graph_ops> capture;  // non-null while the stream is being captured
};

struct event_state {
  std::shared_ptr<stream_state> stream;
  std::uint64_t seq{0};
  bool recorded{false};
  bool done{false};
  clock::time_point when{};
};

}  // namespace
}  // namespace tapeflow::emu::detail

struct CUstream_st {
  std::shared_ptr<tapeflow::emu::detail::stream_state> state;
};
struct CUevent_st {
  std::shared_ptr<tapeflow::emu::detail::event_state> state;
};
struct CUgraph_st {
  std::shared_ptr<tapeflow::emu::detail::graph_ops> graph;
};
struct CUgraphExec_st {
  std::vector<tapeflow::emu::detail::work> ops;
};

namespace tapeflow::emu::detail {
namespace {

std::size_t default_stack_bytes() noexcept
{
#if defined(__SANITIZE_ADDRESS__)
  return std::size_t{512} << 10;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return std::size_t{512} << 10;
#else
  return std::size_t{64} << 10;
#endif
#else
  return std::size_t{64} << 10;
#endif
}

settings parse_environment()
{
  settings s;
  char const* text = std::getenv("TAPEFLOW_EMULATOR");
  if (text == nullptr) { return s; }
  std::string const all = text;
  std::size_t start = 0;
  while (start <= all.size()) {
    std::size_t const end = std::min(all.find(',', start), all.size());
    std::string const item = all.substr(start, end - start);
    start = end + 1;
    if (item.empty()) { continue; }
    std::size_t const eq = item.find('=');
    std::string const key = item.substr(0, eq);
    std::string const value = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto number = [&] {
      char* rest = nullptr;
      unsigned long long const v = std::strtoull(value.c_str(), &rest, 10);
      if (value.empty() || rest == nullptr || *rest != '\0') {
        std::fprintf(stderr, "tapeflow emulator: TAPEFLOW_EMULATOR: '%s' needs a number\n", item.c_str());
        std::exit(2);
      }
      return v;
    };
    if (key == "schedule" && (value == "random" || value == "sequential")) {
      s.random_schedule = value == "random";
    } else if (key == "seed") {
      s.seed = number();
    } else if (key == "threads") {
      s.threads = static_cast<unsigned>(number());
    } else if (key == "streams" && (value == "lazy" || value == "eager")) {
      s.lazy_streams = value == "lazy";
    } else if (key == "memory") {
      s.memory_bytes = number();
    } else if (key == "stack") {
      s.stack_bytes = number();
    } else if (key == "binary") {
      s.kernel_binary_version = static_cast<int>(number());
    } else if (key == "kernel_threads") {
      s.kernel_max_threads = static_cast<int>(number());
    } else {
      std::fprintf(stderr,
                   "tapeflow emulator: TAPEFLOW_EMULATOR: unknown setting '%s' (schedule=sequential|random, seed=N, "
                   "threads=N, streams=lazy|eager, memory=BYTES, stack=BYTES, binary=SM, kernel_threads=N)\n",
                   item.c_str());
      std::exit(2);
    }
  }
  return s;
}

settings resolved(settings s)
{
  if (s.stack_bytes == 0) { s.stack_bytes = default_stack_bytes(); }
  if (s.threads == 0) { s.threads = std::clamp(std::thread::hardware_concurrency(), 1U, 4U); }
  return s;
}

struct allocation {
  std::size_t bytes;
};

/// The device: its settings, memory, the legacy default stream and the sticky error.
struct device {
  std::recursive_mutex mutex;
  settings config{resolved(parse_environment())};
  std::map<std::uintptr_t, allocation> device_memory;  // by start address
  std::map<std::uintptr_t, allocation> pinned_memory;
  std::size_t used{0};
  std::shared_ptr<stream_state> legacy{std::make_shared<stream_state>()};
  std::set<std::shared_ptr<stream_state>> streams;  // every live stream, for device-wide waits
  cudaError_t sticky{cudaSuccess};
  std::string sticky_message;
  std::uint64_t launches{0};

  device() { streams.insert(legacy); }
};

device& dev()
{
  static device* const d = new device();  // never destroyed: streams may be used during exit
  return *d;
}

thread_local cudaError_t last_error = cudaSuccess;

/// Runs `s`'s queued work in order up to (and including) its `upto`-th operation.
void run_until(stream_state& s, std::uint64_t upto)
{
  while (s.executed < upto && !s.queue.empty()) {
    work w = std::move(s.queue.front());
    s.queue.pop_front();
    ++s.executed;
    if (dev().sticky == cudaSuccess) { w(); }
  }
}

void run_all(stream_state& s) { run_until(s, s.enqueued); }

void run_everything()
{
  // Work on one stream may wait for another's; running each to its end in turn is enough, since
  // a cross-stream wait runs the other stream's work itself.
  std::vector<std::shared_ptr<stream_state>> const all(dev().streams.begin(), dev().streams.end());
  for (auto const& s : all) { run_all(*s); }
}

stream_state& resolve(cudaStream_t stream)
{
  return stream == nullptr ? *dev().legacy : *stream->state;
}
std::shared_ptr<stream_state> resolve_shared(cudaStream_t stream)
{
  return stream == nullptr ? dev().legacy : stream->state;
}

void enqueue(cudaStream_t stream, work w)
{
  stream_state& s = resolve(stream);
  if (s.capture) {
    s.capture->ops.push_back(std::move(w));
    return;
  }
  s.queue.push_back(std::move(w));
  ++s.enqueued;
  if (!dev().config.lazy_streams) { run_all(s); }
}

bool capturing_anywhere()
{
  return std::any_of(dev().streams.begin(), dev().streams.end(), [](auto const& s) { return s->capture != nullptr; });
}

/// The live allocation that holds [p, p + bytes), if any.
bool inside(std::map<std::uintptr_t, allocation> const& memory, void const* p, std::size_t bytes)
{
  auto const a = reinterpret_cast<std::uintptr_t>(p);
  auto it = memory.upper_bound(a);
  if (it == memory.begin()) { return false; }
  --it;
  return a >= it->first && a + bytes <= it->first + it->second.bytes;
}

void fail_device(std::string message)
{
  device& d = dev();
  if (d.sticky == cudaSuccess) {
    d.sticky = cudaErrorLaunchFailure;
    d.sticky_message = "unspecified launch failure (emulated device: " + message + ")";
    std::fprintf(stderr, "tapeflow emulator: %s\n", message.c_str());
  }
}

#define TAPEFLOW_EMU_GUARD()                                    \
  std::lock_guard<std::recursive_mutex> emu_lock(dev().mutex);  \
  if (dev().sticky != cudaSuccess) { return dev().sticky; }

}  // namespace

settings active_settings()
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().config;
}

}  // namespace tapeflow::emu::detail

using namespace tapeflow::emu::detail;

// ---------------------------------------------------------------------------------------------
// Errors.
char const* cudaGetErrorName(cudaError_t error) noexcept
{
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

char const* cudaGetErrorString(cudaError_t error) noexcept
{
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory (emulated device)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: {
      std::lock_guard<std::recursive_mutex> lock(dev().mutex);
      return dev().sticky_message.empty() ? "unspecified launch failure" : dev().sticky_message.c_str();
    }
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() noexcept
{
  cudaError_t const e = last_error;
  last_error = cudaSuccess;
  if (e != cudaSuccess) { return e; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().sticky;
}

cudaError_t cudaPeekAtLastError() noexcept
{
  if (last_error != cudaSuccess) { return last_error; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().sticky;
}

// ---------------------------------------------------------------------------------------------
// Device.
cudaError_t cudaGetDeviceCount(int* count) noexcept
{
  if (count == nullptr) { return cudaErrorInvalidValue; }
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int device) noexcept
{
  if (props == nullptr || device != 0) { return cudaErrorInvalidValue; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  *props = {};
  std::snprintf(props->name, sizeof props->name, "tapeflow emulated device (CPU fibers, sm_90 semantics)");
  props->totalGlobalMem = dev().config.memory_bytes;
  props->sharedMemPerBlock = shared_per_block;
  props->warpSize = warp_size;
  props->maxThreadsPerBlock = max_threads_per_block;
  props->multiProcessorCount = multiprocessors;
  props->major = 9;
  props->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) noexcept
{
  if (value == nullptr || device != 0) { return cudaErrorInvalidValue; }
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock: *value = max_threads_per_block; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(shared_per_block); break;
    case cudaDevAttrWarpSize: *value = warp_size; break;
    case cudaDevAttrMultiProcessorCount: *value = multiprocessors; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = max_threads_per_multiprocessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(shared_per_multiprocessor); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(shared_per_block_optin); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) noexcept
{
  if (version == nullptr) { return cudaErrorInvalidValue; }
  *version = 0;  // no driver: the emulator
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  run_everything();
  return dev().sticky;
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (free == nullptr || total == nullptr) { return cudaErrorInvalidValue; }
  *total = dev().config.memory_bytes;
  *free = *total - std::min(*total, dev().used);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void const* function) noexcept
{
  if (attributes == nullptr || function == nullptr) { return cudaErrorInvalidValue; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  tapeflow::emu::settings const& config = dev().config;
  attributes->binaryVersion = config.kernel_binary_version;
  attributes->ptxVersion = config.kernel_binary_version;
  attributes->maxThreadsPerBlock =
    config.kernel_max_threads > 0 ? std::min(config.kernel_max_threads, max_threads_per_block) : max_threads_per_block;
  attributes->sharedSizeBytes = 0;
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(char const** name, void const* function) noexcept
{
  if (name == nullptr || function == nullptr) { return cudaErrorInvalidValue; }
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != function) {
    return cudaErrorInvalidDeviceFunction;
  }
  *name = info.dli_sname;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Streams, events, graphs.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (stream == nullptr || flags > cudaStreamNonBlocking) { return cudaErrorInvalidValue; }
  auto* s = new (std::nothrow) CUstream_st{std::make_shared<stream_state>()};
  if (s == nullptr) { return cudaErrorMemoryAllocation; }
  dev().streams.insert(s->state);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (stream == nullptr) { return cudaErrorInvalidResourceHandle; }
  // Work already queued still runs (CUDA lets it complete after the call returns).
  run_all(*stream->state);
  dev().streams.erase(stream->state);
  delete stream;
  return dev().sticky;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  stream_state& s = resolve(stream);
  if (s.capture) { return cudaErrorStreamCaptureUnsupported; }
  run_all(s);
  return dev().sticky;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  event_state const& e = *event->state;
  if (!e.recorded) { return cudaSuccess; }  // waiting for an event never recorded is a no-op
  std::shared_ptr<stream_state> const other = e.stream;
  std::uint64_t const seq = e.seq;
  if (other == resolve_shared(stream)) { return cudaSuccess; }
  enqueue(stream, [other, seq] { run_until(*other, seq); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidValue; }
  auto* e = new (std::nothrow) CUevent_st{std::make_shared<event_state>()};
  if (e == nullptr) { return cudaErrorMemoryAllocation; }
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete event;  // queued work that marks it keeps its state alive
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  std::shared_ptr<event_state> const e = event->state;
  std::shared_ptr<stream_state> const s = resolve_shared(stream);
  if (s->capture) {
    // Inside a graph, a record marks the event each time the graph runs.
    s->capture->ops.push_back([e] {
      e->done = true;
      e->when = clock::now();
    });
    return cudaSuccess;
  }
  e->stream = s;
  e->recorded = true;
  e->done = false;
  enqueue(stream, [e] {
    e->done = true;
    e->when = clock::now();
  });
  e->seq = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  event_state& e = *event->state;
  if (e.recorded && e.stream) { run_until(*e.stream, e.seq); }
  return dev().sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) noexcept
{
  // A query is a wait that must make progress: it runs the work up to the event.
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ms == nullptr || start == nullptr || stop == nullptr) { return cudaErrorInvalidValue; }
  event_state const& a = *start->state;
  event_state const& b = *stop->state;
  if (!a.recorded || !b.recorded) { return cudaErrorInvalidResourceHandle; }
  if (!a.done || !b.done) { return cudaErrorNotReady; }
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) noexcept
{
  TAPEFLOW_EMU_GUARD();
  stream_state& s = resolve(stream);
  if (stream == nullptr || s.capture) { return cudaErrorStreamCaptureUnsupported; }  // not the legacy stream, not twice
  s.capture = std::make_shared<graph_ops>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (graph == nullptr) { return cudaErrorInvalidValue; }
  stream_state& s = resolve(stream);
  if (!s.capture) { return cudaErrorInvalidValue; }
  auto* g = new (std::nothrow) CUgraph_st{std::move(s.capture)};
  s.capture = nullptr;
  if (g == nullptr) { return cudaErrorMemoryAllocation; }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (exec == nullptr || graph == nullptr) { return cudaErrorInvalidValue; }
  auto* x = new (std::nothrow) CUgraphExec_st{graph->graph->ops};
  if (x == nullptr) { return cudaErrorMemoryAllocation; }
  *exec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (graph == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (exec == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (exec == nullptr) { return cudaErrorInvalidResourceHandle; }
  for (work const& w : exec->ops) { enqueue(stream, w); }
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Memory.
namespace {

cudaError_t allocate_device(void** ptr, std::size_t bytes)
{
  device& d = dev();
  if (ptr == nullptr) { return cudaErrorInvalidValue; }
  std::size_t const size = bytes == 0 ? 1 : bytes;
  if (d.used + size > d.config.memory_bytes) { return cudaErrorMemoryAllocation; }
  void* p = ::operator new(size, std::align_val_t{256}, std::nothrow);
  if (p == nullptr) { return cudaErrorMemoryAllocation; }
  std::memset(p, 0xFF, size);  // fresh device memory holds no zeros to hide an unwritten element
  d.device_memory[reinterpret_cast<std::uintptr_t>(p)] = {size};
  d.used += size;
  *ptr = p;
  return cudaSuccess;
}

void release_device(void* p)
{
  device& d = dev();
  auto const it = d.device_memory.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == d.device_memory.end()) { return; }
  d.used -= it->second.bytes;
  d.device_memory.erase(it);
  ::operator delete(p, std::align_val_t{256});
}

}  // namespace

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  return allocate_device(ptr, bytes);
}

cudaError_t cudaFree(void* ptr) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  if (dev().device_memory.count(reinterpret_cast<std::uintptr_t>(ptr)) == 0) { return cudaErrorInvalidDevicePointer; }
  run_everything();  // cudaFree synchronizes the device
  release_device(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (resolve(stream).capture) { return cudaErrorStreamCaptureUnsupported; }
  return allocate_device(ptr, bytes);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  if (resolve(stream).capture) { return cudaErrorStreamCaptureUnsupported; }
  if (dev().device_memory.count(reinterpret_cast<std::uintptr_t>(ptr)) == 0) { return cudaErrorInvalidDevicePointer; }
  enqueue(stream, [ptr] { release_device(ptr); });  // freed in stream order, after the work before it
  return cudaSuccess;
}

struct CUmemPoolHandle_st {
  std::atomic<unsigned long long> release_threshold{0};  // CUDA's default: keep nothing
};

namespace {
CUmemPoolHandle_st& default_pool() noexcept
{
  static CUmemPoolHandle_st pool;
  return pool;
}
}  // namespace

cudaError_t cudaGetDevice(int* device) noexcept
{
  if (device == nullptr) { return cudaErrorInvalidValue; }
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) noexcept
{
  if (pool == nullptr || device != 0) { return cudaErrorInvalidValue; }
  *pool = &default_pool();
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept
{
  if (pool == nullptr || value == nullptr || attr != cudaMemPoolAttrReleaseThreshold) { return cudaErrorInvalidValue; }
  pool->release_threshold.store(*static_cast<unsigned long long*>(value));
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept
{
  if (pool == nullptr || value == nullptr || attr != cudaMemPoolAttrReleaseThreshold) { return cudaErrorInvalidValue; }
  *static_cast<unsigned long long*>(value) = pool->release_threshold.load();
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaErrorInvalidValue; }
  std::size_t const size = bytes == 0 ? 1 : bytes;
  void* p = ::operator new(size, std::align_val_t{256}, std::nothrow);
  if (p == nullptr) { return cudaErrorMemoryAllocation; }
  dev().pinned_memory[reinterpret_cast<std::uintptr_t>(p)] = {size};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  auto const it = dev().pinned_memory.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == dev().pinned_memory.end()) { return cudaErrorInvalidValue; }
  run_everything();  // cudaFreeHost synchronizes the device
  dev().pinned_memory.erase(it);
  ::operator delete(ptr, std::align_val_t{256});
  return cudaSuccess;
}

namespace {

/// Checks a copy's pointers against the memory they must lie in, then enqueues it. Pageable host
/// memory behaves as CUDA's does: a copy from it takes its bytes before the call returns, a copy
/// into it completes before the call returns.
cudaError_t copy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
  device& d = dev();
  if (bytes == 0) { return cudaSuccess; }
  if (dst == nullptr || src == nullptr) { return cudaErrorInvalidValue; }
  bool const dst_device = inside(d.device_memory, dst, bytes);
  bool const src_device = inside(d.device_memory, src, bytes);
  if (kind == cudaMemcpyDefault) {
    kind = src_device ? (dst_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                      : (dst_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  bool const want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool const want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_device != want_dst_device || src_device != want_src_device) { return cudaErrorInvalidValue; }
  bool const src_pageable = !src_device && !inside(d.pinned_memory, src, bytes);
  bool const dst_pageable = !dst_device && !inside(d.pinned_memory, dst, bytes);
  if (src_pageable) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<unsigned char const*>(src),
                                                               static_cast<unsigned char const*>(src) + bytes);
    enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  if (dst_pageable) { run_all(resolve(stream)); }
  return d.sticky;
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  cudaError_t const status = copy(dst, src, bytes, kind, nullptr);
  if (status != cudaSuccess) { return status; }
  run_all(*dev().legacy);
  return dev().sticky;
}

cudaError_t cudaMemcpyAsync(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  return copy(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (bytes == 0) { return cudaSuccess; }
  if (!inside(dev().device_memory, dst, bytes)) { return cudaErrorInvalidValue; }
  enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  cudaError_t const status = cudaMemsetAsync(dst, value, bytes, nullptr);
  if (status != cudaSuccess) { return status; }
  run_all(*dev().legacy);
  return dev().sticky;
}

// ---------------------------------------------------------------------------------------------
// Launches, host work and settings.
namespace tapeflow::emu {

namespace {
std::atomic<std::uint64_t> epoch{0};
}  // namespace

void launch_kernel(dim3 grid, dim3 block, std::size_t dynamic_smem_bytes, cudaStream_t stream, kernel_body body)
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  std::size_t const threads = static_cast<std::size_t>(block.x) * block.y * block.z;
  bool const bad_grid = grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFU || grid.y > 65535U ||
                        grid.z > 65535U;
  bool const bad_block = threads == 0 || threads > static_cast<std::size_t>(max_threads_per_block) ||
                         block.x > 1024U || block.y > 1024U || block.z > 64U;
  if (bad_grid || bad_block) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (dynamic_smem_bytes > shared_per_block) {  // no opt-in (cudaFuncSetAttribute) in tapeflow
    last_error = cudaErrorInvalidValue;
    return;
  }
  if (dev().sticky != cudaSuccess) { return; }
  auto launch = std::make_shared<kernel_launch>();
  launch->grid = grid;
  launch->block = block;
  launch->dynamic_smem = dynamic_smem_bytes;
  launch->body = std::move(body);
  launch->id = ++dev().launches;
  launches.fetch_add(1, std::memory_order_relaxed);
  enqueue(stream, [launch] {
    std::string const failure = run_kernel(*launch, dev().config);
    if (!failure.empty()) { fail_device(failure); }
  });
}

void enqueue_host(cudaStream_t stream, std::function<void()> work_item)
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (dev().sticky != cudaSuccess) { return; }
  enqueue(stream, std::move(work_item));
}

settings current_settings() { return detail::active_settings(); }

settings configure(settings const& next)
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  run_everything();
  settings const previous = dev().config;
  dev().config = resolved(next);
  dev().launches = 0;  // launches are counted afresh: a seed gives the same schedules from here on
  epoch.fetch_add(1, std::memory_order_relaxed);
  return previous;
}

std::uint64_t configuration_epoch() noexcept { return epoch.load(std::memory_order_relaxed); }

void clear_error()
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  for (auto const& s : dev().streams) {
    s->executed += s->queue.size();
    s->queue.clear();
  }
  dev().sticky = cudaSuccess;
  dev().sticky_message.clear();
}

counters current_counters() noexcept
{
  return {launches.load(), blocks_run.load(), fiber_switches.load()};
}

}  // namespace tapeflow::emu
