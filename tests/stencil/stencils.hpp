// SPDX-License-Identifier: Apache-2.0
// Stencils the segment tests run, chosen to cover the contract: 1-, 2- and 3-D; one and two
// fields; gather- and scatter-form adjoints; periodic and fixed grids; taps that are not symmetric
// (a scatter applied with the wrong sign of an offset gives another gradient). Each is nonlinear,
// so that a recomputed state that differs from the stored one shows in the gradient.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>
#include <cstdint>

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

/// 1-D diffusion with a reaction against the right neighbour at a rate c per cell (a coefficient)
/// and a source at one cell and step window (through the site): u' = u + nu (u[x-1] - 2u + u[x+1])
/// + c u (1 - u[x+1]) + q_t at x = source. The adjoint's share through the right tap depends on c of
/// the cell that reads it: the gather form reads c at its adjoint taps, the scatter form (reverse())
/// gets the reading cell's. Either way dL/dc is the chain's parameter adjoint.
template <class T, bool Gather>
struct logistic_1d_base {
  using value_type = T;
  static constexpr int dims = 1;
  static constexpr int fields = 1;
  static constexpr int coefficients = 1;
  using forward_taps = st::taps<st::tap<0>, st::tap<-1>, st::tap<1>>;
  T nu;
  std::int64_t source;

  /// The source at step t: on at steps 1 to 3 only, so that a step index off by one shows.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static T q(std::size_t t) noexcept { return t >= 1 && t <= 3 ? T(0.25) * T(t) : T(0); }

  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out, st::site<T> const& at) const
  {
    T const c = at.coefficients[0];
    out[0] = u[0] + nu * (u[1] - T(2) * u[0] + u[2]) + c * u[0] * (T(1) - u[2]) + (at.x == source ? q(at.step) : T(0));
  }
  TAPEFLOW_HOST_DEVICE void parameter_adjoint(T const* u, T const* g, T* dc, st::site<T> const&) const
  {
    dc[0] = g[0] * u[0] * (T(1) - u[2]);
  }
};
template <class T>
struct logistic_1d_gather : logistic_1d_base<T, true> {
  using adjoint_taps = typename logistic_1d_base<T, true>::forward_taps;  // λ' at the cell and both neighbours
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* g, T* lambda, st::site<T> const& at) const
  {
    T const* const c = at.coefficients;  // at the cell, its left and its right neighbour
    T const d = this->nu;
    lambda[0] = g[0] * (T(1) - T(2) * d + c[0] * (T(1) - u[2])) + g[2] * d + g[1] * (d - c[1] * u[1]);
  }
};
template <class T>
struct logistic_1d_scatter : logistic_1d_base<T, false> {
  TAPEFLOW_HOST_DEVICE void reverse(T const* u, T const* g, T* contributions, st::site<T> const& at) const
  {
    T const c = at.coefficients[0];
    contributions[0] = g[0] * (T(1) - T(2) * this->nu + c * (T(1) - u[2]));
    contributions[1] = g[0] * this->nu;
    contributions[2] = g[0] * (this->nu - c * u[0]);
  }
};

template <class T>
using allen_cahn_2d = workloads::allen_cahn::stencil<T>;

}  // namespace tapeflow::testing::stencils
