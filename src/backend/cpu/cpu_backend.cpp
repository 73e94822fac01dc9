// SPDX-License-Identifier: Apache-2.0
// The CPU reference backend: host memory, copies inline on the default stream and behind worker
// threads on other streams. Steps run on the calling thread and the pool of
// tapeflow/cpu/thread_pool.hpp; a reverse reads its tiles in place, or through the staging ring of
// tapeflow/cpu/tile_ring.hpp when a plan asks for it (its "shared memory").
#include "backend/backend_ops.hpp"
#include "backend/cpu/cpu_stream.hpp"

#include <tapeflow/config.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <vector>

#include <unistd.h>

namespace tapeflow::detail {
namespace {

/// Bytes of the CPU staging ring a block may use: the size of a typical per-core L2 cache.
constexpr std::size_t cpu_staging_bytes = std::size_t{1} << 20;
constexpr std::align_val_t cpu_alignment{64};

int cpu_device_count() noexcept { return 1; }

std::string cpu_unavailable_reason() { return {}; }

bool cpu_device_unusable() noexcept { return false; }

/// ", AVX2" where the AVX2 copies of the CPU's cloned loops run (TAPEFLOW_CPU_CLONES, config.hpp),
/// else nothing: the device name says which copy produced a result.
std::string cloned_loops()
{
#if defined(TAPEFLOW_HAS_CPU_CLONES)
  if (__builtin_cpu_supports("avx2")) { return ", AVX2"; }
#endif
  return {};
}

device_limits cpu_limits(int ordinal)
{
  device_limits limits;
  limits.kind = backend::cpu;
  limits.ordinal = ordinal;
  limits.multiprocessors = static_cast<int>(tapeflow::cpu::threads());  // the pool's threads run the steps
  limits.name = "host CPU (" + std::to_string(limits.multiprocessors) + " threads" + cloned_loops() + ")";
  limits.shared_mem_per_block = cpu_staging_bytes;
  limits.shared_mem_per_block_optin = cpu_staging_bytes;
  limits.shared_mem_per_multiprocessor = cpu_staging_bytes;
  limits.max_threads_per_block = 1;
  limits.max_threads_per_multiprocessor = 1;
  limits.warp_size = 1;
  long const pages = sysconf(_SC_PHYS_PAGES);
  long const page_size = sysconf(_SC_PAGE_SIZE);
  limits.global_mem_bytes =
    pages > 0 && page_size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size) : 0;
  limits.async_copy = true;  // a staging thread fills the ring ahead of the consumer (when asked for)
  return limits;
}

/// Freed blocks of at least `min_cached` bytes kept for reuse, by size, up to a limit: the CPU's
/// counterpart of CUDA's stream-ordered memory pool. A gradient pushes and pops a layer per step;
/// without reuse every layer is fresh pages from the OS, and faulting them in costs more than the
/// step (Allen–Cahn 512², T = 100: about 60 % of the forward). Not under AddressSanitizer, which
/// must see every free to catch a use after it.
class host_pool {
 public:
  static constexpr std::size_t min_cached = std::size_t{64} << 10;

  host_pool() : limit_(default_limit()) {}
  ~host_pool() { static_cast<void>(release()); }
  host_pool(host_pool const&) = delete;
  host_pool& operator=(host_pool const&) = delete;

  void* take(std::size_t bytes) noexcept
  {
    if (!enabled || bytes < min_cached) { return nullptr; }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) { return nullptr; }
    void* ptr = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return ptr;
  }

  /// Keeps `ptr` for reuse; false when it must be freed.
  bool give(void* ptr, std::size_t bytes) noexcept
  {
    if (!enabled || bytes < min_cached) { return false; }
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes > limit_) { return false; }
    try {
      free_[bytes].push_back(ptr);
    } catch (...) {
      return false;
    }
    cached_ += bytes;
    return true;
  }

  std::size_t release() noexcept
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t const released = cached_;
    for (auto& [bytes, blocks] : free_) {
      for (void* ptr : blocks) { ::operator delete(ptr, cpu_alignment); }
    }
    free_.clear();
    cached_ = 0;
    return released;
  }

  std::size_t cached() noexcept
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool enabled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  static constexpr bool enabled = false;
#else
  static constexpr bool enabled = true;
#endif
#else
  static constexpr bool enabled = true;
#endif

  /// TAPEFLOW_CPU_POOL_BYTES, else an eighth of the machine's memory.
  static std::size_t default_limit() noexcept
  {
    if (char const* env = std::getenv("TAPEFLOW_CPU_POOL_BYTES")) {
      char* end = nullptr;
      unsigned long long const n = std::strtoull(env, &end, 10);
      if (end != env && *end == '\0') { return static_cast<std::size_t>(n); }
    }
    long const pages = sysconf(_SC_PHYS_PAGES);
    long const page_size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page_size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size) / 8 : 0;
  }

  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_{0};
  std::size_t limit_;
};

host_pool& the_pool()
{
  static host_pool pool;
  return pool;
}

cpu::stream* as_stream(stream_view s) noexcept { return static_cast<cpu::stream*>(s.native()); }
cpu::event* as_event(void* e) noexcept { return static_cast<cpu::event*>(e); }

void* cpu_allocate(std::size_t bytes, stream_view)
{
  // No host allocation can be this large, and GCC's aligned operator new rounds a size near
  // SIZE_MAX up past it into a tiny block, which the caller would then overrun.
  if (bytes > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())) {
    TAPEFLOW_FAIL_BYTES(out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed", bytes);
  }
  if (void* reused = the_pool().take(bytes)) { return reused; }
  try {
    return ::operator new(bytes, cpu_alignment);
  } catch (std::bad_alloc const&) {
    // Whatever the pool holds may be what is missing.
    if (the_pool().release() > 0) {
      try {
        return ::operator new(bytes, cpu_alignment);
      } catch (std::bad_alloc const&) {
      }
    }
    TAPEFLOW_FAIL_BYTES(out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed", bytes);
  }
}

void release_now(void* ptr, std::size_t bytes) noexcept
{
  if (!the_pool().give(ptr, bytes)) { ::operator delete(ptr, cpu_alignment); }
}

void cpu_deallocate(void* ptr, std::size_t bytes, stream_view s) noexcept
{
  // Stream-ordered, as cudaFreeAsync: work queued on the stream before the free (a fill, a copy
  // of a buffer destroyed before its stream was synchronised) still owns the memory, so the
  // memory goes back behind it.
  if (cpu::stream* worker = as_stream(s)) {
    try {
      worker->enqueue([ptr, bytes] { release_now(ptr, bytes); });
      return;
    } catch (...) {  // no memory for the task: wait for the stream's work instead
      worker->drain();
    }
  }
  release_now(ptr, bytes);
}

/// Runs `work` inline on the default stream, else behind the stream's earlier work.
template <class Work>
void on_stream(stream_view s, Work&& work)
{
  if (cpu::stream* worker = as_stream(s)) {
    worker->enqueue(std::forward<Work>(work));
  } else {
    work();
  }
}

void cpu_copy(void* dst, void const* src, std::size_t bytes, copy_kind, stream_view s)
{
  if (bytes == 0) { return; }
  if (s.is_default()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  as_stream(s)->enqueue([=] {
    if (auto const delay = cpu::copy_delay(); delay.count() > 0) { std::this_thread::sleep_for(delay); }
    std::memcpy(dst, src, bytes);
  });
}

void cpu_fill(void* dst, unsigned char value, std::size_t bytes, stream_view s)
{
  if (bytes == 0) { return; }
  on_stream(s, [=] { std::memset(dst, value, bytes); });
}

void cpu_synchronize(stream_view s)
{
  if (cpu::stream* worker = as_stream(s)) { worker->drain(); }
}

void* cpu_create_stream() { return new cpu::stream(); }
void cpu_destroy_stream(void* native) noexcept { delete static_cast<cpu::stream*>(native); }

void* cpu_allocate_host(std::size_t bytes) { return cpu_allocate(bytes, {}); }
void cpu_deallocate_host(void* ptr, std::size_t bytes) noexcept { cpu_deallocate(ptr, bytes, {}); }

void* cpu_create_event() { return new cpu::event(); }
void cpu_destroy_event(void* e) noexcept { delete as_event(e); }

void cpu_record_event(void* e, stream_view s)
{
  cpu::event* ev = as_event(e);
  std::uint64_t const ticket = ev->arm();
  on_stream(s, [ev, ticket] { ev->complete(ticket); });
}

void cpu_wait_event(stream_view s, void* e)
{
  cpu::event* ev = as_event(e);
  // Only the record made before this call counts, as on CUDA.
  std::uint64_t const ticket = ev->ticket();
  on_stream(s, [ev, ticket] { ev->wait_for(ticket); });
}

void cpu_synchronize_event(void* e) { as_event(e)->wait(); }

float cpu_elapsed_ms(void* start, void* stop)
{
  auto const a = as_event(start)->completed_at();
  auto const b = as_event(stop)->completed_at();
  return std::chrono::duration<float, std::milli>(b - a).count();
}

}  // namespace

backend_ops const& cpu_backend_ops() noexcept
{
  static backend_ops const table{backend::cpu,       cpu_device_count,    cpu_unavailable_reason, cpu_device_unusable,
                                 cpu_limits,         cpu_allocate,        cpu_deallocate,
                                 cpu_copy,           cpu_fill,            cpu_synchronize,
                                 cpu_create_stream,  cpu_destroy_stream,  cpu_allocate_host,
                                 cpu_deallocate_host, cpu_create_event,   cpu_destroy_event,
                                 cpu_record_event,   cpu_wait_event,      cpu_synchronize_event,
                                 cpu_elapsed_ms,     nullptr,             nullptr,
                                 nullptr,            nullptr};
  return table;
}

}  // namespace tapeflow::detail

namespace tapeflow::cpu {
std::size_t cached_memory() noexcept { return tapeflow::detail::the_pool().cached(); }
std::size_t release_cached_memory() noexcept { return tapeflow::detail::the_pool().release(); }
}  // namespace tapeflow::cpu
