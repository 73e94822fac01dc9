// SPDX-License-Identifier: Apache-2.0
// The chain step of the Enzyme example, parameterised by backend (cpu.cpp, cuda.cu), and the
// backend-independent driver.
#pragma once

#include "enzyme_example.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/enzyme.hpp>
#include <tapeflow/memory.hpp>

#include <numeric>
#include <vector>

namespace tapeflow::workloads::enzyme_example::detail {

/// What every backend's step of the example shares: its state and its records (one slot of
/// slot_chunks chunks per element).
struct step_shape {
  using value_type = double;
  using record_type = enzyme::chunk;

  std::size_t n;
  params p;

  [[nodiscard]] std::size_t state_size() const noexcept { return n; }
  [[nodiscard]] std::size_t slot_chunks() const noexcept { return enzyme::slot_chunks(tape_bytes(p)); }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return n * slot_chunks(); }
};

template <class Step>
result run(Step step, problem const& p, std::vector<double> const& x0, options const& o)
{
  TAPEFLOW_EXPECTS(p.n > 0 && p.steps > 0 && p.inner > 0, "the Enzyme example needs n, steps and inner > 0");
  TAPEFLOW_EXPECTS(x0.size() == p.n, "x0 holds " + std::to_string(x0.size()) + " values; n is " + std::to_string(p.n));
  chain_options c;
  c.kind = o.kind;
  c.policy = o.policy;
  c.budget_bytes = o.budget_bytes;
  c.bw = o.bw;
  c.poison = o.poison;
  c.pipeline = enzyme::slot_pipeline(query_device_limits(o.kind), tape_bytes({p.inner, p.a}), p.n, o.pipeline);
  chain<Step> ch(std::move(step), p.steps, c);
  std::size_t const bytes = p.n * sizeof(double);
  device_buffer state(o.kind, bytes, {});
  state.upload(x0.data(), bytes, {});
  ch.forward(state);
  device_buffer adjoint(o.kind, bytes, {});
  adjoint.copy_from(state, {});  // dL/dx_T = x_T
  result r;
  std::vector<double> xT(p.n);
  state.download(xT.data(), bytes, {});
  r.loss = 0.5 * std::inner_product(xT.begin(), xT.end(), xT.begin(), 0.0);
  ch.reverse(adjoint);
  r.gradient.resize(p.n);
  adjoint.download(r.gradient.data(), bytes, {});
  r.chain = ch.stats();
  return r;
}

result gradient_cpu(problem const& p, std::vector<double> const& x0, options const& o);
#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
result gradient_gpu(problem const& p, std::vector<double> const& x0, options const& o);
#endif

}  // namespace tapeflow::workloads::enzyme_example::detail
