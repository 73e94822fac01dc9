// SPDX-License-Identifier: Apache-2.0
// tapeflow::chain: a chain of applications of one differentiated step, run forward with its tape
// kept where a plan says, then reversed. Its phases, after CUTLASS's:
//   can_implement  plan_chain: the sizes checked, the layers tiled and placed in tiers under the
//                  budgets (budget_error when nothing fits), before anything runs;
//   initialize     the constructor: the same plan (the step timed first under measure_steps),
//                  turned into one schedule;
//   workspace      the tape memory, allocated by the first forward() and reverse() and kept until
//                  the chain goes: later iterations allocate nothing;
//   run            forward() then reverse(), stream-ordered, as often as needed.
// Every policy is one schedule of actions (tapeflow/schedule.hpp) run by one executor
// (detail/chain_executor.hpp), with the captured reverse (detail/captured_reverse.hpp), the
// ordering of calls across streams (detail/call_order.hpp) and the chain's timing
// (detail/step_timing.hpp) beside it; the member functions' bodies are in detail/chain_impl.hpp.
// docs/architecture.md follows one gradient through it; docs/tiers.md explains the plans.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/chain_options.hpp>
#include <tapeflow/detail/call_order.hpp>
#include <tapeflow/detail/chain_executor.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/step.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>

#include <cstddef>
#include <vector>

namespace tapeflow {

/// Tape bytes one layer of `records` records of `record_bytes` takes.
[[nodiscard]] constexpr std::size_t layer_bytes(std::size_t record_bytes, std::size_t records) noexcept
{
  return record_bytes * records;
}

/// Plans a chain of `steps` layers of `records_per_step` records of `record_bytes` bytes over a
/// state of `state_bytes`: what a chain will do, before it runs (no timings yet).
/// Throws logic_error for sizes of zero or that overflow and for malformed options (step costs
/// neither one nor one per step, or negative, or not finite; tile settings the device cannot hold;
/// capture_reverse where the plan is not store),
/// budget_error when no placement fits the budgets, unavailable_error when the backend is not there.
chain_stats plan_chain(std::size_t record_bytes, std::size_t records_per_step, std::size_t steps,
                       std::size_t state_bytes, chain_options const& options);

/// The same for layers of different sizes: step t writes `records_per_step[t]` records (one entry:
/// every step does, and `steps` counts them, 0 meaning one step, as for several entries 0 means
/// their number). Throws as above, and logic_error when there are several entries and `steps` is
/// neither 0 nor their number.
chain_stats plan_chain(std::size_t record_bytes, std::vector<std::size_t> const& records_per_step,
                       std::size_t state_bytes, chain_options const& options, std::size_t steps = 0);

/// A chain of `steps` applications of one differentiated step.
///
/// The Step contract is in tapeflow/step.hpp, checked when the chain is instantiated: a Step that
/// breaks it gets one message per member at fault. Pointers are in the chain's backend memory and
/// calls are stream-ordered on the stream given; on the CPU backend steps run on the calling
/// thread (and may spread their loops over cpu::parallel_for), ordered on the default stream. A
/// Step that declares `halo_records()` gets tiles with that many records on each side
/// (tapeflow/halo.hpp). A Step that declares `parameter_size()` gets a parameter adjoint in its
/// reverse, zeroed at each reverse(), which every step adds its dL/dθ to in the reverse's one order
/// (last step first) under every policy: read it back with parameter_adjoint().
///
/// The chain keeps its tape memory (a buffer_pool, the host tier's ring, snapshots and scratch)
/// from its first forward and reverse until it is destroyed; between iterations it holds its peak.
template <class Step, bool = is_step_v<Step>>
class chain {
 public:
  using value_type = typename Step::value_type;
  using record_type = typename Step::record_type;

  /// Plans `steps` applications of `step` under `options` (timing the step first under
  /// measure_steps). Throws what plan_chain throws, and logic_error for no steps, a state of no
  /// values, a state or parameters past 2^56 bytes, and capture_reverse under a plan other than
  /// store.
  chain(Step step, std::size_t steps, chain_options options);

  // Steps and captured programs refer to the chain's buffers by address: a chain stays put.
  chain(chain const&) = delete;
  chain& operator=(chain const&) = delete;
  chain(chain&&) = delete;
  chain& operator=(chain&&) = delete;
  /// Frees every buffer on the stream it was allocated on; the host first waits for the last call
  /// when the calls changed streams (a chain used on one stream frees without waiting).
  ~chain() = default;

  /// The tiling of every layer (of the largest, when they differ).
  [[nodiscard]] pipeline_plan const& plan() const noexcept { return stats_.plan; }
  /// What the chain planned and, after its calls, did.
  [[nodiscard]] chain_stats const& stats() const noexcept { return stats_; }
  /// The step the chain applies.
  [[nodiscard]] Step const& step() const noexcept { return step_; }
  /// Steps in the chain.
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  /// Bytes of the state forward() takes and of the adjoint reverse() takes.
  [[nodiscard]] std::size_t state_bytes() const noexcept { return step_.state_size() * sizeof(value_type); }
  /// The device tier's layers recorded by forward() and not yet reversed.
  [[nodiscard]] tape const& recorded() const noexcept { return executor_.recorded(); }
  /// Values in the Step's parameters (0 for a Step without parameter_size()).
  [[nodiscard]] std::size_t parameter_size() const { return parameter_size_of(step_); }
  /// dL/dθ summed over every step by the last reverse(): parameter_size() values of value_type in
  /// the chain's backend memory, stream-ordered after that reverse; empty without parameters or
  /// before the first reverse (which allocates it).
  [[nodiscard]] device_buffer const& parameter_adjoint() const noexcept { return executor_.parameter_adjoint(); }

  /// Runs the forward on `stream`: `state` holds the initial state and, afterwards, the final one.
  /// Throws logic_error when the last forward's tape still waits for its reverse, or `state` is
  /// not of the chain's backend and state_bytes(). When pinned memory cannot be had, plans again
  /// without it (stats().fallback says so) and runs again — alone, not in a collective chain,
  /// whose forward ends on every rank or on none (distributed_error on the others). Any other failure (a step, an
  /// allocation, a copy) releases what the call held and propagates; `state` is then unspecified
  /// and the chain ready for a new forward.
  void forward(device_buffer& state, stream_view stream = {});

  /// Runs the reverse on `stream`, consuming the tape: `adjoint` holds dL/d(final state) and,
  /// afterwards, dL/d(initial state). Throws logic_error when no forward's tape waits for its
  /// reverse, or `adjoint` is not of the chain's backend and state_bytes(). Any other failure
  /// releases the tape and propagates; the chain is then ready for a new forward.
  void reverse(device_buffer& adjoint, stream_view stream = {});

 private:
  [[nodiscard]] std::vector<std::size_t> records_per_step() const;
  void check_state(device_buffer const& buffer, char const* what) const;
  [[nodiscard]] bool replan_without_host(out_of_memory const& failure);
  void announce_failure() const noexcept;
  void end_together() const;

  Step step_;
  std::size_t steps_;
  chain_options options_;
  chain_stats stats_{};
  bool pending_{false};                    // a forward's tape waits for its reverse
  detail::chain_executor<Step> executor_;  // the schedule, its tape memory and host tier
  detail::call_order calls_;               // declared last: waits for the last call before the buffers go
};

/// A chain of a Step that breaks the contract: the static_asserts of detail::report_step_contract
/// say what is wrong, and nothing else is compiled (no errors from inside the chain follow them).
template <class Step>
class chain<Step, false> : detail::report_step_contract<Step> {
 public:
  template <class... Args>
  explicit chain(Args&&...) noexcept
  {
  }
  template <class... Args>
  void forward(Args&&...) noexcept
  {
  }
  template <class... Args>
  void reverse(Args&&...) noexcept
  {
  }
  [[nodiscard]] pipeline_plan const& plan() const noexcept { return stats_.plan; }
  [[nodiscard]] chain_stats const& stats() const noexcept { return stats_; }
  [[nodiscard]] std::size_t steps() const noexcept { return 0; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return 0; }

 private:
  chain_stats stats_{};
};

}  // namespace tapeflow

#include <tapeflow/detail/chain_impl.hpp>
