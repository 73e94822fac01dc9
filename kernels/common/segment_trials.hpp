// SPDX-License-Identifier: Apache-2.0
// --segment measure: the segment length of a stencil workload chosen by timing it on this machine
// rather than by the planner's cost model (docs/stencils.md, "Measured"). The model counts states
// moved and cells updated; it knows no caches, and a GPU's weight of an update is not known yet,
// so on some machines and grids its choice loses to a shorter segment or to one step per layer.
// Every segment length gives the same gradient bits, so a trial decides speed only: the workload's
// own gradient, on a short horizon of the real grid, for each candidate length; the fastest runs.
#pragma once

#include "json.hpp"
#include "run_options.hpp"
#include "session.hpp"

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/timing.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace tapeflow::workloads {

/// One segment length timed on this machine.
struct segment_trial {
  int segment{1};          ///< steps per segment; 1: one step per layer (the one-step chain)
  double ms_per_step{0};   ///< the gradient's time over the trial's steps (the slowest rank's)
};

/// What --segment measure found.
struct segment_measurement {
  std::vector<segment_trial> trials;  ///< every candidate, shortest segment first
  int chosen{1};                      ///< the fastest
  std::size_t steps{0};               ///< the trials' horizon (time steps of the longest candidate)
  double wall_ms{0};                  ///< what the trials took, planning and warm-ups included

  /// "1: 19.8 ms/step, 2: 14.1, 3: 15 (a horizon of 4 steps, 1.93 s) -> 2".
  [[nodiscard]] std::string describe() const
  {
    std::string text;
    char item[64];
    for (segment_trial const& t : trials) {
      std::snprintf(item, sizeof item, text.empty() ? "%d: %.3g ms/step" : ", %d: %.3g", t.segment, t.ms_per_step);
      text += item;
    }
    char tail[96];
    std::snprintf(tail, sizeof tail, " (a horizon of %zu steps, %.2f s) -> %d", steps, wall_ms / 1000.0, chosen);
    return text + tail;
  }

  /// For --json and the benchmark rows: the segment chosen, the trials' steps and time, and each
  /// candidate's time per step.
  [[nodiscard]] cli::json_object json() const
  {
    std::vector<cli::json_object> each;
    for (segment_trial const& t : trials) {
      each.emplace_back();
      each.back().add("segment", t.segment).add("ms_per_step", t.ms_per_step);
    }
    cli::json_object j;
    j.add("chosen", chosen).add("steps", steps).add("wall_ms", wall_ms).add("trials", each);
    return j;
  }
};

/// Warm-up and timed gradients a trial runs per candidate: the median of the timed ones is its
/// time. The first gradient of a session allocates its pools and touches its pages.
inline constexpr int segment_trial_warmup = 1;
inline constexpr int segment_trial_repeats = 3;
/// The seed of the trials' random inputs.
inline constexpr std::uint64_t segment_trial_seed = 20261129;

/// The segment lengths --segment measure times for a gradient of `steps` steps whose planner picks
/// `planned` (0 where --segment auto would run one step per layer): one step per layer, 2 to 4,
/// and the planner's choice with its neighbours, each at most `steps` and
/// stencil::max_segment_steps, shortest first.
[[nodiscard]] inline std::vector<int> segment_candidates(int planned, std::size_t steps)
{
  std::size_t const cap = std::min<std::size_t>(steps, static_cast<std::size_t>(stencil::max_segment_steps));
  std::vector<int> k{1, 2, 3, 4};
  if (planned > 0) {
    for (int near : {planned - 1, planned, planned + 1}) { k.push_back(near); }
  }
  std::sort(k.begin(), k.end());
  k.erase(std::unique(k.begin(), k.end()), k.end());
  k.erase(std::remove_if(k.begin(), k.end(), [&](int n) { return n < 1 || static_cast<std::size_t>(n) > cap; }), k.end());
  return k;
}

/// The segment of the fastest trial; of equally fast ones, the shortest (trials shortest first).
/// Throws logic_error for no trials.
[[nodiscard]] inline int fastest_segment(std::vector<segment_trial> const& trials)
{
  TAPEFLOW_EXPECTS(!trials.empty(), "no segment length was timed");
  segment_trial const* best = &trials.front();
  for (segment_trial const& t : trials) {
    if (t.ms_per_step < best->ms_per_step) { best = &t; }
  }
  return best->segment;
}

/// Times the gradient of D's problem `p` under `o` at every candidate segment length
/// (segment_candidates of what --segment auto plans) and returns the trials and the fastest. A
/// candidate runs the horizon (the longest candidate's steps, at most p.steps) cut to whole
/// segments of its own, on the real grid with D's random inputs (a trial's time does not depend
/// on their values): segment_trial_warmup gradients, then the median of segment_trial_repeats,
/// event-timed. A length the device cannot hold (a segment's tile past its
/// on-chip memory) is left out. Over ranks every rank runs every trial (collective), the
/// candidates are those no longer than the planner's choice (a longer one's halo may not fit the
/// thinnest rank's part), and a trial's time is the slowest rank's, so all ranks choose alike.
/// Throws what opening and running D's sessions throws.
template <class D, class T>
[[nodiscard]] segment_measurement measure_segments(typename D::problem const& p, typename D::options const& o)
{
  static_assert(std::is_base_of_v<stencil_options, typename D::options>, "--segment measure is a stencil workload's");
  TAPEFLOW_NVTX_RANGE("tapeflow::segment_trials");  // the trials apart from the run in a profile
  auto const start = std::chrono::steady_clock::now();
  typename D::options base = o;
  base.measure_segment = false;
  base.measure_time = false;  // events time the trials
  base.progress = {};

  typename D::options planner = base;
  planner.segment = 0;
  int planned = 0;
  for (auto const& [name, value] : D::template plan<T>(p, planner).facts) {
    if (name == "segment_steps") { planned = static_cast<int>(value); }
  }
  std::vector<int> candidates;
  for (int k : segment_candidates(planned, p.steps)) {
    if (o.ranks) {
      // A length that does not fit would throw on every rank and leave the communicator broken
      // (distributed::collectively): over ranks the candidates are those no longer than the
      // planner's, which fit, as a shorter segment's tile and halo do wherever a longer one's do.
      if (k <= planned) { candidates.push_back(k); }
      continue;
    }
    typename D::options tried = base;
    tried.segment = k;
    try {
      static_cast<void>(D::template plan<T>(p, tried));
      candidates.push_back(k);
    } catch (logic_error const&) {
      // a segment this device cannot hold: not a candidate
    }
  }
  TAPEFLOW_EXPECTS(!candidates.empty(), "no segment length fits this device");

  segment_measurement m;
  m.steps = static_cast<std::size_t>(candidates.back());
  for (int k : candidates) {
    typename D::problem trial = p;
    trial.steps = m.steps / static_cast<std::size_t>(k) * static_cast<std::size_t>(k);
    typename D::options tried = base;
    tried.segment = k;
    auto const inputs = D::template random_inputs<T>(trial, segment_trial_seed);
    auto const views = views_of(inputs);
    auto session = D::template open<T>(trial, tried);
    event_timer timer(o.kind, o.stream);
    std::vector<double> ms;
    for (int run = 0; run < segment_trial_warmup + segment_trial_repeats; ++run) {
      session->load(views, o.stream);
      double const took = timer([&] {
        session->forward(o.stream);
        session->reverse(o.stream);
      });
      if (run >= segment_trial_warmup) { ms.push_back(took); }
    }
    double per_step = median(std::move(ms)) / static_cast<double>(trial.steps);
    if (o.ranks) { per_step = distributed::max_over_ranks(*o.ranks, per_step); }
    m.trials.push_back({k, per_step});
  }
  m.chosen = fastest_segment(m.trials);
  m.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return m;
}

/// `o` with its segment length settled: where it asks for --segment measure, the measured fastest
/// (measure_segments, reported through `found` when given); otherwise as it is.
template <class D, class T>
[[nodiscard]] typename D::options settle_segment(typename D::problem const& p, typename D::options o,
                                                 segment_measurement* found = nullptr)
{
  if constexpr (std::is_base_of_v<stencil_options, typename D::options>) {
    if (o.measure_segment) {
      segment_measurement const m = measure_segments<D, T>(p, o);
      o.segment = m.chosen;
      o.measure_segment = false;
      if (found != nullptr) { *found = m; }
    }
  } else {
    static_cast<void>(p);
    static_cast<void>(found);
  }
  return o;
}

}  // namespace tapeflow::workloads
