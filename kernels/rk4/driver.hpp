// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the RK4 gradient: the particle buffers, the tape (arena or
// global stack), the forward, the seed dL/dy_end = y_end, the reverse, as the engine a session
// runs. Each backend supplies its Kernels (cpu.cpp: plain loops; cuda_step.cuh: launches), all
// calling the regions of math.hpp:
//
//   segment(thread_tape_writer<step_record<T>>, state<T>* y, T* arc, T const* budget, params, stream)
//   chunk_reverse(thread_tape_reader<step_record<T>>, state<T>* g, params, stream)
//   stack_forward(step_record<T>* tape, state<T>* y, T const* budget, uint32* steps, params, stream)
//   stack_reverse(step_record<T> const* tape, uint32 const* steps, state<T>* g, params, stream)
//   primal(state<T>* y, T const* budget, uint32* steps, params, stream)
//   budgets(state<T> const* y0, uint32 const* targets, T* out, params, stream)
#pragma once

#include "rk4.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/thread_tape.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::workloads::rk4::detail {

/// One problem's device buffers and tape, reusable across gradients (the benchmark reruns it).
template <class T, class Kernels>
class engine {
 public:
  using record = step_record<T>;

  engine(Kernels kernels, problem const& p, options const& o)
    : kernels_(std::move(kernels)), o_(o), k_(params_of<T>(p)), n_(p.particles),
      y0_(o.kind, n_ * sizeof(state<T>), o.stream), y_(o.kind, n_ * sizeof(state<T>), o.stream),
      adj_(o.kind, n_ * sizeof(state<T>), o.stream), arc_(o.kind, n_ * sizeof(T), o.stream),
      budget_(o.kind, n_ * sizeof(T), o.stream)
  {
    if (o.tape == method::arena) {
      arena_ = std::make_unique<thread_tape<record>>(n_, arena_options(p, o));
    } else {
      std::size_t const bytes = n_ * p.max_steps * sizeof(record);
      stack_ = device_buffer(o.kind, bytes, o.stream);
      stack_steps_ = device_buffer(o.kind, n_ * sizeof(std::uint32_t), o.stream);
    }
  }

  void upload(host_array<T> state0, host_array<T> budgets)
  {
    y0_.upload(state0.data, y0_.size(), o_.stream);
    budget_.upload(budgets.data, budget_.size(), o_.stream);
  }

  /// The initial state again (untimed set-up of a run).
  void reset()
  {
    y_.copy_from(y0_, o_.stream);
    arc_.fill(0, o_.stream);  // all-zero bytes are 0.0
  }

  /// The taped forward: y_ ends as the final states.
  void forward()
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::rk4::forward");
    stream_view const s = o_.stream;
    auto* const y = y_.data_as<state<T>>();
    auto* const arc = arc_.data_as<T>();
    auto const* const budget = budget_.data_as<T>();
    if (arena_) {
      arena_->forward([&](thread_tape_writer<record> w, stream_view st) { kernels_.segment(w, y, arc, budget, k_, st); },
                      s);
    } else {
      if (o_.poison) { stack_.fill(0xFF, s); }
      kernels_.stack_forward(stack_.data_as<record>(), y, budget, stack_steps_.data_as<std::uint32_t>(), k_, s);
    }
  }

  /// Seeds dL/dy_end = y_end and runs the reverse: adj_ ends as dL/dy_0.
  void reverse()
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::rk4::reverse");
    stream_view const s = o_.stream;
    adj_.copy_from(y_, s);
    auto* const g = adj_.data_as<state<T>>();
    if (arena_) {
      arena_->reverse([&](thread_tape_reader<record> r, stream_view st) { kernels_.chunk_reverse(r, g, k_, st); }, s);
    } else {
      kernels_.stack_reverse(stack_.data_as<record>(), stack_steps_.data_as<std::uint32_t>(), g, k_, s);
    }
  }

  /// The untaped primal into y_ (trip counts into `steps`, P words on the backend).
  void primal(device_buffer& steps)
  {
    kernels_.primal(y_.data_as<state<T>>(), budget_.data_as<T>(), steps.data_as<std::uint32_t>(), k_, o_.stream);
  }

  [[nodiscard]] std::vector<T> download(device_buffer const& b) const
  {
    std::vector<T> out(b.size() / sizeof(T));
    b.download(out.data(), b.size(), o_.stream);
    return out;
  }
  [[nodiscard]] std::vector<T> final_state() const { return download(y_); }
  [[nodiscard]] std::vector<T> gradient() const { return download(adj_); }
  [[nodiscard]] std::vector<std::uint32_t> steps() const
  {
    if (arena_) { return arena_->steps(o_.stream); }
    std::vector<std::uint32_t> out(n_);
    stack_steps_.download(out.data(), out.size() * sizeof(std::uint32_t), o_.stream);
    return out;
  }
  /// Bytes of tape storage the last forward used (arena: its chunks; stack: its whole capacity).
  [[nodiscard]] std::size_t tape_bytes() const { return arena_ ? arena_->stats().tape_bytes : stack_.size(); }
  [[nodiscard]] thread_tape_stats arena_stats() const { return arena_ ? arena_->stats() : thread_tape_stats{}; }
  [[nodiscard]] Kernels const& kernels() const noexcept { return kernels_; }
  [[nodiscard]] params<T> const& step_params() const noexcept { return k_; }

 private:
  Kernels kernels_;
  options o_;
  params<T> k_;
  std::size_t n_;
  device_buffer y0_, y_, adj_, arc_, budget_;
  std::unique_ptr<thread_tape<record>> arena_;
  device_buffer stack_, stack_steps_;
};

template <class T>
void validate_inputs(problem const& p, host_array<T> state0, host_array<T> budgets)
{
  validate(p, state0.size, budgets.size);
  for (std::size_t i = 0; i < budgets.size; ++i) {
    TAPEFLOW_EXPECTS(std::isfinite(static_cast<double>(budgets.data[i])) && budgets.data[i] >= T(0),
                     "the arc-length budget of particle " + std::to_string(i) + " is not a finite value >= 0");
  }
  for (std::size_t i = 0; i < state0.size; ++i) {
    TAPEFLOW_EXPECTS(std::isfinite(static_cast<double>(state0.data[i])),
                     "the initial state of particle " + std::to_string(i / 6) + " is not finite");
  }
}

/// What an RK4 session tells besides a session's results: each particle's trip count in its last
/// forward.
class counts_steps {
 public:
  virtual ~counts_steps() = default;
  [[nodiscard]] virtual std::vector<std::uint32_t> steps() const = 0;
};

/// One RK4 problem on a backend: the engine (particles, tape), the primal's trip counts.
template <class T, class Kernels>
class rk4_session final : public session<T>, public counts_steps {
 public:
  rk4_session(Kernels kernels, problem const& p, options const& o)
    : session<T>(o.kind), p_(p), o_(o), engine_(std::move(kernels), p, o),
      steps_(o.kind, p.particles * sizeof(std::uint32_t), o.stream)
  {
  }

  void load(std::vector<host_array<T>> const& inputs, stream_view) override
  {
    TAPEFLOW_EXPECTS(inputs.size() == 2, "RK4 takes 2 inputs (the particles' states and their budgets), not " +
                                           std::to_string(inputs.size()));
    validate_inputs(p_, inputs[0], inputs[1]);
    engine_.upload(inputs[0], inputs[1]);
  }

  void primal(stream_view) override
  {
    engine_.reset();
    engine_.primal(steps_);
  }

  void forward(stream_view) override
  {
    engine_.reset();
    engine_.forward();
    pending_ = true;
    if (o_.progress) { o_.progress(chain_phase::forward, 1, 1); }
  }

  T loss(stream_view) override { return rk4::loss(engine_.final_state()); }

  void reverse(stream_view) override
  {
    TAPEFLOW_EXPECTS(pending_, "reverse() needs a completed forward() whose tape was not reversed yet");
    pending_ = false;
    engine_.reverse();
    if (o_.progress) { o_.progress(chain_phase::reverse, 1, 1); }
  }

  std::vector<std::vector<T>> gradients(stream_view) override { return {engine_.gradient()}; }

  std::vector<std::vector<T>> outputs(stream_view) override { return {engine_.final_state()}; }

  tape_report report() const override
  {
    tape_report r;
    if (o_.tape == method::arena) { r.arena = engine_.arena_stats(); }
    r.tape_bytes = engine_.tape_bytes();
    r.peak_device_bytes = device_memory_usage(this->kind()).peak_bytes;
    r.peak_host_bytes = host_memory_usage(this->kind()).peak_bytes;
    std::vector<std::uint32_t> const steps = engine_.steps();
    double total = 0;
    std::uint32_t most = 0;
    for (std::uint32_t n : steps) {
      total += n;
      most = std::max(most, n);
    }
    r.facts = {{"mean_steps", total / static_cast<double>(std::max<std::size_t>(1, steps.size()))},
               {"most_steps", static_cast<double>(most)}};
    return r;
  }

  [[nodiscard]] std::vector<std::uint32_t> steps() const override { return engine_.steps(); }

 private:
  problem p_;
  options o_;
  engine<T, Kernels> engine_;
  device_buffer steps_;
  bool pending_{false};
};

template <class T, class Kernels>
primal_result<T> run_primal(Kernels kernels, problem const& p, std::vector<T> const& state0,
                            std::vector<T> const& budgets, options const& o)
{
  validate_inputs<T>(p, state0, budgets);
  stream_view const s = o.stream;
  params<T> const k = params_of<T>(p);
  device_buffer y(o.kind, p.particles * sizeof(state<T>), s);
  device_buffer budget(o.kind, p.particles * sizeof(T), s);
  device_buffer steps(o.kind, p.particles * sizeof(std::uint32_t), s);
  y.upload(state0.data(), y.size(), s);
  budget.upload(budgets.data(), budget.size(), s);
  kernels.primal(y.data_as<state<T>>(), budget.data_as<T>(), steps.data_as<std::uint32_t>(), k, s);
  primal_result<T> r;
  r.final_state.resize(state0.size());
  y.download(r.final_state.data(), y.size(), s);
  r.steps.resize(p.particles);
  steps.download(r.steps.data(), steps.size(), s);
  r.loss = loss(r.final_state);
  return r;
}

template <class T, class Kernels>
std::vector<T> run_budgets(Kernels kernels, problem const& p, std::vector<T> const& state0,
                           std::vector<std::uint32_t> const& targets, options const& o)
{
  validate(p, state0.size(), targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    TAPEFLOW_EXPECTS(targets[i] >= 1 && targets[i] <= p.max_steps,
                     "target " + std::to_string(targets[i]) + " of particle " + std::to_string(i) +
                       " is outside 1.." + std::to_string(p.max_steps));
  }
  stream_view const s = o.stream;
  params<T> const k = params_of<T>(p);
  device_buffer y0(o.kind, p.particles * sizeof(state<T>), s);
  device_buffer t(o.kind, p.particles * sizeof(std::uint32_t), s);
  device_buffer out(o.kind, p.particles * sizeof(T), s);
  y0.upload(state0.data(), y0.size(), s);
  t.upload(targets.data(), t.size(), s);
  kernels.budgets(y0.data_as<state<T>>(), t.data_as<std::uint32_t>(), out.data_as<T>(), k, s);
  std::vector<T> budgets(p.particles);
  out.download(budgets.data(), out.size(), s);
  return budgets;
}

}  // namespace tapeflow::workloads::rk4::detail
