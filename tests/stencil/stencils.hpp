// SPDX-License-Identifier: Apache-2.0
// Stencils the segment tests run, chosen to cover the contract: 1-, 2- and 3-D; one and two
// fields; gather- and scatter-form adjoints; periodic and fixed grids; taps that are not symmetric
// (a scatter applied with the wrong sign of an offset gives another gradient). Each is nonlinear,
// so that a recomputed state that differs from the stored one shows in the gradient.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <tapeflow/workloads/allen_cahn/stencil.hpp>

namespace tapeflow::testing::stencils {

namespace st = tapeflow::stencil;

/// 1-D Burgers-like advection with diffusion, scatter form (the reverse of forward(), as Enzyme
/// gives it): u' = u - c u (u[x+1] - u[x-1]) + nu (u[x+1] - 2u + u[x-1]).
template <class T>
struct burgers_1d {
  using value_type = T;
  static constexpr int dims = 1;
  static constexpr int fields = 1;
  using forward_taps = st::taps<st::tap<0>, st::tap<-1>, st::tap<1>>;
  T c;
  T nu;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const
  {
    out[0] = u[0] - c * u[0] * (u[2] - u[1]) + nu * (u[2] - T(2) * u[0] + u[1]);
  }
  TAPEFLOW_HOST_DEVICE void reverse(T const* u, T const* g, T* contributions) const
  {
    contributions[0] = g[0] * (T(1) - c * (u[2] - u[1]) - T(2) * nu);
    contributions[1] = g[0] * (c * u[0] + nu);
    contributions[2] = g[0] * (nu - c * u[0]);
  }
};

/// 2-D advection of u by itself along a skewed pair of taps, with diffusion, scatter form:
/// u' = u + nu lap(u) - c u (u[x+1, y] - u[x, y-1]).
template <class T>
struct advection_2d {
  using value_type = T;
  static constexpr int dims = 2;
  static constexpr int fields = 1;
  using forward_taps = st::taps<st::tap<0, 0>, st::tap<1, 0>, st::tap<0, -1>, st::tap<-1, 0>, st::tap<0, 1>>;
  T c;
  T nu;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const
  {
    T const lap = u[1] + u[2] + u[3] + u[4] - T(4) * u[0];
    out[0] = u[0] + nu * lap - c * u[0] * (u[1] - u[2]);
  }
  TAPEFLOW_HOST_DEVICE void reverse(T const* u, T const* g, T* contributions) const
  {
    contributions[0] = g[0] * (T(1) - T(4) * nu - c * (u[1] - u[2]));
    contributions[1] = g[0] * (nu - c * u[0]);
    contributions[2] = g[0] * (nu + c * u[0]);
    contributions[3] = g[0] * nu;
    contributions[4] = g[0] * nu;
  }
};

/// Gray–Scott reaction–diffusion in 3-D, two fields (a, b), gather form:
///   a' = a + Da lap(a) - a b^2 + F (1 - a),   b' = b + Db lap(b) + a b^2 - (F + K) b.
template <class T>
struct gray_scott_3d {
  using value_type = T;
  static constexpr int dims = 3;
  static constexpr int fields = 2;
  // a and b at the cell, then a's six neighbours, then b's.
  using forward_taps =
    st::taps<st::tap<0, 0, 0, 0>, st::tap<0, 0, 0, 1>, st::tap<-1, 0, 0, 0>, st::tap<1, 0, 0, 0>, st::tap<0, -1, 0, 0>,
             st::tap<0, 1, 0, 0>, st::tap<0, 0, -1, 0>, st::tap<0, 0, 1, 0>, st::tap<-1, 0, 0, 1>, st::tap<1, 0, 0, 1>,
             st::tap<0, -1, 0, 1>, st::tap<0, 1, 0, 1>, st::tap<0, 0, -1, 1>, st::tap<0, 0, 1, 1>>;
  using adjoint_taps = forward_taps;  // λ'_a and λ'_b at the same cells
  T da;
  T db;
  T feed;
  T kill;

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out) const
  {
    T const a = u[0];
    T const b = u[1];
    T const lap_a = u[2] + u[3] + u[4] + u[5] + u[6] + u[7] - T(6) * a;
    T const lap_b = u[8] + u[9] + u[10] + u[11] + u[12] + u[13] - T(6) * b;
    out[0] = a + da * lap_a - a * b * b + feed * (T(1) - a);
    out[1] = b + db * lap_b + a * b * b - (feed + kill) * b;
  }
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* g, T* lambda) const
  {
    T const a = u[0];
    T const b = u[1];
    T const sum_a = g[2] + g[3] + g[4] + g[5] + g[6] + g[7];
    T const sum_b = g[8] + g[9] + g[10] + g[11] + g[12] + g[13];
    lambda[0] = g[0] * (T(1) - T(6) * da - b * b - feed) + da * sum_a + g[1] * (b * b);
    lambda[1] = g[0] * (-T(2) * a * b) + g[1] * (T(1) - T(6) * db + T(2) * a * b - (feed + kill)) + db * sum_b;
  }
};

template <class T>
using allen_cahn_2d = workloads::allen_cahn::stencil<T>;

}  // namespace tapeflow::testing::stencils
