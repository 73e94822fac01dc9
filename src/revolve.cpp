// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/revolve.hpp>

#include <algorithm>
#include <limits>
#include <numeric>

namespace tapeflow {

std::size_t binomial(std::size_t n, std::size_t k) noexcept
{
  constexpr std::size_t saturated = std::numeric_limits<std::size_t>::max();
  if (k > n) { return 0; }
  k = std::min(k, n - k);
  std::size_t result = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    // result * (n - k + i) / i is C(n - k + i, i), exact; the product itself may pass 2^64 where
    // the quotient does not (C(63, 29) fits, 29 times it does not). With g = gcd(result, i),
    // i / g divides the factor (it divides result * factor and shares nothing with result / g),
    // so divide first and guard the smaller product.
    std::size_t const factor = n - k + i;
    std::size_t const g = std::gcd(result, i);
    std::size_t const left = result / g;
    std::size_t const right = factor / (i / g);
    if (left > saturated / right) { return saturated; }
    result = left * right;
  }
  return result;
}

std::size_t revolve_repetitions(std::size_t l, std::size_t s)
{
  TAPEFLOW_EXPECTS(l > 0 && s > 0, "revolve needs at least one step and one snapshot");
  TAPEFLOW_EXPECTS(l <= (std::size_t{1} << 62), "Revolve over " + std::to_string(l) + " steps is past 2^62");
  s = std::min(s, l);  // more snapshots than steps are never used (and s + r must not wrap)
  // The least r with binomial(s + r, s) >= l. The binomial grows with r, and r = l reaches l
  // (binomial(s + l, s) >= s + l): double r until it reaches l, then bisect. r is small unless s
  // is, so this takes a few binomials where bisecting [0, l] took log2(l) (and counting up, l).
  std::size_t hi = 1;
  while (binomial(s + hi, s) < l) { hi = std::min(2 * hi, l); }
  std::size_t lo = hi / 2;  // binomial(s + lo, s) < l, or lo = 0
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

/// A store or a restore: a copy of the state, which the tier planner prices.
bool copies_state(revolve_action const& a) noexcept { return a.op == revolve_op::store || a.op == revolve_op::restore; }

/// The first split of l >= 2 steps with s >= 2 snapshots: the fewest steps m to advance before
/// storing the state, of those that reverse the whole in t(l, s) untaped steps.
///
/// With r = revolve_repetitions(l, s) and beta(s, r) = C(s + r, s) (the most steps s snapshots
/// reverse with r repetitions; 0 for r < 0), a split m costs f(m) = m + t(m, s) + t(l - m, s - 1).
/// Where beta(s, r - 2) <= m <= beta(s, r - 1) and beta(s - 1, r - 1) <= l - m <= beta(s - 1, r),
/// the left part takes r - 1 repetitions and the right r, so f(m) = r l - beta(s + 1, r - 2) -
/// beta(s, r - 1) = r l - beta(s + 1, r - 1) = t(l, s) (Pascal's rule): every such m is optimal,
/// and these ranges meet because beta(s, r - 1) < l <= beta(s, r - 1) + beta(s - 1, r). Below the
/// larger of the two lower bounds f falls by at least 1 per step (the left part's repetitions are
/// at most r - 2 or the right part's at least r + 1), so that bound is the least optimal m.
std::size_t first_split(std::size_t l, std::size_t s)
{
  std::size_t const r = revolve_repetitions(l, s);  // >= 1, as l >= 2
  std::size_t const left = r >= 2 ? binomial(s + r - 2, s) : 0;
  std::size_t const right_most = binomial(s - 1 + r, s - 1);  // may saturate: then l - it is negative
  std::size_t const right = right_most >= l ? 0 : l - right_most;
  return std::max<std::size_t>({1, left, right});
}

/// Builds the schedule without recursion: a chain with many snapshots splits as deep as it has
/// snapshots, past any thread's stack.
class scheduler {
 public:
  explicit scheduler(revolve_visitor const& emit) : emit_(emit) {}

  /// Reverses steps [0, l) with s snapshots, the working state at step 0.
  void run(std::size_t l, std::size_t s)
  {
    std::size_t const first = live_++;
    emit_({revolve_op::store, 0, 0, first});
    todo_.push_back({task::range, 0, l, s, first});
    while (!todo_.empty()) {
      task const t = todo_.back();
      todo_.pop_back();
      if (t.kind == task::release) {
        emit_({revolve_op::release, t.start, t.start, t.slot});
        --live_;
      } else {
        reverse_range(t.start, t.end, t.snapshots, t.slot);
      }
    }
    emit_({revolve_op::release, 0, 0, first});
    --live_;
  }

 private:
  static constexpr std::size_t unknown = static_cast<std::size_t>(-1);

  /// What is left to do, last in first out: reverse [start, end) with `snapshots`, the state at
  /// `start` in `slot`; or release `slot`, which holds the state at `start`.
  struct task {
    enum kind_t { range, release } kind;
    std::size_t start, end, snapshots, slot;
  };

  /// Makes the working state the state at `step`, from the snapshot in `slot` (the state at
  /// `from_step`) unless the working state is already on the way.
  void bring_to(std::size_t step, std::size_t from_step, std::size_t slot)
  {
    bool const usable = where_ != unknown && where_ >= from_step && where_ <= step;
    if (!usable) {
      emit_({revolve_op::restore, from_step, from_step, slot});
      where_ = from_step;
    }
    if (where_ < step) {
      emit_({revolve_op::advance, where_, step, slot});
      where_ = step;
    }
  }

  void tape_and_reverse(std::size_t step, std::size_t from_step, std::size_t slot)
  {
    bring_to(step, from_step, slot);
    emit_({revolve_op::taped, step, step + 1, 0});
    emit_({revolve_op::reverse, step, step + 1, 0});
    where_ = step + 1;  // the taped run moved the working state on
  }

  /// Reverses [start, end) with `s` snapshots, the state at `start` in `slot`: at once for one
  /// step or one snapshot, otherwise by storing the state at the first split and leaving the two
  /// parts, the right one first, to the loop. Snapshots are released in the reverse order of
  /// their stores, so the slots in use are always 0 .. live - 1.
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
    std::size_t const mid = start + first_split(l, s);
    bring_to(mid, start, slot);
    std::size_t const mid_slot = live_++;
    emit_({revolve_op::store, mid, mid, mid_slot});
    todo_.push_back({task::range, start, mid, s, slot});
    todo_.push_back({task::release, mid, mid, 0, mid_slot});
    todo_.push_back({task::range, mid, end, s - 1, mid_slot});
  }

  revolve_visitor const& emit_;
  std::vector<task> todo_;
  std::size_t live_{0};   // snapshot slots in use
  std::size_t where_{0};  // the step the working state is at
};

}  // namespace

void visit_revolve_schedule(std::size_t l, std::size_t s, revolve_visitor const& visit)
{
  TAPEFLOW_EXPECTS(l > 0 && s > 0, "revolve needs at least one step and one snapshot");
  s = std::min(s, l);  // more snapshots than steps are never used
  scheduler{visit}.run(l, s);
}

std::vector<revolve_action> revolve_schedule(std::size_t l, std::size_t s)
{
  std::vector<revolve_action> out;
  visit_revolve_schedule(l, s, [&out](revolve_action const& a) { out.push_back(a); });
  return out;
}

std::size_t revolve_state_copies(std::size_t l, std::size_t s)
{
  std::size_t copies = 0;
  visit_revolve_schedule(l, s, [&copies](revolve_action const& a) {
    copies += copies_state(a) ? 1 : 0;
  });
  return copies;
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
    if (copies_state(a)) { ++copies; }
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
