// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the LBM gradient: upload f0, run the chain's forward (one
// layer per step), L and the seed dL/df_T = f_T, the chain's reverse, download. Each backend
// supplies its Step (kernels) and its loss reduction.
#pragma once

#include "lbm.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stream.hpp>

#include <utility>
#include <vector>

namespace tapeflow::workloads::lbm::detail {

template <class T>
T omega_of(problem const& p) noexcept
{
  return static_cast<T>(1.0 / p.tau);
}

inline chain_options chain_options_of(options const& o)
{
  chain_options c;
  c.kind = o.kind;
  c.policy = o.policy;
  c.budget_bytes = o.budget_bytes;
  c.host_budget_bytes = o.host_budget_bytes;
  c.bw = o.bw;
  c.pipeline = o.pipeline;
  c.measure_time = o.measure_time;
  c.capture_reverse = o.capture_reverse;
  c.poison = o.poison;
  c.progress = o.progress;
  return c;
}

/// `loss(state, stream)` returns L for a state buffer on the backend.
template <class T, class Step, class Loss>
gradient_result<T> run_gradient(Step step, Loss&& loss, problem const& p, std::vector<T> const& f0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lbm::gradient");
  validate(p, f0.size());
  std::size_t const bytes = f0.size() * sizeof(T);
  reset_device_memory_peak(o.kind);
  chain<Step> c(std::move(step), p.steps, chain_options_of(o));
  stream_view const stream = o.stream;

  device_buffer state(o.kind, bytes, stream);
  state.upload(f0.data(), bytes, stream);
  c.forward(state, stream);

  gradient_result<T> result;
  result.loss = loss(state, stream);
  device_buffer adjoint(o.kind, bytes, stream);
  adjoint.copy_from(state, stream);  // dL/df_T = f_T
  c.reverse(adjoint, stream);

  result.gradient.resize(f0.size());
  adjoint.download(result.gradient.data(), bytes, stream);
  result.chain = c.stats();
  result.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  return result;
}

/// `advance(in, out, stream)` applies one primal step on the backend.
template <class T, class Advance>
std::vector<T> run_primal(Advance&& advance, problem const& p, std::vector<T> const& f0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lbm::primal");
  validate(p, f0.size());
  std::size_t const bytes = f0.size() * sizeof(T);
  stream_view const stream = o.stream;
  device_buffer a(o.kind, bytes, stream);
  device_buffer b(o.kind, bytes, stream);
  a.upload(f0.data(), bytes, stream);
  for (std::size_t s = 0; s < p.steps; ++s) {
    advance(a.data_as<T>(), b.data_as<T>(), stream);
    std::swap(a, b);
  }
  std::vector<T> f(f0.size());
  a.download(f.data(), bytes, stream);
  return f;
}

}  // namespace tapeflow::workloads::lbm::detail
