// SPDX-License-Identifier: Apache-2.0
#include "lbm.hpp"
#include "backends.hpp"
#include "math.hpp"
#include "stencil.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <cmath>
#include <random>
#include <string>

namespace tapeflow::workloads::lbm {

void validate(problem const& p)
{
  TAPEFLOW_EXPECTS(p.nx >= 1 && p.ny >= 1, "the lattice needs nx >= 1 and ny >= 1 (got " + std::to_string(p.nx) +
                                             " x " + std::to_string(p.ny) + ")");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps must be at least 1");
  TAPEFLOW_EXPECTS(std::isfinite(p.tau) && p.tau > 0.5,
                   "BGK needs a relaxation time tau > 0.5 (omega < 2), got " + ::tapeflow::detail::shown(p.tau));
  TAPEFLOW_EXPECTS(p.nx <= (std::size_t{1} << 31) && p.ny <= (std::size_t{1} << 31) &&
                     p.nx * p.ny <= (std::size_t{1} << 40),
                   "lattice " + std::to_string(p.nx) + " x " + std::to_string(p.ny) + " is too large");
}

void validate(problem const& p, std::size_t values)
{
  validate(p);
  TAPEFLOW_EXPECTS(values == p.values(), "the initial state holds " + std::to_string(values) + " values; a " +
                                           std::to_string(p.nx) + " x " + std::to_string(p.ny) +
                                           " D2Q9 lattice needs 9 * nx * ny = " + std::to_string(p.values()));
}

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  validate(p, p.values());
  return on_backend(
    o.kind, "the LBM workload", [&] { return detail::open_cpu<T>(p, o); },
    [&](auto) { return detail::open_gpu<T>(p, o); });
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  validate(p, p.values());
  if (auto const segments = segments_of<T>(p, o)) { return plan_stencil_chain<stencil<T>>(grid_of<T>(p), *segments, o); }
  return plan_chain(sizeof(record<T>), records_per_layer<T>(p.cells()), p.steps, p.values() * sizeof(T),
                    chain_options_of(o));
}

template <class T>
std::vector<T> random_state(problem const& p, std::uint64_t seed)
{
  validate(p, p.values());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> r(-1.0, 1.0);
  std::size_t const cells = p.cells();
  std::vector<T> f(p.values());
  for (std::size_t cell = 0; cell < cells; ++cell) {
    double const rho = 1.0 + 0.1 * r(rng);
    double const ux = 0.05 * r(rng);
    double const uy = 0.05 * r(rng);
    double const usq = ux * ux + uy * uy;
    for (int i = 0; i < directions; ++i) {
      double const cu = cx(i) * ux + cy(i) * uy;
      double const feq = weight<double>(i) * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq);
      f[static_cast<std::size_t>(i) * cells + cell] = static_cast<T>(feq * (1.0 + 0.05 * r(rng)));
    }
  }
  return f;
}

template std::unique_ptr<session<float>> open<float>(problem const&, options const&);
template std::unique_ptr<session<double>> open<double>(problem const&, options const&);
template chain_stats plan<float>(problem const&, options const&);
template chain_stats plan<double>(problem const&, options const&);
template std::vector<float> random_state<float>(problem const&, std::uint64_t);
template std::vector<double> random_state<double>(problem const&, std::uint64_t);

}  // namespace tapeflow::workloads::lbm
