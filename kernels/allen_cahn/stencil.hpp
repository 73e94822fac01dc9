// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn as a tapeflow stencil (tapeflow/stencil/stencil.hpp): the per-cell math of math.hpp,
// handed to the library with its taps, so that its segments (k steps per launch, the reverse of k
// steps on chip) are the library's. The gather-form adjoint is math.hpp's adjoint_cell. A problem
// runs in segments when its options ask for them (stencil_options::segment, or ranks).
#pragma once

#include "allen_cahn.hpp"
#include "math.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/workloads/common/stencil_workload.hpp>

namespace tapeflow::workloads::allen_cahn {

template <class T>
struct stencil {
  using value_type = T;
  static constexpr int dims = 2;
  static constexpr int fields = 1;
  // The cell, then up (row i - 1), down, left (column j - 1), right: step_cell's order. Rows are y.
  using forward_taps = tapeflow::stencil::taps<tapeflow::stencil::tap<0, 0>, tapeflow::stencil::tap<0, -1>,
                                               tapeflow::stencil::tap<0, 1>, tapeflow::stencil::tap<-1, 0>,
                                               tapeflow::stencil::tap<1, 0>>;
  using adjoint_taps = forward_taps;  // the Laplacian is symmetric: λ gathers the same five cells

  coefficients<T> k;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const { out[0] = step_cell(u[0], u[1], u[2], u[3], u[4], k); }
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* g, T* lambda) const
  {
    lambda[0] = adjoint_cell(u[0], g[0], g[1], g[2], g[3], g[4], k);
  }
};

/// The periodic n x n grid of the problem, for its stencil (rows are y).
template <class T>
[[nodiscard]] tapeflow::stencil::grid<T> grid_of(problem const& p) noexcept
{
  return {p.n, p.n, 1, tapeflow::stencil::boundary::periodic, T(0)};
}

/// The segments the problem runs in on o.kind (stencil_segments: k as asked, of this rank's slab
/// over o.ranks). Throws logic_error for the partials tape content and for a k the device (or the
/// thinnest slab) cannot hold.
template <class T>
[[nodiscard]] tapeflow::stencil::segment_plan segment_plan_of(problem const& p, options const& o)
{
  TAPEFLOW_EXPECTS(o.content == tape_content::values,
                   "segments tape the state itself: the partials tape content runs one step per layer (segment 1)");
  return stencil_segments<stencil<T>>(grid_of<T>(p), p.steps, o);
}

}  // namespace tapeflow::workloads::allen_cahn
