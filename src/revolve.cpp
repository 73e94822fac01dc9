// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/revolve.hpp>

#include <algorithm>
#include <limits>

namespace tapeflow {

std::size_t binomial(std::size_t n, std::size_t k) noexcept
{
  constexpr std::size_t saturated = std::numeric_limits<std::size_t>::max();
  if (k > n) { return 0; }
  k = std::min(k, n - k);
  std::size_t result = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    // result * (n - k + i) / i is exact at every step; guard the multiplication.
    std::size_t const factor = n - k + i;
    if (result > saturated / factor) { return saturated; }
    result = result * factor / i;
  }
  return result;
}

std::size_t revolve_repetitions(std::size_t l, std::size_t s)
{
  TAPEFLOW_EXPECTS(l > 0 && s > 0, "revolve needs at least one step and one snapshot");
  TAPEFLOW_EXPECTS(l <= (std::size_t{1} << 62), "Revolve over " + std::to_string(l) + " steps is past 2^62");
  s = std::min(s, l);  // more snapshots than steps are never used (and s + r must not wrap)
  // The least r with binomial(s + r, s) >= l: the binomial grows with r, and r = l reaches l
  // (binomial(s + l, s) >= s + l), so a bisection; counting r up took l steps when s was 1.
  std::size_t lo = 0;
  std::size_t hi = l;
  while (lo < hi) {
    std::size_t const mid = lo + (hi - lo) / 2;
    if (binomial(s + mid, s) >= l) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

std::size_t revolve_forward_steps(std::size_t l, std::size_t s)
{
  std::size_t const r = revolve_repetitions(l, s);
  s = std::min(s, l);
  TAPEFLOW_EXPECTS(r <= static_cast<std::size_t>(-1) / l,
                   "Revolve over " + std::to_string(l) + " steps with " + std::to_string(s) + " snapshots overflows");
  return r * l - binomial(s + r, s + 1);
}

namespace {

struct scheduler {
  std::vector<revolve_action>& out;
  std::vector<bool> live;   // snapshot slots in use
  std::size_t where;        // the step the working state is at
  static constexpr std::size_t unknown = static_cast<std::size_t>(-1);

  std::size_t take_slot()
  {
    auto it = std::find(live.begin(), live.end(), false);
    std::size_t const slot = static_cast<std::size_t>(it - live.begin());
    *it = true;
    return slot;
  }

  /// Makes the working state the state at `step`, from the snapshot in `slot` (the state at
  /// `from_step`) unless the working state is already on the way.
  void bring_to(std::size_t step, std::size_t from_step, std::size_t slot)
  {
    bool const usable = where != unknown && where >= from_step && where <= step;
    if (!usable) {
      out.push_back({revolve_op::restore, from_step, from_step, slot});
      where = from_step;
    }
    if (where < step) {
      out.push_back({revolve_op::advance, where, step, slot});
      where = step;
    }
  }

  void tape_and_reverse(std::size_t step, std::size_t from_step, std::size_t slot)
  {
    bring_to(step, from_step, slot);
    out.push_back({revolve_op::taped, step, step + 1, 0});
    out.push_back({revolve_op::reverse, step, step + 1, 0});
    where = step + 1;  // the taped run moved the working state on
  }

  /// Reverses steps [start, end) with `s` snapshots, the state at `start` being in `slot`.
  void reverse_range(std::size_t start, std::size_t end, std::size_t s, std::size_t slot)
  {
    std::size_t const l = end - start;
    if (l == 1) {
      tape_and_reverse(start, start, slot);
      return;
    }
    if (s == 1) {
      for (std::size_t t = end; t-- > start;) { tape_and_reverse(t, start, slot); }
      return;
    }
    // The cost of a first split after m steps, f(m) = m + t(m, s) + t(l - m, s - 1), is convex in
    // m: take the smallest m whose successor is no cheaper.
    auto const cost = [s](std::size_t total, std::size_t m) {
      return m + revolve_forward_steps(m, s) + revolve_forward_steps(total - m, s - 1);
    };
    std::size_t lo = 1;
    std::size_t hi = l - 1;
    while (lo < hi) {
      std::size_t const m = lo + (hi - lo) / 2;
      if (cost(l, m + 1) >= cost(l, m)) {
        hi = m;
      } else {
        lo = m + 1;
      }
    }
    std::size_t const m = lo;
    std::size_t const mid = start + m;
    bring_to(mid, start, slot);
    std::size_t const mid_slot = take_slot();
    out.push_back({revolve_op::store, mid, mid, mid_slot});
    reverse_range(mid, end, s - 1, mid_slot);
    out.push_back({revolve_op::release, mid, mid, mid_slot});
    live[mid_slot] = false;
    reverse_range(start, mid, s, slot);
  }
};

}  // namespace

std::vector<revolve_action> revolve_schedule(std::size_t l, std::size_t s)
{
  TAPEFLOW_EXPECTS(l > 0 && s > 0, "revolve needs at least one step and one snapshot");
  s = std::min(s, l);  // more snapshots than steps are never used
  std::vector<revolve_action> out;
  scheduler sched{out, std::vector<bool>(s, false), 0};
  std::size_t const first = sched.take_slot();
  out.push_back({revolve_op::store, 0, 0, first});
  sched.reverse_range(0, l, s, first);
  out.push_back({revolve_op::release, 0, 0, first});
  return out;
}

std::size_t count_forward_steps(std::vector<revolve_action> const& schedule) noexcept
{
  std::size_t steps = 0;
  for (revolve_action const& a : schedule) {
    if (a.op == revolve_op::advance) { steps += a.to - a.from; }
  }
  return steps;
}

std::size_t count_state_copies(std::vector<revolve_action> const& schedule) noexcept
{
  std::size_t copies = 0;
  for (revolve_action const& a : schedule) {
    if (a.op == revolve_op::store || a.op == revolve_op::restore) { ++copies; }
  }
  return copies;
}

std::string to_string(revolve_action const& a)
{
  switch (a.op) {
    case revolve_op::store: return "store " + std::to_string(a.from) + " -> slot " + std::to_string(a.slot);
    case revolve_op::restore: return "restore slot " + std::to_string(a.slot) + " (" + std::to_string(a.from) + ")";
    case revolve_op::advance: return "advance " + std::to_string(a.from) + " -> " + std::to_string(a.to);
    case revolve_op::taped: return "taped " + std::to_string(a.from);
    case revolve_op::reverse: return "reverse " + std::to_string(a.from);
    case revolve_op::release: return "release slot " + std::to_string(a.slot);
  }
  return "?";
}

}  // namespace tapeflow
