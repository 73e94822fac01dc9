// SPDX-License-Identifier: Apache-2.0
// The per-thread tape arena, kernel side (host and device): the warp-interleaved chunk layout, the
// writer a forward *segment* kernel gets, and the reader a reverse *chunk* kernel gets. The host
// owner is include/tapeflow/thread_tape.hpp; docs/thread-tape.md explains the design.
//
// A thread's loop runs an unknown number of steps. The arena cuts the steps into chunks of
// `chunk_steps` steps for every thread; inside a chunk, record (thread t, step s) of warp
// w = t / 32, lane = t % 32 sits at ((w * chunk_steps + s) * 32 + lane): at each step the 32
// lanes of a warp write (and later read) 32 consecutive records, one coalesced run.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(TAPEFLOW_WARP_VOTES)
#include <tapeflow/device/platform.hpp>  // a warp vote's lane mask (device::detail::lane_mask_lt)
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>  // atomicOr in device code (nvcc includes its runtime in every .cu)
#endif

namespace tapeflow {

/// Threads interleaved per group in a chunk: a CUDA warp (half a wavefront on AMD, still two
/// coalesced runs per wavefront).
inline constexpr std::size_t thread_tape_lanes = 32;

/// The layout of one chunk of the arena: `threads` threads, `chunk_steps` steps each.
struct thread_tape_layout {
  std::size_t threads{0};
  std::size_t chunk_steps{1};

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t warps() const noexcept
  {
    return (threads + thread_tape_lanes - 1) / thread_tape_lanes;
  }
  /// Records of one chunk (the last warp padded to 32 lanes).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t chunk_records() const noexcept
  {
    return warps() * chunk_steps * thread_tape_lanes;
  }
  /// Where thread `thread`'s step `step` (0 <= step < chunk_steps, counted inside the chunk) sits.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t index(std::size_t thread, std::size_t step) const noexcept
  {
    return ((thread / thread_tape_lanes) * chunk_steps + step) * thread_tape_lanes + thread % thread_tape_lanes;
  }
  /// Steps a thread that ran `total` steps has in chunk `chunk`.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t steps_in_chunk(std::size_t total,
                                                                          std::size_t chunk) const noexcept
  {
    std::size_t const first = chunk * chunk_steps;
    std::size_t const left = total > first ? total - first : 0;
    return left < chunk_steps ? left : chunk_steps;
  }
};

/// Words of the status a segment reports to the host (zeroed before each segment).
enum thread_tape_status : std::uint32_t {
  thread_tape_active = 0,    ///< non-zero: some thread wants more steps (the next segment runs)
  thread_tape_overflow = 1,  ///< non-zero: some thread wants more steps than max_steps allows
  thread_tape_status_words = 4,
};

namespace detail {

/// Sets `*word` to 1 when `raise` (for any thread): one atomic per warp where there are CUDA's
/// warps (TAPEFLOW_WARP_VOTES: CUDA device code, and the emulated device, whose host-side callers
/// are lone lanes), an atomic on HIP (after a read, so the word is not hammered), an atomic store on
/// the CPU (the pool's threads).
TAPEFLOW_HOST_DEVICE inline void raise_flag(std::uint32_t* word, bool raise) noexcept
{
#if defined(TAPEFLOW_WARP_VOTES)
  unsigned const active = __activemask();
  unsigned const votes = __ballot_sync(active, raise);
  if (votes != 0 && (active & device::detail::lane_mask_lt()) == 0) { atomicOr(word, 1u); }  // the lowest active lane
#elif defined(__HIP_DEVICE_COMPILE__)
  if (raise && *static_cast<std::uint32_t volatile*>(word) == 0) { atomicOr(word, 1u); }
#else
  // Host: regions may run on several CPU threads at once (the CPU backend's pool).
  if (raise) { __atomic_store_n(word, 1u, __ATOMIC_RELAXED); }
#endif
}

}  // namespace detail

/// What a forward segment kernel gets for chunk `chunk()`: thread t, which has run `steps(t)`
/// steps so far, runs on from step steps(t) up to (not including) end_step(), writes one record
/// per step with write(t, step, record), and reports with finish(t, steps_now, wants_more).
///
///   std::uint32_t n = w.steps(t);
///   if (n < w.first_step()) return;           // finished in an earlier chunk
///   ... load the thread's loop state ...
///   while (n < w.end_step() && keep_going) { w.write(t, n, record); ...one step...; ++n; }
///   ... store the loop state ...
///   w.finish(t, n, keep_going);
template <class R>
class thread_tape_writer {
 public:
  using record_type = R;
  thread_tape_writer() = default;
  TAPEFLOW_HOST_DEVICE thread_tape_writer(R* chunk, thread_tape_layout layout, std::uint32_t* steps,
                                          std::uint32_t* status, std::size_t chunk_index,
                                          std::uint32_t max_steps) noexcept
    : chunk_(chunk), layout_(layout), steps_(steps), status_(status), chunk_index_(chunk_index),
      max_steps_(max_steps)
  {
    require_record<R>();
  }

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t threads() const noexcept { return layout_.threads; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t chunk() const noexcept { return chunk_index_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE thread_tape_layout layout() const noexcept { return layout_; }
  /// The first step this chunk holds.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t first_step() const noexcept
  {
    return static_cast<std::uint32_t>(chunk_index_ * layout_.chunk_steps);
  }
  /// One past the last step a thread may record in this segment (the chunk's end or max_steps).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t end_step() const noexcept
  {
    std::uint32_t const end = first_step() + static_cast<std::uint32_t>(layout_.chunk_steps);
    return end < max_steps_ ? end : max_steps_;
  }
  /// Steps thread `t` has recorded before this segment.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t steps(std::size_t t) const noexcept { return steps_[t]; }
  /// Records thread `t`'s step `step` (first_step() <= step < end_step()).
  TAPEFLOW_HOST_DEVICE void write(std::size_t t, std::uint32_t step, R const& record) const noexcept
  {
    chunk_[layout_.index(t, step - first_step())] = record;
  }
  /// Thread `t` has now run `steps` steps in all; `wants_more` if its loop is not done.
  TAPEFLOW_HOST_DEVICE void finish(std::size_t t, std::uint32_t steps, bool wants_more) const noexcept
  {
    steps_[t] = steps;
    bool const overflow = wants_more && steps >= max_steps_;
    detail::raise_flag(status_ + thread_tape_active, wants_more && !overflow);
    if (overflow) { detail::raise_flag(status_ + thread_tape_overflow, true); }
  }

 private:
  R* chunk_{nullptr};
  thread_tape_layout layout_{};
  std::uint32_t* steps_{nullptr};
  std::uint32_t* status_{nullptr};
  std::size_t chunk_index_{0};
  std::uint32_t max_steps_{0};
};

/// What a reverse chunk kernel gets for chunk `chunk()`: thread t reverses its count(t) steps of
/// this chunk, last first: for (s = first_step() + count(t); s-- > first_step();) read(t, s).
template <class R>
class thread_tape_reader {
 public:
  using record_type = R;
  thread_tape_reader() = default;
  TAPEFLOW_HOST_DEVICE thread_tape_reader(R const* chunk, thread_tape_layout layout, std::uint32_t const* steps,
                                          std::size_t chunk_index) noexcept
    : chunk_(chunk), layout_(layout), steps_(steps), chunk_index_(chunk_index)
  {
    require_record<R>();
  }

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t threads() const noexcept { return layout_.threads; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t chunk() const noexcept { return chunk_index_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE thread_tape_layout layout() const noexcept { return layout_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t first_step() const noexcept
  {
    return static_cast<std::uint32_t>(chunk_index_ * layout_.chunk_steps);
  }
  /// Steps thread `t` ran in all.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t steps(std::size_t t) const noexcept { return steps_[t]; }
  /// Steps of thread `t` in this chunk.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t count(std::size_t t) const noexcept
  {
    return static_cast<std::uint32_t>(layout_.steps_in_chunk(steps_[t], chunk_index_));
  }
  /// Thread `t`'s record of step `step` (first_step() <= step < first_step() + count(t)).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE R const& read(std::size_t t, std::uint32_t step) const noexcept
  {
    return chunk_[layout_.index(t, step - first_step())];
  }

 private:
  R const* chunk_{nullptr};
  thread_tape_layout layout_{};
  std::uint32_t const* steps_{nullptr};
  std::size_t chunk_index_{0};
};

}  // namespace tapeflow
