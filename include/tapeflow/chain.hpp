// SPDX-License-Identifier: Apache-2.0
// The host scheduler for a chain of differentiated steps: the forward pushes one layer per step,
// the reverse pops them last-first and hands each to the step's staged reverse kernel.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>

namespace tapeflow {

enum class chain_phase { forward, reverse };

/// How a chain runs.
struct chain_options {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::automatic};
  /// Most device bytes the tape may occupy at once; 0 means the device's memory.
  std::size_t budget_bytes{0};
  /// Tile, stage and block overrides; `record_bytes` and `records` are filled in by the chain.
  pipeline_request pipeline{};
  /// Synchronise around forward() and reverse() and record their wall time in the stats.
  bool measure_time{false};
  /// Fill each buffer the chain hands a step to write with NaN bytes (0xFF) first, so tests can
  /// prove that a step writes every element. Costs one fill per layer.
  bool poison{false};
  /// Called after each layer: (phase, layers done, layers in all).
  std::function<void(chain_phase, std::size_t, std::size_t)> progress{};
};

/// What a chain did.
struct chain_stats {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::store};
  pipeline_plan plan{};
  std::size_t steps{0};
  std::size_t layer_bytes{0};         ///< tape bytes of one layer
  std::size_t tape_bytes{0};          ///< tape bytes of all layers
  std::size_t peak_tape_bytes{0};     ///< most tape bytes held on the device at once
  std::size_t budget_bytes{0};        ///< 0: unlimited
  double forward_ms{0};
  double reverse_ms{0};
};

/// Tape bytes one layer of `records` records of `record_bytes` takes.
[[nodiscard]] constexpr std::size_t layer_bytes(std::size_t record_bytes, std::size_t records) noexcept
{
  return record_bytes * records;
}

/// Resolves a policy for a chain whose whole tape takes `tape_bytes` under `budget_bytes` (0: no
/// limit). Throws budget_error when the tape does not fit and no other tier is available yet, and
/// unavailable_error for tiers this build does not provide.
tape_policy resolve_policy(tape_policy requested, std::size_t tape_bytes, std::size_t budget_bytes);

/// Plans a chain of `steps` layers of `records_per_step` records of `record_bytes` bytes: checks
/// the sizes, resolves the policy against the budget and asks the planner for the tiling. What a
/// chain will do, before it runs (the returned stats carry no timings yet).
chain_stats plan_chain(std::size_t record_bytes, std::size_t records_per_step, std::size_t steps,
                       chain_options const& options);

/// A chain of `steps` applications of one differentiated step.
///
/// A Step provides:
///   using value_type  = ...;   // element of the state
///   using record_type = ...;   // tape record (tapeflow::is_record_v)
///   std::size_t state_size() const;          // values in the state
///   std::size_t records_per_step() const;    // records one step writes
///   void augmented_forward(std::size_t step, value_type const* in, value_type* out,
///                          tape_writer<record_type> tape, stream_view s) const;
///   void reverse(std::size_t step, tape_reader<record_type> tape, pipeline_plan const& plan,
///                value_type const* adjoint_out, value_type* adjoint_in, stream_view s) const;
/// Pointers are in the chain's backend memory; calls are stream-ordered on `s`.
template <class Step>
class chain {
 public:
  using value_type = typename Step::value_type;
  using record_type = typename Step::record_type;

  chain(Step step, std::size_t steps, chain_options options)
    : step_(std::move(step)), steps_(steps), options_(std::move(options)),
      tape_(options_.kind, tape_options{options_.budget_bytes})
  {
    require_record<record_type>();
    TAPEFLOW_EXPECTS(step_.state_size() > 0, "a chain's state must hold at least one value");
    stats_ = plan_chain(sizeof(record_type), step_.records_per_step(), steps_, options_);
  }

  [[nodiscard]] pipeline_plan const& plan() const noexcept { return stats_.plan; }
  [[nodiscard]] chain_stats const& stats() const noexcept { return stats_; }
  [[nodiscard]] Step const& step() const noexcept { return step_; }
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return step_.state_size() * sizeof(value_type); }

  /// Runs the augmented forward: `state` holds the initial state and, afterwards, the final one.
  /// Records one layer per step. Throws logic_error when a recorded tape is still pending.
  void forward(device_buffer& state, stream_view stream = {})
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::chain::forward");
    TAPEFLOW_EXPECTS(tape_.empty(), "forward() called again before reverse() consumed the tape");
    check_state(state, "state");
    timer t{*this, stream, stats_.forward_ms};
    device_buffer scratch(options_.kind, state.size(), stream);
    for (std::size_t s = 0; s < steps_; ++s) {
      TAPEFLOW_NVTX_RANGE("tapeflow::layer::forward");
      layer& l = tape_.push<record_type>(stats_.plan.records, stats_.plan.tile_records, stream);
      if (options_.poison) {
        scratch.fill(0xFF, stream);
        l.fill(0xFF, stream);
      }
      step_.augmented_forward(s, state.data_as<value_type>(), scratch.data_as<value_type>(),
                              l.writer<record_type>(), stream);
      l.commit();
      std::swap(state, scratch);
      report(chain_phase::forward, s + 1);
    }
    stats_.peak_tape_bytes = tape_.peak_bytes();
  }

  /// Runs the reverse: `adjoint` holds dL/d(final state) and, afterwards, dL/d(initial state).
  /// Consumes the tape. Throws logic_error when there is no recorded forward to reverse.
  void reverse(device_buffer& adjoint, stream_view stream = {})
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::chain::reverse");
    TAPEFLOW_EXPECTS(tape_.depth() == steps_,
                     "reverse() needs a completed forward(); the tape holds " +
                       std::to_string(tape_.depth()) + " of " + std::to_string(steps_) + " layers");
    check_state(adjoint, "adjoint");
    timer t{*this, stream, stats_.reverse_ms};
    device_buffer scratch(options_.kind, adjoint.size(), stream);
    for (std::size_t s = steps_; s-- > 0;) {
      TAPEFLOW_NVTX_RANGE("tapeflow::layer::reverse");
      layer const& l = tape_.top();
      if (options_.poison) { scratch.fill(0xFF, stream); }
      step_.reverse(s, l.reader<record_type>(), stats_.plan, adjoint.data_as<value_type>(),
                    scratch.data_as<value_type>(), stream);
      tape_.pop();
      std::swap(adjoint, scratch);
      report(chain_phase::reverse, steps_ - s);
    }
  }

  /// The tape (layers recorded by forward() and not yet reversed).
  [[nodiscard]] tape const& recorded() const noexcept { return tape_; }

 private:
  struct timer {
    chain& owner;
    stream_view stream;
    double& out_ms;
    std::chrono::steady_clock::time_point start{};
    timer(chain& c, stream_view s, double& out) : owner(c), stream(s), out_ms(out)
    {
      if (owner.options_.measure_time) {
        synchronize(owner.options_.kind, stream);
        start = std::chrono::steady_clock::now();
      }
    }
    ~timer()
    {
      if (!owner.options_.measure_time) { return; }
      try {
        synchronize(owner.options_.kind, stream);
      } catch (...) {  // the error resurfaces at the caller's next synchronisation
      }
      out_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    timer(timer const&) = delete;
    timer& operator=(timer const&) = delete;
  };

  void check_state(device_buffer const& buffer, char const* what) const
  {
    TAPEFLOW_EXPECTS(buffer.kind() == options_.kind,
                     std::string{what} + " buffer lives on backend " + std::string{to_string(buffer.kind())} +
                       ", the chain runs on " + std::string{to_string(options_.kind)});
    TAPEFLOW_EXPECTS(buffer.size() == state_bytes(),
                     std::string{what} + " buffer holds " + std::to_string(buffer.size()) +
                       " bytes, the step's state needs " + std::to_string(state_bytes()));
  }

  void report(chain_phase phase, std::size_t done) const
  {
    if (options_.progress) { options_.progress(phase, done, steps_); }
  }

  Step step_;
  std::size_t steps_;
  chain_options options_;
  tape tape_;
  chain_stats stats_{};
};

}  // namespace tapeflow
