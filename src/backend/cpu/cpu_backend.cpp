// SPDX-License-Identifier: Apache-2.0
// The CPU reference backend: host memory, synchronous copies, no streams. Its "shared memory" is
// the bounded staging ring of tapeflow/cpu/tile_ring.hpp, filled ahead by a worker thread.
#include "backend/backend_ops.hpp"

#include <tapeflow/error.hpp>

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

void cpu_copy(void* dst, void const* src, std::size_t bytes, copy_kind, stream_view)
{
  if (bytes != 0) { std::memcpy(dst, src, bytes); }
}

void cpu_fill(void* dst, unsigned char value, std::size_t bytes, stream_view)
{
  if (bytes != 0) { std::memset(dst, value, bytes); }
}

void cpu_synchronize(stream_view) {}
void* cpu_create_stream() { return nullptr; }
void cpu_destroy_stream(void*) noexcept {}

}  // namespace

backend_ops const& cpu_backend_ops() noexcept
{
  static backend_ops const table{backend::cpu,   cpu_device_count, cpu_unavailable_reason,
                                 cpu_limits,     cpu_allocate,     cpu_deallocate,
                                 cpu_copy,       cpu_fill,         cpu_synchronize,
                                 cpu_create_stream, cpu_destroy_stream};
  return table;
}

}  // namespace tapeflow::detail
