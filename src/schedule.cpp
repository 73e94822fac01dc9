// SPDX-License-Identifier: Apache-2.0
// The mixed schedule's optimiser: a dynamic program over (interval of steps, free device units,
// free host units). docs/tiers.md ("The mixed schedule") states the model, the class and the
// optimality claim; tests/test_schedule.cpp checks it against an exhaustive search and
// tests/planner/test_reference.py against checkpoint-schedules. On long chains, whose tables
// need a coarse memory unit, four candidates costed exactly compete with it, among them the
// steps in blocks ("Long chains"); the outcomes of the last models planned are kept ("Plans are
// kept").
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <utility>

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

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::size_t units(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit; }

void check_model(schedule_model const& m)
{
  TAPEFLOW_EXPECTS(!m.steps.empty(), "a schedule needs at least one step");
  TAPEFLOW_EXPECTS(m.state_bytes > 0, "a schedule needs the state's size");
  TAPEFLOW_EXPECTS(m.host_layer_ms.empty() || m.host_layer_ms.size() == m.steps.size(),
                   "host_layer_ms needs one entry per step");
  for (step_cost const& s : m.steps) {
    TAPEFLOW_EXPECTS(s.layer_bytes > 0, "every step needs a positive layer size");
    TAPEFLOW_EXPECTS(s.forward_ms >= 0 && s.aug_forward_ms >= 0 && s.reverse_ms >= 0,
                     "step costs must be non-negative");
  }
  for (int k = 0; k < 2; ++k) {
    TAPEFLOW_EXPECTS(m.write_ms[k] >= 0 && m.read_ms[k] >= 0, "checkpoint costs must be non-negative");
  }
}

double host_penalty(schedule_model const& m, std::size_t i) { return m.host_layer_ms.empty() ? 0.0 : m.host_layer_ms[i]; }

/// Every step the same (size, costs, host cost): the tables then depend on an interval's length only.
bool equal_steps(schedule_model const& m)
{
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    step_cost const& s = m.steps[i];
    step_cost const& f = m.steps[0];
    if (s.layer_bytes != f.layer_bytes || s.forward_ms != f.forward_ms || s.aug_forward_ms != f.aug_forward_ms ||
        s.reverse_ms != f.reverse_ms || host_penalty(m, i) != host_penalty(m, 0)) {
      return false;
    }
  }
  return true;
}

/// The dynamic program. C(i, e, d, h): reverse steps [i, e) with the working state at step i
/// (held by nothing else), d device and h host units free. P_k(i, e, d, h): the same with the
/// state at i held in a checkpoint on level k, which d and h do not count.
class optimiser {
 public:
  optimiser(schedule_model const& m, std::size_t unit) : m_(m), n_(m.steps.size())
  {
    uniform_ = equal_steps(m);
    state_ = units(m.state_bytes, unit);
    D_ = m.device_bytes / unit;
    H_ = m.host_bytes / unit;
    layer_.resize(n_);
    prefix_.assign(n_ + 1, 0.0);
    std::size_t need_d = 0;
    std::size_t need_h = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      layer_[i] = units(m.steps[i].layer_bytes, unit);
      prefix_[i + 1] = prefix_[i] + m.steps[i].forward_ms;
      need_d += (m.device_layers ? layer_[i] : 0) + (m.checkpoints[0] ? state_ : 0);
      need_h += (m.host_layers ? layer_[i] : 0) + (m.checkpoints[1] ? state_ : 0);
    }
    // More memory than every checkpoint and layer at once is never used.
    D_ = std::min(D_, need_d);
    H_ = std::min(H_, need_h);
  }

  /// Table entries times the work per entry, to pick the unit.
  [[nodiscard]] double work() const
  {
    double const keys = uniform_ ? double(n_ + 1) : double(n_ + 1) * double(n_ + 2) / 2.0;
    return keys * double(D_ + 1) * double(H_ + 1) * 3.0 * double(n_);
  }
  /// No coarser unit shrinks the tables further.
  [[nodiscard]] bool smallest() const noexcept { return D_ == 0 && H_ == 0; }
  [[nodiscard]] double entries() const
  {
    double const keys = uniform_ ? double(n_ + 1) : double(n_ + 1) * double(n_ + 1);
    return keys * double(D_ + 1) * double(H_ + 1) * 3.0;
  }

  void solve()
  {
    std::size_t const keys = uniform_ ? n_ + 1 : (n_ + 1) * (n_ + 1);
    std::size_t const size = keys * (D_ + 1) * (H_ + 1);
    for (int t = 0; t < 3; ++t) {
      cost_[t].assign(size, inf);
      how_[t].assign(size, 0);
    }
    for (std::size_t len = 1; len <= n_; ++len) {
      std::size_t const last_start = uniform_ ? 0 : n_ - len;
      for (std::size_t i = 0; i <= last_start; ++i) {
        for (std::size_t d = 0; d <= D_; ++d) {
          for (std::size_t h = 0; h <= H_; ++h) { solve_c(i, i + len, d, h); }
        }
        for (int k = 0; k < 2; ++k) {
          if (!m_.checkpoints[k]) { continue; }
          for (std::size_t d = 0; d <= D_; ++d) {
            for (std::size_t h = 0; h <= H_; ++h) { solve_p(k, i, i + len, d, h); }
          }
        }
      }
    }
  }

  [[nodiscard]] double best() const { return at(0, 0, n_, D_, H_); }

  void emit(std::vector<schedule_action>& out) const { emit_c(out, 0, n_, D_, H_); }

 private:
  // how_: bits 0-2 the choice, the rest the split point.
  enum : std::uint32_t { single = 0, keep_device = 1, keep_host = 2, split_device = 3, split_host = 4 };
  enum : std::uint32_t { last_use = 0, again = 1 };

  [[nodiscard]] std::size_t index(std::size_t i, std::size_t e, std::size_t d, std::size_t h) const
  {
    std::size_t const key = uniform_ ? e - i : i * (n_ + 1) + (e - i);
    return (key * (D_ + 1) + d) * (H_ + 1) + h;
  }
  [[nodiscard]] double at(int table, std::size_t i, std::size_t e, std::size_t d, std::size_t h) const
  {
    return cost_[table][index(i, e, d, h)];
  }
  [[nodiscard]] double forward(std::size_t i, std::size_t e) const { return prefix_[e] - prefix_[i]; }

  void solve_c(std::size_t i, std::size_t e, std::size_t d, std::size_t h)
  {
    step_cost const& s = m_.steps[i];
    double best = inf;
    std::uint32_t how = single;
    auto consider = [&](double c, std::uint32_t choice) {
      if (c < best) {
        best = c;
        how = choice;
      }
    };
    if (e == i + 1) {
      best = s.aug_forward_ms + s.reverse_ms;
    } else {
      if (m_.device_layers && layer_[i] <= d) {
        consider(s.aug_forward_ms + at(0, i + 1, e, d - layer_[i], h) + s.reverse_ms, keep_device);
      }
      if (m_.host_layers && layer_[i] <= h) {
        consider(s.aug_forward_ms + host_penalty(m_, i) + at(0, i + 1, e, d, h - layer_[i]) + s.reverse_ms, keep_host);
      }
      for (int k = 0; k < 2; ++k) {
        if (!m_.checkpoints[k] || state_ > (k == 0 ? d : h)) { continue; }
        std::size_t const dd = k == 0 ? d - state_ : d;
        std::size_t const hh = k == 1 ? h - state_ : h;
        for (std::size_t mid = i + 1; mid < e; ++mid) {
          double const c = m_.write_ms[k] + forward(i, mid) + at(0, mid, e, dd, hh) + at(1 + k, i, mid, dd, hh);
          consider(c, static_cast<std::uint32_t>((k == 0 ? split_device : split_host) | (mid - i) << 3));
        }
      }
    }
    cost_[0][index(i, e, d, h)] = best;
    how_[0][index(i, e, d, h)] = how;
  }

  void solve_p(int k, std::size_t i, std::size_t e, std::size_t d, std::size_t h)
  {
    double const read = m_.read_ms[k];
    std::size_t const dd = k == 0 ? d + state_ : d;
    std::size_t const hh = k == 1 ? h + state_ : h;
    // The freed checkpoint may be more memory than the tables hold: more is never needed.
    double best = read + at(0, i, e, std::min(dd, D_), std::min(hh, H_));
    std::uint32_t how = last_use;
    for (std::size_t mid = i + 1; mid < e; ++mid) {
      double const c = read + forward(i, mid) + at(0, mid, e, d, h) + at(1 + k, i, mid, d, h);
      if (c < best) {
        best = c;
        how = static_cast<std::uint32_t>(again | (mid - i) << 3);
      }
    }
    cost_[1 + k][index(i, e, d, h)] = best;
    how_[1 + k][index(i, e, d, h)] = how;
  }

  void emit_c(std::vector<schedule_action>& out, std::size_t i, std::size_t e, std::size_t d, std::size_t h) const
  {
    std::uint32_t const how = how_[0][index(i, e, d, h)];
    std::size_t const mid = i + (how >> 3);
    switch (how & 7u) {
      case single:
        out.push_back({action_kind::taped, i, i + 1, level::device, false});
        out.push_back({action_kind::reverse, i, i, level::device, false});
        return;
      case keep_device:
        out.push_back({action_kind::taped, i, i + 1, level::device, true});
        emit_c(out, i + 1, e, d - layer_[i], h);
        out.push_back({action_kind::reverse, i, i, level::device, false});
        return;
      case keep_host:
        out.push_back({action_kind::taped, i, i + 1, level::host, true});
        emit_c(out, i + 1, e, d, h - layer_[i]);
        out.push_back({action_kind::reverse, i, i, level::host, false});
        return;
      default: {
        int const k = (how & 7u) == split_device ? 0 : 1;
        level const where = k == 0 ? level::device : level::host;
        std::size_t const dd = k == 0 ? d - state_ : d;
        std::size_t const hh = k == 1 ? h - state_ : h;
        out.push_back({action_kind::store, i, i, where, false});
        out.push_back({action_kind::advance, i, mid, where, false});
        emit_c(out, mid, e, dd, hh);
        emit_p(out, k, i, mid, dd, hh);
        return;
      }
    }
  }

  void emit_p(std::vector<schedule_action>& out, int k, std::size_t i, std::size_t e, std::size_t d,
              std::size_t h) const
  {
    level const where = k == 0 ? level::device : level::host;
    std::uint32_t const how = how_[1 + k][index(i, e, d, h)];
    out.push_back({action_kind::restore, i, i, where, false});
    if ((how & 7u) == last_use) {
      out.push_back({action_kind::release, i, i, where, false});
      emit_c(out, i, e, std::min(k == 0 ? d + state_ : d, D_), std::min(k == 1 ? h + state_ : h, H_));
      return;
    }
    std::size_t const mid = i + (how >> 3);
    out.push_back({action_kind::advance, i, mid, where, false});
    emit_c(out, mid, e, d, h);
    emit_p(out, k, i, mid, d, h);
  }

  schedule_model const& m_;
  std::size_t n_;
  bool uniform_{false};
  std::size_t state_{0};
  std::size_t D_{0};
  std::size_t H_{0};
  std::vector<std::size_t> layer_;
  std::vector<double> prefix_;
  std::vector<double> cost_[3];
  std::vector<std::uint32_t> how_[3];
};

/// The largest unit that divides every size the optimiser counts.
std::size_t natural_unit(schedule_model const& m)
{
  std::size_t g = m.state_bytes;
  for (step_cost const& s : m.steps) { g = std::gcd(g, s.layer_bytes); }
  return std::max<std::size_t>(g, 1);
}

struct replayed {
  double cost{0};
  std::vector<layer_fate> fate;
  std::vector<std::size_t> recomputed;
  std::size_t peak_device{0};
  std::size_t peak_host{0};
  std::size_t stores[2]{0, 0};
};

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
  r.recomputed.assign(n, 0);
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
        for (std::size_t t = a.step; t < a.to; ++t) { ++r.recomputed[t]; }
        for (std::size_t t = a.step; t < a.to; ++t) { r.cost += m.steps[t].forward_ms; }
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
  // A step that ran untaped before its layer was taped had its layer rebuilt from a checkpoint
  // (unless the host kept it): recomputed. One that never did was taped in the first sweep and
  // kept on the device until its reverse (the last step: just before it).
  for (std::size_t t = 0; t < n; ++t) {
    if (r.fate[t] == layer_fate::host) { continue; }
    r.fate[t] = r.recomputed[t] > 0 ? layer_fate::recompute : layer_fate::device;
  }
  return r;
}

/// The finest unit a model's schedules are judged in: its own, or its natural unit.
std::size_t finest_unit(schedule_model const& m) { return m.unit_bytes != 0 ? m.unit_bytes : natural_unit(m); }

/// The unit the optimiser counts in: the model's, or the natural unit coarsened until the tables
/// are small enough to solve in well under a second.
std::size_t table_unit(schedule_model const& model)
{
  if (model.unit_bytes != 0) { return model.unit_bytes; }
  constexpr double max_work = 2e8;
  constexpr double max_entries = 4e6;
  std::size_t unit = natural_unit(model);
  for (;;) {
    optimiser probe(model, unit);
    if (probe.smallest() || (probe.work() <= max_work && probe.entries() <= max_entries)) { return unit; }
    unit *= 2;
  }
}

/// A schedule of `actions`, its cost and fates from a replay under `measure` (the model whose
/// memory, counted in `unit`, and costs it is judged by).
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

/// The optimiser's actions for `model` in `unit`. Empty when nothing fits.
std::optional<std::vector<schedule_action>> solved_actions(schedule_model const& model, std::size_t unit)
{
  optimiser dp(model, unit);
  dp.solve();
  if (!(dp.best() < inf)) { return std::nullopt; }
  std::vector<schedule_action> actions;
  dp.emit(actions);
  return actions;
}

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

/// A chain's steps grouped into blocks of consecutive steps, about equal in bytes: block b is the
/// steps [first[b], first[b + 1]).
struct blocks {
  std::vector<std::size_t> first;
  schedule_model model;  ///< one step per block
};

/// `m` in about `count` blocks: a block's costs and layer are its steps' sums, so a schedule of the
/// blocks, each block's steps run in order where it runs the block (`unblocked`), costs under `m`
/// exactly what it costs under the blocks' model. A block that is the working layer keeps its
/// steps but the last on the device until their reverse, so the blocks' device budget is `m`'s
/// less the most any block keeps that way. Empty when that leaves nothing.
std::optional<blocks> in_blocks(schedule_model const& m, std::size_t count)
{
  std::size_t const n = m.steps.size();
  double total = 0;
  for (step_cost const& s : m.steps) { total += static_cast<double>(s.layer_bytes); }
  blocks b;
  b.first.push_back(0);
  double done = 0;  // bytes of the steps before t
  for (std::size_t t = 0; t < n; ++t) {
    if (t > b.first.back() && done >= total * static_cast<double>(b.first.size()) / static_cast<double>(count)) {
      b.first.push_back(t);
    }
    done += static_cast<double>(m.steps[t].layer_bytes);
  }
  b.first.push_back(n);

  b.model = m;
  b.model.steps.clear();
  b.model.host_layer_ms.clear();
  std::size_t reserve = 0;
  for (std::size_t k = 0; k + 1 < b.first.size(); ++k) {
    step_cost sum;
    double host = 0;
    for (std::size_t t = b.first[k]; t < b.first[k + 1]; ++t) {
      step_cost const& s = m.steps[t];
      sum.forward_ms += s.forward_ms;
      sum.aug_forward_ms += s.aug_forward_ms;
      sum.reverse_ms += s.reverse_ms;
      sum.layer_bytes += s.layer_bytes;
      host += host_penalty(m, t);
    }
    reserve = std::max(reserve, sum.layer_bytes - m.steps[b.first[k + 1] - 1].layer_bytes);
    b.model.steps.push_back(sum);
    if (!m.host_layer_ms.empty()) { b.model.host_layer_ms.push_back(host); }
  }
  if (reserve > 0 && (!m.device_layers || reserve > m.device_bytes)) { return std::nullopt; }
  b.model.device_bytes -= reserve;
  return b;
}

/// A schedule of `b`'s blocks as one of their steps: a block advanced, taped or reversed is its
/// steps advanced, taped in order or reversed last first; a block taped as the working layer
/// keeps its steps but the last on the device; a checkpoint of a block is one of its first step.
std::vector<schedule_action> unblocked(blocks const& b, std::vector<schedule_action> const& coarse)
{
  std::vector<schedule_action> out;
  std::vector<level> where(b.first.back(), level::device);
  for (schedule_action const& a : coarse) {
    std::size_t const first = b.first[a.step];
    std::size_t const end = b.first[a.step + 1];
    switch (a.kind) {
      case action_kind::advance: out.push_back({action_kind::advance, first, b.first[a.to], a.where, false}); break;
      case action_kind::taped:
        for (std::size_t t = first; t < end; ++t) {
          bool const last = t + 1 == end;
          where[t] = a.kept || last ? a.where : level::device;
          out.push_back({action_kind::taped, t, 0, where[t], a.kept || !last});
        }
        break;
      case action_kind::reverse:
        for (std::size_t t = end; t-- > first;) { out.push_back({action_kind::reverse, t, 0, where[t], false}); }
        break;
      case action_kind::store:
      case action_kind::restore:
      case action_kind::release: out.push_back({a.kind, first, 0, a.where, false}); break;
    }
  }
  return out;
}

// A field added to step_cost or schedule_model must join same_step or same_model (the cache's
// key): these sizes are the fields the two compare (on the LP64 targets tapeflow builds for).
static_assert(sizeof(void*) != 8 || sizeof(step_cost) == 32, "a new field of step_cost must join same_step");
static_assert(sizeof(void*) != 8 || sizeof(schedule_model) == 120, "a new field of schedule_model must join same_model");

bool same_step(step_cost const& a, step_cost const& b) noexcept
{
  return a.forward_ms == b.forward_ms && a.aug_forward_ms == b.aug_forward_ms && a.reverse_ms == b.reverse_ms &&
         a.layer_bytes == b.layer_bytes;
}

/// Every field the optimiser reads, equal.
bool same_model(schedule_model const& a, schedule_model const& b) noexcept
{
  return a.state_bytes == b.state_bytes && a.device_bytes == b.device_bytes && a.host_bytes == b.host_bytes &&
         a.write_ms[0] == b.write_ms[0] && a.write_ms[1] == b.write_ms[1] && a.read_ms[0] == b.read_ms[0] &&
         a.read_ms[1] == b.read_ms[1] && a.host_layer_ms == b.host_layer_ms && a.device_layers == b.device_layers &&
         a.host_layers == b.host_layers && a.checkpoints[0] == b.checkpoints[0] &&
         a.checkpoints[1] == b.checkpoints[1] && a.unit_bytes == b.unit_bytes &&
         std::equal(a.steps.begin(), a.steps.end(), b.steps.begin(), b.steps.end(), same_step);
}

/// The last few models planned in this process and their schedules (empty: none fits). The
/// optimiser is a pure function of the model, so a chain built again for the same problem — a
/// workload's one-shot gradient() in a training loop — gets its schedule without solving again.
class schedule_cache {
 public:
  static schedule_cache& instance()
  {
    static schedule_cache cache;
    return cache;
  }

  /// The cached outcome for `model`, if any (moved to the front).
  std::optional<std::optional<schedule>> find(schedule_model const& model)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (same_model(it->first, model)) {
        entries_.splice(entries_.begin(), entries_, it);
        ++stats_.hits;
        return entries_.front().second;
      }
    }
    ++stats_.misses;
    return std::nullopt;
  }

  void put(schedule_model const& model, std::optional<schedule> const& outcome)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace_front(model, outcome);
    if (entries_.size() > capacity) { entries_.pop_back(); }
  }

  schedule_cache_stats stats()
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  static constexpr std::size_t capacity = 8;
  std::mutex mutex_;
  std::list<std::pair<schedule_model, std::optional<schedule>>> entries_;  // most recent first
  schedule_cache_stats stats_{};
};

/// The optimiser's outcome for a checked model.
std::optional<schedule> plan_schedule(schedule_model const& model)
{
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
  // Revolve with as many device checkpoints as the budget holds, counted exactly.
  std::size_t const snapshots = std::min(model.device_bytes / (units(model.state_bytes, exact) * exact), n);
  if (model.checkpoints[0] && snapshots > 0) { consider(costed(revolve_actions(n, snapshots), exact, model)); }
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

schedule_cache_stats schedule_cache_counts() { return schedule_cache::instance().stats(); }

schedule optimal_schedule(schedule_model const& model)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::optimal_schedule");
  check_model(model);
  std::optional<std::optional<schedule>> cached = schedule_cache::instance().find(model);
  std::optional<schedule> const best = cached ? std::move(*cached) : plan_schedule(model);
  if (!cached) { schedule_cache::instance().put(model, best); }
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

std::vector<schedule_action> revolve_actions(std::size_t steps, std::size_t snapshots)
{
  std::vector<schedule_action> actions;
  constexpr std::size_t empty = static_cast<std::size_t>(-1);
  std::vector<std::size_t> held(snapshots, empty);
  std::vector<bool> stored(steps, false);
  auto release = [&](std::size_t slot) {
    actions.push_back({action_kind::release, held[slot], 0, level::device, false});
    stored[held[slot]] = false;
    held[slot] = empty;
  };
  for (revolve_action const& r : revolve_schedule(steps, snapshots)) {
    switch (r.op) {
      case revolve_op::store:
        if (held[r.slot] != empty) { release(r.slot); }
        TAPEFLOW_EXPECTS(!stored[r.from], "Revolve stored the state at step " + std::to_string(r.from) + " twice");
        held[r.slot] = r.from;
        stored[r.from] = true;
        actions.push_back({action_kind::store, r.from, 0, level::device, false});
        break;
      case revolve_op::restore:
        TAPEFLOW_EXPECTS(held[r.slot] == r.from, "Revolve restored a slot that does not hold step " + std::to_string(r.from));
        actions.push_back({action_kind::restore, r.from, 0, level::device, false});
        break;
      case revolve_op::release:
        if (held[r.slot] != empty) { release(r.slot); }
        break;
      case revolve_op::advance: actions.push_back({action_kind::advance, r.from, r.to, level::device, false}); break;
      case revolve_op::taped: actions.push_back({action_kind::taped, r.from, 0, level::device, false}); break;
      case revolve_op::reverse: actions.push_back({action_kind::reverse, r.from, 0, level::device, false}); break;
    }
  }
  for (std::size_t slot = 0; slot < held.size(); ++slot) {
    if (held[slot] != empty) { release(slot); }
  }
  return actions;
}

double evaluate_schedule(schedule_model const& model, std::vector<schedule_action> const& actions,
                         std::size_t unit_bytes)
{
  check_model(model);
  return replay(model, actions, unit_bytes).cost;
}

}  // namespace tapeflow
