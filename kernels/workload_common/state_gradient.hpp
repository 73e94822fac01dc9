// SPDX-License-Identifier: Apache-2.0
// The host side shared by the chain workloads whose loss is L = 0.5 * sum(x_T^2) over their state
// (Allen–Cahn, LBM): upload x_0, the chain's forward, L and the seed dL/dx_T = x_T, the chain's
// reverse, download; and the untaped primal. Each backend supplies its Step and its loss.
#pragma once

#include "run_options.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
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

namespace detail {

/// `loss(state, stream)` returns L for a state buffer on the backend. Validate the problem first.
template <class T, class Step, class Loss>
state_gradient<T> half_square_gradient(Step step, Loss&& loss, std::size_t steps, std::vector<T> const& x0,
                                       run_options const& o)
{
  std::size_t const bytes = x0.size() * sizeof(T);
  reset_device_memory_peak(o.kind);
  chain<Step> c(std::move(step), steps, chain_options_of(o));
  stream_view const stream = o.stream;

  device_buffer state(o.kind, bytes, stream);
  state.upload(x0.data(), bytes, stream);
  c.forward(state, stream);

  state_gradient<T> result;
  result.loss = loss(state, stream);
  device_buffer adjoint(o.kind, bytes, stream);
  adjoint.copy_from(state, stream);  // dL/dx_T = x_T
  c.reverse(adjoint, stream);

  result.gradient.resize(x0.size());
  adjoint.download(result.gradient.data(), bytes, stream);
  result.chain = c.stats();
  result.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  return result;
}

/// x_T without a tape: `advance(in, out, stream)` applies one primal step on the backend.
template <class T, class Advance>
std::vector<T> untaped_primal(Advance&& advance, std::size_t steps, std::vector<T> const& x0, run_options const& o)
{
  std::size_t const bytes = x0.size() * sizeof(T);
  stream_view const stream = o.stream;
  device_buffer a(o.kind, bytes, stream);
  device_buffer b(o.kind, bytes, stream);
  a.upload(x0.data(), bytes, stream);
  for (std::size_t s = 0; s < steps; ++s) {
    advance(a.data_as<T>(), b.data_as<T>(), stream);
    std::swap(a, b);
  }
  std::vector<T> x(x0.size());
  a.download(x.data(), bytes, stream);
  return x;
}

}  // namespace detail
}  // namespace tapeflow::workloads
