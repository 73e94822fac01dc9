// SPDX-License-Identifier: Apache-2.0
// Stencil segments on the CPU backend: the tile program (tile_program.hpp) run by one thread per
// tile, the tiles spread over the CPU's threads (cpu::parallel_for). Each thread keeps one scratch
// buffer the size of a tile's levels, so a segment's k steps and their adjoints run in its cache:
// the CPU's cache-blocked equivalent of the GPU's shared-memory segments, with the same bits.
#pragma once

#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/tile_program.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tapeflow::stencil {

/// Runs the tile program of stencil S on the CPU backend's threads (segment_step's Runner).
template <class S>
class cpu_runner {
 public:
  using T = typename S::value_type;

  cpu_runner(S stencil, grid<T> g, segment_plan const& plan)
    : program_{stencil, g, reach::of<S>(), plan.tile}
  {
  }

  [[nodiscard]] std::size_t state_size() const noexcept { return program_.g.cells() * S::fields; }

  void advance(int k, T const* in, T* out, stream_view) const
  {
    std::size_t const values = program_.advance_scratch(k);
    each_tile([&](std::size_t t, T* scratch) { program_.advance(solo_team{}, program_.tile_box(t), k, in, out, scratch); },
              values);
  }

  void reverse(int k, T const* checkpoint, T const* lambda_out, T* lambda_in, stream_view) const
  {
    std::size_t const values = program_.reverse_scratch(k);
    each_tile(
      [&](std::size_t t, T* scratch) {
        program_.reverse(solo_team{}, program_.tile_box(t), k, checkpoint, lambda_out, lambda_in, scratch);
      },
      values);
  }

  void record(T const* in, T* taped, std::size_t padded_values, stream_view) const
  {
    std::size_t const values = state_size();
    std::copy(in, in + values, taped);
    std::fill(taped + values, taped + padded_values, T(0));
  }

 private:
  /// Calls work(tile, scratch) for every tile, in parallel, with `values` of scratch per thread.
  template <class Work>
  void each_tile(Work&& work, std::size_t values) const
  {
    std::size_t const tiles = program_.tiles();
    cpu::parallel_for(tiles, cpu::grain_for(tiles), [&](std::size_t first, std::size_t last) {
      thread_local std::vector<T> scratch;  // kept: later segments allocate nothing
      if (scratch.size() < values) { scratch.resize(values); }
      for (std::size_t t = first; t < last; ++t) { work(t, scratch.data()); }
    });
  }

  tile_program<S> program_;
};

/// The chain Step of stencil S's segments on the CPU backend.
template <class S>
using cpu_segments = segment_step<S, cpu_runner<S>>;

/// The CPU Step of `plan`'s segments of `stencil` over `g`.
template <class S>
[[nodiscard]] cpu_segments<S> make_cpu_segments(S stencil, grid<typename S::value_type> g, segment_plan const& plan)
{
  return cpu_segments<S>(cpu_runner<S>(stencil, g, plan), plan);
}

}  // namespace tapeflow::stencil
