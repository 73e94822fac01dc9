// SPDX-License-Identifier: Apache-2.0
// Schedules written out directly rather than optimised: every layer kept (a tier split, and a
// long chain's candidate), Revolve's; and the text of an action.
#include <tapeflow/error.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/schedule.hpp>

#include <algorithm>
#include <string>

namespace tapeflow {

char const* to_string(level l) noexcept { return l == level::device ? "device" : "host"; }

std::string to_string(schedule_action const& a)
{
  std::string const s = std::to_string(a.step);
  switch (a.kind) {
    case action_kind::advance: return "advance " + s + " -> " + std::to_string(a.to);
    case action_kind::taped: return "taped " + s + (a.kept ? std::string{" keep on "} + to_string(a.where) : "");
    case action_kind::store: return "store " + s + " on " + to_string(a.where);
    case action_kind::restore: return "restore " + s + " from " + to_string(a.where);
    case action_kind::release: return "release " + s + " on " + to_string(a.where);
    case action_kind::reverse: return "reverse " + s;
  }
  return "?";
}

std::vector<schedule_action> kept_actions(std::vector<level> const& where, bool last_working)
{
  std::size_t const n = where.size();
  std::vector<schedule_action> actions;
  for (std::size_t t = 0; t < n; ++t) {
    bool const kept = !(last_working && t + 1 == n);
    actions.push_back({action_kind::taped, t, 0, where[t], kept});
  }
  for (std::size_t t = n; t-- > 0;) { actions.push_back({action_kind::reverse, t, 0, where[t], false}); }
  return actions;
}

std::vector<schedule_action> revolve_actions(std::size_t steps, std::size_t snapshots, level where)
{
  snapshots = std::min(snapshots, steps);  // as revolve_schedule: more than steps are never used
  std::vector<schedule_action> actions;
  constexpr std::size_t empty = static_cast<std::size_t>(-1);
  std::vector<std::size_t> held(snapshots, empty);
  std::vector<bool> stored(steps, false);
  auto release = [&](std::size_t slot) {
    actions.push_back({action_kind::release, held[slot], 0, where, false});
    stored[held[slot]] = false;
    held[slot] = empty;
  };
  // The checkpoints live on `where`; the working state and layer are the device's, as always.
  visit_revolve_schedule(steps, snapshots, [&](revolve_action const& r) {
    switch (r.op) {
      case revolve_op::store:
        if (held[r.slot] != empty) { release(r.slot); }
        TAPEFLOW_EXPECTS(!stored[r.from], "Revolve stored the state at step " + std::to_string(r.from) + " twice");
        held[r.slot] = r.from;
        stored[r.from] = true;
        actions.push_back({action_kind::store, r.from, 0, where, false});
        break;
      case revolve_op::restore:
        TAPEFLOW_EXPECTS(held[r.slot] == r.from, "Revolve restored a slot that does not hold step " + std::to_string(r.from));
        actions.push_back({action_kind::restore, r.from, 0, where, false});
        break;
      case revolve_op::release:
        if (held[r.slot] != empty) { release(r.slot); }
        break;
      case revolve_op::advance: actions.push_back({action_kind::advance, r.from, r.to, level::device, false}); break;
      case revolve_op::taped: actions.push_back({action_kind::taped, r.from, 0, level::device, false}); break;
      case revolve_op::reverse: actions.push_back({action_kind::reverse, r.from, 0, level::device, false}); break;
    }
  });
  for (std::size_t slot = 0; slot < held.size(); ++slot) {
    if (held[slot] != empty) { release(slot); }
  }
  return actions;
}

}  // namespace tapeflow
