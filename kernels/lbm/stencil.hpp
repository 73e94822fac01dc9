// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 as a tapeflow stencil (tapeflow/stencil/stencil.hpp): the per-cell math of math.hpp,
// handed to the library so that its segments (k steps per launch, the reverse of k steps on chip)
// and its slabs over MPI ranks are the library's.
//
// The library's forward is a gather, so the step pulls: f'_i at x is what the cell x - c_i relaxes
// along i, which takes that cell's 9 values (81 taps: 9 per neighbour, the cell's own first). Each
// post-collision value is math.hpp's `relaxed` of the same inputs as in the pushing chain, so a
// segment gives the bits of the one-step chain. The adjoint gathers λ' from the 9 cells x + c_i
// and runs collide_adjoint on the cell's own velocity, recomputed from its 9 values (the first 9
// taps; the other 72 are not read).
//
// One step per layer stays with the chain of cuda_step.cuh and cpu.cpp, whose layer is the cells'
// velocities (2 of 9 values); a segment's layer is the whole state once per k steps. With
// --segment auto the workload takes whichever of the two moves fewer bytes (segments_of).
#pragma once

#include "lbm.hpp"
#include "math.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/workloads/common/stencil_workload.hpp>

#include <optional>
#include <utility>

namespace tapeflow::workloads::lbm {

namespace detail {
/// Tap n = 9 d + j reads field j of the cell x - c_d (d = 0: the cell itself).
template <class Sequence>
struct pulled_taps;
template <int... N>
struct pulled_taps<std::integer_sequence<int, N...>> {
  using type = tapeflow::stencil::taps<tapeflow::stencil::tap<-cx(N / directions), -cy(N / directions), 0, N % directions>...>;
};
/// Tap i reads field i of the cell x + c_i: where the forward sent the cell's value along i.
template <class Sequence>
struct pushed_taps;
template <int... I>
struct pushed_taps<std::integer_sequence<int, I...>> {
  using type = tapeflow::stencil::taps<tapeflow::stencil::tap<cx(I), cy(I), 0, I>...>;
};
}  // namespace detail

template <class T>
struct stencil {
  using value_type = T;
  static constexpr int dims = 2;
  static constexpr int fields = directions;
  using forward_taps = typename detail::pulled_taps<std::make_integer_sequence<int, directions * directions>>::type;
  using adjoint_taps = typename detail::pushed_taps<std::make_integer_sequence<int, directions>>::type;

  T omega;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const
  {
    TAPEFLOW_HOST_UNROLL
    for (int i = 0; i < directions; ++i) {
      T f[directions];  // the cell x - c_i
      TAPEFLOW_HOST_UNROLL
      for (int j = 0; j < directions; ++j) { f[j] = u[i * directions + j]; }
      moments<T> const m = moments_of(f);
      out[i] = relaxed(f[i], i, m, squared(m.u), omega);
    }
  }
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* g, T* lambda) const
  {
    T f[directions];
    T gbar[directions];
    TAPEFLOW_HOST_UNROLL
    for (int i = 0; i < directions; ++i) {
      f[i] = u[i];
      gbar[i] = g[i];
    }
    T out[directions];
    collide_adjoint(moments_of(f).u, gbar, omega, out);
    TAPEFLOW_HOST_UNROLL
    for (int i = 0; i < directions; ++i) { lambda[i] = out[i]; }
  }
};

/// The periodic nx x ny lattice of the problem, for its stencil.
template <class T>
[[nodiscard]] tapeflow::stencil::grid<T> grid_of(problem const& p) noexcept
{
  return {p.nx, p.ny, 1, tapeflow::stencil::boundary::periodic, T(0)};
}

/// The segments the problem runs in on o.kind (stencil_segments: k as asked, or the planner's, of
/// this rank's slab over o.ranks). Throws logic_error for a k the device (or the thinnest slab)
/// cannot hold.
template <class T>
[[nodiscard]] tapeflow::stencil::segment_plan segment_plan_of(problem const& p, options const& o)
{
  return stencil_segments<stencil<T>>(grid_of<T>(p), p.steps, o);
}

/// States (of 9 values per cell) the one-step chain moves per step: f read and written in the
/// forward, g read and written in the reverse, and the layer of 2 values per cell written and read.
inline constexpr double one_step_states_per_step = 4.0 + 2.0 * 2.0 / directions;

/// The segments the problem runs in on the stencil library, planned once (collectively over
/// o.ranks): over ranks, in segments of K > 1, or, with --segment auto, when the planner's segments
/// cost less than the one-step chain (segment_plan::beats_one_step); none when the one-step chain
/// runs. Throws what segment_plan_of throws.
template <class T>
[[nodiscard]] std::optional<tapeflow::stencil::segment_plan> segments_of(problem const& p, options const& o)
{
  if (o.segment == 1 && !o.ranks) { return std::nullopt; }
  tapeflow::stencil::segment_plan plan = segment_plan_of<T>(p, o);
  if (o.segment == 0 && !o.ranks && !plan.beats_one_step(one_step_states_per_step)) { return std::nullopt; }
  return plan;
}

/// Whether the problem runs on the stencil library (segments_of has a plan).
template <class T>
[[nodiscard]] bool on_stencil_library(problem const& p, options const& o)
{
  return segments_of<T>(p, o).has_value();
}

}  // namespace tapeflow::workloads::lbm
