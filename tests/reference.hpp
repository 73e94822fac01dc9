// SPDX-License-Identifier: Apache-2.0
// An independent implementation of the brief's Allen–Cahn formula in long double, with no tape and
// none of the library's code: the yardstick for gradient tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace tapeflow::testing {

using real = long double;

struct reference_problem {
  std::size_t n;
  std::size_t steps;
  real dt = 0.05L;
  real eps2 = 1.0L;
};

/// One explicit step: u' = u + dt (eps2 lap(u) + u - u^3), periodic.
inline std::vector<real> reference_step(std::vector<real> const& u, reference_problem const& p)
{
  std::size_t const n = p.n;
  std::vector<real> next(u.size());
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      real const c = u[i * n + j];
      real const lap = u[((i + n - 1) % n) * n + j] + u[((i + 1) % n) * n + j] + u[i * n + (j + n - 1) % n] +
                       u[i * n + (j + 1) % n] - 4 * c;
      next[i * n + j] = c + p.dt * (p.eps2 * lap + c - c * c * c);
    }
  }
  return next;
}

inline real reference_loss(std::vector<real> u0, reference_problem const& p)
{
  for (std::size_t s = 0; s < p.steps; ++s) { u0 = reference_step(u0, p); }
  real sum = 0;
  for (real v : u0) { sum += v * v; }
  return sum / 2;
}

/// dL/du0 by the adjoint recursion, keeping every state (scatter form: each cell pushes its
/// contributions to itself and its neighbours, unlike the library's gather).
inline std::vector<real> reference_gradient(std::vector<real> const& u0, reference_problem const& p)
{
  std::size_t const n = p.n;
  std::vector<std::vector<real>> states{u0};
  for (std::size_t s = 0; s < p.steps; ++s) { states.push_back(reference_step(states.back(), p)); }
  std::vector<real> g = states.back();  // dL/du_T = u_T
  for (std::size_t s = p.steps; s-- > 0;) {
    std::vector<real> const& u = states[s];
    std::vector<real> prev(g.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        std::size_t const k = i * n + j;
        real const gk = g[k];
        real const c = u[k];
        // d u'_k / d u_k (own term) and d u'_k / d u_m = dt eps2 for the four neighbours m.
        prev[k] += gk * (1 + p.dt * (-4 * p.eps2 + 1 - 3 * c * c));
        real const w = gk * p.dt * p.eps2;
        prev[((i + n - 1) % n) * n + j] += w;
        prev[((i + 1) % n) * n + j] += w;
        prev[i * n + (j + n - 1) % n] += w;
        prev[i * n + (j + 1) % n] += w;
      }
    }
    g = std::move(prev);
  }
  return g;
}

/// Fresh random values in [-0.9, 0.9] (never zeros), from a seed the test reports.
template <class T>
std::vector<T> random_state(std::size_t count, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  std::vector<T> v(count);
  for (T& x : v) { x = static_cast<T>(dist(rng)); }
  return v;
}

inline std::uint64_t fresh_seed()
{
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

/// max_i |a_i - b_i| / max_i |b_i|: the norm-wise relative error of `a` against `b`. Infinite
/// (so that `EXPECT_LT(relative_error(a, b), tol)` fails) when the sizes differ or any value of
/// either is NaN or infinite: std::max would drop a NaN difference and pass a NaN gradient.
template <class A, class B>
double relative_error(std::vector<A> const& a, std::vector<B> const& b)
{
  double const infinite = std::numeric_limits<double>::infinity();
  if (a.size() != b.size()) { return infinite; }
  real worst = 0;
  real scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    real const x = static_cast<real>(a[i]);
    real const y = static_cast<real>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) { return infinite; }
    worst = std::max(worst, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return static_cast<double>(scale == 0 ? worst : worst / scale);
}

template <class T>
std::vector<real> widen(std::vector<T> const& v)
{
  return std::vector<real>(v.begin(), v.end());
}

}  // namespace tapeflow::testing
