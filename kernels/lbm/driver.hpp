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

/// `loss(state, stream)` returns L for a state buffer on the backend.
template <class T, class Step, class Loss>
gradient_result<T> run_gradient(Step step, Loss&& loss, problem const& p, std::vector<T> const& f0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lbm::gradient");
  validate(p, f0.size());
  return workloads::detail::half_square_gradient<T>(std::move(step), std::forward<Loss>(loss), p.steps, f0, o);
}

/// `advance(in, out, stream)` applies one primal step on the backend.
template <class T, class Advance>
std::vector<T> run_primal(Advance&& advance, problem const& p, std::vector<T> const& f0, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lbm::primal");
  validate(p, f0.size());
  return workloads::detail::untaped_primal<T>(std::forward<Advance>(advance), p.steps, f0, o);
}

}  // namespace tapeflow::workloads::lbm::detail
