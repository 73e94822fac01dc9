// SPDX-License-Identifier: Apache-2.0
// The bodies of tapeflow::chain's member functions (tapeflow/chain.hpp declares and documents
// them): planning, the checks of each call, its order and timing, and the failure paths around
// the executor.
#pragma once

#include <tapeflow/chain.hpp>
#include <tapeflow/detail/collective_plan.hpp>
#include <tapeflow/detail/step_timing.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <string>
#include <utility>

namespace tapeflow {

template <class Step, bool Valid>
chain<Step, Valid>::chain(Step step, std::size_t steps, chain_options options)
  : step_(std::move(step)), steps_(steps), options_(std::move(options)), executor_(step_, steps_, options_, stats_),
    calls_(options_.kind)
{
  require_record<record_type>();
  options_.pipeline.halo_records = std::max(options_.pipeline.halo_records, halo_records_of(step_));
  if (options_.kind != backend::cpu && options_.pipeline.bulk_copy) {
    options_.pipeline.bulk_copy = bulk_copy_runs_of(step_);  // a preference: cp.async where it cannot run
  }
  TAPEFLOW_EXPECTS(steps_ > 0, "a chain needs at least one step");
  TAPEFLOW_EXPECTS(step_.state_size() > 0, "a chain's state must hold at least one value");
  // Bytes are values times sizeof(value_type): bounded first, so that no product wraps.
  TAPEFLOW_EXPECTS(step_.state_size() <= max_plan_bytes / sizeof(value_type),
                   "a chain's state of " + std::to_string(step_.state_size()) + " values is past 2^56 bytes");
  TAPEFLOW_EXPECTS(parameter_size_of(step_) <= max_plan_bytes / sizeof(value_type),
                   "a step's " + std::to_string(parameter_size_of(step_)) + " parameters are past 2^56 bytes");
  distributed::communicator* const ranks = options_.collective.get();
  auto plan = [&] {
    if (ranks != nullptr && !options_.step_costs.empty()) { detail::agree_step_costs(*ranks, options_.step_costs); }
    stats_ = plan_chain(sizeof(record_type), records_per_step(), state_bytes(), options_, steps_);
  };
  auto const planned = [&] {
    if (ranks != nullptr) { detail::agree_plan_inputs(*ranks, options_); }
    plan();
    bool measure = options_.measure_steps && options_.step_costs.empty() && options_.policy != tape_policy::store &&
                   (options_.budget_bytes != 0 && stats_.tape_bytes > options_.budget_bytes);
    // Each rank's part has its own tape: if one measures and plans again (a meeting), all do.
    if (ranks != nullptr && options_.measure_steps) {
      measure = distributed::max_over_ranks(*ranks, measure ? 1.0 : 0.0) > 0;
    }
    if (measure) {
      options_.step_costs = detail::measure_step_costs(step_, stats_, options_.kind);
      plan();
    }
  };
  if (ranks == nullptr) {
    planned();
  } else {
    distributed::collectively(*ranks, planned);
    distributed::require_same(*ranks, detail::schedule_fingerprint(stats_, steps_), "the chain's schedule");
  }
  executor_.set_plan();
}

template <class Step, bool Valid>
void chain<Step, Valid>::forward(device_buffer& state, stream_view stream)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::chain::forward");
  TAPEFLOW_EXPECTS(!pending_, "forward() called again before reverse() consumed the tape");
  check_state(state, "state");
  stream_view const s = calls_.stream(stream);
  calls_.follow(s);
  detail::call_timer const timer{options_.measure_time, options_.kind, s, stats_.forward_ms};
  try {
    try {
      executor_.forward(state, s);
    } catch (out_of_memory const& failure) {
      // Pinned memory could not be had: plan without host memory and run again (`state` is
      // only written at the end of a forward, so it still holds the initial state). Not for one
      // rank of many: the others would keep the old schedule.
      if (!executor_.host_allocation_failed() || options_.collective) { throw; }
      executor_.abandon(s);
      if (!replan_without_host(failure)) { throw; }  // the failure itself, of its own type
      executor_.forward(state, s);
    }
    end_together();
  } catch (...) {
    executor_.abandon(s);  // `state` is left unspecified; the chain is ready for a new forward
    announce_failure();
    throw;
  }
  pending_ = true;
  calls_.end(s);
}

template <class Step, bool Valid>
void chain<Step, Valid>::reverse(device_buffer& adjoint, stream_view stream)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::chain::reverse");
  TAPEFLOW_EXPECTS(pending_, "reverse() needs a completed forward() whose tape was not reversed yet");
  check_state(adjoint, "adjoint");
  stream_view const s = calls_.stream(stream);
  calls_.follow(s);
  pending_ = false;
  {
    detail::call_timer const timer{options_.measure_time, options_.kind, s, stats_.reverse_ms};
    try {
      executor_.reverse(adjoint, s);
      end_together();
    } catch (...) {
      executor_.abandon(s);  // the tape is gone: the next forward starts afresh
      announce_failure();
      throw;
    }
  }
  executor_.finish_reverse();
  calls_.end(s);
}

/// Inside a catch block: tells the other ranks of a collective chain that this one failed (a
/// distributed_error they know of already).
template <class Step, bool Valid>
void chain<Step, Valid>::announce_failure() const noexcept
{
  if (options_.collective) { distributed::announce_current_exception(*options_.collective); }
}

/// A collective chain's call ends on every rank or on none: the ranks meet once more, and a rank
/// that failed after its last exchange with some of them is heard of here.
template <class Step, bool Valid>
void chain<Step, Valid>::end_together() const
{
  if (options_.collective) { static_cast<void>(distributed::gather_all(*options_.collective, char{1})); }
}

/// Records each step writes: one count, or one per step (Step::records_per_step(step)).
template <class Step, bool Valid>
std::vector<std::size_t> chain<Step, Valid>::records_per_step() const
{
  if constexpr (!detail::step_contract::has_records_per_step_of<Step>::value) {
    return {step_.records_per_step()};
  } else {
    std::vector<std::size_t> records(steps_);
    for (std::size_t t = 0; t < steps_; ++t) { records[t] = step_.records_per_step(t); }
    return records;
  }
}

template <class Step, bool Valid>
void chain<Step, Valid>::check_state(device_buffer const& buffer, char const* what) const
{
  TAPEFLOW_EXPECTS(buffer.kind() == options_.kind,
                   std::string{what} + " buffer lives on backend " + std::string{to_string(buffer.kind())} +
                     ", the chain runs on " + std::string{to_string(options_.kind)});
  TAPEFLOW_EXPECTS(buffer.size() == state_bytes(),
                   std::string{what} + " buffer holds " + std::to_string(buffer.size()) +
                     " bytes, the step's state needs " + std::to_string(state_bytes()));
}

/// After pinned memory could not be had: forced `offload` recomputes instead; other plans are
/// made again without host memory. False, the plan unchanged, when nothing fits the device budget
/// then: the caller rethrows the failure.
template <class Step, bool Valid>
bool chain<Step, Valid>::replan_without_host(out_of_memory const& failure)
{
  chain_options fallback = options_;
  bool const offloading = stats_.policy == tape_policy::offload;
  if (offloading) {
    fallback.policy = tape_policy::recompute;
  } else {
    fallback.host_tier_on_cpu = false;
    fallback.host_budget_bytes = 1;  // no layer or checkpoint fits: device and recomputation only
  }
  chain_stats replanned;
  try {
    replanned = plan_chain(sizeof(record_type), records_per_step(), state_bytes(), fallback, steps_);
  } catch (budget_error const&) {
    return false;
  }
  replanned.fallback = std::string{offloading ? "host tier unavailable (" : "pinned memory unavailable ("} +
                       failure.what() + (offloading ? "); recomputing instead" : "); planned without it");
  stats_ = std::move(replanned);
  executor_.set_plan();
  return true;
}

}  // namespace tapeflow
