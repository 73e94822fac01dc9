// SPDX-License-Identifier: Apache-2.0
// What a chain times (tapeflow/timing.hpp does the timing):
//   measure_steps  its step's costs, before planning: the untaped forward, taped forward and
//                  reverse of one or two steps, each a warm-up and the median of three;
//   measure_time   the wall time of each forward() and reverse(), from a synchronised start to a
//                  synchronised end, and the device time of the untaped steps it recomputes.
#pragma once

#include <tapeflow/chain_options.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/step.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/timing.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

namespace tapeflow::detail {

/// Times step `t` (its layer tiled by `plan`) on `kind`'s default stream: its untaped forward,
/// taped forward and reverse on a state and an adjoint of values in [0.25, 0.75) (not zeros: a
/// kernel can run faster on zeros than on data), each a warm-up then the median of three.
template <class Step>
[[nodiscard]] step_cost measure_step(Step const& step, std::size_t t, pipeline_plan const& plan, backend kind)
{
  using value_type = typename Step::value_type;
  using record_type = typename Step::record_type;
  stream_view const s{};
  std::size_t const bytes = step.state_size() * sizeof(value_type);
  device_buffer in(kind, bytes, s);
  device_buffer out(kind, bytes, s);
  device_buffer adjoint(kind, bytes, s);
  device_buffer adjoint_in(kind, bytes, s);
  device_buffer records(kind, plan.records * sizeof(record_type), s);
  std::vector<value_type> values(bytes / sizeof(value_type));
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = static_cast<value_type>(0.25 + 0.5 * static_cast<double>((k * 2654435761u) % 1024u) / 1024.0);
  }
  in.upload(values.data(), bytes, s);
  adjoint.upload(values.data(), bytes, s);
  synchronize(kind, s);  // `values` is pageable host memory, and goes when this returns
  synchronized_timer const synchronized{kind, s};
  auto const median_of_three = [&](auto&& run) { return median_ms(1, 3, synchronized, run); };
  step_cost c;
  c.forward_ms = median_of_three([&] { step.forward(t, in.data_as<value_type>(), out.data_as<value_type>(), s); });
  c.aug_forward_ms = median_of_three([&] {
    step.augmented_forward(t, in.data_as<value_type>(), out.data_as<value_type>(),
                           tape_writer<record_type>{records.data_as<record_type>(), plan.layout()}, s);
  });
  // A step with parameters adds to a parameter adjoint: a scratch one here, not the chain's.
  device_buffer theta(kind, std::max<std::size_t>(1, parameter_size_of(step)) * sizeof(value_type), s);
  theta.fill(0, s);
  c.reverse_ms = median_of_three([&] {
    reverse_step(step, t, tape_reader<record_type>{records.data_as<record_type>(), plan.layout()}, plan,
                 adjoint.data_as<value_type>(), adjoint_in.data_as<value_type>(), theta.data_as<value_type>(), s);
  });
  c.layer_bytes = plan.records * sizeof(record_type);
  return c;
}

/// The step costs measure_steps plans with, for the chain `planned` describes. Layers of one size:
/// step 0's, timed. Layers of different sizes: the steps with the largest and the smallest layer
/// are timed and every step gets costs linear in its layer's size through those two (a step's
/// time is a part that does not depend on its layer, the state's traffic, and a part in
/// proportion to it).
template <class Step>
[[nodiscard]] std::vector<step_cost> measure_step_costs(Step const& step, chain_stats const& planned, backend kind)
{
  using record_type = typename Step::record_type;
  if (planned.step_plans.empty()) { return {measure_step(step, 0, planned.plan, kind)}; }
  auto const records = [&](std::size_t t) { return step_plan(planned, t).records; };
  std::size_t largest = 0;
  std::size_t smallest = 0;
  for (std::size_t t = 1; t < planned.steps; ++t) {
    if (records(t) > records(largest)) { largest = t; }
    if (records(t) < records(smallest)) { smallest = t; }
  }
  step_cost const big = measure_step(step, largest, step_plan(planned, largest), kind);
  if (records(smallest) == records(largest)) { return {big}; }
  step_cost const little = measure_step(step, smallest, step_plan(planned, smallest), kind);
  double const span = static_cast<double>(big.layer_bytes - little.layer_bytes);
  auto const between = [](double a, double b, double w) { return std::max(0.0, a + (b - a) * w); };
  std::vector<step_cost> costs(planned.steps);
  for (std::size_t t = 0; t < planned.steps; ++t) {
    std::size_t const bytes = records(t) * sizeof(record_type);
    double const w = static_cast<double>(bytes - little.layer_bytes) / span;
    costs[t] = step_cost{between(little.forward_ms, big.forward_ms, w),
                         between(little.aug_forward_ms, big.aug_forward_ms, w),
                         between(little.reverse_ms, big.reverse_ms, w), bytes};
  }
  return costs;
}

/// measure_time's wall time of one forward() or reverse(): the stream synchronised when it is
/// made and when it goes, the time between written to `out_ms` (also when the call throws).
class call_timer {
 public:
  call_timer(bool enabled, backend kind, stream_view s, double& out_ms)
    : enabled_(enabled), kind_(kind), stream_(s), out_ms_(out_ms)
  {
    if (!enabled_) { return; }
    synchronize(kind_, stream_);
    start_ = std::chrono::steady_clock::now();
  }
  ~call_timer()
  {
    if (!enabled_) { return; }
    try {
      synchronize(kind_, stream_);
    } catch (...) {  // the error resurfaces at the caller's next synchronisation
    }
    out_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }
  call_timer(call_timer const&) = delete;
  call_timer& operator=(call_timer const&) = delete;

 private:
  bool enabled_;
  backend kind_;
  stream_view stream_;
  double& out_ms_;
  std::chrono::steady_clock::time_point start_{};
};

/// measure_time's recomputation time: a pair of events around each run of untaped steps, summed
/// after the reverse.
class recompute_timer {
 public:
  recompute_timer(backend kind, bool enabled) noexcept : kind_(kind), enabled_(enabled) {}

  /// Marks the start of a run of untaped steps on `s`.
  void begin(stream_view s)
  {
    if (!enabled_) { return; }
    runs_.emplace_back(event{kind_}, event{kind_});
    runs_.back().first.record(s);
  }
  /// Marks the end of the run begun last.
  void end(stream_view s)
  {
    if (enabled_) { runs_.back().second.record(s); }
  }
  /// Milliseconds of every run since the last clear(); waits for them, then clears.
  [[nodiscard]] double collect_ms()
  {
    double ms = 0;
    for (auto const& [begin, end] : runs_) { ms += static_cast<double>(elapsed_ms(begin, end)); }
    runs_.clear();
    return ms;
  }
  /// Forgets every run (a new forward, or a failed call).
  void clear() noexcept { runs_.clear(); }

 private:
  backend kind_;
  bool enabled_;
  std::vector<std::pair<event, event>> runs_;
};

}  // namespace tapeflow::detail
