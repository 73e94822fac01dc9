// SPDX-License-Identifier: Apache-2.0
// The CPU reference backend: host memory, synchronous copies, no streams. Its "shared memory" is
// the bounded staging ring of tapeflow/cpu/tile_ring.hpp, filled ahead by a worker thread.
#include "backend/backend_ops.hpp"
#include "backend/cpu/cpu_stream.hpp"

#include <tapeflow/error.hpp>

#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include <unistd.h>

namespace tapeflow::detail {
namespace {

/// Bytes of the CPU staging ring a block may use: the size of a typical per-core L2 cache.
constexpr std::size_t cpu_staging_bytes = std::size_t{1} << 20;
constexpr std::align_val_t cpu_alignment{64};

int cpu_device_count() noexcept { return 1; }

std::string cpu_unavailable_reason() { return {}; }

device_limits cpu_limits(int ordinal)
{
  device_limits limits;
  limits.kind = backend::cpu;
  limits.ordinal = ordinal;
  unsigned const threads = std::thread::hardware_concurrency();
  limits.multiprocessors = threads == 0 ? 1 : static_cast<int>(threads);
  limits.name = "host CPU (" + std::to_string(limits.multiprocessors) + " threads)";
  limits.shared_mem_per_block = cpu_staging_bytes;
  limits.shared_mem_per_multiprocessor = cpu_staging_bytes;
  limits.max_threads_per_block = 1;
  limits.max_threads_per_multiprocessor = 1;
  limits.warp_size = 1;
  long const pages = sysconf(_SC_PHYS_PAGES);
  long const page_size = sysconf(_SC_PAGE_SIZE);
  limits.global_mem_bytes =
    pages > 0 && page_size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size) : 0;
  limits.async_copy = true;  // a worker thread fills the staging ring ahead of the consumer
  return limits;
}

void* cpu_allocate(std::size_t bytes, stream_view)
{
  try {
    return ::operator new(bytes, cpu_alignment);
  } catch (std::bad_alloc const&) {
    TAPEFLOW_FAIL_BYTES(out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed", bytes);
  }
}

void cpu_deallocate(void* ptr, std::size_t, stream_view) noexcept { ::operator delete(ptr, cpu_alignment); }

cpu::stream* as_stream(stream_view s) noexcept { return static_cast<cpu::stream*>(s.native()); }
cpu::event* as_event(void* e) noexcept { return static_cast<cpu::event*>(e); }

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
  static backend_ops const table{backend::cpu,       cpu_device_count,    cpu_unavailable_reason,
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
