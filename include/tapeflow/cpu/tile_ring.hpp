// SPDX-License-Identifier: Apache-2.0
// The CPU backend's staging ring: a bounded ring of staging slots, filled last-tile-first by a
// persistent staging thread while the calling thread consumes the tiles already staged. The host
// analogue of device/tile_pipeline.cuh, so the FIFO and prefetch logic runs (and is tested)
// without a GPU. Each slot holds a tile and its halo (tapeflow/halo.hpp).
//
// On a CPU a copy into a ring buys nothing the caches and prefetchers do not already do, so the
// CPU backend reads tiles in place unless a plan asks for the ring (pipeline_request::staging);
// cpu::reverse_tiles (tapeflow/cpu/reverse.hpp) does what the plan says.
#pragma once

#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/halo.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tapeflow::cpu {

/// What the CPU backend's reverse did, summed over every layer it handed to a consumer.
struct ring_stats {
  std::size_t tiles{0};           ///< tiles handed to the consumer (in place or staged)
  std::size_t staged_tiles{0};    ///< of which copied through a staging ring
  std::size_t consumer_waits{0};  ///< times the consumer found its next tile not yet staged
  std::size_t producer_waits{0};  ///< times the staging thread found the ring full
  std::size_t max_in_flight{0};   ///< most tiles staged but not yet consumed (<= stages)

  ring_stats& operator+=(ring_stats const& o) noexcept
  {
    tiles += o.tiles;
    staged_tiles += o.staged_tiles;
    consumer_waits += o.consumer_waits;
    producer_waits += o.producer_waits;
    max_in_flight = std::max(max_in_flight, o.max_in_flight);
    return *this;
  }
};

namespace detail {
/// `body` running on one of the CPU backend's persistent staging threads
/// (src/backend/cpu/staging.cpp), started on first use; destroying the task waits for it. `body`
/// must not throw.
class staging_task {
 public:
  explicit staging_task(std::function<void()> body);
  ~staging_task();
  staging_task(staging_task const&) = delete;
  staging_task& operator=(staging_task const&) = delete;
  /// Waits until `body` has returned and its thread is free for the next task.
  void wait() noexcept;

  struct state;

 private:
  std::shared_ptr<state> state_;
};
/// How many staging threads the process has started (tests: one per concurrent ring, not per layer).
[[nodiscard]] std::size_t staging_threads_started();

inline void cpu_relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

/// Waits on `changed` until `ready()`, which reads atomics, but first spins on it for a few tens
/// of microseconds with the lock released: a tile handed between two running threads then costs
/// no futex wake-up (the ring's handoff on small tiles). Returns with `lock` held and ready() true.
template <class Ready>
void spin_then_wait(std::unique_lock<std::mutex>& lock, std::condition_variable& changed, Ready&& ready)
{
  if (ready()) { return; }
  lock.unlock();
  auto const until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (unsigned i = 1; !ready(); ++i) {
    if (i % 64 == 0 && std::chrono::steady_clock::now() > until) { break; }
    cpu_relax();
  }
  lock.lock();
  changed.wait(lock, ready);
}
}  // namespace detail

template <class R>
class tile_ring {
 public:
  /// A ring of `plan.stages` slots of `plan.window_records()` records (a tile and its halo).
  explicit tile_ring(pipeline_plan const& plan)
    : stages_(static_cast<std::size_t>(plan.stages)), tile_records_(plan.tile_records), halo_(plan.halo_records),
      slot_records_(plan.window_records())
  {
    require_record<R>();
    TAPEFLOW_EXPECTS(plan.stages >= 2, "a staging ring needs at least 2 stages");
    TAPEFLOW_EXPECTS(plan.tile_records > 0, "a staging ring needs tiles of at least one record");
    TAPEFLOW_EXPECTS(plan.record_bytes == sizeof(R), "the plan was made for records of " +
                                                       std::to_string(plan.record_bytes) + " bytes, not " +
                                                       std::to_string(sizeof(R)));
    slots_.reset(new R[stages_ * slot_records_]);  // trivially copyable: left uninitialised
  }

  [[nodiscard]] std::size_t stages() const noexcept { return stages_; }
  [[nodiscard]] ring_stats const& stats() const noexcept { return stats_; }

  /// Streams every tile of `tape`, last tile first, through the ring and calls
  /// `consume(tile, staged, first_record, count)` for each on the calling thread. `staged` points
  /// at the tile's copy in the ring; it is valid until `consume` returns. An exception thrown by
  /// `consume` stops the staging and propagates.
  template <class Consume>
  void reverse(tape_reader<R> tape, Consume&& consume)
  {
    stream(tape, [&](std::size_t tile, tile_window<R> const& window, R const* staged, std::size_t first,
                     std::size_t count) {
      static_cast<void>(window);
      consume(tile, staged, first, count);
    });
  }

  /// As reverse(), with the tile's window: `consume(tile, window, first_record, count)`, where
  /// window[j] is record j of the layer for j in the tile or within the plan's halo of it.
  template <class Consume>
  void reverse_windows(tape_reader<R> tape, Consume&& consume)
  {
    stream(tape, [&](std::size_t tile, tile_window<R> const& window, R const*, std::size_t first,
                     std::size_t count) { consume(tile, window, first, count); });
  }

 private:
  [[nodiscard]] R* slot(std::size_t k) noexcept { return slots_.get() + (k % stages_) * slot_records_; }

  template <class Consume>
  void stream(tape_reader<R> tape, Consume&& consume)
  {
    tile_layout const layout = tape.layout();
    TAPEFLOW_EXPECTS(layout.tile_records == tile_records_,
                     "the layer's tiles hold " + std::to_string(layout.tile_records) +
                       " records; the ring's slots hold " + std::to_string(tile_records_));
    std::size_t const tiles = tape.tiles();
    if (tiles == 0) { return; }
    R const* const layer = tape.tile(0);
    auto window_span_of = [&](std::size_t tile) {
      return window_of(layout.first(tile), layout.count(tile), halo_, layout.records);
    };

    // The counters change under `mutex` (so a blocked waiter is woken), and are atomics so that a
    // waiter may spin on them without it first.
    std::mutex mutex;
    std::condition_variable changed;
    std::atomic<std::size_t> produced{0};
    std::atomic<std::size_t> consumed{0};
    std::atomic<bool> stop{false};
    ring_stats run{};

    detail::staging_task producer([&]() noexcept {
      for (std::size_t k = 0; k < tiles; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (produced - consumed == stages_) { ++run.producer_waits; }
          detail::spin_then_wait(lock, changed, [&] { return stop || produced - consumed < stages_; });
          if (stop) { break; }
        }
        // Slot k % stages was consumed (the wait above), and the consumer reads only slots of
        // tiles already produced, so this copy races with nothing.
        window_span const w = window_span_of(tiles - 1 - k);
        std::size_t const head = std::min(w.extent, w.records - w.origin);
        std::memcpy(static_cast<void*>(slot(k)), layer + w.origin, head * sizeof(R));
        if (head < w.extent) {  // the window wraps past the end of the layer
          std::memcpy(static_cast<void*>(slot(k) + head), layer, (w.extent - head) * sizeof(R));
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++produced;
          run.max_in_flight = std::max(run.max_in_flight, produced - consumed);
        }
        changed.notify_all();
      }
    });

    try {
      for (std::size_t k = 0; k < tiles; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (produced <= k) { ++run.consumer_waits; }
          detail::spin_then_wait(lock, changed, [&] { return produced > k; });
        }
        std::size_t const tile = tiles - 1 - k;
        window_span const w = window_span_of(tile);
        tile_window<R> const window(slot(k), w);
        std::size_t const first = layout.first(tile);
        consume(tile, window, &window[first], first, layout.count(tile));
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++consumed;
        }
        changed.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stop = true;
      }
      changed.notify_all();
      producer.wait();
      throw;
    }
    producer.wait();
    run.tiles = tiles;
    run.staged_tiles = tiles;
    stats_ += run;
  }

  std::size_t stages_;
  std::size_t tile_records_;
  std::size_t halo_;
  std::size_t slot_records_;
  std::unique_ptr<R[]> slots_;
  ring_stats stats_{};
};

}  // namespace tapeflow::cpu
