// SPDX-License-Identifier: Apache-2.0
// The typed result of the chain workloads whose input is their initial state, whose loss is
// L = 0.5 * sum(x_T^2) and whose gradient is dL/dx_0 (Allen–Cahn, LBM, Burgers), and the entry
// points they share over their session.
#pragma once

#include <tapeflow/workloads/common/session.hpp>

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/memory.hpp>

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

namespace detail {

/// dL/dx_0 and L of `x0` through the session `open()` returns, the device's peak counted from
/// before it opens.
template <class T, class Open>
[[nodiscard]] state_gradient<T> state_gradient_of(Open&& open, std::vector<T> const& x0, backend kind, stream_view s)
{
  reset_device_memory_peak(kind);
  std::unique_ptr<session<T>> const run = open();
  outcome<T> r = gradient_of(*run, {x0}, s);
  state_gradient<T> g;
  g.loss = r.loss;
  g.gradient = std::move(r.gradients.front());
  g.chain = std::move(*r.report.chain);
  g.peak_device_bytes = r.report.peak_device_bytes;
  g.staging = r.report.staging;
  return g;
}

/// x_T of `x0` without a tape, through the session `open()` returns.
template <class T, class Open>
[[nodiscard]] std::vector<T> state_primal_of(Open&& open, std::vector<T> const& x0, stream_view s)
{
  std::unique_ptr<session<T>> const run = open();
  run->load({x0}, s);
  run->primal(s);
  return std::move(run->outputs(s).front());
}

}  // namespace detail
}  // namespace tapeflow::workloads
