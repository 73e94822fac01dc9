// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/schedule.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

namespace tapeflow {
namespace {

TEST(Revolve, BinomialAndRepetitions)
{
  EXPECT_EQ(binomial(10, 3), 120u);
  EXPECT_EQ(binomial(5, 0), 1u);
  EXPECT_EQ(binomial(3, 5), 0u);
  EXPECT_EQ(binomial(200, 100), static_cast<std::size_t>(-1));  // saturates
  // Results that fit though a product on the way does not (29 * C(62, 28) > 2^64): exact.
  EXPECT_EQ(binomial(63, 29), 759510004936100355u);
  EXPECT_EQ(binomial(66, 33), 7219428434016265740u);
  EXPECT_EQ(binomial(67, 33), 14226520737620288370u);  // the largest C(n, n / 2) below 2^64
  EXPECT_EQ(binomial(68, 34), static_cast<std::size_t>(-1));  // 2.8e19: saturates
  // Near the top of Revolve's range: C(17 + 74, 17) < 2^60 - 1 <= C(17 + 75, 17) (Python's
  // math.comb), and t(l, s) as the closed form gives it.
  EXPECT_EQ(revolve_repetitions((std::size_t{1} << 60) - 1, 17), 75u);
  EXPECT_EQ(revolve_forward_steps(220345353082529671u, 16), 15376800470868236100u);
  EXPECT_EQ(revolve_repetitions(10, 1), 9u);
  EXPECT_EQ(revolve_repetitions(1, 1), 0u);
  EXPECT_THROW(static_cast<void>(revolve_repetitions(0, 3)), logic_error);
  EXPECT_THROW(static_cast<void>(revolve_forward_steps(5, 0)), logic_error);
}

TEST(Revolve, HugeArgumentsAnswerAtOnce)
{
  // More snapshots than steps are never used: SIZE_MAX of them answer as l do (C(s + r, s) wrapped
  // to 0 and the search for r never ended). A long chain's r is found by bisection, not l trials.
  std::size_t const all = static_cast<std::size_t>(-1);
  EXPECT_EQ(revolve_repetitions(10, all), revolve_repetitions(10, 10));
  EXPECT_EQ(revolve_forward_steps(10, all), revolve_forward_steps(10, 10));
  EXPECT_EQ(revolve_forward_steps(10, 10), 9u);
  EXPECT_EQ(revolve_schedule(10, all).size(), revolve_schedule(10, 10).size());
  EXPECT_EQ(revolve_actions(10, all).size(), revolve_actions(10, 10).size());
  EXPECT_EQ(revolve_repetitions(std::size_t{1} << 36, 1), (std::size_t{1} << 36) - 1);
  EXPECT_EQ(revolve_repetitions(std::size_t{1} << 40, 2), 1482909U);  // C(r + 2, 2) >= 2^40 first at r = 1482909
  EXPECT_THROW(static_cast<void>(revolve_repetitions(all, 1)), logic_error);
  for (std::size_t l = 1; l <= 200; ++l) {  // the bisection finds the least r, as counting up did
    for (std::size_t s = 1; s <= 6; ++s) {
      std::size_t r = 0;
      while (binomial(s + r, s) < l) { ++r; }
      ASSERT_EQ(revolve_repetitions(l, s), r) << "l " << l << ", s " << s;
    }
  }
}

TEST(Revolve, TheIssuesTestVectors)
{
  struct vec {
    std::size_t l, s, t;
  };
  for (vec v : {vec{10, 1, 45}, vec{10, 2, 20}, vec{100, 5, 316}, vec{100, 10, 222}, vec{1000, 10, 3636}}) {
    EXPECT_EQ(revolve_forward_steps(v.l, v.s), v.t) << "l " << v.l << ", s " << v.s;
    EXPECT_EQ(count_forward_steps(revolve_schedule(v.l, v.s)), v.t) << "l " << v.l << ", s " << v.s;
  }
}

/// The optimum by exhaustive dynamic programming: reversing l steps from a stored start with s
/// snapshots, the first split advancing m steps.
std::size_t optimum(std::size_t l, std::size_t s, std::map<std::pair<std::size_t, std::size_t>, std::size_t>& memo)
{
  if (l == 1) { return 0; }
  if (s == 1) { return l * (l - 1) / 2; }
  auto const key = std::make_pair(l, s);
  if (auto it = memo.find(key); it != memo.end()) { return it->second; }
  std::size_t best = static_cast<std::size_t>(-1);
  for (std::size_t m = 1; m < l; ++m) { best = std::min(best, m + optimum(l - m, s - 1, memo) + optimum(m, s, memo)); }
  memo[key] = best;
  return best;
}

TEST(Revolve, ScheduleIsOptimalAndValidForEverySmallChain)
{
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> memo;
  for (std::size_t l = 1; l <= 60; ++l) {
    for (std::size_t s = 1; s <= 7; ++s) {
      std::vector<revolve_action> const schedule = revolve_schedule(l, s);
      std::size_t const expected = optimum(l, std::min(s, l), memo);
      ASSERT_EQ(revolve_forward_steps(l, s), expected) << "l " << l << ", s " << s;
      ASSERT_EQ(count_forward_steps(schedule), expected) << "l " << l << ", s " << s;

      // Replay it: the working state, the snapshots, the reverse order and the slot count.
      std::size_t where = 0;
      std::vector<long> slot(std::min(s, l), -1);
      std::size_t next_reverse = l;
      bool have_layer = false;
      std::size_t live = 0;
      std::size_t max_live = 0;
      for (revolve_action const& a : schedule) {
        switch (a.op) {
          case revolve_op::store:
            ASSERT_EQ(where, a.from);
            ASSERT_LT(a.slot, slot.size());
            ASSERT_EQ(slot[a.slot], -1) << "slot in use";
            slot[a.slot] = static_cast<long>(a.from);
            max_live = std::max(max_live, ++live);
            break;
          case revolve_op::restore:
            ASSERT_EQ(slot[a.slot], static_cast<long>(a.from));
            where = a.from;
            break;
          case revolve_op::advance:
            ASSERT_EQ(where, a.from);
            ASSERT_LT(a.from, a.to);
            where = a.to;
            break;
          case revolve_op::taped:
            ASSERT_EQ(where, a.from);
            ASSERT_EQ(a.from + 1, next_reverse) << "steps are reversed last-first";
            ASSERT_FALSE(have_layer);
            have_layer = true;
            where = a.from + 1;
            break;
          case revolve_op::reverse:
            ASSERT_TRUE(have_layer);
            ASSERT_EQ(a.from + 1, next_reverse);
            have_layer = false;
            --next_reverse;
            break;
          case revolve_op::release:
            ASSERT_EQ(slot[a.slot], static_cast<long>(a.from));
            slot[a.slot] = -1;
            --live;
            break;
        }
      }
      EXPECT_EQ(next_reverse, 0u);
      EXPECT_EQ(live, 0u);
      EXPECT_LE(max_live, std::min(s, l));
    }
  }
}

/// The steps the optimal schedule stores, in order, beyond the first: each range split at the
/// least m of the fewest untaped steps, the right part reversed first.
void least_splits(std::size_t start, std::size_t l, std::size_t s,
                  std::map<std::pair<std::size_t, std::size_t>, std::size_t>& memo, std::vector<std::size_t>& out)
{
  if (l == 1 || s == 1) { return; }
  std::size_t const best = optimum(l, s, memo);
  std::size_t m = 1;
  while (m + optimum(l - m, s - 1, memo) + optimum(m, s, memo) != best) { ++m; }
  out.push_back(start + m);
  least_splits(start + m, l - m, s - 1, memo, out);
  least_splits(start, m, s, memo, out);
}

TEST(Revolve, EveryRangeSplitsAtItsLeastOptimalStep)
{
  // The split is computed from binomials (src/revolve.cpp, first_split), not searched: it must be
  // the least of the optimal splits the exhaustive program finds, at every level of every chain.
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> memo;
  for (std::size_t l = 1; l <= 70; ++l) {
    for (std::size_t s = 1; s <= 9; ++s) {
      std::vector<std::size_t> expected;
      least_splits(0, l, std::min(s, l), memo, expected);
      std::vector<std::size_t> stored;
      for (revolve_action const& a : revolve_schedule(l, s)) {
        if (a.op == revolve_op::store && a.from != 0) { stored.push_back(a.from); }
      }
      ASSERT_EQ(stored, expected) << "l " << l << ", s " << s;
    }
  }
}

TEST(Revolve, AsManySnapshotsAsStepsBuildWithoutDeepRecursion)
{
  // With s = l every split stores the next step, as deep as the chain is long: 200 000 nested
  // calls overflowed the stack (tapeflow plan ... --policy recompute with a large budget crashed).
  std::size_t const l = 200000;
  std::vector<revolve_action> const schedule = revolve_schedule(l, l);
  EXPECT_EQ(count_forward_steps(schedule), l - 1);  // each step's state is stored on the way
  EXPECT_EQ(revolve_forward_steps(l, l), l - 1);
  std::size_t stores = 0;
  std::size_t max_slot = 0;
  for (revolve_action const& a : schedule) {
    if (a.op == revolve_op::store) {
      ++stores;
      max_slot = std::max(max_slot, a.slot);
    }
  }
  EXPECT_EQ(stores, l);
  EXPECT_EQ(max_slot, l - 1);
  EXPECT_EQ(count_forward_steps(revolve_schedule(l, 1000)), revolve_forward_steps(l, 1000));
}

TEST(Revolve, FirstReverseFollowsTheTapedLastStep)
{
  std::vector<revolve_action> const schedule = revolve_schedule(17, 3);
  auto const first_reverse = std::find_if(schedule.begin(), schedule.end(),
                                          [](revolve_action const& a) { return a.op == revolve_op::reverse; });
  ASSERT_NE(first_reverse, schedule.begin());
  EXPECT_EQ(std::prev(first_reverse)->op, revolve_op::taped);
  EXPECT_EQ(std::prev(first_reverse)->from, 16u);
}

TEST(Revolve, StoresAndRestoresTheStateNoMoreThanItMust)
{
  // Every store and restore is a copy of the state the tier planner prices (docs/tiers.md). Of
  // the first splits with the fewest forward steps the first is taken, and a snapshot is restored
  // only where the working state is not already on the way (counts of this implementation,
  // fewer than taking the last of the best splits: 6, 26 and 160).
  struct vec {
    std::size_t l, s, copies;
  };
  for (vec v : {vec{4, 2, 5}, vec{17, 3, 24}, vec{100, 5, 153}}) {
    EXPECT_EQ(count_state_copies(revolve_schedule(v.l, v.s)), v.copies) << "l " << v.l << ", s " << v.s;
    EXPECT_EQ(revolve_state_copies(v.l, v.s), v.copies) << "l " << v.l << ", s " << v.s;
  }
  for (std::size_t l = 1; l <= 60; ++l) {
    for (std::size_t s = 1; s <= 7; ++s) {
      std::size_t where = 0;
      for (revolve_action const& a : revolve_schedule(l, s)) {
        if (a.op == revolve_op::restore) {
          ASSERT_NE(where, a.from) << "l " << l << ", s " << s << ": the working state is already at " << where;
          where = a.from;
        } else if (a.op == revolve_op::advance) {
          where = a.to;
        } else if (a.op == revolve_op::taped) {
          where = a.from + 1;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tapeflow
