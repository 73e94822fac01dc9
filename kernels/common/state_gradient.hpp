// SPDX-License-Identifier: Apache-2.0
// The typed result of the chain workloads whose input is their initial state, whose loss is
// L = 0.5 * sum(x_T^2) and whose gradient is dL/dx_0 (Allen–Cahn, LBM, Burgers), and the entry
// points they share over their session.
#pragma once

#include <tapeflow/workloads/common/session.hpp>

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

/// The gradient of a chain workload with respect to its initial state.
template <class T>
struct state_gradient {
  T loss{};
  std::vector<T> gradient;             ///< dL/dx_0, laid out like the state
  chain_stats chain{};
  std::size_t peak_device_bytes{0};    ///< every tapeflow allocation on the backend, peak
  cpu::ring_stats staging{};           ///< CPU backend only
};

/// L = 0.5 * sum(x^2) over `count` values, accumulated in double (host).
template <class T>
[[nodiscard]] T half_sum_of_squares(T const* x, std::size_t count) noexcept
{
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) { sum += static_cast<double>(x[i]) * static_cast<double>(x[i]); }
  return static_cast<T>(0.5 * sum);
}

// The entry points of the chain workloads whose input is their initial state x_0 and whose loss is
// L = 0.5 * sum(x_T^2) (Allen–Cahn, LBM, Burgers), over the workload's validate(problem, values)
// and open<T>(problem, options); each names them in its namespace (`using workloads::gradient;`).

/// dL/dx_0 and L for the initial state `x0` (laid out as the problem's state); the peak device
/// bytes are counted from the start of the call. Throws what the workload's validate() and open()
/// throw.
template <class T, class Problem, class Options>
[[nodiscard]] state_gradient<T> gradient(Problem const& p, std::vector<T> const& x0, Options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::workloads::gradient");
  validate(p, x0.size());
  outcome<T> r = gradient_on_new_session<T>(p, {x0}, o);
  auto g = chain_result<state_gradient<T>>(r);
  g.gradient = std::move(r.gradients.front());
  return g;
}

/// x_T for the initial state `x0`, without a tape. Throws what gradient() throws.
template <class T, class Problem, class Options>
[[nodiscard]] std::vector<T> primal(Problem const& p, std::vector<T> const& x0, Options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::workloads::primal");
  validate(p, x0.size());
  std::unique_ptr<session<T>> const run = open<T>(p, o);
  run->load({x0}, o.stream);
  run->primal(o.stream);
  return std::move(run->outputs(o.stream).front());
}

/// L = 0.5 * sum(x^2) of a state, accumulated in double.
template <class T>
[[nodiscard]] T loss(std::vector<T> const& x) noexcept
{
  return half_sum_of_squares(x.data(), x.size());
}

/// What the namespace of a workload whose input is its initial state takes in with
/// `using namespace workloads::state_workload;`: its result type, gradient_result<T> (dL/dx_0 laid
/// out as the state, L, the chain's stats and the peak device bytes), and the entry points above:
/// gradient(problem, x0, options), primal(problem, x0, options) (x_T without a tape) and loss(x).
namespace state_workload {
template <class T>
using gradient_result = state_gradient<T>;
using workloads::gradient;
using workloads::loss;
using workloads::primal;
}  // namespace state_workload
}  // namespace tapeflow::workloads
