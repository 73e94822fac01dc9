// SPDX-License-Identifier: Apache-2.0
// optimal_schedule: a model's kept outcome, or the optimiser's schedule; on long chains, whose
// tables need a coarse memory unit, the cheapest of it and five candidates costed exactly, among
// them the steps in blocks (docs/tiers.md, "Long chains").
#include "schedule/internal.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace tapeflow {
namespace detail::scheduling {
namespace {

/// The optimiser's schedule for `model` in `unit`, costed under `measure`. Empty when nothing fits.
std::optional<schedule> solve(schedule_model const& model, std::size_t unit, schedule_model const& measure)
{
  std::optional<std::vector<schedule_action>> actions = solved_actions(model, unit);
  if (!actions) { return std::nullopt; }
  return costed(std::move(*actions), unit, measure);
}

/// Every layer kept, none recomputed: the layers whose host copies cost the most per byte on the
/// device while they fit, the others on the host, the last one the working layer. Empty when the
/// budgets do not hold them (counted in `unit`).
std::optional<std::vector<schedule_action>> kept_split(schedule_model const& m, std::size_t unit)
{
  std::size_t const n = m.steps.size();
  std::vector<std::size_t> order(n - 1);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return host_penalty(m, a) / double(m.steps[a].layer_bytes) > host_penalty(m, b) / double(m.steps[b].layer_bytes);
  });
  std::size_t free[2] = {m.device_layers ? m.device_bytes / unit : 0, m.host_layers ? m.host_bytes / unit : 0};
  std::vector<level> where(n, level::device);
  for (std::size_t t : order) {
    std::size_t const u = units(m.steps[t].layer_bytes, unit);
    int const k = u <= free[0] ? 0 : 1;
    if (u > free[k]) { return std::nullopt; }
    free[k] -= u;
    where[t] = static_cast<level>(k);
  }
  return kept_actions(where, true);
}

/// Every step as large and as costly as the largest and costliest. Its steps are equal, so its
/// tables depend on an interval's length only and stay small in a fine unit; its schedules are
/// valid for `m` (no layer of `m` is larger) and cost no more under `m` than under it.
schedule_model equalised(schedule_model const& m)
{
  step_cost most;
  double host = 0;
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    step_cost const& s = m.steps[i];
    most.forward_ms = std::max(most.forward_ms, s.forward_ms);
    most.aug_forward_ms = std::max(most.aug_forward_ms, s.aug_forward_ms);
    most.reverse_ms = std::max(most.reverse_ms, s.reverse_ms);
    most.layer_bytes = std::max(most.layer_bytes, s.layer_bytes);
    host = std::max(host, host_penalty(m, i));
  }
  schedule_model e = m;
  e.steps.assign(m.steps.size(), most);
  if (!m.host_layer_ms.empty()) { e.host_layer_ms.assign(m.steps.size(), host); }
  return e;
}

/// `m` with each budget at most what every layer and checkpoint on that level at once hold (the
/// sum saturating): more is never used, and budgets near 2^64 ("unlimited") kept the tables from
/// shrinking as the unit coarsened, until the unit wrapped to 0.
schedule_model within_need(schedule_model const& m)
{
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  auto add = [](std::size_t a, std::size_t b) { return a > most - b ? most : a + b; };
  std::size_t need[2] = {0, 0};
  for (step_cost const& s : m.steps) {
    need[0] = add(add(need[0], m.device_layers ? s.layer_bytes : 0), m.checkpoints[0] ? m.state_bytes : 0);
    need[1] = add(add(need[1], m.host_layers ? s.layer_bytes : 0), m.checkpoints[1] ? m.state_bytes : 0);
  }
  schedule_model out = m;
  out.device_bytes = std::min(m.device_bytes, need[0]);
  out.host_bytes = std::min(m.host_bytes, need[1]);
  return out;
}

/// The optimiser's outcome for a checked model.
std::optional<schedule> plan_schedule(schedule_model const& given)
{
  schedule_model const model = within_need(given);
  // Sizes as the schedules are judged: in the model's unit, or exactly.
  std::size_t const exact = finest_unit(model);
  std::optional<schedule> best;
  std::size_t const n = model.steps.size();
  if (n <= max_schedule_steps(equal_steps(model))) {
    std::size_t const unit = table_unit(model);
    best = solve(model, unit, model);
    if (unit == exact) { return best; }
  }
  // The unit was coarsened, or the chain is too long for the tables at all: every checkpoint and
  // every layer costs at least one unit, which on a long chain can be far more than it holds
  // (300 unequal steps: two units in the budget; 4000 equal ones: three). More candidates, each
  // costed under the true sizes and costs; the cheapest is kept.
  auto consider = [&](std::optional<schedule> alternative) {
    if (alternative && (!best || alternative->predicted_ms < best->predicted_ms)) { best = std::move(alternative); }
  };
  // Unequal steps planned as equal steps as large and costly as the largest: a fine unit again.
  if (!equal_steps(model) && n <= max_schedule_steps(true)) {
    schedule_model const e = equalised(model);
    consider(solve(e, table_unit(e), model));
  }
  // Revolve with as many checkpoints as the budget holds, counted exactly: on the device, and on
  // the host (the only choice when the device holds no checkpoint beyond the working layer).
  for (level const where : {level::device, level::host}) {
    int const k = static_cast<int>(where);
    std::size_t const budget = k == 0 ? model.device_bytes : model.host_bytes;
    std::size_t const snapshots = std::min(budget / (units(model.state_bytes, exact) * exact), n);
    if (model.checkpoints[k] && snapshots > 0) { consider(costed(revolve_actions(n, snapshots, where), exact, model)); }
  }
  // Every layer kept, on the device while it holds them and on the host after, counted exactly.
  if (std::optional<std::vector<schedule_action>> split = kept_split(model, exact)) {
    consider(costed(std::move(*split), exact, model));
  }
  // The steps in blocks of about equal bytes, their number halved in turn: fewer steps, so
  // tables in a finer unit, but coarser choices (a block is kept, recomputed or reversed whole,
  // and a larger working block holds more). Stop when halving no longer pays, when the unit is
  // already the blocks' finest, or when the blocks no longer fit.
  double previous = inf;
  for (std::size_t count = n / 2; count >= 2; count /= 2) {
    std::optional<blocks> const b = in_blocks(model, count);
    if (!b) { break; }
    if (b->model.steps.size() > max_schedule_steps(equal_steps(b->model))) { continue; }
    std::size_t const block_unit = table_unit(b->model);
    std::optional<std::vector<schedule_action>> const coarse = solved_actions(b->model, block_unit);
    if (!coarse) { break; }
    schedule s = costed(unblocked(*b, *coarse), exact, model);
    bool const better = s.predicted_ms < previous;
    previous = s.predicted_ms;
    consider(std::move(s));
    if (!better || block_unit == finest_unit(b->model)) { break; }
  }
  return best;
}

}  // namespace
}  // namespace detail::scheduling

schedule optimal_schedule(schedule_model const& model)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::optimal_schedule");
  detail::scheduling::check_model(model);
  std::optional<std::optional<schedule>> cached = detail::scheduling::cached_outcome(model);
  std::optional<schedule> const best = cached ? std::move(*cached) : detail::scheduling::plan_schedule(model);
  if (!cached) { detail::scheduling::keep_outcome(model, best); }
  if (!best) {
    TAPEFLOW_FAIL_BYTES(budget_error,
                        "no schedule fits: " + std::to_string(model.steps.size()) + " steps, state " +
                          std::to_string(model.state_bytes) + " bytes, device " + std::to_string(model.device_bytes) +
                          " and host " + std::to_string(model.host_bytes) + " bytes free for checkpoints and layers",
                        model.state_bytes);
  }
  return *best;
}

std::size_t max_schedule_steps(bool equal_steps) noexcept { return equal_steps ? 4000 : 400; }

}  // namespace tapeflow
