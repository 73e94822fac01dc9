// SPDX-License-Identifier: Apache-2.0
// The CPU backend's staged reverse: a bounded ring of staging buffers, filled last-tile-first by a
// worker thread while the calling thread consumes the tiles already staged. The host analogue of
// device/tile_pipeline.cuh, so the FIFO and prefetch logic runs (and is tested) without a GPU.
#pragma once

#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tapeflow::cpu {

/// What the ring did, summed over every layer it streamed.
struct ring_stats {
  std::size_t tiles{0};           ///< tiles staged and consumed
  std::size_t consumer_waits{0};  ///< times the consumer found its next tile not yet staged
  std::size_t producer_waits{0};  ///< times the worker found the ring full
  std::size_t max_in_flight{0};   ///< most tiles staged but not yet consumed (<= stages)
};

template <class R>
class tile_ring {
 public:
  /// A ring of `plan.stages` slots of `plan.tile_records` records.
  explicit tile_ring(pipeline_plan const& plan)
    : stages_(static_cast<std::size_t>(plan.stages)), tile_records_(plan.tile_records),
      slots_(static_cast<std::size_t>(plan.stages) * plan.tile_records)
  {
    require_record<R>();
    TAPEFLOW_EXPECTS(plan.stages >= 2, "a staging ring needs at least 2 stages");
    TAPEFLOW_EXPECTS(plan.tile_records > 0, "a staging ring needs tiles of at least one record");
    TAPEFLOW_EXPECTS(plan.record_bytes == sizeof(R), "the plan was made for records of " +
                                                       std::to_string(plan.record_bytes) + " bytes, not " +
                                                       std::to_string(sizeof(R)));
  }

  [[nodiscard]] std::size_t stages() const noexcept { return stages_; }
  [[nodiscard]] ring_stats const& stats() const noexcept { return stats_; }

  /// Streams every tile of `tape`, last tile first, through the ring and calls
  /// `consume(tile, staged, first_record, count)` for each on the calling thread. `staged` points
  /// at the tile's copy in the ring; it is valid until `consume` returns. An exception thrown by
  /// `consume` stops the worker and propagates.
  template <class Consume>
  void reverse(tape_reader<R> tape, Consume&& consume)
  {
    TAPEFLOW_EXPECTS(tape.layout().tile_records == tile_records_,
                     "the layer's tiles hold " + std::to_string(tape.layout().tile_records) +
                       " records; the ring's slots hold " + std::to_string(tile_records_));
    std::size_t const tiles = tape.tiles();
    if (tiles == 0) { return; }

    std::mutex mutex;
    std::condition_variable changed;
    std::size_t produced = 0;
    std::size_t consumed = 0;
    bool stop = false;

    std::thread worker([&] {
      for (std::size_t k = 0; k < tiles; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (produced - consumed == stages_) { ++stats_.producer_waits; }
          changed.wait(lock, [&] { return stop || produced - consumed < stages_; });
          if (stop) { return; }
        }
        // Slot k % stages was consumed (the wait above), and the consumer reads only slots of
        // tiles already produced, so this copy races with nothing.
        std::size_t const tile = tiles - 1 - k;
        std::memcpy(static_cast<void*>(slot(k)), tape.tile(tile), tape.tile_size(tile) * sizeof(R));
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++produced;
          stats_.max_in_flight = std::max(stats_.max_in_flight, produced - consumed);
        }
        changed.notify_all();
      }
    });

    try {
      for (std::size_t k = 0; k < tiles; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (produced <= k) { ++stats_.consumer_waits; }
          changed.wait(lock, [&] { return produced > k; });
        }
        std::size_t const tile = tiles - 1 - k;
        consume(tile, static_cast<R const*>(slot(k)), tape.layout().first(tile), tape.tile_size(tile));
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
      worker.join();
      throw;
    }
    worker.join();
    stats_.tiles += tiles;
  }

 private:
  [[nodiscard]] R* slot(std::size_t k) noexcept { return slots_.data() + (k % stages_) * tile_records_; }

  std::size_t stages_;
  std::size_t tile_records_;
  std::vector<R> slots_;
  ring_stats stats_{};
};

/// The staging ring of one gradient as a CPU step holds it: built by the first reverse step from
/// the chain's plan (steps do not see the plan before), reused by every later one. Steps are
/// copied into the chain, so they share it through a shared_ptr.
template <class R>
class lazy_tile_ring {
 public:
  tile_ring<R>& for_plan(pipeline_plan const& plan)
  {
    if (!ring_) { ring_ = std::make_unique<tile_ring<R>>(plan); }
    return *ring_;
  }
  /// What the ring did so far (zeros when no reverse ran).
  [[nodiscard]] ring_stats stats() const noexcept { return ring_ ? ring_->stats() : ring_stats{}; }

 private:
  std::unique_ptr<tile_ring<R>> ring_;
};

}  // namespace tapeflow::cpu
