// SPDX-License-Identifier: Apache-2.0
// The mixed schedule's optimiser: a dynamic program over (interval of steps, free device units,
// free host units), and the memory unit it counts in. docs/tiers.md ("The mixed schedule") states
// the model, the class and the optimality claim; tests/test_schedule.cpp checks it against an
// exhaustive search and tests/planner/test_reference.py against checkpoint-schedules.
#include "schedule/internal.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

namespace tapeflow::detail::scheduling {

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

namespace {

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

}  // namespace

std::size_t finest_unit(schedule_model const& m) { return m.unit_bytes != 0 ? m.unit_bytes : natural_unit(m); }

std::size_t table_unit(schedule_model const& model)
{
  if (model.unit_bytes != 0) { return model.unit_bytes; }
  constexpr double max_work = 2e8;
  constexpr double max_entries = 4e6;
  std::size_t unit = natural_unit(model);
  for (;;) {
    optimiser probe(model, unit);
    if (probe.smallest() || (probe.work() <= max_work && probe.entries() <= max_entries)) { return unit; }
    if (unit > std::numeric_limits<std::size_t>::max() / 2) { return unit; }  // the coarsest there is
    unit *= 2;
  }
}

std::optional<std::vector<schedule_action>> solved_actions(schedule_model const& model, std::size_t unit)
{
  optimiser dp(model, unit);
  dp.solve();
  if (!(dp.best() < inf)) { return std::nullopt; }
  std::vector<schedule_action> actions;
  dp.emit(actions);
  return actions;
}

}  // namespace tapeflow::detail::scheduling
