// SPDX-License-Identifier: Apache-2.0
// The per-thread tape arena, host side: a bounded, tiled tape for kernels whose threads each run a
// loop of a data-dependent trip count (Enzyme's hardest case: no device malloc, no per-thread
// stack of guessed size). See docs/thread-tape.md.
//
// The forward runs in *segments*: segment k is one launch in which every still-active thread runs
// up to chunk_steps more steps into the device slot of chunk k; after it the host reads a 16-byte
// status (one async copy into pinned memory and an event wait) and launches the next segment while
// any thread wants more steps. The reverse visits the chunks last-first; in chunk k each thread
// reverses its own steps of that chunk, last first.
//
// Tiers: every chunk keeps its own device slot unless a device budget is set. Under a budget the
// chunks cycle through a ring of device slots; chunks are pushed out to pinned host memory on a D2H
// copy stream behind the forward and prefetched back on an H2D copy stream ahead of the reverse,
// ordered by events (no device-wide synchronisation). The last chunks the forward wrote are still
// in their slots when the reverse starts and are read there.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/thread_tape.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow {

struct thread_tape_options {
  backend kind{backend::cpu};
  /// Steps of every thread in one chunk (and at most per segment launch).
  std::size_t chunk_steps{32};
  /// Hard cap on any thread's steps; a thread that wants more is a logic_error after its segment.
  /// 0: no cap beyond 2^32 - 1.
  std::size_t max_steps{0};
  /// Device bytes the chunk slots may hold; 0: every chunk keeps a device slot. A budget below one
  /// chunk is a budget_error.
  std::size_t device_budget_bytes{0};
  /// Pinned host bytes the chunks pushed out may hold; 0: no limit. Exceeding it is a budget_error.
  std::size_t host_budget_bytes{0};
  /// Chunks prefetched ahead of the reverse (at most device slots - 1).
  std::size_t prefetch_distance{2};
  /// Fill each chunk slot with NaN bytes before its segment (tests: the reverse reads only records
  /// the forward wrote).
  bool poison{false};
};

struct thread_tape_stats {
  std::size_t threads{0};
  std::size_t chunk_steps{0};
  std::size_t record_bytes{0};
  std::size_t chunk_bytes{0};        ///< one chunk of every thread (warps padded to 32 lanes)
  std::size_t chunks{0};             ///< chunks (segments) of the last forward
  std::size_t slot_limit{0};         ///< device slots the budget allows (0: one per chunk)
  std::size_t device_slots{0};       ///< device chunk slots held
  std::size_t chunks_to_host{0};     ///< chunks pushed to pinned host memory by the last forward
  std::size_t prefetches{0};         ///< chunks copied back by the last reverse
  std::size_t d2h_bytes{0};
  std::size_t h2d_bytes{0};
  std::size_t tape_bytes{0};         ///< chunks * chunk_bytes
  std::size_t device_bytes{0};       ///< device bytes held: slots, step counts, status
  std::size_t host_bytes{0};         ///< pinned bytes held: pushed-out chunks, status
  std::size_t prefetch_distance{0};
  std::size_t max_steps{0};          ///< the most steps any thread ran in the last forward

  /// A line a person can read.
  [[nodiscard]] std::string describe() const;
};

/// The untyped owner; thread_tape<R> adds the record type and the segment loops.
class thread_arena {
 public:
  /// An arena for `threads` threads writing records of `record_bytes` (a multiple of 16).
  /// Throws logic_error for bad sizes and budget_error for a device budget below one chunk.
  thread_arena(std::size_t record_bytes, std::size_t threads, thread_tape_options const& options);
  thread_arena(thread_arena const&) = delete;
  thread_arena& operator=(thread_arena const&) = delete;
  thread_arena(thread_arena&&) = delete;
  thread_arena& operator=(thread_arena&&) = delete;
  /// Waits for the copy streams, then frees everything.
  ~thread_arena();

  /// The bytes of one chunk an arena of these arguments would have, checked as the constructor
  /// checks them (the same errors), allocating nothing: for plans.
  [[nodiscard]] static std::size_t planned_chunk_bytes(std::size_t record_bytes, std::size_t threads,
                                                       thread_tape_options const& options);

  [[nodiscard]] thread_tape_layout layout() const noexcept { return layout_; }
  [[nodiscard]] backend kind() const noexcept { return options_.kind; }
  [[nodiscard]] std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  /// Chunks the last forward wrote.
  [[nodiscard]] std::size_t chunks() const noexcept { return chunks_; }
  /// The cap the writer enforces (max_steps, or 2^32 - 1).
  [[nodiscard]] std::uint32_t step_cap() const noexcept { return cap_; }
  /// Every thread's total steps in the last forward (downloads them; waits on `s`).
  [[nodiscard]] std::vector<std::uint32_t> steps(stream_view s = {}) const;
  /// The most steps any thread ran in the last forward (downloads the counts; waits on `s`).
  [[nodiscard]] std::size_t max_steps(stream_view s = {}) const;
  /// The numbers above; max_steps downloads the step counts (waits for the last stream used), so
  /// stats() is not for timed code.
  [[nodiscard]] thread_tape_stats stats() const;

  // The protocol thread_tape<R> drives (one forward, then one reverse):
  void begin_forward(stream_view s);
  /// The slot chunk `k` is written into (the stream first waits until it is free).
  [[nodiscard]] void* begin_segment(std::size_t k, stream_view s);
  /// After segment k's launch: pushes chunks out, reads the status (waits for the segment).
  /// True when another segment must run. Throws logic_error when a thread overflowed max_steps.
  [[nodiscard]] bool end_segment(std::size_t k, stream_view s);
  void begin_reverse(stream_view s);
  /// The slot holding chunk `k` (the stream first waits for its prefetch).
  [[nodiscard]] void const* begin_read(std::size_t k, stream_view s);
  void end_read(std::size_t k, stream_view s);
  void end_reverse(stream_view s);
  /// After a failure: waits for the copy streams, drops the tape (keeps the buffers). Never throws.
  void abandon() noexcept;

  [[nodiscard]] std::uint32_t* step_counts() noexcept { return steps_.data_as<std::uint32_t>(); }
  [[nodiscard]] std::uint32_t* status() noexcept { return status_.data_as<std::uint32_t>(); }

 private:
  enum class phase { idle, forward, forwarded, reverse };
  [[nodiscard]] bool ring() const noexcept { return slot_limit_ != 0; }
  [[nodiscard]] std::size_t slot_of(std::size_t k) const noexcept { return ring() ? k % slot_limit_ : k; }
  [[nodiscard]] bool resident(std::size_t k) const noexcept { return !ring() || k + slot_limit_ >= chunks_; }
  void push_out(std::size_t k);
  void issue_prefetches(std::size_t reading);

  thread_tape_options options_;
  thread_tape_layout layout_;
  std::size_t record_bytes_;
  std::size_t chunk_bytes_;
  std::uint32_t cap_;
  std::size_t slot_limit_{0};  // 0: unbounded (no ring)
  std::size_t lag_{0};         // chunk k is pushed out after segment k + lag
  std::size_t distance_{0};

  phase phase_{phase::idle};
  std::size_t chunks_{0};
  std::size_t pushed_{0};          // chunks 0..pushed_-1 are (being) copied to the host
  std::size_t next_prefetch_{0};   // chunks below it are still to be prefetched (counting down)
  std::size_t prefetches_{0};
  stream_view compute_{};

  device_buffer steps_;
  device_buffer status_;
  pinned_buffer status_host_;
  event status_ready_;
  std::vector<device_buffer> slots_;
  std::vector<pinned_buffer> host_;
  std::vector<event> slot_free_;   // ring: the slot's previous chunk is no longer needed
  std::vector<event> slot_ready_;  // ring: the slot holds the prefetched chunk
  std::vector<event> written_;     // ring: the segment finished writing the slot
  event offloaded_;                // every D2H copy queued so far has landed
  event prefetched_;               // every H2D copy queued so far has landed
  // Declared last, destroyed first: work queued on them uses the buffers and events above.
  stream d2h_;
  stream h2d_;
};

/// The typed arena: runs the segment loop of a forward and the chunk loop of a reverse.
template <class R>
class thread_tape {
 public:
  using record_type = R;

  thread_tape(std::size_t threads, thread_tape_options const& options) : arena_(sizeof(R), threads, options)
  {
    require_record<R>();
  }

  /// Runs segments `segment(thread_tape_writer<R>, stream)` (each one launch over every thread)
  /// until no thread wants more steps. Returns the number of chunks. On failure the tape is
  /// dropped and the arena stays usable.
  template <class Segment>
  std::size_t forward(Segment&& segment, stream_view s = {})
  {
    try {
      arena_.begin_forward(s);
      for (std::size_t k = 0;; ++k) {
        R* const chunk = static_cast<R*>(arena_.begin_segment(k, s));
        segment(thread_tape_writer<R>{chunk, arena_.layout(), arena_.step_counts(), arena_.status(), k,
                                      arena_.step_cap()},
                s);
        if (!arena_.end_segment(k, s)) { return k + 1; }
      }
    } catch (...) {
      arena_.abandon();
      throw;
    }
  }

  /// Runs `chunk(thread_tape_reader<R>, stream)` for every chunk, last first (each one launch).
  template <class Chunk>
  void reverse(Chunk&& chunk, stream_view s = {})
  {
    try {
      arena_.begin_reverse(s);
      for (std::size_t k = arena_.chunks(); k-- > 0;) {
        R const* const data = static_cast<R const*>(arena_.begin_read(k, s));
        chunk(thread_tape_reader<R>{data, arena_.layout(), arena_.step_counts(), k}, s);
        arena_.end_read(k, s);
      }
      arena_.end_reverse(s);
    } catch (...) {
      arena_.abandon();
      throw;
    }
  }

  [[nodiscard]] thread_arena& arena() noexcept { return arena_; }
  [[nodiscard]] thread_arena const& arena() const noexcept { return arena_; }
  [[nodiscard]] thread_tape_layout layout() const noexcept { return arena_.layout(); }
  [[nodiscard]] std::size_t chunks() const noexcept { return arena_.chunks(); }
  [[nodiscard]] std::vector<std::uint32_t> steps(stream_view s = {}) const { return arena_.steps(s); }
  [[nodiscard]] std::size_t max_steps(stream_view s = {}) const { return arena_.max_steps(s); }
  [[nodiscard]] thread_tape_stats stats() const { return arena_.stats(); }

 private:
  thread_arena arena_;
};

}  // namespace tapeflow
