// SPDX-License-Identifier: Apache-2.0
// Stencil segments on the CPU backend: the tile program (tile_program.hpp) run by one thread per
// tile, the tiles spread over the CPU's threads (cpu::parallel_for). Each thread keeps one scratch
// buffer the size of a tile's levels, so a segment's k steps and their adjoints run in its cache:
// the CPU's cache-blocked equivalent of the GPU's shared-memory segments, with the same bits.
// Over the ranks of a distributed run, each rank runs its slab of the grid, the ghost planes
// exchanged once per segment (tapeflow/stencil/slab.hpp).
#pragma once

#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/stencil/segment.hpp>
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

  cpu_runner(S stencil, grid<T> g, segment_plan const& plan)
    : program_{stencil, g, reach::of<S>(), plan.tile}
  {
  }

  /// This rank's slab of the whole grid `whole`, cut over the ranks of `comm` (the plan is this
  /// slab's: plan_slab_segments). Throws what ghost_exchange throws.
  cpu_runner(S stencil, grid<T> const& whole, segment_plan const& plan, std::shared_ptr<distributed::communicator> comm)
    : cpu_runner(stencil, whole, plan)
  {
    slab const s = slab::of(whole.extent(S::dims - 1), comm->size(), comm->rank());
    int const depth = deepest_halo(segment_shape{plan.k, program_.r});
    program_.g = slab_grid(whole, S::dims, s);
    // Every rank's state is as long as the widest slab's (its tail zero), so that every rank plans
    // the same layers (chain_options::collective).
    padded_size_ = (s.global + static_cast<std::size_t>(s.ranks) - 1) / static_cast<std::size_t>(s.ranks) *
                   (program_.g.cells() / s.extent) * S::fields;
    state_ghosts_ = std::make_shared<ghost_exchange<T>>(comm, s, whole, S::dims, S::fields, depth);
    adjoint_ghosts_ = std::make_shared<ghost_exchange<T>>(std::move(comm), s, whole, S::dims, S::fields, depth);
    program_.slab = state_ghosts_->view();
  }

  /// Values of this runner's state: the grid's fields, one after the other. Over ranks, the slab's,
  /// then zeros up to the widest slab's size.
  [[nodiscard]] std::size_t state_size() const noexcept
  {
    return padded_size_ != 0 ? padded_size_ : program_.g.cells() * S::fields;
  }

  void advance(int k, T const* in, T* out, stream_view) const
  {
    tile_program<S> program = program_;
    if (state_ghosts_) { program.slab.state = state_ghosts_->fill(in, segment_shape{k, program.r}.forward_halo(0)); }
    std::size_t const values = program.advance_scratch(k);
    each_tile([&](std::size_t t, T* scratch) { program.advance(solo_team{}, program.tile_box(t), k, in, out, scratch); },
              values);
    zero_tail(out);
  }

  void reverse(int k, T const* checkpoint, T const* lambda_out, T* lambda_in, stream_view) const
  {
    tile_program<S> program = program_;
    if (state_ghosts_) {
      segment_shape const shape{k, program.r};
      program.slab.state = state_ghosts_->fill(checkpoint, shape.state_halo(0));
      program.slab.adjoint = adjoint_ghosts_->fill(lambda_out, shape.lambda_halo(k));
    }
    std::size_t const values = program.reverse_scratch(k);
    each_tile(
      [&](std::size_t t, T* scratch) {
        program.reverse(solo_team{}, program.tile_box(t), k, checkpoint, lambda_out, lambda_in, scratch);
      },
      values);
    zero_tail(lambda_in);
  }

  void record(T const* in, T* taped, std::size_t padded_values, stream_view) const
  {
    std::size_t const values = state_size();
    std::copy(in, in + values, taped);
    std::fill(taped + values, taped + padded_values, T(0));
  }

 private:
  void zero_tail(T* state) const
  {
    std::fill(state + program_.g.cells() * S::fields, state + state_size(), T(0));
  }

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
  std::size_t padded_size_{0};  // over ranks: the widest slab's values; 0: not cut
  // Over ranks: the ghost planes of the state and of the adjoint (shared by the copies a chain
  // makes of its Step; its calls come one at a time).
  std::shared_ptr<ghost_exchange<T>> state_ghosts_;
  std::shared_ptr<ghost_exchange<T>> adjoint_ghosts_;
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

/// The CPU Step of this rank's slab of `whole`, cut over the ranks of `comm`, in `plan`'s segments
/// (plan_slab_segments). Its state is the slab's (slab::of says which planes).
template <class S>
[[nodiscard]] cpu_segments<S> make_cpu_segments(S stencil, grid<typename S::value_type> const& whole,
                                                segment_plan const& plan,
                                                std::shared_ptr<distributed::communicator> comm)
{
  return cpu_segments<S>(cpu_runner<S>(stencil, whole, plan, std::move(comm)), plan);
}

}  // namespace tapeflow::stencil
