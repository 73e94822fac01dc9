// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the Allen–Cahn gradient: upload u0, run the chain's
// forward (one layer per step), L and the seed dL/du_T = u_T, the chain's reverse, download.
// Each backend supplies its Step (kernels) and its loss reduction.
#pragma once

#include "allen_cahn.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace tapeflow::workloads::allen_cahn::detail {

template <class T>
coefficients<T> coefficients_of(problem const& p) noexcept
{
  return {static_cast<T>(p.dt), static_cast<T>(p.eps2)};
}


/// `loss(state, stream)` returns L for a state buffer on the backend.
template <class T, class Step, class Loss>
gradient_result<T> run_gradient(Step step, Loss&& loss, problem const& p, std::vector<T> const& u0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::allen_cahn::gradient");
  validate(p, u0.size());
  return workloads::detail::half_square_gradient<T>(std::move(step), std::forward<Loss>(loss), p.steps, u0, o);
}

/// `advance(in, out, stream)` applies one primal step on the backend.
template <class T, class Advance>
std::vector<T> run_primal(Advance&& advance, problem const& p, std::vector<T> const& u0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::allen_cahn::primal");
  validate(p, u0.size());
  return workloads::detail::untaped_primal<T>(std::forward<Advance>(advance), p.steps, u0, o);
}

inline double median_of(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  std::size_t const m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// Event-timed medians of the primal (T untaped steps) and of the gradient (augmented forward,
/// seed, reverse), device-resident, after `warmup` runs.
template <class T, class Step>
bench_result run_benchmark(Step const& step, problem const& p, std::vector<T> const& u0, options const& o,
                           int warmup, int repeats)
{
  TAPEFLOW_EXPECTS(repeats >= 1 && warmup >= 0, "a benchmark needs repeats >= 1 and warmup >= 0");
  validate(p, u0.size());
  std::size_t const bytes = u0.size() * sizeof(T);
  stream_view const s = o.stream;
  chain_options co = chain_options_of(o);
  co.measure_time = false;  // events time it; no extra synchronisation
  co.progress = nullptr;
  reset_device_memory_peak(o.kind);
  chain<Step> c(step, p.steps, co);
  device_buffer a(o.kind, bytes, s);
  device_buffer b(o.kind, bytes, s);
  device_buffer adjoint(o.kind, bytes, s);
  event start(o.kind);
  event middle(o.kind);
  event stop(o.kind);
  std::vector<double> primal, forward, reverse, grad;
  auto allocated = [&] {
    memory_usage const d = device_memory_usage(o.kind);
    memory_usage const h = host_memory_usage(o.kind);
    return std::pair<std::size_t, std::size_t>{d.allocations + h.allocations, d.allocated_bytes + h.allocated_bytes};
  };
  std::pair<std::size_t, std::size_t> after_first{};
  for (int run = 0; run < warmup + repeats; ++run) {
    if (run == 1) { after_first = allocated(); }
    a.upload(u0.data(), bytes, s);
    start.record(s);
    for (std::size_t t = 0; t < p.steps; ++t) {
      step.forward(t, a.template data_as<T>(), b.template data_as<T>(), s);
      std::swap(a, b);
    }
    stop.record(s);
    double const primal_ms = elapsed_ms(start, stop);
    a.upload(u0.data(), bytes, s);
    start.record(s);
    c.forward(a, s);
    adjoint.copy_from(a, s);  // dL/du_T = u_T
    middle.record(s);
    c.reverse(adjoint, s);
    stop.record(s);
    if (run < warmup) {
      synchronize(o.kind, s);
      continue;
    }
    primal.push_back(primal_ms);
    forward.push_back(elapsed_ms(start, middle));
    reverse.push_back(elapsed_ms(middle, stop));
    grad.push_back(elapsed_ms(start, stop));
  }
  bench_result r;
  r.primal_ms = median_of(primal);
  r.grad_ms = median_of(grad);
  r.forward_ms = median_of(forward);
  r.reverse_ms = median_of(reverse);
  r.chain = c.stats();
  r.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  if (warmup + repeats > 1) {
    r.repeat_allocations = allocated().first - after_first.first;
    r.repeat_allocated_bytes = allocated().second - after_first.second;
  }
  return r;
}

}  // namespace tapeflow::workloads::allen_cahn::detail
