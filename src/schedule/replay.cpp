// SPDX-License-Identifier: Apache-2.0
// A schedule checked and costed by replaying it under a model: what evaluate_schedule answers,
// and how every schedule optimal_schedule returns gets its cost, fates and peaks.
#include "schedule/internal.hpp"

#include <tapeflow/error.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

namespace tapeflow {
namespace detail::scheduling {

void check_model(schedule_model const& m)
{
  TAPEFLOW_EXPECTS(!m.steps.empty(), "a schedule needs at least one step");
  TAPEFLOW_EXPECTS(m.state_bytes > 0 && m.state_bytes <= max_plan_bytes,
                   "a schedule needs the state's size, at most 2^56 bytes; got " + std::to_string(m.state_bytes));
  TAPEFLOW_EXPECTS(m.unit_bytes <= max_plan_bytes, "the memory unit is at most 2^56 bytes");
  TAPEFLOW_EXPECTS(m.host_layer_ms.empty() || m.host_layer_ms.size() == m.steps.size(),
                   "host_layer_ms needs one entry per step");
  for (step_cost const& s : m.steps) {
    TAPEFLOW_EXPECTS(s.layer_bytes > 0 && s.layer_bytes <= max_plan_bytes,
                     "every step needs a positive layer size, at most 2^56 bytes");
    TAPEFLOW_EXPECTS(plannable_ms(s.forward_ms) && plannable_ms(s.aug_forward_ms) && plannable_ms(s.reverse_ms),
                     "step costs must be finite, from 0 to 1e12 ms");
  }
  // A copy's cost may be infinite: a level with no bandwidth is never chosen (plan_tiers prices
  // copies so when it measured none). Not a number, or negative, it is a malformed model.
  for (double const ms : m.host_layer_ms) { TAPEFLOW_EXPECTS(ms >= 0, "host_layer_ms must not be negative or NaN"); }
  for (int k = 0; k < 2; ++k) {
    TAPEFLOW_EXPECTS(m.write_ms[k] >= 0 && m.read_ms[k] >= 0, "checkpoint costs must not be negative or NaN");
  }
}

replayed replay(schedule_model const& m, std::vector<schedule_action> const& actions, std::size_t unit)
{
  TAPEFLOW_EXPECTS(unit > 0, "the memory unit must be positive");
  std::size_t const n = m.steps.size();
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::size_t const state_units = units(m.state_bytes, unit);
  std::size_t const budget_units[2] = {m.device_bytes / unit, m.host_bytes / unit};
  std::size_t used_units[2] = {0, 0};
  std::size_t used_bytes[2] = {0, 0};
  std::size_t pos = 0;  // the working state starts at step 0
  std::size_t next = n;  // steps >= next are reversed
  std::map<std::pair<std::size_t, int>, bool> held;
  // per step: -1 no layer, 0 device, 1 host, 2 the working layer
  std::vector<int> layer(n, -1);
  bool working = false;
  replayed r;
  r.fate.assign(n, layer_fate::recompute);
  // An advance over [step, to) costs the difference of two prefix sums and marks its steps in a
  // difference array (+1 at step, -1 at to), summed after the loop: the replay's work grows with
  // the actions, not with the untaped steps they run (with one checkpoint, n^2 / 2 of them).
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t t = 0; t < n; ++t) { prefix[t + 1] = prefix[t] + m.steps[t].forward_ms; }
  std::vector<std::ptrdiff_t> runs(n + 1, 0);
  auto fail = [&](std::size_t at, std::string const& why) {
    TAPEFLOW_FAIL(logic_error, "invalid schedule at action " + std::to_string(at) + " (" + to_string(actions[at]) +
                                 "): " + why);
  };
  auto take = [&](std::size_t at, int k, std::size_t u, std::size_t bytes) {
    if (used_units[k] + u > budget_units[k]) { fail(at, std::string{"exceeds the "} + to_string(level(k)) + " budget"); }
    used_units[k] += u;
    used_bytes[k] += bytes;
    r.peak_device = std::max(r.peak_device, used_bytes[0]);
    r.peak_host = std::max(r.peak_host, used_bytes[1]);
  };
  for (std::size_t at = 0; at < actions.size(); ++at) {
    schedule_action const& a = actions[at];
    int const k = static_cast<int>(a.where);
    if (working && a.kind != action_kind::reverse) { fail(at, "the working layer must be reversed first"); }
    switch (a.kind) {
      case action_kind::advance:
        if (pos != a.step || a.to <= a.step || a.to > n) { fail(at, "the working state is not there"); }
        ++runs[a.step];
        --runs[a.to];
        r.cost += prefix[a.to] - prefix[a.step];
        pos = a.to;
        break;
      case action_kind::taped:
        if (pos != a.step || a.step >= next) { fail(at, "the working state is not there"); }
        if (layer[a.step] != -1) { fail(at, "the step already has a layer"); }
        r.cost += m.steps[a.step].aug_forward_ms;
        if (a.kept) {
          if ((k == 0 && !m.device_layers) || (k == 1 && !m.host_layers)) { fail(at, "layers may not be kept there"); }
          take(at, k, units(m.steps[a.step].layer_bytes, unit), m.steps[a.step].layer_bytes);
          layer[a.step] = k;
          if (k == 1) { r.cost += host_penalty(m, a.step); }
          r.fate[a.step] = k == 0 ? layer_fate::device : layer_fate::host;
        } else {
          if (a.step + 1 != next) { fail(at, "only the next step to reverse may be taped without keeping it"); }
          layer[a.step] = 2;
          working = true;
        }
        pos = a.step + 1;
        break;
      case action_kind::store:
        if (pos != a.step || pos == none) { fail(at, "the working state is not there"); }
        if (!m.checkpoints[k]) { fail(at, "checkpoints may not be stored there"); }
        if (held.count({a.step, k}) != 0) { fail(at, "already held"); }
        take(at, k, state_units, m.state_bytes);
        held[{a.step, k}] = true;
        r.cost += m.write_ms[k];
        ++r.stores[k];
        break;
      case action_kind::restore:
        if (held.count({a.step, k}) == 0) { fail(at, "no such checkpoint"); }
        r.cost += m.read_ms[k];
        pos = a.step;
        break;
      case action_kind::release:
        if (held.erase({a.step, k}) == 0) { fail(at, "no such checkpoint"); }
        used_units[k] -= state_units;
        used_bytes[k] -= m.state_bytes;
        break;
      case action_kind::reverse:
        if (a.step + 1 != next || layer[a.step] == -1) { fail(at, "not the next step to reverse, or it has no layer"); }
        if (layer[a.step] == 0 || layer[a.step] == 1) {
          used_units[layer[a.step]] -= units(m.steps[a.step].layer_bytes, unit);
          used_bytes[layer[a.step]] -= m.steps[a.step].layer_bytes;
        }
        layer[a.step] = -1;
        working = false;
        r.cost += m.steps[a.step].reverse_ms;
        next = a.step;
        break;
    }
  }
  if (next != 0) { TAPEFLOW_FAIL(logic_error, "invalid schedule: step " + std::to_string(next - 1) + " is not reversed"); }
  if (!held.empty()) { TAPEFLOW_FAIL(logic_error, "invalid schedule: a checkpoint is never released"); }
  r.recomputed.assign(n, 0);
  std::ptrdiff_t running = 0;
  for (std::size_t t = 0; t < n; ++t) {
    running += runs[t];
    r.recomputed[t] = static_cast<std::size_t>(running);
  }
  // A step that ran untaped before its layer was taped had its layer rebuilt from a checkpoint
  // (unless the host kept it): recomputed. One that never did was taped in the first sweep and
  // kept on the device until its reverse (the last step: just before it).
  for (std::size_t t = 0; t < n; ++t) {
    if (r.fate[t] == layer_fate::host) { continue; }
    r.fate[t] = r.recomputed[t] > 0 ? layer_fate::recompute : layer_fate::device;
  }
  return r;
}

schedule costed(std::vector<schedule_action> actions, std::size_t unit, schedule_model const& measure)
{
  schedule out;
  out.actions = std::move(actions);
  out.unit_bytes = unit;
  replayed const r = replay(measure, out.actions, unit);
  out.predicted_ms = r.cost;
  out.fate = r.fate;
  out.recomputed = r.recomputed;
  out.peak_device_bytes = r.peak_device;
  out.peak_host_bytes = r.peak_host;
  out.checkpoints[0] = r.stores[0];
  out.checkpoints[1] = r.stores[1];
  return out;
}

}  // namespace detail::scheduling

double evaluate_schedule(schedule_model const& model, std::vector<schedule_action> const& actions,
                         std::size_t unit_bytes)
{
  detail::scheduling::check_model(model);
  return detail::scheduling::replay(model, actions, unit_bytes).cost;
}

}  // namespace tapeflow
