// SPDX-License-Identifier: Apache-2.0
#include "burgers.hpp"
#include "backends.hpp"
#include "math.hpp"
#include "stencil.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace tapeflow::workloads::burgers {

void validate(problem const& p)
{
  TAPEFLOW_EXPECTS(p.n >= 1, "the line needs at least one cell");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps must be at least 1");
  TAPEFLOW_EXPECTS(p.n <= (std::size_t{1} << 40), "a line of " + std::to_string(p.n) + " cells is too large");
  TAPEFLOW_EXPECTS(std::isfinite(p.a), "the advection number a must be finite");
  TAPEFLOW_EXPECTS(std::isfinite(p.b) && p.b > 0 && p.b <= 0.5,
                   "the diffusion number b = nu dt / dx^2 must be in (0, 1/2] for the explicit scheme, got " +
                     ::tapeflow::detail::shown(p.b));
}

void validate(problem const& p, std::size_t values)
{
  validate(p);
  TAPEFLOW_EXPECTS(values == p.n, "the initial state holds " + std::to_string(values) + " values; " +
                                    std::to_string(p.n) + " cells need " + std::to_string(p.n));
}

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  validate(p, p.n);
  return on_backend(
    o.kind, "the Burgers workload", [&] { return detail::open_cpu<T>(p, o); },
    [&](auto) { return detail::open_gpu<T>(p, o); });
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  validate(p, p.n);
  if (on_stencil_library(o)) { return plan_stencil_chain<stencil<T>>(grid_of<T>(p), segment_plan_of<T>(p, o), o); }
  chain_options c = chain_options_of(o);
  c.pipeline.halo_records = std::max(c.pipeline.halo_records, halo_records);  // as the chain does for the step
  return plan_chain(sizeof(record<T>), records_for<T>(p.n), p.steps, p.n * sizeof(T), c);
}

template <class T>
std::vector<T> random_state(problem const& p, std::uint64_t seed)
{
  validate(p, p.n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> amplitude(0.1, 0.5);
  std::uniform_real_distribution<double> phase(0.0, 6.283185307179586);
  double amp[4];
  double ph[4];
  for (int m = 0; m < 4; ++m) {
    amp[m] = amplitude(rng) / (m + 1);
    ph[m] = phase(rng);
  }
  std::vector<T> u(p.n);
  for (std::size_t j = 0; j < p.n; ++j) {
    double const x = 6.283185307179586 * static_cast<double>(j) / static_cast<double>(p.n);
    double v = 0;
    for (int m = 0; m < 4; ++m) { v += amp[m] * std::sin((m + 1) * x + ph[m]); }
    u[j] = static_cast<T>(v);
  }
  return u;
}

template std::unique_ptr<session<float>> open<float>(problem const&, options const&);
template std::unique_ptr<session<double>> open<double>(problem const&, options const&);
template chain_stats plan<float>(problem const&, options const&);
template chain_stats plan<double>(problem const&, options const&);
template std::vector<float> random_state(problem const&, std::uint64_t);
template std::vector<double> random_state(problem const&, std::uint64_t);

}  // namespace tapeflow::workloads::burgers
