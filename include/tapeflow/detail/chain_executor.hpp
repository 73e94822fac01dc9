// SPDX-License-Identifier: Apache-2.0
// The executor of a chain: one interpreter of a schedule of actions (tapeflow/schedule.hpp) for
// every policy (tiers.hpp's chain_actions: a tier split, Revolve's or the optimiser's). forward()
// runs the actions up to the first reverse (the taped run of the last step, whose output is the
// final state); reverse() runs the rest, visiting the layers last-first.
//   device     a layer pushed on the tape in the forward, popped in the reverse;
//   host       written into a ring slot, copied out on a D2H stream, prefetched back on an H2D
//              stream up to `prefetch_distance` layers ahead of its reverse (detail/host_tier.hpp);
//   recompute  taped just before its reverse, from a checkpoint and untaped advances.
//
// The working state ping-pongs between two buffers through pointers (cur_, spare_): in the
// forward the caller's `state` and a scratch, a result that ends in the scratch copied back (or,
// where the schedule keeps anything on the host, a copy of `state`, so that a forward planned
// again without pinned memory starts over from the initial state); in the reverse's
// recomputation, the executor's own. A Step whose record is its input state (tapes_state()) runs
// on the executor's own buffers, padded to whole records with zero tails: a layer kept on the device
// is then x_t's buffer itself, adopted by the tape while the untaped forward writes x_{t+1}, and
// the working buffer is replaced from the pool — the forward moves the primal's bytes. The adjoints ping-pong the same way. The caller's buffers
// are never swapped in: the executor frees its buffers on its stream, while the caller's stream
// may still use the caller's. Tape memory (layers, ring slots, checkpoints, scratch, the
// parameter adjoint) comes from the first forward and reverse and stays: later ones allocate nothing.
//
// One file of over 400 lines: one class, the interpreter of every action, whose members (the
// working buffers, the tape, the host ring, the checkpoints) each action reads and writes; split,
// every part would reach into the others.
#pragma once

#include <tapeflow/chain_options.hpp>
#include <tapeflow/detail/captured_reverse.hpp>
#include <tapeflow/detail/host_tier.hpp>
#include <tapeflow/detail/step_timing.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/step.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>
#include <tapeflow/tiers.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::detail {

template <class Step>
class chain_executor {
 public:
  using value_type = typename Step::value_type;
  using record_type = typename Step::record_type;

  /// Runs `steps` steps of `step` as `options` ask and `stats` plans, reporting into `stats`; all
  /// three belong to the owner and outlive the executor.
  chain_executor(Step const& step, std::size_t steps, chain_options const& options, chain_stats& stats)
    : step_(step), steps_(steps), options_(options), stats_(stats), pool_(options.kind),
      tape_(options.kind, tape_options{options.budget_bytes, &pool_}), captured_(options.kind),
      recompute_times_(options.kind, options.measure_time)
  {
  }
  chain_executor(chain_executor const&) = delete;
  chain_executor& operator=(chain_executor const&) = delete;
  chain_executor(chain_executor&&) = delete;
  chain_executor& operator=(chain_executor&&) = delete;

  /// Takes the schedule of the current plan (`stats.tiers`); after a re-plan, drops the host tier
  /// made for the old one. Throws logic_error when the plan does not describe the chain's steps.
  void set_plan()
  {
    set_working_state();
    actions_ = chain_actions(stats_.tiers, steps_);
    auto const first_reverse = std::find_if(actions_.begin(), actions_.end(),
                                            [](schedule_action const& a) { return a.kind == action_kind::reverse; });
    reverse_recomputes_ = std::any_of(first_reverse, actions_.end(),
                                      [](schedule_action const& a) { return a.kind != action_kind::reverse; });
    uses_host_ = std::any_of(actions_.begin(), actions_.end(),
                             [](schedule_action const& a) { return a.where == level::host; });
    host_.reset();
  }

  /// Runs the schedule up to its first reverse: `state` holds the initial state and, afterwards,
  /// the final one.
  void forward(device_buffer& state, stream_view s)
  {
    peak_ = 0;  // the counts a forward starts from
    forward_reported_ = 0;
    recompute_times_.clear();
    stats_.recompute_steps = 0;
    stats_.recompute_ms = 0;
    stats_.stall_ms = 0;
    stats_.prefetches = 0;
    std::size_t const bytes = working_bytes_;
    release_checkpoints();
    checkpoints_.resize(steps_);  // by step; kept sized between gradients
    if (!host_ && uses_host_) {
      host_ = std::make_unique<host_tier>(options_.kind, stats_.layer_bytes, steps_,
                                          std::max<std::size_t>(1, stats_.tiers.ring_slots), options_.measure_time);
    }
    if (host_) { host_->begin(s); }
    // Kept from the last gradient (freed only by abandon() and the destructor).
    bool const keep_initial = host_ != nullptr || tapes_state_;
    if (!scratch_) { scratch_.emplace(take_working(s)); }
    if (!work_ && (keep_initial || reverse_recomputes_)) { work_.emplace(take_working(s)); }
    if (options_.capture_reverse) {
      captured_.reserve(steps_, stats_.layer_bytes, bytes, s);
      peak_ = steps_ * stats_.layer_bytes;
    }
    track_peak();
    if (keep_initial) { work_->copy_from(state, state_bytes(), s); }
    cur_ = keep_initial ? &*work_ : &state;
    spare_ = &*scratch_;
    next_action_ = 0;
    lookahead_ = 0;
    while (actions_[next_action_].kind != action_kind::reverse) { run_action(actions_[next_action_++], s); }
    if (cur_ != &state) { state.copy_from(*cur_, state_bytes(), s); }
    // What the reverse recomputes starts from a restore into the executor's working state.
    cur_ = work_ ? &*work_ : nullptr;
    spare_ = work_ ? &*scratch_ : nullptr;
  }

  /// Runs the rest of the schedule: `adjoint` holds dL/d(final state) and, afterwards,
  /// dL/d(initial state). Zeroes the parameter adjoint first.
  void reverse(device_buffer& adjoint, stream_view s)
  {
    zero_parameter_adjoint(s);
    if (options_.capture_reverse) {
      reverse_captured(adjoint, s);
    } else {
      reverse_scheduled(adjoint, s);
    }
  }

  /// After a reverse: its peak tape bytes and, under measure_time, its recomputation's time.
  void finish_reverse()
  {
    stats_.peak_tape_bytes = peak_;
    if (options_.measure_time) { stats_.recompute_ms += recompute_times_.collect_ms(); }
  }

  /// Releases everything a failed forward or reverse held; the schedule can run again.
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
    recompute_times_.clear();
  }

  /// Whether the host tier could not have pinned memory (the owner then plans without it).
  [[nodiscard]] bool host_allocation_failed() const noexcept { return host_ && host_->allocation_failed(); }
  /// The device tier's layers recorded by forward() and not yet reversed.
  [[nodiscard]] tape const& recorded() const noexcept { return tape_; }
  /// dL/dθ of the last reverse (empty before the first, or without parameters).
  [[nodiscard]] device_buffer const& parameter_adjoint() const noexcept { return parameter_adjoint_; }

 private:
  void reverse_scheduled(device_buffer& adjoint, stream_view s)
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
        reverse_one(a.step, tape_reader<record_type>{slot, plan_of(a.step).layout()}, in->data_as<value_type>(),
                    out->data_as<value_type>(), s);
        host_->end_read(a.step, s);
      } else {
        reverse_one(a.step, tape_.top().template reader<record_type>(), in->data_as<value_type>(),
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

  /// The resident tape, reversed by the captured program.
  void reverse_captured(device_buffer& adjoint, stream_view s)
  {
    captured_.run(adjoint, s, options_.poison,
                  [this](std::size_t t, device_buffer const& resident, device_buffer const& adjoint_out,
                         device_buffer& adjoint_in, stream_view ps) {
                    reverse_one(t, tape_reader<record_type>{resident.data_as<record_type>(), plan_of(t).layout()},
                                adjoint_out.data_as<value_type>(), adjoint_in.data_as<value_type>(), ps);
                  });
    stats_.program_launches = captured_.launches();
    stats_.graph_captured = captured_.captured();
    report(chain_phase::reverse, steps_);
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
        poison_state(*spare_, s);
        value_type const* in = cur_->data_as<value_type>();
        value_type* out = spare_->data_as<value_type>();
        if (options_.capture_reverse) {
          device_buffer& resident = captured_.resident(a.step);
          poison(resident, s);
          step_.augmented_forward(a.step, in, out,
                                  tape_writer<record_type>{resident.data_as<record_type>(), plan_of(a.step).layout()}, s);
        } else if (a.kept && a.where == level::host) {
          std::size_t const bytes = plan_of(a.step).records * sizeof(record_type);
          auto* slot = static_cast<record_type*>(host_->begin_write(a.step, bytes, s));
          track_peak();
          if (options_.poison) { host_->fill_slot(a.step, 0xFF, s); }
          step_.augmented_forward(a.step, in, out, tape_writer<record_type>{slot, plan_of(a.step).layout()}, s);
          host_->end_write(a.step, s);
        } else if (tapes_state_) {
          state_as_layer(a.step, s);
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
          checkpoints_[a.step] = pool_.take(working_bytes_, s);
          checkpoint_bytes_ += working_bytes_;
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
          checkpoint_bytes_ -= working_bytes_;
        }
        break;
      case action_kind::reverse: break;  // reverse_scheduled's
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

  /// Step t of a Step that tapes its state, its layer on the device: x_t's working buffer becomes
  /// the layer, the untaped forward writes x_{t+1} into the spare, and the working buffer is
  /// replaced from the pool.
  void state_as_layer(std::size_t t, stream_view s)
  {
    layer const& l = tape_.adopt<record_type>(plan_of(t).records, plan_of(t).tile_records, std::move(*cur_));
    track_peak();
    *cur_ = take_working(s);
    step_.forward(t, l.storage().template data_as<value_type>(), spare_->data_as<value_type>(), s);
  }

  /// Untaped steps from..to-1 on the working state (recomputation), timed under measure_time.
  void advance_untaped(std::size_t from, std::size_t to, stream_view s)
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::recompute");
    recompute_times_.begin(s);
    for (std::size_t t = from; t < to; ++t) {
      poison_state(*spare_, s);
      step_.forward(t, cur_->data_as<value_type>(), spare_->data_as<value_type>(), s);
      std::swap(cur_, spare_);
    }
    recompute_times_.end(s);
    stats_.recompute_steps += to - from;
  }

  /// Step t's reverse from `reader`, adding to the parameter adjoint when the Step has parameters.
  void reverse_one(std::size_t t, tape_reader<record_type> reader, value_type const* adjoint_out,
                   value_type* adjoint_in, stream_view s)
  {
    reverse_step(step_, t, reader, plan_of(t), adjoint_out, adjoint_in, parameter_adjoint_.data_as<value_type>(), s);
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

  /// Allocates the parameter adjoint on the first reverse (on its stream), then zeroes it.
  void zero_parameter_adjoint(stream_view s)
  {
    std::size_t const n = parameter_size_of(step_);
    if (n == 0) { return; }
    if (parameter_adjoint_.size() == 0) { parameter_adjoint_ = device_buffer(options_.kind, n * sizeof(value_type), s); }
    parameter_adjoint_.fill(0, s);  // all-zero bytes are 0.0
  }

  /// Gives every device checkpoint back to the pool (the slots by step stay, empty).
  void release_checkpoints()
  {
    for (device_buffer& c : checkpoints_) {
      if (c.size() > 0) { pool_.give(std::move(c)); }
    }
    checkpoint_bytes_ = 0;
  }

  void track_peak() noexcept
  {
    std::size_t const now = tape_.bytes() + (host_ ? host_->ring_bytes() : 0) + checkpoint_bytes_;
    peak_ = std::max(peak_, now);
  }

  void poison(device_buffer& buffer, stream_view s) const
  {
    if (options_.poison) { buffer.fill(0xFF, s); }
  }

  /// Poisons a working state's values (its zero tail, the last record's padding, stays).
  void poison_state(device_buffer& buffer, stream_view s) const
  {
    if (options_.poison) { buffer.fill(0xFF, 0, state_bytes(), s); }
  }

  /// Whether the Step's record is its input state (and the plan lets the tape adopt it), and the
  /// bytes of every working state buffer: the state's, or whole records of it.
  void set_working_state()
  {
    tapes_state_ = tapes_state_of(step_) && !options_.capture_reverse;
    working_bytes_ = state_bytes();
    if (!tapes_state_) { return; }
    constexpr std::size_t per_record = sizeof(record_type) / sizeof(value_type);
    static_assert(sizeof(record_type) % sizeof(value_type) == 0,
                  "a Step that tapes its state has records of whole values of its state");
    std::size_t const records = (step_.state_size() + per_record - 1) / per_record;
    for (std::size_t t = 0; t < steps_; ++t) {
      TAPEFLOW_EXPECTS(plan_of(t).records == records,
                       "a Step that tapes its state writes ceil(state values / values per record) = " +
                         std::to_string(records) + " records per step; step " + std::to_string(t) + " writes " +
                         std::to_string(plan_of(t).records));
    }
    working_bytes_ = records * sizeof(record_type);
  }

  /// A working state buffer from the pool; a new one's tail past the state (the last record's
  /// padding) zeroed, which no step writes, so every working buffer keeps a zero tail.
  [[nodiscard]] device_buffer take_working(stream_view s)
  {
    std::size_t const before = pool_.allocations();
    device_buffer b = pool_.take(working_bytes_, s);
    if (pool_.allocations() != before) { b.fill(0, state_bytes(), working_bytes_ - state_bytes(), s); }
    return b;
  }

  /// Forward progress: the steps the forward sweep has reached (the reverse's recomputation
  /// reaches none it has not).
  void report_forward(std::size_t reached)
  {
    if (reached <= forward_reported_) { return; }
    forward_reported_ = reached;
    report(chain_phase::forward, reached);
  }

  void report(chain_phase phase, std::size_t done) const
  {
    if (options_.progress) { options_.progress(phase, done, steps_); }
  }

  [[nodiscard]] pipeline_plan const& plan_of(std::size_t t) const noexcept { return step_plan(stats_, t); }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return step_.state_size() * sizeof(value_type); }

  Step const& step_;
  std::size_t steps_;
  chain_options const& options_;
  chain_stats& stats_;
  buffer_pool pool_;  // layers and scratch; declared before the tape, which gives back to it
  tape tape_;
  std::size_t peak_{0};
  // the schedule: its actions, the next one to run, and the host lookahead's cursor
  std::vector<schedule_action> actions_;
  std::size_t next_action_{0};
  std::size_t lookahead_{0};
  std::size_t forward_reported_{0};
  bool reverse_recomputes_{false};  // the schedule runs steps (or restores) after its first reverse
  bool uses_host_{false};           // the schedule keeps a layer or a checkpoint on the host
  bool tapes_state_{false};         // the Step's record is its input state: device layers are adopted
  std::size_t working_bytes_{0};    // bytes of each working state buffer and device checkpoint
  // the working state and its scratch; device checkpoints by step; the host tier
  std::optional<device_buffer> work_;
  std::optional<device_buffer> scratch_;
  device_buffer* cur_{nullptr};    // the working state: work_, scratch_ or (in a forward) the caller's
  device_buffer* spare_{nullptr};  // where the next step writes
  std::vector<device_buffer> checkpoints_;
  std::size_t checkpoint_bytes_{0};
  std::unique_ptr<host_tier> host_;
  captured_reverse captured_;      // capture_reverse: the resident tape and the program reversing it
  device_buffer parameter_adjoint_;  // dL/dθ (Steps with parameters)
  recompute_timer recompute_times_;
};

}  // namespace tapeflow::detail
