// SPDX-License-Identifier: Apache-2.0
// The chain step of the Enzyme example, parameterised by backend (cpu.cpp, cuda.cu), and the
// backend-independent driver.
#pragma once

#include "enzyme_example.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/enzyme.hpp>
#include <tapeflow/memory.hpp>

#include <tapeflow/error.hpp>

#include <memory>
#include <numeric>
#include <string>
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

/// The chain of a Step opened on x0 (one slot of `slot_bytes` per element: the hand-written pair's
/// tape, or Enzyme's inputs and tape): device-resident sweeps for gradient() and the benchmarks.
template <class Step>
class chain_sweeps final : public sweeps {
 public:
  chain_sweeps(Step step, problem const& p, std::vector<double> const& x0, options const& o, std::size_t slot_bytes)
    : n_(checked(p, x0)), chain_(std::move(step), p.steps, chain_options_of(p, o, slot_bytes)),
      initial_(o.kind, n_ * sizeof(double), {}), state_(o.kind, n_ * sizeof(double), {}),
      adjoint_(o.kind, n_ * sizeof(double), {})
  {
    initial_.upload(x0.data(), n_ * sizeof(double), {});
  }

  void forward() override
  {
    state_.copy_from(initial_, {});
    chain_.forward(state_);
  }

  void reverse() override
  {
    adjoint_.copy_from(state_, {});  // dL/dx_T = x_T
    chain_.reverse(adjoint_);
  }

  result collect() override
  {
    result r;
    std::vector<double> xT(n_);
    state_.download(xT.data(), n_ * sizeof(double), {});
    r.loss = 0.5 * std::inner_product(xT.begin(), xT.end(), xT.begin(), 0.0);
    r.gradient.resize(n_);
    adjoint_.download(r.gradient.data(), n_ * sizeof(double), {});
    r.chain = chain_.stats();
    return r;
  }

 private:
  static std::size_t checked(problem const& p, std::vector<double> const& x0)
  {
    TAPEFLOW_EXPECTS(p.n > 0 && p.steps > 0 && p.inner > 0, "the Enzyme example needs n, steps and inner > 0");
    TAPEFLOW_EXPECTS(x0.size() == p.n,
                     "x0 holds " + std::to_string(x0.size()) + " values; n is " + std::to_string(p.n));
    return p.n;
  }

  static chain_options chain_options_of(problem const& p, options const& o, std::size_t slot_bytes)
  {
    chain_options c;
    c.kind = o.kind;
    c.policy = o.policy;
    c.budget_bytes = o.budget_bytes;
    c.bw = o.bw;
    c.poison = o.poison;
    c.pipeline = enzyme::slot_pipeline(query_device_limits(o.kind), slot_bytes, p.n, o.pipeline);
    return c;
  }

  std::size_t n_;
  chain<Step> chain_;
  device_buffer initial_;
  device_buffer state_;
  device_buffer adjoint_;
};

/// The hand-written pair's sweeps: slots of tape_bytes(p).
template <class Step>
std::unique_ptr<sweeps> open_hand_written(Step step, problem const& p, std::vector<double> const& x0,
                                          options const& o)
{
  return std::make_unique<chain_sweeps<Step>>(std::move(step), p, x0, o, tape_bytes({p.inner, p.a}));
}

std::unique_ptr<sweeps> open_cpu(problem const& p, std::vector<double> const& x0, options const& o);
#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
std::unique_ptr<sweeps> open_gpu(problem const& p, std::vector<double> const& x0, options const& o);
#endif

}  // namespace tapeflow::workloads::enzyme_example::detail
