// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the LSTM gradient: the buffers a step points at, the input
// projection W X of every step, the chain's forward over the state (h, c), L = Σ h_T, the seed
// (g_h, g_c) = (1, 0), the chain's reverse with the parameter gradients accumulated by each step
// into the chain's parameter adjoint (dW, dU, db one after the other), and the downloads. Each backend supplies its Step (cpu.cpp, cuda_step.cuh).
#pragma once

#include "lstm.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace tapeflow::workloads::lstm::detail {

/// What a step reads and writes besides the chain's state and tape, in the backend's memory.
/// Matrices are column-major in cuBLAS's sense (see cuda_step.cuh); the weights are the user's
/// row-major arrays, which are their transposes column-major.
template <class T>
struct step_buffers {
  T const* w{nullptr};   ///< 4H x I row-major
  T const* u{nullptr};   ///< 4H x H row-major
  T const* b{nullptr};   ///< 4H
  T const* x{nullptr};   ///< T x B x I
  T* wx{nullptr};        ///< W x_t of every step: 4H x (T B) column-major, written by project_inputs
  T* z{nullptr};         ///< U h of one step: 4H x B column-major (forward scratch)
  T* dz{nullptr};        ///< δz of one step: 4H x B column-major (reverse scratch)
  T* h_prev{nullptr};    ///< h of one step unpacked from the tape: B x H (reverse scratch)
  T const* ones{nullptr};  ///< B ones (db as a GEMV)
};

/// The step's parameters θ = (W, U, b), and so the chain's parameter adjoint: dL/dW (4H x I
/// row-major), then dL/dU (4H x H row-major), then dL/db (4H).
[[nodiscard]] inline std::size_t parameter_count(problem const& p) noexcept
{
  return 4 * p.hidden * (p.input + p.hidden + 1);
}

/// Where dL/dW, dL/dU and dL/db start in the parameter adjoint `g` (values).
template <class T>
struct parameter_gradients {
  T* dw;
  T* du;
  T* db;
  parameter_gradients(problem const& p, T* g) noexcept
    : dw(g), du(g + 4 * p.hidden * p.input), db(g + 4 * p.hidden * (p.input + p.hidden))
  {
  }
};

/// The buffers of one problem on one backend. `gradients` adds the reverse's scratch (a primal run
/// needs none); the parameter gradients are the chain's parameter adjoint.
template <class T>
struct workspace {
  std::size_t gates;  // 4H
  device_buffer w, u, b, x, wx, z, dz, h_prev, ones;

  workspace(backend kind, problem const& p, bool gradients, stream_view s)
    : gates(4 * p.hidden), w(kind, gates * p.input * sizeof(T), s), u(kind, gates * p.hidden * sizeof(T), s),
      b(kind, gates * sizeof(T), s), x(kind, p.steps * p.batch * p.input * sizeof(T), s),
      wx(kind, gates * p.steps * p.batch * sizeof(T), s), z(kind, gates * p.batch * sizeof(T), s)
  {
    if (!gradients) { return; }
    dz = device_buffer(kind, gates * p.batch * sizeof(T), s);
    h_prev = device_buffer(kind, p.batch * p.hidden * sizeof(T), s);
    ones = device_buffer(kind, p.batch * sizeof(T), s);
    std::vector<T> const one(p.batch, T(1));
    ones.upload(one.data(), ones.size(), s);
  }

  void upload(weights<T> const& params, sequence<T> const& seq, stream_view s)
  {
    w.upload(params.w.data(), w.size(), s);
    u.upload(params.u.data(), u.size(), s);
    b.upload(params.b.data(), b.size(), s);
    x.upload(seq.x.data(), x.size(), s);
  }

  [[nodiscard]] step_buffers<T> buffers() noexcept
  {
    return {w.data_as<T>(),  u.data_as<T>(),  b.data_as<T>(),  x.data_as<T>(),      wx.data_as<T>(),
            z.data_as<T>(),  dz.data_as<T>(), h_prev.data_as<T>(), ones.data_as<T>()};
  }
};


/// The chain's initial state: h0 then c0 (zeros where the sequence leaves them empty).
template <class T>
void upload_state(device_buffer& state, problem const& p, sequence<T> const& seq, stream_view s)
{
  std::size_t const half = p.batch * p.hidden * sizeof(T);
  state.fill(0, s);
  if (!seq.h0.empty()) { state.upload(seq.h0.data(), half, s); }
  if (!seq.c0.empty()) { state.upload(seq.c0.data(), half, s, half); }
}

/// Σ h over the first B x H values of a downloaded state, in double.
template <class T>
T sum_of(T const* h, std::size_t count) noexcept
{
  double sum = 0;
  for (std::size_t k = 0; k < count; ++k) { sum += static_cast<double>(h[k]); }
  return static_cast<T>(sum);
}

/// `make_step(buffers)` builds the backend's Step over the workspace.
template <class T, class MakeStep>
gradient_result<T> run_gradient(MakeStep&& make_step, problem const& p, weights<T> const& params,
                                sequence<T> const& seq, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lstm::gradient");
  validate(p, params, seq);
  TAPEFLOW_EXPECTS(!o.capture_reverse, "the LSTM's reverse runs cuBLAS, which tapeflow does not capture into a "
                                       "replayed program; leave capture_reverse off");
  using step_type = decltype(make_step(std::declval<step_buffers<T>>()));
  stream_view const s = o.stream;
  std::size_t const cells = p.batch * p.hidden;
  std::size_t const state_bytes = 2 * cells * sizeof(T);
  reset_device_memory_peak(o.kind);

  workspace<T> ws(o.kind, p, true, s);
  ws.upload(params, seq, s);
  step_type const step = make_step(ws.buffers());
  // Before the chain: with measure_steps it times steps as it is built, and they read the
  // projected inputs.
  step.project_inputs(s);
  chain<step_type> c(step, p.steps, chain_options_of(o));

  device_buffer state(o.kind, state_bytes, s);
  upload_state(state, p, seq, s);
  c.forward(state, s);

  gradient_result<T> result;
  std::vector<T> final_h(cells);
  state.download(final_h.data(), cells * sizeof(T), s);
  result.loss = sum_of(final_h.data(), cells);

  // dL/dh_T = 1, dL/dc_T = 0.
  std::vector<T> seed(2 * cells, T(0));
  std::fill(seed.begin(), seed.begin() + static_cast<std::ptrdiff_t>(cells), T(1));
  device_buffer adjoint(o.kind, state_bytes, s);
  adjoint.upload(seed.data(), state_bytes, s);
  c.reverse(adjoint, s);  // zeroes the parameter adjoint, then every step adds its dL/dθ

  result.gradient.w.resize(params.w.size());
  result.gradient.u.resize(params.u.size());
  result.gradient.b.resize(params.b.size());
  std::size_t const w_bytes = params.w.size() * sizeof(T);
  std::size_t const u_bytes = params.u.size() * sizeof(T);
  c.parameter_adjoint().download(result.gradient.w.data(), w_bytes, s);
  c.parameter_adjoint().download(result.gradient.u.data(), u_bytes, s, w_bytes);
  c.parameter_adjoint().download(result.gradient.b.data(), params.b.size() * sizeof(T), s, w_bytes + u_bytes);
  result.chain = c.stats();
  result.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  return result;
}

/// (h_T, c_T) by T untaped steps of `make_step(buffers)`.
template <class T, class MakeStep>
final_state<T> run_primal(MakeStep&& make_step, problem const& p, weights<T> const& params, sequence<T> const& seq,
                          options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lstm::primal");
  validate(p, params, seq);
  stream_view const s = o.stream;
  std::size_t const cells = p.batch * p.hidden;
  workspace<T> ws(o.kind, p, false, s);
  ws.upload(params, seq, s);
  auto const step = make_step(ws.buffers());
  device_buffer a(o.kind, 2 * cells * sizeof(T), s);
  device_buffer b(o.kind, 2 * cells * sizeof(T), s);
  upload_state(a, p, seq, s);
  step.project_inputs(s);
  for (std::size_t t = 0; t < p.steps; ++t) {
    step.forward(t, a.data_as<T>(), b.data_as<T>(), s);
    std::swap(a, b);
  }
  final_state<T> out;
  out.h.resize(cells);
  out.c.resize(cells);
  a.download(out.h.data(), cells * sizeof(T), s);
  a.download(out.c.data(), cells * sizeof(T), s, cells * sizeof(T));
  return out;
}

}  // namespace tapeflow::workloads::lstm::detail
