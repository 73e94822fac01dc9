// SPDX-License-Identifier: Apache-2.0
// Stencil segments on the CPU backend: the tile program (tile_program.hpp) run by one thread per
// tile, the tiles spread over the CPU's threads (cpu::parallel_for). Each thread keeps one scratch
// buffer the size of a tile's levels, so a segment's k steps and their adjoints run in its cache:
// the CPU's cache-blocked equivalent of the GPU's shared-memory segments, with the same bits.
// Over the ranks of a distributed run, each rank runs its slab or block of the grid, the ghost cells
// exchanged once per segment (tapeflow/stencil/slab.hpp) while the tiles that do not read them run.
#pragma once

#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/runner_program.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/tile_program.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace tapeflow::stencil {

/// Runs the tile program of stencil S on the CPU backend's threads (segment_step's Runner).
template <class S>
class cpu_runner {
 public:
  using T = typename S::value_type;

  /// The runner over `g`; with `comm`, over this rank's part of `g` (the whole grid) cut over the
  /// ranks of `comm` (the plan is the part's: plan_slab_segments); `c`: S's coefficients in host
  /// memory, where it has them. Throws what runner_program throws.
  cpu_runner(S stencil, grid<T> const& g, segment_plan const& plan,
             std::shared_ptr<distributed::communicator> comm = nullptr, coefficient_view<T> c = {})
    : program_(stencil, g, plan, std::move(comm), c)
  {
  }

  [[nodiscard]] std::size_t state_size() const noexcept { return program_.state_size(); }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return program_.parameter_size(); }

  /// The interior tiles run while the ghost planes travel, the boundary tiles once they are here;
  /// the inner tiles (tile_program::inner_tiles) through the tile program compiled for them.
  void advance(std::size_t first, int k, T const* in, T* out, stream_view s) const
  {
    program_.advancing(k, in, s).run([&](tile_program<S> const& program, tile_range tiles) {
      tile_rect const inner = program.inner_tiles(program.advance_reach(k));
      each_tile(tiles, program.advance_scratch(k), [&](std::size_t t, T* scratch) {
        by_kind(inner.holds(t), [&](auto kind) {
          advance_tile<decltype(kind)::value>(program, t, first, k, in, out, scratch);
        });
      });
    }, s);
    zero_tail(out);
  }

  void reverse(std::size_t first, int k, T const* checkpoint, T const* lambda_out, T* lambda_in, T* dc,
               stream_view s) const
  {
    program_.reversing(k, checkpoint, lambda_out, s).run([&](tile_program<S> const& program, tile_range tiles) {
      tile_rect const inner = program.inner_tiles(program.reverse_reach(k));
      each_tile(tiles, program.reverse_scratch(k), [&](std::size_t t, T* scratch) {
        by_kind(inner.holds(t), [&](auto kind) {
          reverse_tile<decltype(kind)::value>(program, t, first, k, checkpoint, lambda_out, lambda_in, dc, scratch);
        });
      });
    }, s);
    zero_tail(lambda_in);
  }

  void record(T const* in, T* taped, std::size_t padded_values, stream_view) const
  {
    std::size_t const values = state_size();
    std::copy(in, in + values, taped);
    std::fill(taped + values, taped + padded_values, T(0));
  }

 private:
  /// Tile t's forward and reverse (tile_program's advance and reverse on one thread), each compiled
  /// as one function (TAPEFLOW_FLATTEN), for the x86-64 baseline and for AVX2 (TAPEFLOW_CPU_CLONES).
  /// Each runs a local copy of the program, whose address never leaves the function, so the
  /// compiler knows a level's stores cannot change the stencil's coefficients and keeps them in
  /// registers across a row's vector loop (from the caller's reference it reloaded them every cell).
  template <bool Inner>
  TAPEFLOW_CPU_KERNEL static void advance_tile(tile_program<S> const& program, std::size_t t,
                                               std::size_t first, int k, T const* in, T* out,
                                               T* scratch)
  {
    tile_program<S> const local = program;
    local.template advance<Inner>(solo_team{}, local.tile_box(t), first, k, in, out, scratch);
  }
  template <bool Inner>
  TAPEFLOW_CPU_KERNEL static void reverse_tile(tile_program<S> const& program, std::size_t t,
                                               std::size_t first, int k, T const* checkpoint,
                                               T const* lambda_out, T* lambda_in, T* dc,
                                               T* scratch)
  {
    tile_program<S> const local = program;
    local.template reverse<Inner>(solo_team{}, local.tile_box(t), first, k, checkpoint, lambda_out, lambda_in,
                                  dc, scratch);
  }

  void zero_tail(T* state) const { std::fill(state + program_.used_values(), state + state_size(), T(0)); }

  /// Calls work(tile, scratch) for every tile of `tiles`, in parallel, with `values` of scratch per
  /// thread.
  template <class Work>
  static void each_tile(tile_range tiles, std::size_t values, Work&& work)
  {
    std::size_t const count = tiles.size();
    if (count == 0) { return; }
    cpu::parallel_for(count, cpu::grain_for(count), [&](std::size_t first, std::size_t last) {
      thread_local std::vector<T> scratch;  // kept: later segments allocate nothing
      if (scratch.size() < values) { scratch.resize(values); }
      for (std::size_t i = first; i < last; ++i) { work(tiles[i], scratch.data()); }
    });
  }

  runner_program<S, ghost_exchange<T>> program_;
};

/// The chain Step of stencil S's segments on the CPU backend.
template <class S>
using cpu_segments = segment_step<S, cpu_runner<S>>;

/// The CPU Step of `plan`'s segments of `stencil` over `g`; with `comm`, of this rank's part of `g`
/// (the whole grid) cut over the ranks of `comm`, in the segments plan_slab_segments planned (its
/// state is the part's: cut_for says which cells). A null `comm` is one process. A stencil with
/// coefficients reads them from `c` (host memory; over ranks, the part's cells of them) and is a
/// Step with parameters (dL/dc of the cells it holds).
template <class S>
[[nodiscard]] cpu_segments<S> make_cpu_segments(S stencil, grid<typename S::value_type> const& g,
                                                segment_plan const& plan,
                                                std::shared_ptr<distributed::communicator> comm = nullptr,
                                                coefficient_view<typename S::value_type> c = {})
{
  return cpu_segments<S>(cpu_runner<S>(std::move(stencil), g, plan, std::move(comm), c), plan);
}

/// make_cpu_segments as an object, for code written once over the backends (device.cuh's twin).
struct cpu_segments_maker {
  template <class S, class... Rest>
  auto operator()(S stencil, Rest&&... rest) const
  {
    return make_cpu_segments(std::move(stencil), std::forward<Rest>(rest)...);
  }
};

}  // namespace tapeflow::stencil
