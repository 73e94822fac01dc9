// SPDX-License-Identifier: Apache-2.0
// The host scheduler for a chain of differentiated steps. Every policy is one schedule of actions
// (tapeflow/schedule.hpp; tiers.hpp's chain_actions turns a tier plan into one), run by one
// executor: untaped advances, taped forwards whose layer is kept on the device or the host,
// checkpoints of the state on either level, and reverses last-first, each handing its layer to
// the step's staged reverse kernel:
//   device     pushed on the tape in the forward, popped in the reverse;
//   host       written into a ring slot, copied out on a D2H stream, prefetched back on an H2D
//              stream up to `prefetch_distance` layers ahead of its reverse (detail/host_tier.hpp);
//   recompute  taped just before its reverse, from a checkpoint and untaped advances (Revolve's
//              schedule under `recompute`, the optimiser's under `mixed`).
// Tape memory (layers, ring slots, checkpoints, scratch, the parameter adjoint) is allocated by
// the first forward and reverse and kept until the chain goes: later iterations allocate nothing.
// Policy `auto` resolves to `mixed` when the tape does not fit the device: the optimiser's
// schedule mixes all three per step.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/detail/host_tier.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/program.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/step.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>
#include <tapeflow/tiers.hpp>
#include <tapeflow/timing.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow {

enum class chain_phase { forward, reverse };

/// How a chain runs.
struct chain_options {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::automatic};
  /// Most device bytes the tape (layers, host-tier ring, snapshots) may occupy at once; 0: no limit.
  std::size_t budget_bytes{0};
  /// Most pinned host bytes the host tier may occupy; 0: no limit.
  std::size_t host_budget_bytes{0};
  /// Copy bandwidths for the planner's cost model; zeros mean "measure them" (once per process,
  /// and only when the plan depends on them).
  bandwidths bw{};
  /// On the CPU backend `auto` never puts layers or checkpoints in host memory (a copy there
  /// saves nothing); this lets it, to run the host tier's part of a mixed schedule on the CPU
  /// (tests do).
  bool host_tier_on_cpu{false};
  /// Measured step costs for the planner (schedule.hpp's step_cost; layer_bytes is ignored):
  /// one entry for every step, or one per step. Empty: estimated from the step's traffic at the
  /// device-to-device bandwidth, or measured when `measure_steps` is set.
  std::vector<step_cost> step_costs{};
  /// Before planning a tape that does not fit, time the step's untaped forward, taped forward
  /// and reverse (on a zero state: a warm-up, then the median of three) and plan with those: step
  /// 0's; for layers of different sizes, the steps with the largest and the smallest layer, every
  /// step's costs linear in its layer's size through those two. The timed steps run a few extra
  /// times at construction.
  bool measure_steps{false};
  /// Tile, stage and block overrides; `record_bytes` and `records` are filled in by the chain.
  pipeline_request pipeline{};
  /// Keep every layer and the adjoint buffers resident across iterations and replay the reverse
  /// as one captured program (a CUDA Graph on CUDA): many small layers then cost one launch.
  /// Needs every layer on the device (the plan must resolve to `store`).
  bool capture_reverse{false};
  /// Synchronise around forward() and reverse() and record wall, stall and recompute times.
  bool measure_time{false};
  /// Fill each buffer the chain hands a step to write with NaN bytes (0xFF) first, so tests can
  /// prove that a step writes every element. Costs one fill per layer.
  bool poison{false};
  /// Called after each step: (phase, steps done, steps in all).
  std::function<void(chain_phase, std::size_t, std::size_t)> progress{};
};

/// What a chain planned and did.
struct chain_stats {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::store};  ///< resolved
  pipeline_plan plan{};                    ///< tiling of every layer (of the largest, when they differ)
  std::vector<pipeline_plan> step_plans;   ///< per step when layers differ; empty: every layer is `plan`
  tier_plan tiers{};                       ///< per-layer tiers, ring, snapshots
  std::size_t steps{0};
  std::size_t layer_bytes{0};              ///< tape bytes of one layer (the largest, when they differ)
  std::size_t tape_bytes{0};               ///< tape bytes of all layers
  std::size_t peak_tape_bytes{0};          ///< most tape bytes held on the device at once (measured)
  std::size_t host_tape_bytes{0};          ///< pinned host bytes of the host tier
  std::size_t budget_bytes{0};             ///< 0: unlimited
  std::size_t prefetches{0};               ///< host-tier layers copied back
  std::size_t recompute_steps{0};          ///< untaped forward steps run to rebuild layers
  double forward_ms{0};                    ///< measure_time only
  double reverse_ms{0};
  double stall_ms{0};                      ///< compute waiting on the ring or on prefetches
  double recompute_ms{0};                  ///< time of the untaped forward steps
  std::string fallback;                    ///< why the tiers changed at run time (empty: they did not)
  /// The step costs the planner used, given (chain_options::step_costs) or measured
  /// (measure_steps); empty: estimated from each step's traffic.
  std::vector<step_cost> step_costs;
  std::size_t program_launches{0};         ///< capture_reverse: reverses run as one program
  bool graph_captured{false};              ///< capture_reverse: a device graph was captured
};

/// Tape bytes one layer of `records` records of `record_bytes` takes.
[[nodiscard]] constexpr std::size_t layer_bytes(std::size_t record_bytes, std::size_t records) noexcept
{
  return record_bytes * records;
}

/// Plans a chain of `steps` layers of `records_per_step` records of `record_bytes` bytes over a
/// state of `state_bytes`: checks the sizes, tiles the layers and places them in tiers under the
/// budgets. What a chain will do, before it runs (no timings yet).
chain_stats plan_chain(std::size_t record_bytes, std::size_t records_per_step, std::size_t steps,
                       std::size_t state_bytes, chain_options const& options);

/// The same for layers of different sizes: `records_per_step[t]` records for step t, one chain
/// step per entry. One entry means every layer has that many (the steps count is then taken from
/// `steps`).
chain_stats plan_chain(std::size_t record_bytes, std::vector<std::size_t> const& records_per_step,
                       std::size_t state_bytes, chain_options const& options, std::size_t steps = 0);

/// A chain of `steps` applications of one differentiated step.
///
/// The Step contract is in tapeflow/step.hpp, checked when the chain is instantiated: a Step that
/// breaks it gets one message per member at fault. Pointers are in the chain's backend memory;
/// calls are stream-ordered on `s`. On the CPU backend steps run on the calling thread (and may
/// spread their loops over tapeflow::cpu::parallel_for), ordered on the default stream. A Step
/// that declares `halo_records()` gets tiles with that many records on each side
/// (tapeflow/halo.hpp, cpu::reverse_windows). A Step that declares `parameter_size()` gets a
/// parameter adjoint in its reverse, zeroed at each reverse(), which every step's reverse adds its
/// dL/dθ to in the reverse's fixed order (last step first) under every policy and tier: read it
/// back with parameter_adjoint().
///
/// The chain keeps its tape memory (a buffer_pool, the host tier's ring, snapshots and scratch)
/// from its first forward and reverse until it is destroyed, so that later iterations allocate
/// nothing; between iterations it holds its peak.
template <class Step, bool = is_step_v<Step>>
class chain {
 public:
  using value_type = typename Step::value_type;
  using record_type = typename Step::record_type;

  chain(Step step, std::size_t steps, chain_options options)
    : step_(std::move(step)), steps_(steps), options_(std::move(options)), pool_(options_.kind),
      tape_(options_.kind, tape_options{options_.budget_bytes, &pool_})
  {
    require_record<record_type>();
    options_.pipeline.halo_records = std::max(options_.pipeline.halo_records, halo_records_of(step_));
    if (options_.kind != backend::cpu && options_.pipeline.bulk_copy) {
      options_.pipeline.bulk_copy = bulk_copy_runs_of(step_);  // a preference: cp.async where it cannot run
    }
    TAPEFLOW_EXPECTS(step_.state_size() > 0, "a chain's state must hold at least one value");
    stats_ = plan_chain(sizeof(record_type), records_per_step(), state_bytes(), options_, steps_);
    if (options_.measure_steps && options_.step_costs.empty() && options_.policy != tape_policy::store &&
        (options_.budget_bytes != 0 && stats_.tape_bytes > options_.budget_bytes)) {
      options_.step_costs = measure_step_costs();
      stats_ = plan_chain(sizeof(record_type), records_per_step(), state_bytes(), options_, steps_);
    }
    TAPEFLOW_EXPECTS(!options_.capture_reverse || stats_.policy == tape_policy::store,
                     "capture_reverse needs every layer on the device (policy store); the plan chose '" +
                       std::string{to_string(stats_.policy)} + "'");
    set_actions();
  }

  // Steps and captured programs refer to the chain's buffers by address: a chain stays put.
  chain(chain const&) = delete;
  chain& operator=(chain const&) = delete;
  chain(chain&&) = delete;
  chain& operator=(chain&&) = delete;
  /// Every buffer of the chain is freed on the stream it was allocated on, the stream of an
  /// earlier call. When the calls changed streams, the last one may still be running on another:
  /// the host then waits for it first (a chain used on one stream frees in that stream's order,
  /// without waiting).
  ~chain()
  {
    if (!switched_streams_) { return; }
    try {
      last_call_->synchronize();
    } catch (...) {  // a device that failed has nothing left to wait for
    }
  }

  [[nodiscard]] pipeline_plan const& plan() const noexcept { return stats_.plan; }
  [[nodiscard]] chain_stats const& stats() const noexcept { return stats_; }
  [[nodiscard]] Step const& step() const noexcept { return step_; }
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return step_.state_size() * sizeof(value_type); }
  /// The device tier's layers recorded by forward() and not yet reversed.
  [[nodiscard]] tape const& recorded() const noexcept { return tape_; }
  /// Values in the Step's parameters (0 for a Step without parameter_size()).
  [[nodiscard]] std::size_t parameter_size() const { return parameter_size_of(step_); }
  /// dL/dθ summed over every step by the last reverse(), parameter_size() values of value_type in
  /// the chain's backend memory (stream-ordered after that reverse); empty without parameters or
  /// before the first reverse (which allocates it).
  [[nodiscard]] device_buffer const& parameter_adjoint() const noexcept { return parameter_adjoint_; }

  /// Runs the forward: `state` holds the initial state and, afterwards, the final one. Throws
  /// logic_error when a recorded forward is still waiting for its reverse.
  void forward(device_buffer& state, stream_view stream = {})
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::chain::forward");
    TAPEFLOW_EXPECTS(!pending_, "forward() called again before reverse() consumed the tape");
    check_state(state, "state");
    stream_view const s = compute_stream(stream);
    follow_last_call(s);
    timer t{*this, s, stats_.forward_ms};
    try {
      try {
        start_forward();
        run_forward(state, s);
      } catch (out_of_memory const& failure) {
        // Pinned memory could not be had: plan without host memory and run again (`state` is
        // only written at the end of a forward, so it still holds the initial state).
        if (!host_ || !host_->allocation_failed()) { throw; }
        abandon(s);
        replan_without_host(failure);
        start_forward();
        run_forward(state, s);
      }
    } catch (...) {
      abandon(s);  // `state` is left unspecified; the chain is ready for a new forward
      throw;
    }
    pending_ = true;
    end_call(s);
  }

  /// Runs the reverse: `adjoint` holds dL/d(final state) and, afterwards, dL/d(initial state).
  /// Consumes the tape. Throws logic_error when there is no recorded forward to reverse.
  void reverse(device_buffer& adjoint, stream_view stream = {})
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::chain::reverse");
    TAPEFLOW_EXPECTS(pending_, "reverse() needs a completed forward() whose tape was not reversed yet");
    check_state(adjoint, "adjoint");
    stream_view const s = compute_stream(stream);
    follow_last_call(s);
    pending_ = false;
    {
      timer t{*this, s, stats_.reverse_ms};
      try {
        zero_parameter_adjoint(s);
        if (options_.capture_reverse) {
          captured_reverse(adjoint, s);
        } else {
          run_reverse(adjoint, s);
        }
      } catch (...) {
        abandon(s);  // the tape is gone: the next forward starts afresh
        throw;
      }
    }
    stats_.peak_tape_bytes = peak_;
    if (options_.measure_time) { collect_times(); }
    end_call(s);
  }

 private:
  // ---- the executor: one schedule of actions for every policy (tiers.hpp's chain_actions) ----
  // forward() runs the actions up to the first reverse (the taped run of the last step, whose
  // output is the final state); reverse() runs the rest.
  //
  // The working state ping-pongs between two buffers through pointers (cur_, spare_). In the
  // forward they are the caller's `state` and the chain's scratch, and a result that ends in the
  // scratch is copied back; where the schedule keeps anything on the host, the forward works on
  // the chain's own copy of `state` instead, so that a forward planned again (pinned memory could
  // not be had) starts over from the caller's initial state. The reverse's recomputation works on
  // the chain's buffers. The adjoints ping-pong the same way between the caller's buffer and a
  // scratch. The caller's buffers are never swapped into the chain, whose buffers are freed on
  // the chain's stream (a swapped-in caller buffer would be freed while the caller's stream may
  // still use it).
  void run_forward(device_buffer& state, stream_view s)
  {
    std::size_t const bytes = state.size();
    release_checkpoints();
    checkpoints_.resize(steps_);  // by step; kept sized between gradients
    if (!host_ && uses_host_) {
      host_ = std::make_unique<detail::host_tier>(options_.kind, stats_.layer_bytes, steps_,
                                                  std::max<std::size_t>(1, stats_.tiers.ring_slots),
                                                  options_.measure_time);
    }
    if (host_) { host_->begin(s); }
    // Kept from the last gradient (freed only by abandon() and the chain's destructor).
    bool const keep_initial = host_ != nullptr;
    if (!scratch_) { scratch_.emplace(options_.kind, bytes, s); }
    if (!work_ && (keep_initial || reverse_recomputes_)) { work_.emplace(options_.kind, bytes, s); }
    if (options_.capture_reverse) {
      if (arena_.empty()) {
        // The resident tape: one buffer per layer, allocated once, reused by every iteration.
        arena_.reserve(steps_);
        for (std::size_t t = 0; t < steps_; ++t) { arena_.emplace_back(options_.kind, stats_.layer_bytes, s); }
        for (device_buffer& a : adjoints_) { a = device_buffer(options_.kind, state.size(), s); }
      }
      peak_ = steps_ * stats_.layer_bytes;
    }
    track_peak();
    if (keep_initial) { work_->copy_from(state, s); }
    cur_ = keep_initial ? &*work_ : &state;
    spare_ = &*scratch_;
    next_action_ = 0;
    lookahead_ = 0;
    while (actions_[next_action_].kind != action_kind::reverse) { run_action(actions_[next_action_++], s); }
    if (cur_ != &state) { state.copy_from(*cur_, s); }
    // What the reverse recomputes starts from a restore into the chain's working state.
    cur_ = work_ ? &*work_ : nullptr;
    spare_ = work_ ? &*scratch_ : nullptr;
  }

  void run_reverse(device_buffer& adjoint, stream_view s)
  {
    device_buffer scratch = pool_.take(adjoint.size(), s);
    device_buffer* in = &adjoint;
    device_buffer* out = &scratch;
    prefetch_ahead(next_action_);
    for (; next_action_ < actions_.size(); ++next_action_) {
      schedule_action const& a = actions_[next_action_];
      if (a.kind != action_kind::reverse) {
        run_action(a, s);
        prefetch_ahead(next_action_ + 1);  // a host layer written here may have held the lookahead back
        continue;
      }
      TAPEFLOW_NVTX_RANGE("tapeflow::layer::reverse");
      poison(*out, s);
      if (a.where == level::host) {
        auto const* slot = static_cast<record_type const*>(host_->begin_read(a.step, s));
        prefetch_ahead(next_action_ + 1);
        reverse_step(a.step, tape_reader<record_type>{slot, plan_of(a.step).layout()}, in->data_as<value_type>(),
                     out->data_as<value_type>(), s);
        host_->end_read(a.step, s);
      } else {
        reverse_step(a.step, tape_.top().template reader<record_type>(), in->data_as<value_type>(),
                     out->data_as<value_type>(), s);
        tape_.pop();
      }
      std::swap(in, out);
      report(chain_phase::reverse, steps_ - a.step);
    }
    if (in != &adjoint) { adjoint.copy_from(*in, s); }
    if (host_) {
      host_->end(s);
      stats_.prefetches = host_->prefetches();
      stats_.host_tape_bytes = host_->peak_host_bytes();
      stats_.stall_ms = host_->stall_ms();
    }
    pool_.give(std::move(scratch));
    release_checkpoints();
  }

  void run_action(schedule_action const& a, stream_view s)
  {
    switch (a.kind) {
      case action_kind::advance:
        advance_untaped(a.step, a.to, s);
        report_forward(a.to);
        break;
      case action_kind::taped: {
        TAPEFLOW_NVTX_RANGE("tapeflow::layer::forward");
        poison(*spare_, s);
        value_type const* in = cur_->data_as<value_type>();
        value_type* out = spare_->data_as<value_type>();
        if (options_.capture_reverse) {
          if (options_.poison) { arena_[a.step].fill(0xFF, s); }
          step_.augmented_forward(a.step, in, out,
                                  tape_writer<record_type>{arena_[a.step].data_as<record_type>(), plan_of(a.step).layout()}, s);
        } else if (a.kept && a.where == level::host) {
          std::size_t const bytes = plan_of(a.step).records * sizeof(record_type);
          auto* slot = static_cast<record_type*>(host_->begin_write(a.step, bytes, s));
          track_peak();
          if (options_.poison) { host_->fill_slot(a.step, 0xFF, s); }
          step_.augmented_forward(a.step, in, out, tape_writer<record_type>{slot, plan_of(a.step).layout()}, s);
          host_->end_write(a.step, s);
        } else {
          taped_on_device(a.step, in, out, s);
        }
        std::swap(cur_, spare_);
        report_forward(a.step + 1);
        break;
      }
      case action_kind::store:
        if (a.where == level::host) {
          host_->store(a.step, *cur_, s);
        } else {
          TAPEFLOW_EXPECTS(checkpoints_[a.step].size() == 0, "a device checkpoint of this step is already held");
          checkpoints_[a.step] = pool_.take(state_bytes(), s);
          checkpoint_bytes_ += state_bytes();
          track_peak();
          checkpoints_[a.step].copy_from(*cur_, s);
        }
        break;
      case action_kind::restore:
        if (a.where == level::host) {
          host_->restore(a.step, *cur_, s);
        } else {
          cur_->copy_from(checkpoints_[a.step], s);
        }
        break;
      case action_kind::release:
        if (a.where == level::host) {
          host_->release(a.step);
        } else {
          pool_.give(std::move(checkpoints_[a.step]));  // leaves it empty
          checkpoint_bytes_ -= state_bytes();
        }
        break;
      case action_kind::reverse: break;  // run_reverse's
    }
  }

  /// Step t's augmented forward from `in` to `out`, its layer pushed on the device tape.
  void taped_on_device(std::size_t t, value_type const* in, value_type* out, stream_view s)
  {
    layer& l = tape_.push<record_type>(plan_of(t).records, plan_of(t).tile_records, s);
    track_peak();
    if (options_.poison) { l.fill(0xFF, s); }
    step_.augmented_forward(t, in, out, l.writer<record_type>(), s);
    l.commit();
  }

  /// Untaped steps from..to-1 on the working state (recomputation), timed under measure_time.
  void advance_untaped(std::size_t from, std::size_t to, stream_view s)
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::recompute");
    event* begin = mark(s);
    for (std::size_t t = from; t < to; ++t) {
      poison(*spare_, s);
      step_.forward(t, cur_->data_as<value_type>(), spare_->data_as<value_type>(), s);
      std::swap(cur_, spare_);
    }
    event* end = mark(s);
    if (begin != nullptr) { recompute_events_.emplace_back(begin, end); }
    stats_.recompute_steps += to - from;
  }

  /// Queues the prefetches of the next host layers to be reversed, up to the plan's prefetch
  /// distance ahead, stopping at a host layer written before its reverse (its slot is needed for
  /// that write first). A cursor keeps the scan linear over the whole reverse.
  void prefetch_ahead(std::size_t from)
  {
    std::size_t const distance = stats_.tiers.prefetch_distance;
    if (!host_ || distance == 0) { return; }
    std::size_t i = std::max(from, lookahead_);
    for (; i < actions_.size() && host_->queued() < distance; ++i) {
      schedule_action const& a = actions_[i];
      if (a.kind == action_kind::taped && a.kept && a.where == level::host) { break; }
      if (a.kind == action_kind::reverse && a.where == level::host && !host_->prefetch(a.step)) { break; }
    }
    lookahead_ = i;
  }

  /// The schedule for the current plan.
  void set_actions()
  {
    actions_ = chain_actions(stats_.tiers, steps_);
    auto const first_reverse = std::find_if(actions_.begin(), actions_.end(),
                                            [](schedule_action const& a) { return a.kind == action_kind::reverse; });
    reverse_recomputes_ = std::any_of(first_reverse, actions_.end(),
                                      [](schedule_action const& a) { return a.kind != action_kind::reverse; });
    uses_host_ = std::any_of(actions_.begin(), actions_.end(),
                             [](schedule_action const& a) { return a.where == level::host; });
  }

  /// Gives every device checkpoint back to the pool (the slots by step stay, empty).
  void release_checkpoints()
  {
    for (device_buffer& c : checkpoints_) {
      if (c.size() > 0) { pool_.give(std::move(c)); }
    }
    checkpoint_bytes_ = 0;
  }

  /// Forward progress: the steps the forward sweep has reached (reported while forward() runs).
  void report_forward(std::size_t reached)
  {
    if (pending_ || reached <= forward_reported_) { return; }
    forward_reported_ = reached;
    report(chain_phase::forward, reached);
  }

  // ---- the resident tape, reversed by a captured program ------------------------------------
  void captured_reverse(device_buffer& adjoint, stream_view s)
  {
    if (!program_) {
      program_ = std::make_unique<captured_program>(options_.kind, [this](stream_view ps) {
        for (std::size_t t = steps_; t-- > 0;) {
          std::size_t const in = (steps_ - 1 - t) % 2;
          device_buffer& out = adjoints_[1 - in];
          if (options_.poison) { out.fill(0xFF, ps); }
          reverse_step(t, tape_reader<record_type>{arena_[t].template data_as<record_type>(), plan_of(t).layout()},
                       adjoints_[in].template data_as<value_type>(), out.template data_as<value_type>(), ps);
        }
      });
    }
    adjoints_[0].copy_from(adjoint, s);
    program_->launch(s);
    adjoint.copy_from(adjoints_[steps_ % 2], s);
    stats_.program_launches = program_->launches();
    stats_.graph_captured = program_->captured();
    report(chain_phase::reverse, steps_);
  }
  /// The step costs options.measure_steps plans with. Layers of one size: step 0's, timed. Layers
  /// of different sizes: the steps with the largest and the smallest layer are timed and every
  /// step gets costs linear in its layer's size through those two (a step's time is a part that
  /// does not depend on its layer — the state's traffic — and a part in proportion to it).
  std::vector<step_cost> measure_step_costs()
  {
    if (stats_.step_plans.empty()) { return {measure_step(0)}; }
    std::size_t largest = 0;
    std::size_t smallest = 0;
    for (std::size_t t = 1; t < steps_; ++t) {
      if (plan_of(t).records > plan_of(largest).records) { largest = t; }
      if (plan_of(t).records < plan_of(smallest).records) { smallest = t; }
    }
    step_cost const big = measure_step(largest);
    if (plan_of(smallest).records == plan_of(largest).records) { return {big}; }
    step_cost const little = measure_step(smallest);
    double const span = static_cast<double>(big.layer_bytes - little.layer_bytes);
    auto const between = [](double a, double b, double w) { return std::max(0.0, a + (b - a) * w); };
    std::vector<step_cost> costs(steps_);
    for (std::size_t t = 0; t < steps_; ++t) {
      std::size_t const bytes = plan_of(t).records * sizeof(record_type);
      double const w = static_cast<double>(bytes - little.layer_bytes) / span;
      costs[t] = step_cost{between(little.forward_ms, big.forward_ms, w),
                           between(little.aug_forward_ms, big.aug_forward_ms, w),
                           between(little.reverse_ms, big.reverse_ms, w), bytes};
    }
    return costs;
  }

  /// Times step t's untaped forward, taped forward and reverse on a state and an adjoint of
  /// values in [0.25, 0.75) (not zeros: a kernel can run faster on zeros than on data): a warm-up,
  /// then the median of three.
  step_cost measure_step(std::size_t t)
  {
    stream_view const s = compute_stream({});
    std::size_t const bytes = state_bytes();
    device_buffer in(options_.kind, bytes, s);
    device_buffer out(options_.kind, bytes, s);
    device_buffer adjoint(options_.kind, bytes, s);
    device_buffer adjoint_in(options_.kind, bytes, s);
    pipeline_plan const& plan = plan_of(t);
    device_buffer records(options_.kind, plan.records * sizeof(record_type), s);
    std::vector<value_type> values(bytes / sizeof(value_type));
    for (std::size_t k = 0; k < values.size(); ++k) {
      values[k] = static_cast<value_type>(0.25 + 0.5 * static_cast<double>((k * 2654435761u) % 1024u) / 1024.0);
    }
    in.upload(values.data(), bytes, s);
    adjoint.upload(values.data(), bytes, s);
    synchronize(options_.kind, s);  // `values` is pageable host memory, and goes when this returns
    synchronized_timer const synchronized{options_.kind, s};
    auto const median_of_three = [&](auto&& run) { return median_ms(1, 3, synchronized, run); };
    step_cost c;
    c.forward_ms = median_of_three([&] { step_.forward(t, in.data_as<value_type>(), out.data_as<value_type>(), s); });
    c.aug_forward_ms = median_of_three([&] {
      step_.augmented_forward(t, in.data_as<value_type>(), out.data_as<value_type>(),
                              tape_writer<record_type>{records.data_as<record_type>(), plan.layout()}, s);
    });
    // A step with parameters adds to a parameter adjoint: a scratch one here, not the chain's.
    device_buffer theta(options_.kind, std::max<std::size_t>(1, parameter_size_of(step_)) * sizeof(value_type), s);
    theta.fill(0, s);
    c.reverse_ms = median_of_three([&] {
      reverse_step(t, tape_reader<record_type>{records.data_as<record_type>(), plan.layout()},
                   adjoint.data_as<value_type>(), adjoint_in.data_as<value_type>(), s, theta.data_as<value_type>());
    });
    c.layer_bytes = plan.records * sizeof(record_type);
    return c;
  }

  // ---- bookkeeping -------------------------------------------------------------------------
  /// The tiling of step t's layer: one plan for every layer, or one per step when they differ.
  [[nodiscard]] pipeline_plan const& plan_of(std::size_t t) const noexcept
  {
    return stats_.step_plans.empty() ? stats_.plan : stats_.step_plans[t];
  }

  /// Resets the counts a forward starts from.
  void start_forward()
  {
    peak_ = 0;
    forward_reported_ = 0;
    recompute_events_.clear();
    stats_.recompute_steps = 0;
    stats_.recompute_ms = 0;
    stats_.stall_ms = 0;
    stats_.prefetches = 0;
  }

  /// Records each step writes: one count, or one per step (Step::records_per_step(step)).
  [[nodiscard]] std::vector<std::size_t> records_per_step() const
  {
    if constexpr (!detail::step_contract::has_records_per_step_of<Step>::value) {
      return {step_.records_per_step()};
    } else {
      std::vector<std::size_t> records(steps_);
      for (std::size_t t = 0; t < steps_; ++t) { records[t] = step_.records_per_step(t); }
      return records;
    }
  }

  /// The Step's reverse of step `t`, handed the parameter adjoint when the Step has parameters.
  /// (`theta`: where dL/dθ is added; the chain's parameter adjoint unless given.)
  void reverse_step(std::size_t t, tape_reader<record_type> reader, value_type const* adjoint_out,
                    value_type* adjoint_in, stream_view s, value_type* theta = nullptr)
  {
    if constexpr (has_parameters_v<Step>) {
      value_type* const into = theta != nullptr ? theta : parameter_adjoint_.data_as<value_type>();
      step_.reverse(t, reader, plan_of(t), adjoint_out, adjoint_in, into, s);
    } else {
      step_.reverse(t, reader, plan_of(t), adjoint_out, adjoint_in, s);
    }
  }

  /// Allocates the parameter adjoint on the first reverse (on its stream), then zeroes it.
  void zero_parameter_adjoint(stream_view s)
  {
    std::size_t const n = parameter_size_of(step_);
    if (n == 0) { return; }
    if (parameter_adjoint_.size() == 0) { parameter_adjoint_ = device_buffer(options_.kind, n * sizeof(value_type), s); }
    parameter_adjoint_.fill(0, s);  // all-zero bytes are 0.0
  }

  /// The memory this call reuses was last used by the previous call: when that ran on another
  /// stream, this one waits for it (stream-ordered; the host does not wait).
  void follow_last_call(stream_view s)
  {
    if (options_.kind == backend::cpu) { return; }  // one stream: inline, in order
    if (!last_call_) { last_call_.emplace(options_.kind); }
    if (called_ && s.native() != last_stream_.native()) {
      last_call_->wait(s);
      switched_streams_ = true;
    }
  }

  void end_call(stream_view s)
  {
    if (options_.kind == backend::cpu) { return; }
    last_call_->record(s);
    last_stream_ = s;
    called_ = true;
  }

  stream_view compute_stream(stream_view requested) const noexcept
  {
    // CPU steps run inline on the calling thread: order everything on the default stream.
    return options_.kind == backend::cpu ? stream_view{} : requested;
  }

  /// After pinned memory could not be had: forced `offload` recomputes instead; other plans are
  /// made again without host memory. The failure itself propagates when nothing fits the device
  /// budget.
  void replan_without_host(out_of_memory const& failure)
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
      throw failure;
    }
    replanned.fallback = std::string{offloading ? "host tier unavailable (" : "pinned memory unavailable ("} +
                         failure.what() + (offloading ? "); recomputing instead" : "); planned without it");
    stats_ = std::move(replanned);
    set_actions();
    host_.reset();
  }

  /// Releases everything a failed forward or reverse held; the chain can run again.
  void abandon(stream_view s) noexcept
  {
    try {
      synchronize(options_.kind, s);
    } catch (...) {  // the failure that brought us here is what the caller sees
    }
    while (!tape_.empty()) { tape_.pop(); }
    if (host_) { host_->abandon(); }
    checkpoints_.clear();
    checkpoint_bytes_ = 0;
    work_.reset();
    scratch_.reset();
    cur_ = spare_ = nullptr;
    marks_.clear();
    recompute_events_.clear();
    pending_ = false;
  }

  void track_peak() noexcept
  {
    std::size_t const now = tape_.bytes() + (host_ ? host_->ring_bytes() : 0) + checkpoint_bytes_;
    peak_ = std::max(peak_, now);
  }

  event* mark(stream_view s)
  {
    if (!options_.measure_time) { return nullptr; }
    marks_.emplace_back(std::make_unique<event>(options_.kind));
    marks_.back()->record(s);
    return marks_.back().get();
  }

  void collect_times()
  {
    for (auto const& [begin, end] : recompute_events_) {
      stats_.recompute_ms += static_cast<double>(elapsed_ms(*begin, *end));
    }
    recompute_events_.clear();
    marks_.clear();
  }

  void poison(device_buffer& buffer, stream_view s) const
  {
    if (options_.poison) { buffer.fill(0xFF, s); }
  }

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
  buffer_pool pool_;  // layers and scratch; declared before the tape, which gives back to it
  tape tape_;
  chain_stats stats_{};
  bool pending_{false};
  std::size_t peak_{0};
  // the schedule: its actions, the next one to run, and the host lookahead's cursor
  std::vector<schedule_action> actions_;
  std::size_t next_action_{0};
  std::size_t lookahead_{0};
  std::size_t forward_reported_{0};
  // the working state and its scratch; device checkpoints by step; the host tier
  std::optional<device_buffer> work_;
  std::optional<device_buffer> scratch_;
  device_buffer* cur_{nullptr};    // the working state: work_, scratch_ or (in a forward) the caller's
  device_buffer* spare_{nullptr};  // where the next step writes
  bool reverse_recomputes_{false};  // the schedule runs steps (or restores) after its first reverse
  bool uses_host_{false};           // the schedule keeps a layer or a checkpoint on the host
  std::vector<device_buffer> checkpoints_;
  std::size_t checkpoint_bytes_{0};
  std::unique_ptr<detail::host_tier> host_;
  // capture_reverse: the resident tape and adjoints, and the program that reverses them
  std::vector<device_buffer> arena_;
  device_buffer adjoints_[2];
  std::unique_ptr<captured_program> program_;
  // dL/dθ (Steps with parameters)
  device_buffer parameter_adjoint_;
  // the last forward()/reverse() and its stream, which the next call's reuse of memory follows
  std::optional<event> last_call_;
  stream_view last_stream_{};
  bool called_{false};
  bool switched_streams_{false};  // a call ran on another stream than the one before it
  // timing marks (measure_time)
  std::vector<std::unique_ptr<event>> marks_;
  std::vector<std::pair<event*, event*>> recompute_events_;
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
