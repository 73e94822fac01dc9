// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the LSTM gradient, its session: the buffers a step points
// at, the input projection W X of every step, the chain's forward over the state (h, c), L = Σ h_T,
// the seed (g_h, g_c) = (1, 0), the chain's reverse with the parameter gradients accumulated by
// each step into the chain's parameter adjoint (dW, dU, db one after the other), and the downloads.
// Each backend supplies a Kit: what its steps share (the CUDA kit's cuBLAS handle) and its Step
// (cpu.cpp, cuda_step.cuh):
//
//   using step_type = ...;
//   step_type step(problem const&, step_buffers<T>) const;   a Step of the chain (tapeflow/step.hpp)
//                                                            with project_inputs(stream)
#pragma once

#include "lstm.hpp"
#include "math.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
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


/// The problem's parts, in the order of the input file and of load(): W, U, b, x, h0, c0.
[[nodiscard]] inline std::vector<std::size_t> input_sizes(problem const& p)
{
  std::size_t const g = 4 * p.hidden;
  return {g * p.input, g * p.hidden, g, p.steps * p.batch * p.input, p.batch * p.hidden, p.batch * p.hidden};
}

/// Σ of `count` values, in double.
template <class T>
[[nodiscard]] T sum_of(T const* h, std::size_t count) noexcept
{
  double sum = 0;
  for (std::size_t k = 0; k < count; ++k) { sum += static_cast<double>(h[k]); }
  return static_cast<T>(sum);
}

/// One LSTM problem on a backend: the workspace, the state and its adjoint, the seed, the steps'
/// kit and the chain (made by the first forward, after the inputs it may time its steps on are
/// loaded and projected).
template <class T, class Kit>
class lstm_session final : public session<T> {
 public:
  using step_type = typename Kit::step_type;

  lstm_session(problem const& p, options const& o, Kit kit)
    : session<T>(o.kind), p_(p), o_(o), kit_(std::move(kit)), ws_(o.kind, p, true, o.stream),
      step_(kit_.step(p, ws_.buffers())), state_(o.kind, state_bytes(), o.stream), spare_(o.kind, state_bytes(), o.stream),
      adjoint_(o.kind, state_bytes(), o.stream), seed_(o.kind, state_bytes(), o.stream)
  {
    TAPEFLOW_EXPECTS(!o.capture_reverse, "the LSTM's reverse runs cuBLAS, which tapeflow does not capture into a "
                                         "replayed program; leave capture_reverse off");
    // dL/dh_T = 1, dL/dc_T = 0.
    std::vector<T> seed(2 * cells(), T(0));
    std::fill(seed.begin(), seed.begin() + static_cast<std::ptrdiff_t>(cells()), T(1));
    seed_.upload(seed.data(), state_bytes(), o.stream);
    synchronize(o.kind, o.stream);  // `seed` is pageable host memory, and goes when this returns
  }

  void load(std::vector<host_array<T>> const& inputs, stream_view s) override
  {
    std::vector<std::size_t> const sizes = input_sizes(p_);
    char const* const names[] = {"W", "U", "b", "x", "h0", "c0"};
    TAPEFLOW_EXPECTS(inputs.size() == sizes.size(),
                     "the LSTM takes 6 inputs (W, U, b, x, h0, c0), not " + std::to_string(inputs.size()));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      TAPEFLOW_EXPECTS(inputs[i].size == sizes[i], std::string{names[i]} + " holds " + std::to_string(inputs[i].size) +
                                                     " values; the problem needs " + std::to_string(sizes[i]));
    }
    device_buffer* const to[] = {&ws_.w, &ws_.u, &ws_.b, &ws_.x};
    for (std::size_t i = 0; i < 4; ++i) { to[i]->upload(inputs[i].data, sizes[i] * sizeof(T), s); }
    state_.upload(inputs[4].data, cells() * sizeof(T), s);
    state_.upload(inputs[5].data, cells() * sizeof(T), s, cells() * sizeof(T));
  }

  void primal(stream_view s) override
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::lstm::primal");
    step_.project_inputs(s);
    for (std::size_t t = 0; t < p_.steps; ++t) {
      step_.forward(t, state_.template data_as<T>(), spare_.template data_as<T>(), s);
      std::swap(state_, spare_);
    }
  }

  void forward(stream_view s) override
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::lstm::forward");
    step_.project_inputs(s);
    if (!chain_) { chain_.emplace(step_, p_.steps, chain_options_of(o_)); }
    chain_->forward(state_, s);
    adjoint_.copy_from(seed_, s);
  }

  T loss(stream_view s) override
  {
    std::vector<T> h(cells());
    state_.download(h.data(), cells() * sizeof(T), s);
    return sum_of(h.data(), cells());
  }

  void reverse(stream_view s) override
  {
    TAPEFLOW_EXPECTS(chain_, "reverse() needs a completed forward() whose tape was not reversed yet");
    chain_->reverse(adjoint_, s);  // zeroes the parameter adjoint, then every step adds its dL/dθ
  }

  std::vector<std::vector<T>> gradients(stream_view s) override
  {
    std::vector<std::size_t> const sizes = input_sizes(p_);
    std::vector<std::vector<T>> g;
    std::size_t at = 0;
    for (std::size_t i = 0; i < 3; ++i) {  // dL/dW, dL/dU, dL/db
      g.emplace_back(sizes[i]);
      chain_->parameter_adjoint().download(g.back().data(), sizes[i] * sizeof(T), s, at);
      at += sizes[i] * sizeof(T);
    }
    return g;
  }

  std::vector<std::vector<T>> outputs(stream_view s) override
  {
    std::vector<std::vector<T>> hc(2, std::vector<T>(cells()));
    state_.download(hc[0].data(), cells() * sizeof(T), s);
    state_.download(hc[1].data(), cells() * sizeof(T), s, cells() * sizeof(T));
    return hc;
  }

  tape_report report() const override
  {
    tape_report r = chain_session_report(chain_, this->kind());
    r.staging = kit_.staging();
    return r;
  }

 private:
  [[nodiscard]] std::size_t cells() const noexcept { return p_.batch * p_.hidden; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return 2 * cells() * sizeof(T); }

  problem p_;
  options o_;
  Kit kit_;  // before the step, which points into it
  workspace<T> ws_;
  step_type step_;
  device_buffer state_, spare_, adjoint_, seed_;
  std::optional<chain<step_type>> chain_;
};

}  // namespace tapeflow::workloads::lstm::detail
