// SPDX-License-Identifier: Apache-2.0
// The CPU backend's parallel loops: one persistent pool of worker threads per process, shared by
// every CPU step (the workloads' forward and reverse loops, cpu::reverse_tiles). A loop is cut
// into chunks of a fixed size; the calling thread and the workers take chunks in order from one
// counter until none is left, so a worker the OS has not scheduled yet simply gets fewer chunks
// (on a loaded machine the caller does the work itself rather than wait for it).
//
// Why a pool of our own rather than OpenMP or TBB: the installed package then needs no runtime
// beyond the C++ library (no -fopenmp or TBB on every consumer's link line, nothing for the
// pkg-config file or find_dependency to find), it behaves the same under GCC, Clang, hipcc and
// the sanitizers, and chunks are fixed by the loop, not by the thread count, so a body whose
// result depends only on its chunk gives the same bits with any number of threads.
#pragma once

#include <cstddef>

namespace tapeflow::cpu {

/// Threads a parallel loop runs on, the calling thread included (at least 1). Set by
/// set_threads(), else by the environment variable TAPEFLOW_CPU_THREADS, else the hardware's
/// concurrency.
[[nodiscard]] std::size_t threads() noexcept;

/// Runs later parallel loops on `count` threads (the caller and count - 1 workers); 0 restores the
/// default. Waits for a loop in progress; throws logic_error when called from inside a loop body.
void set_threads(std::size_t count);

namespace detail {
using chunk_function = void (*)(void* context, std::size_t chunk);
/// Calls fn(context, c) once for every c in [0, chunks), on the pool and the calling thread, and
/// returns when every call has returned. The first exception a call throws stops the handing out
/// of chunks and is rethrown here once the calls in flight have finished.
void run_chunks(std::size_t chunks, chunk_function fn, void* context);
}  // namespace detail

/// Calls body(begin, end) for consecutive ranges of at most `grain` indices covering [0, count),
/// in parallel. Ranges depend only on `count` and `grain`. A loop started inside a loop body, or
/// while another thread's loop holds the pool, runs on the calling thread alone.
template <class Body>
void parallel_for(std::size_t count, std::size_t grain, Body&& body)
{
  if (count == 0) { return; }
  if (grain == 0) { grain = 1; }
  std::size_t const chunks = count / grain + (count % grain != 0 ? 1 : 0);
  if (chunks == 1) {
    body(std::size_t{0}, count);
    return;
  }
  auto run = [&](std::size_t chunk) {
    std::size_t const begin = chunk * grain;
    std::size_t const end = count - begin < grain ? count : begin + grain;
    body(begin, end);
  };
  detail::run_chunks(
    chunks, [](void* context, std::size_t chunk) { (*static_cast<decltype(run)*>(context))(chunk); }, &run);
}

/// A grain that cuts `count` indices into about `chunks_per_thread` chunks per thread, each of at
/// least `minimum` indices: enough chunks for the caller to take over a late worker's share,
/// few enough that handing them out costs nothing measurable.
[[nodiscard]] inline std::size_t grain_for(std::size_t count, std::size_t minimum = 1,
                                           std::size_t chunks_per_thread = 8) noexcept
{
  std::size_t const pieces = threads() * chunks_per_thread;
  std::size_t const grain = (count + pieces - 1) / pieces;
  return grain < minimum ? minimum : grain;
}

}  // namespace tapeflow::cpu
