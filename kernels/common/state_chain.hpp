// SPDX-License-Identifier: Apache-2.0
// The session of a chain workload whose input is its initial state x_0 and whose loss is
// L = 0.5 * sum(x_T^2) (Allen–Cahn, LBM, Burgers): the state uploaded, the chain's forward, L and
// the seed dL/dx_T = x_T, the chain's reverse, dL/dx_0 downloaded; the primal as untaped steps.
// Each backend supplies its Step and how it sums the state's squares (a host loop on the CPU, a
// device reduction on a GPU: device_loss.cuh).
#pragma once

#include "run_options.hpp"
#include "session.hpp"
#include "state_gradient.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stencil/segment.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

/// Adds a stencil segment plan to a report: its line among the notes, k and the states a step
/// moves among the facts (what `tapeflow plan` prints and --json and the benchmarks record).
inline void report_segments(tape_report& r, tapeflow::stencil::segment_plan const& s)
{
  r.notes.push_back("stencil: " + s.describe());
  r.facts.emplace_back("segment_steps", static_cast<double>(s.k));
  r.facts.emplace_back("states_moved_per_step", s.states_per_step);
  r.facts.emplace_back("cell_updates_per_step", s.cells_per_step);
}

/// True for a Step of stencil segments (tapeflow/stencil/segment.hpp), whose plan the session
/// reports beside the chain's.
template <class Step, class = void>
struct has_segment_plan : std::false_type {};
template <class Step>
struct has_segment_plan<Step, std::void_t<decltype(std::declval<Step const&>().plan().states_per_step)>>
  : std::true_type {};

/// 0.5 * sum(x^2) of a CPU backend buffer of T, accumulated in double.
template <class T>
struct host_half_squares {
  T operator()(device_buffer const& x, stream_view) const noexcept
  {
    return half_sum_of_squares(x.data_as<T>(), x.size() / sizeof(T));
  }
};

/// A chain of `steps` applications of `Step` from the initial state to L = HalfSquares(x_T). The
/// chain (its plan) is made by the first forward: a primal needs none, and a chain that times its
/// step before planning (measure_steps) times it on the loaded state.
template <class T, class Step, class HalfSquares>
class state_chain_session final : public session<T> {
 public:
  /// `staging`: the ring counters a CPU step adds its tiles to (null on a GPU).
  state_chain_session(Step step, std::size_t steps, run_options const& o, HalfSquares half_squares,
                      std::shared_ptr<cpu::ring_stats const> staging = nullptr)
    : session<T>(o.kind), step_(std::move(step)), steps_(steps), o_(o), half_squares_(std::move(half_squares)),
      staging_(std::move(staging)), state_(o.kind, state_bytes(), o.stream), adjoint_(o.kind, state_bytes(), o.stream)
  {
  }

  void load(std::vector<host_array<T>> const& inputs, stream_view s) override
  {
    std::size_t const values = step_.state_size();
    TAPEFLOW_EXPECTS(inputs.size() == 1, "the workload takes one input, its initial state");
    TAPEFLOW_EXPECTS(inputs[0].size == values, "the initial state holds " + std::to_string(inputs[0].size) +
                                                 " values; the problem's state has " + std::to_string(values));
    state_.upload(inputs[0].data, state_bytes(), s);
  }

  void primal(stream_view s) override
  {
    if (!spare_) { spare_.emplace(this->kind(), state_bytes(), s); }
    for (std::size_t t = 0; t < steps_; ++t) {
      step_.forward(t, state_.data_as<T>(), spare_->data_as<T>(), s);
      std::swap(state_, *spare_);
    }
  }

  void forward(stream_view s) override
  {
    if (!chain_) { chain_.emplace(step_, steps_, chain_options_of(o_)); }
    chain_->forward(state_, s);
    adjoint_.copy_from(state_, s);  // dL/dx_T = x_T
  }

  T loss(stream_view s) override { return half_squares_(state_, s); }

  void reverse(stream_view s) override
  {
    TAPEFLOW_EXPECTS(chain_, "reverse() needs a completed forward() whose tape was not reversed yet");
    chain_->reverse(adjoint_, s);
  }

  std::vector<std::vector<T>> gradients(stream_view s) override { return {download(adjoint_, s)}; }

  std::vector<std::vector<T>> outputs(stream_view s) override { return {download(state_, s)}; }

  tape_report report() const override
  {
    tape_report r = chain_session_report(chain_, this->kind());
    if (staging_) { r.staging = *staging_; }
    if constexpr (has_segment_plan<Step>::value) { report_segments(r, step_.plan()); }
    return r;
  }

 private:
  static std::vector<T> download(device_buffer const& b, stream_view s)
  {
    std::vector<T> v(b.size() / sizeof(T));
    b.download(v.data(), b.size(), s);
    return v;
  }

  [[nodiscard]] std::size_t state_bytes() const noexcept { return step_.state_size() * sizeof(T); }

  Step step_;
  std::size_t steps_;
  run_options o_;
  std::optional<chain<Step>> chain_;
  HalfSquares half_squares_;
  std::shared_ptr<cpu::ring_stats const> staging_;
  device_buffer state_;
  device_buffer adjoint_;
  std::optional<device_buffer> spare_;  // the primal's second state, allocated by its first run
};

/// A state_chain_session on the heap, as a workload's open() returns it.
template <class T, class Step, class HalfSquares>
[[nodiscard]] std::unique_ptr<session<T>> open_state_chain(Step step, std::size_t steps, run_options const& o,
                                                           HalfSquares half_squares,
                                                           std::shared_ptr<cpu::ring_stats const> staging = nullptr)
{
  return std::make_unique<state_chain_session<T, Step, HalfSquares>>(std::move(step), steps, o,
                                                                     std::move(half_squares), std::move(staging));
}

}  // namespace tapeflow::workloads
