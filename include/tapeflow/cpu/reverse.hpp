// SPDX-License-Identifier: Apache-2.0
// How a CPU step's reverse gets its tiles: cpu::reverse_tiles hands it every tile of a layer,
// last first, as the plan says (pipeline_plan::staging):
//   in_place  each tile where it lies in the layer, the tiles spread over cpu::threads() threads
//             (the calling thread and the pool's workers). `consume` is then called concurrently
//             for different tiles, exactly as a GPU runs one block per tile: it may write what
//             its tile's records determine, and must not write what another tile's consumer
//             writes (accumulate per tile, and reduce after, in tile order);
//   ring      through a tile_ring: copies made by a persistent staging thread, every tile
//             consumed in order on the calling thread.
// Either way the consumer sees the same records, so a correct reverse gives the same bits.
#pragma once

#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/halo.hpp>
#include <tapeflow/plan.hpp>

#include <cstddef>
#include <string>

namespace tapeflow::cpu {

namespace detail {
template <class R>
void check_reverse_plan(tape_reader<R> const& tape, pipeline_plan const& plan)
{
  TAPEFLOW_EXPECTS(plan.kind == backend::cpu, "cpu::reverse_tiles needs a CPU plan, got one for " +
                                                std::string{to_string(plan.kind)});
  TAPEFLOW_EXPECTS(plan.record_bytes == sizeof(R), "the plan was made for records of " +
                                                     std::to_string(plan.record_bytes) + " bytes, not " +
                                                     std::to_string(sizeof(R)));
  TAPEFLOW_EXPECTS(tape.layout().tile_records == plan.tile_records && tape.layout().records == plan.records,
                   "the layer holds " + std::to_string(tape.layout().records) + " records in tiles of " +
                     std::to_string(tape.layout().tile_records) + "; the plan says " + std::to_string(plan.records) +
                     " in tiles of " + std::to_string(plan.tile_records));
}
}  // namespace detail

/// Calls consume(tile, records, first_record, count) for every tile of `tape`, last first, as
/// `plan` says (see the top of this file). `records` points at the tile's first record and is
/// valid until consume returns. Adds what happened to `*stats` when given. An exception thrown by
/// `consume` propagates once the calls in flight have returned.
template <class R, class Consume>
void reverse_tiles(tape_reader<R> tape, pipeline_plan const& plan, Consume&& consume, ring_stats* stats = nullptr)
{
  detail::check_reverse_plan(tape, plan);
  if (plan.staging == cpu_staging::ring) {
    tile_ring<R> ring(plan);
    ring.reverse(tape, consume);
    if (stats != nullptr) { *stats += ring.stats(); }
    return;
  }
  std::size_t const tiles = tape.tiles();
  parallel_for(tiles, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t k = begin; k < end; ++k) {
      std::size_t const tile = tiles - 1 - k;
      consume(tile, tape.tile(tile), tape.layout().first(tile), tape.tile_size(tile));
    }
  });
  if (stats != nullptr) { stats->tiles += tiles; }
}

/// As reverse_tiles, for a stencil's reverse: consume(tile, window, first_record, count), where
/// window[j] is record j of the layer for every j in the tile or within `plan.halo_records` of it
/// (periodic). In place the window reads the layer; through the ring, the tile's staged copy
/// with its halo.
template <class R, class Consume>
void reverse_windows(tape_reader<R> tape, pipeline_plan const& plan, Consume&& consume, ring_stats* stats = nullptr)
{
  detail::check_reverse_plan(tape, plan);
  if (plan.staging == cpu_staging::ring) {
    tile_ring<R> ring(plan);
    ring.reverse_windows(tape, consume);
    if (stats != nullptr) { *stats += ring.stats(); }
    return;
  }
  std::size_t const tiles = tape.tiles();
  tile_layout const layout = tape.layout();
  R const* const layer = tiles == 0 ? nullptr : tape.tile(0);
  parallel_for(tiles, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t k = begin; k < end; ++k) {
      std::size_t const tile = tiles - 1 - k;
      std::size_t const first = layout.first(tile);
      std::size_t const count = layout.count(tile);
      tile_window<R> const window =
        tile_window<R>::in_place(layer, window_of(first, count, plan.halo_records, layout.records));
      consume(tile, window, first, count);
    }
  });
  if (stats != nullptr) { stats->tiles += tiles; }
}

}  // namespace tapeflow::cpu
