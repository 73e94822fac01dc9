// SPDX-License-Identifier: Apache-2.0
#include "wave.hpp"
#include "backends.hpp"
#include "math.hpp"
#include "segments.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>

#include <cmath>
#include <random>
#include <string>

namespace tapeflow::workloads::wave {

void validate(problem const& p)
{
  TAPEFLOW_EXPECTS(p.nx >= 2 && p.ny >= 2 && p.nz >= 1,
                   "the wave grid needs nx, ny >= 2 and nz >= 1 (got " + std::to_string(p.nx) + " x " +
                     std::to_string(p.ny) + " x " + std::to_string(p.nz) + ")");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps must be at least 1");
  // Each side below 2^24 and the cells below 2^40, checked by division: three sides of up to 2^24
  // multiply past 2^64.
  std::size_t const most_cells = std::size_t{1} << 40;
  TAPEFLOW_EXPECTS(p.nx <= (std::size_t{1} << 24) && p.ny <= (std::size_t{1} << 24) && p.nz <= (std::size_t{1} << 24) &&
                     p.ny <= most_cells / p.nx && p.nz <= most_cells / (p.nx * p.ny) &&
                     p.steps <= (std::size_t{1} << 32),
                   "the wave grid " + std::to_string(p.nx) + " x " + std::to_string(p.ny) + " x " +
                     std::to_string(p.nz) + " over " + std::to_string(p.steps) + " steps is too large");
  TAPEFLOW_EXPECTS(std::isfinite(p.dt) && p.dt > 0, "the time step dt must be positive and finite");
  TAPEFLOW_EXPECTS(std::isfinite(p.h) && p.h > 0, "the grid spacing h must be positive and finite");
  TAPEFLOW_EXPECTS(std::isfinite(p.peak_frequency) && p.peak_frequency > 0,
                   "the source's peak frequency must be positive and finite");
}

template <class T>
geometry<T> geometry_of(problem const& p)
{
  geometry<T> g{};
  g.nx = p.nx;
  g.ny = p.ny;
  g.nz = p.nz;
  g.dt = static_cast<T>(p.dt);
  g.inv_h2 = static_cast<T>(1.0 / (p.h * p.h));
  g.source_x = p.nx / 2;
  g.source_y = p.ny / 2;
  g.source_z = p.nz / 2;
  g.receiver_y = p.ny > 1 ? 1 : 0;
  g.receiver_z = p.nz / 2;
  g.peak_frequency = static_cast<T>(p.peak_frequency);
  return g;
}

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  validate(p);
  return on_backend(
    o.kind, "the wave workload", [&] { return detail::open_cpu<T>(p, o); },
    [&](auto) { return detail::open_gpu<T>(p, o); });
}

template <class T>
gradient_result<T> gradient(problem const& p, std::vector<T> const& m, std::vector<T> const& d, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::wave::gradient");
  validate(p);
  outcome<T> r = gradient_on_new_session<T>(p, {m, d}, o);
  auto g = chain_result<gradient_result<T>>(r);
  g.gradient = std::move(r.gradients.front());
  return g;
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  validate(p);
  if (auto const segments = segments_of<T>(p, o)) { return plan_segments<T>(p, *segments, o); }
  auto const planned = [&] {
    return plan_chain(sizeof(record<T>), records_for<T>(p.cells()), p.steps, (2 * p.cells() + 1) * sizeof(T),
                      chain_options_of(o));
  };
  return on_backend(o.kind, "the wave workload", planned, [&](auto) { return planned(); });
}

template <class T>
std::vector<T> random_model(problem const& p, std::uint64_t seed)
{
  validate(p);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> phase(0.0, 6.283185307179586);
  double const a = phase(rng);
  double const b = phase(rng);
  double const c = phase(rng);
  std::vector<T> m(p.cells());
  for (std::size_t cell = 0; cell < m.size(); ++cell) {
    double const x = static_cast<double>(cell % p.nx) / static_cast<double>(p.nx);
    double const y = static_cast<double>(cell / p.nx % p.ny) / static_cast<double>(p.ny);
    double const z = static_cast<double>(cell / (p.nx * p.ny)) / static_cast<double>(p.nz);
    double const wave = std::sin(6.283185307179586 * x + a) * std::sin(6.283185307179586 * y + b) *
                        std::cos(3.141592653589793 * z + c);
    m[cell] = static_cast<T>(0.55 + 0.35 * wave);
  }
  return m;
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                \
  template geometry<T> geometry_of<T>(problem const&);                                                        \
  template std::unique_ptr<session<T>> open<T>(problem const&, options const&);                               \
  template gradient_result<T> gradient(problem const&, std::vector<T> const&, std::vector<T> const&, options const&); \
  template chain_stats plan<T>(problem const&, options const&);                                                \
  template std::vector<T> random_model<T>(problem const&, std::uint64_t);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::workloads::wave
