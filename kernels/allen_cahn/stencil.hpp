// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn as a tapeflow stencil (tapeflow/stencil/stencil.hpp): the per-cell math of math.hpp,
// handed to the library with its taps, so that its segments (k steps per launch, the reverse of k
// steps on chip) are the library's. The gather-form adjoint is math.hpp's adjoint_cell.
#pragma once

#include "math.hpp"

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/stencil.hpp>

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

}  // namespace tapeflow::workloads::allen_cahn
