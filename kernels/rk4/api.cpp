// SPDX-License-Identifier: Apache-2.0
#include "rk4.hpp"
#include "backends.hpp"
#include "driver.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>

#include <cmath>
#include <string>

namespace tapeflow::workloads::rk4 {

void validate(problem const& p)
{
  TAPEFLOW_EXPECTS(p.particles >= 1, "the RK4 workload needs at least one particle");
  TAPEFLOW_EXPECTS(p.particles <= (std::size_t{1} << 32) - 1, "too many particles: " + std::to_string(p.particles));
  TAPEFLOW_EXPECTS(p.max_steps >= 1 && p.max_steps < (std::size_t{1} << 31),
                   "max_steps must be between 1 and 2^31 - 1, not " + std::to_string(p.max_steps));
  TAPEFLOW_EXPECTS(std::isfinite(p.dt) && p.dt > 0, "the step dt must be positive and finite");
  TAPEFLOW_EXPECTS(std::isfinite(p.k) && p.k >= 0, "the confinement k must be finite and >= 0");
  TAPEFLOW_EXPECTS(p.wells.size() <= static_cast<std::size_t>(max_wells),
                   "at most " + std::to_string(max_wells) + " wells, not " + std::to_string(p.wells.size()));
  for (well_spec const& w : p.wells) {
    TAPEFLOW_EXPECTS(std::isfinite(w.sigma) && w.sigma > 0 && std::isfinite(w.amplitude) &&
                       std::isfinite(w.centre[0]) && std::isfinite(w.centre[1]) && std::isfinite(w.centre[2]),
                     "a well needs a finite centre and amplitude and a positive width sigma");
  }
}

void validate(problem const& p, std::size_t state_values, std::size_t budget_values)
{
  validate(p);
  TAPEFLOW_EXPECTS(state_values == 6 * p.particles, "the initial state holds " + std::to_string(state_values) +
                                                      " values; " + std::to_string(p.particles) +
                                                      " particles need " + std::to_string(6 * p.particles));
  TAPEFLOW_EXPECTS(budget_values == p.particles, "there are " + std::to_string(budget_values) + " budgets for " +
                                                   std::to_string(p.particles) + " particles");
}

template <class T>
params<T> params_of(problem const& p)
{
  params<T> k{};
  k.pot.k = static_cast<T>(p.k);
  k.pot.wells = static_cast<int>(p.wells.size());
  for (std::size_t j = 0; j < p.wells.size() && j < static_cast<std::size_t>(max_wells); ++j) {
    well_spec const& w = p.wells[j];
    k.pot.w[j] = {{static_cast<T>(w.centre[0]), static_cast<T>(w.centre[1]), static_cast<T>(w.centre[2])},
                  static_cast<T>(w.amplitude), static_cast<T>(1.0 / (w.sigma * w.sigma))};
  }
  k.dt = static_cast<T>(p.dt);
  k.max_steps = static_cast<std::uint32_t>(p.max_steps);
  return k;
}

thread_tape_options arena_options(problem const& p, options const& o)
{
  thread_tape_options a;
  a.kind = o.kind;
  a.chunk_steps = o.chunk_steps;
  a.max_steps = p.max_steps;  // the workload clamps at max_steps, so the arena never overflows
  a.device_budget_bytes = o.device_budget_bytes;
  a.host_budget_bytes = o.host_budget_bytes;
  a.prefetch_distance = o.prefetch_distance;
  a.poison = o.poison;
  return a;
}

constexpr char const* workload = "the RK4 workload";

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  validate(p, 6 * p.particles, p.particles);
  return on_backend(
    o.kind, workload, [&] { return detail::open_cpu<T>(p, o); }, [&](auto) { return detail::open_gpu<T>(p, o); });
}

template <class T>
gradient_result<T> gradient(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::rk4::gradient");
  reset_device_memory_peak(o.kind);
  std::unique_ptr<session<T>> const run = open<T>(p, o);
  outcome<T> r = gradient_of(*run, {state0, budgets}, o.stream);
  gradient_result<T> g;
  g.loss = r.loss;
  g.gradient = std::move(r.gradients.front());
  g.steps = dynamic_cast<detail::counts_steps const&>(*run).steps();
  if (r.report.arena) { g.arena = *r.report.arena; }
  g.tape_bytes = r.report.tape_bytes;
  g.peak_device_bytes = r.report.peak_device_bytes;
  return g;
}

template <class T>
primal_result<T> primal(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                        options const& o)
{
  return on_backend(
    o.kind, workload, [&] { return detail::primal_cpu(p, state0, budgets, o); },
    [&](auto) { return detail::primal_gpu(p, state0, budgets, o); });
}

template <class T>
std::vector<T> budgets_for_steps(problem const& p, std::vector<T> const& state0,
                                 std::vector<std::uint32_t> const& targets, options const& o)
{
  return on_backend(
    o.kind, workload, [&] { return detail::budgets_cpu(p, state0, targets, o); },
    [&](auto) { return detail::budgets_gpu(p, state0, targets, o); });
}

template <class T>
T loss(std::vector<T> const& final_state)
{
  double sum = 0;
  for (T v : final_state) { sum += 0.5 * static_cast<double>(v) * static_cast<double>(v); }
  return static_cast<T>(sum);
}

template params<float> params_of<float>(problem const&);
template params<double> params_of<double>(problem const&);
template params<long double> params_of<long double>(problem const&);
template std::unique_ptr<session<float>> open<float>(problem const&, options const&);
template std::unique_ptr<session<double>> open<double>(problem const&, options const&);
template gradient_result<float> gradient(problem const&, std::vector<float> const&, std::vector<float> const&,
                                         options const&);
template gradient_result<double> gradient(problem const&, std::vector<double> const&, std::vector<double> const&,
                                          options const&);
template primal_result<float> primal(problem const&, std::vector<float> const&, std::vector<float> const&,
                                     options const&);
template primal_result<double> primal(problem const&, std::vector<double> const&, std::vector<double> const&,
                                      options const&);
template std::vector<float> budgets_for_steps(problem const&, std::vector<float> const&,
                                              std::vector<std::uint32_t> const&, options const&);
template std::vector<double> budgets_for_steps(problem const&, std::vector<double> const&,
                                               std::vector<std::uint32_t> const&, options const&);
template float loss(std::vector<float> const&);
template double loss(std::vector<double> const&);

}  // namespace tapeflow::workloads::rk4
