// SPDX-License-Identifier: Apache-2.0
#include "allen_cahn.hpp"
#include "backends.hpp"
#include "stencil.hpp"
#include "math.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <cmath>
#include <random>
#include <string>

namespace tapeflow::workloads::allen_cahn {

void validate(problem const& p)
{
  TAPEFLOW_EXPECTS(p.n >= 1, "the grid side n must be at least 1");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps must be at least 1");
  // n^2 values of 8 bytes in a size_t.
  TAPEFLOW_EXPECTS(p.n <= (std::size_t{1} << 30), "grid side " + std::to_string(p.n) + " is too large");
  TAPEFLOW_EXPECTS(std::isfinite(p.dt) && p.dt > 0, "the time step dt must be positive and finite");
  TAPEFLOW_EXPECTS(std::isfinite(p.eps2) && p.eps2 >= 0, "the diffusion eps2 must be finite and not negative");
}

void validate(problem const& p, std::size_t values)
{
  validate(p);
  TAPEFLOW_EXPECTS(values == p.n * p.n, "the initial state holds " + std::to_string(values) +
                                          " values; an n = " + std::to_string(p.n) + " grid needs " +
                                          std::to_string(p.n * p.n));
}

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  validate(p, p.n * p.n);
  return on_backend(
    o.kind, "the Allen–Cahn workload", [&] { return detail::open_cpu<T>(p, o); },
    [&](auto) { return detail::open_gpu<T>(p, o); });
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  validate(p, p.n * p.n);
  if (!segmented(o)) {
    return plan_chain(sizeof(record<T>), records_for<T>(p.n * p.n), p.steps, p.n * p.n * sizeof(T), chain_options_of(o));
  }
  return plan_stencil_chain<stencil<T>>(grid_of<T>(p), segment_plan_of<T>(p, o), o);
}

template <class T>
std::vector<T> random_state(std::size_t n, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  std::vector<T> values(n * n);
  for (T& v : values) { v = static_cast<T>(dist(rng)); }
  return values;
}

#define TAPEFLOW_INSTANTIATE(T)                                                                    \
  template std::unique_ptr<session<T>> open<T>(problem const&, options const&);                   \
  template chain_stats plan<T>(problem const&, options const&);                                    \
  template std::vector<T> random_state<T>(std::size_t, std::uint64_t);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::workloads::allen_cahn
