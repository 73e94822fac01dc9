// SPDX-License-Identifier: Apache-2.0
// Burgers as a tapeflow stencil (tapeflow/stencil/stencil.hpp): the per-cell math of math.hpp,
// handed to the library with its taps. The library's step is Burgers' GPU step (one step per
// launch at segment 1, the reverse reading its neighbours through the library's halos), and, on
// any backend, its segments (k steps per launch, the reverse of k steps on chip) and its slabs over
// MPI ranks. The gather-form adjoint is math.hpp's adjoint_cell.
#pragma once

#include "burgers.hpp"
#include "math.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/workloads/common/stencil_workload.hpp>

namespace tapeflow::workloads::burgers {

template <class T>
struct stencil {
  using value_type = T;
  static constexpr int dims = 1;
  static constexpr int fields = 1;
  // The cell, then its left (j - 1) and right (j + 1) neighbours.
  using forward_taps =
    tapeflow::stencil::taps<tapeflow::stencil::tap<0>, tapeflow::stencil::tap<-1>, tapeflow::stencil::tap<1>>;
  using adjoint_taps = forward_taps;  // λ_j gathers what u_j fed into u'_{j-1}, u'_j and u'_{j+1}

  coefficients<T> k;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const { out[0] = step_cell(u[1], u[0], u[2], k); }
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* g, T* lambda) const
  {
    lambda[0] = adjoint_cell(u[1], u[2], g[1], g[0], g[2], k);
  }
};

/// The periodic line of the problem, for its stencil.
template <class T>
[[nodiscard]] tapeflow::stencil::grid<T> grid_of(problem const& p) noexcept
{
  return {p.n, 1, 1, tapeflow::stencil::boundary::periodic, T(0)};
}

/// Whether the problem runs on the stencil library: in segments or over ranks (segmented), or on a
/// GPU, whose step is the library's (the one-step chain's device pipelines do not stage halos).
/// Otherwise the CPU backend's one-step chain reads its halos through tile windows (cpu.cpp).
[[nodiscard]] inline bool on_stencil_library(options const& o) noexcept
{
  return segmented(o) || o.kind != backend::cpu;
}

/// The segments the problem runs in on o.kind (stencil_segments: k as asked, of this rank's slab
/// over o.ranks). Throws logic_error for a k the device (or the thinnest slab) cannot hold.
template <class T>
[[nodiscard]] tapeflow::stencil::segment_plan segment_plan_of(problem const& p, options const& o)
{
  return stencil_segments<stencil<T>>(grid_of<T>(p), p.steps, o);
}

}  // namespace tapeflow::workloads::burgers
