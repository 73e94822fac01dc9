// SPDX-License-Identifier: Apache-2.0
// The mixed schedule's optimiser (tapeflow/schedule.hpp) against an exhaustive search over every
// schedule of the machine model (one working state, checkpoints on two levels, layers kept on
// either level or taped just before their reverse), against Revolve's closed form, and the
// schedule's replay. tests/planner/test_reference.py compares it with checkpoint-schedules.
#include <tapeflow/error.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/tiers.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <unordered_map>
#include <vector>

namespace tapeflow {
namespace {

/// The cheapest way to reverse the chain over every sequence of the machine's moves, by
/// Dijkstra's algorithm over its states (memory in the model's bytes, unit 1). Infinity when no
/// sequence reverses it within the budgets.
double exhaustive(schedule_model const& m)
{
  std::size_t const n = m.steps.size();
  // State: pos (4 bits), next (4 bits), checkpoints (2 bits per step), layers (2 bits per step:
  // 0 none, 1 device, 2 host).
  auto pack = [&](std::uint64_t pos, std::uint64_t next, std::uint64_t ck, std::uint64_t lay) {
    return pos | next << 4 | ck << 8 | lay << (8 + 2 * n);
  };
  auto ck_at = [](std::uint64_t ck, std::size_t i, int k) { return (ck >> (2 * i + static_cast<unsigned>(k))) & 1u; };
  auto lay_at = [](std::uint64_t lay, std::size_t i) { return (lay >> (2 * i)) & 3u; };
  auto used = [&](std::uint64_t ck, std::uint64_t lay, int k) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (ck_at(ck, i, k) != 0) { bytes += m.state_bytes; }
      if (lay_at(lay, i) == static_cast<std::uint64_t>(k + 1)) { bytes += m.steps[i].layer_bytes; }
    }
    return bytes;
  };
  std::size_t const budget[2] = {m.device_bytes, m.host_bytes};
  using item = std::pair<double, std::uint64_t>;
  std::priority_queue<item, std::vector<item>, std::greater<>> queue;
  std::unordered_map<std::uint64_t, double> dist;
  auto push = [&](double c, std::uint64_t s) {
    auto it = dist.find(s);
    if (it == dist.end() || c < it->second) {
      dist[s] = c;
      queue.push({c, s});
    }
  };
  push(0.0, pack(0, n, 0, 0));
  while (!queue.empty()) {
    auto [c, s] = queue.top();
    queue.pop();
    if (c > dist[s]) { continue; }
    std::uint64_t const pos = s & 15u;
    std::uint64_t const next = (s >> 4) & 15u;
    std::uint64_t const ck = (s >> 8) & ((std::uint64_t{1} << (2 * n)) - 1);
    std::uint64_t const lay = s >> (8 + 2 * n);
    if (next == 0) { return c; }
    std::size_t const j = next - 1;  // the next step to reverse
    // Reverse j from a kept layer.
    if (lay_at(lay, j) != 0) {
      push(c + m.steps[j].reverse_ms, pack(pos, j, ck, lay & ~(std::uint64_t{3} << (2 * j))));
    }
    if (pos < next) {
      step_cost const& st = m.steps[pos];
      // Tape j and reverse it at once (the working layer).
      if (pos == j) { push(c + st.aug_forward_ms + st.reverse_ms, pack(pos + 1, j, ck, lay)); }
      // Advance untaped.
      if (pos + 1 < next) { push(c + st.forward_ms, pack(pos + 1, next, ck, lay)); }
      // Tape and keep.
      if (lay_at(lay, pos) == 0) {
        for (int k = 0; k < 2; ++k) {
          bool const allowed = k == 0 ? m.device_layers : m.host_layers;
          if (!allowed || used(ck, lay, k) + st.layer_bytes > budget[k]) { continue; }
          double const extra = k == 1 && !m.host_layer_ms.empty() ? m.host_layer_ms[pos] : 0.0;
          push(c + st.aug_forward_ms + extra,
               pack(pos + 1, next, ck, lay | static_cast<std::uint64_t>(k + 1) << (2 * pos)));
        }
      }
      // Store the working state.
      for (int k = 0; k < 2; ++k) {
        if (!m.checkpoints[k] || ck_at(ck, pos, k) != 0 || used(ck, lay, k) + m.state_bytes > budget[k]) {
          continue;
        }
        push(c + m.write_ms[k], pack(pos, next, ck | std::uint64_t{1} << (2 * pos + static_cast<unsigned>(k)), lay));
      }
    }
    // Restore or release a checkpoint.
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 2; ++k) {
        if (ck_at(ck, i, k) == 0) { continue; }
        if (i < next) { push(c + m.read_ms[k], pack(i, next, ck, lay)); }
        push(c, pack(pos, next, ck & ~(std::uint64_t{1} << (2 * i + static_cast<unsigned>(k))), lay));
      }
    }
  }
  return std::numeric_limits<double>::infinity();
}

schedule_model random_model(std::mt19937& rng)
{
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  schedule_model m;
  std::size_t const n = static_cast<std::size_t>(pick(1, 5));
  bool const uniform = pick(0, 2) == 0;
  for (std::size_t i = 0; i < n; ++i) {
    step_cost s{double(pick(0, 4)), double(pick(1, 5)), double(pick(1, 4)), std::size_t(pick(1, 3))};
    m.steps.push_back(uniform && i > 0 ? m.steps[0] : s);
    m.host_layer_ms.push_back(uniform && i > 0 ? m.host_layer_ms[0] : double(pick(0, 3)));
  }
  m.state_bytes = std::size_t(pick(1, 2));
  m.device_bytes = std::size_t(pick(0, 5));
  m.host_bytes = std::size_t(pick(0, 4));
  for (int k = 0; k < 2; ++k) {
    m.write_ms[k] = double(pick(0, 3));
    m.read_ms[k] = double(pick(0, 3));
    m.checkpoints[k] = pick(0, 3) != 0;
  }
  m.device_layers = pick(0, 3) != 0;
  m.host_layers = pick(0, 3) != 0;
  m.unit_bytes = 1;
  return m;
}

TEST(MixedSchedule, OptimalAgainstExhaustiveSearch)
{
  std::mt19937 rng(13);
  int solved = 0;
  int infeasible = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    schedule_model const m = random_model(rng);
    double const want = exhaustive(m);
    if (!(want < std::numeric_limits<double>::infinity())) {
      EXPECT_THROW(static_cast<void>(optimal_schedule(m)), budget_error) << "trial " << trial;
      ++infeasible;
      continue;
    }
    schedule const s = optimal_schedule(m);
    EXPECT_DOUBLE_EQ(s.predicted_ms, want) << "trial " << trial << ": " << m.steps.size() << " steps";
    EXPECT_DOUBLE_EQ(evaluate_schedule(m, s.actions, 1), s.predicted_ms) << "trial " << trial;
    ++solved;
  }
  EXPECT_GT(solved, 1000);
  EXPECT_GT(infeasible, 10);
}

/// Revolve's setting: l steps of which only the untaped ones cost (1 each), room for s device
/// checkpoints of a 10-byte state, no kept layers and no host.
schedule_model revolve_model(std::size_t l, std::size_t s)
{
  schedule_model m;
  m.steps.assign(l, step_cost{1.0, 0.0, 0.0, 1000});
  m.state_bytes = 10;
  m.device_bytes = 10 * s;
  m.device_layers = m.host_layers = false;
  m.checkpoints[1] = false;
  return m;
}

TEST(MixedSchedule, RevolveIsTheCaseWithDeviceCheckpointsOnly)
{
  // Untaped steps only cost: the optimum is Revolve's t(l, s), s counting the initial state.
  for (std::size_t l = 1; l <= 60; ++l) {
    for (std::size_t s = 1; s <= 7; ++s) {
      schedule_model const m = revolve_model(l, s);
      schedule const sched = optimal_schedule(m);
      EXPECT_DOUBLE_EQ(sched.predicted_ms, double(revolve_forward_steps(l, s))) << "l " << l << ", s " << s;
      EXPECT_DOUBLE_EQ(evaluate_schedule(m, sched.actions, sched.unit_bytes), sched.predicted_ms);
    }
  }
}

// The chain runs every policy as a schedule (chain_actions): Revolve's, with its slots renamed
// by step, replays as a valid schedule of the class at exactly Revolve's cost within s
// checkpoints; a tier split keeps each layer where its tier says and reverses them last-first.
TEST(ChainActions, RevolveAndTierSplitsAreValidSchedules)
{
  for (std::size_t l = 1; l <= 40; ++l) {
    for (std::size_t s = 1; s <= 6; ++s) {
      schedule_model const m = revolve_model(l, s);
      tier_plan plan;
      plan.policy = tape_policy::recompute;
      plan.tiers.assign(l, tier::recompute);
      plan.snapshots = s;
      std::vector<schedule_action> const actions = chain_actions(plan, l);
      EXPECT_DOUBLE_EQ(evaluate_schedule(m, actions, 10), double(revolve_forward_steps(l, s))) << "l " << l << ", s " << s;
    }
  }
  std::mt19937 rng(testing::UnitTest::GetInstance()->random_seed());
  for (std::size_t l = 1; l <= 30; ++l) {
    schedule_model m;
    m.steps.assign(l, step_cost{1.0, 2.0, 3.0, 100});
    m.state_bytes = 10;
    m.device_bytes = m.host_bytes = 100 * l;
    m.checkpoints[0] = m.checkpoints[1] = false;
    tier_plan plan;
    plan.policy = tape_policy::offload;
    for (std::size_t t = 0; t < l; ++t) { plan.tiers.push_back(rng() % 2 == 0 ? tier::host : tier::device); }
    std::vector<schedule_action> const actions = chain_actions(plan, l);
    ASSERT_EQ(actions.size(), 2 * l);
    EXPECT_DOUBLE_EQ(evaluate_schedule(m, actions, 10), 5.0 * double(l)) << "l " << l;
    for (std::size_t t = 0; t < l; ++t) {
      level const where = plan.tiers[t] == tier::host ? level::host : level::device;
      EXPECT_EQ(actions[t].kind, action_kind::taped);
      EXPECT_EQ(actions[t].where, where);
      EXPECT_EQ(actions[2 * l - 1 - t].kind, action_kind::reverse);
      EXPECT_EQ(actions[2 * l - 1 - t].step, t);
    }
  }
  tier_plan bad;
  bad.policy = tape_policy::store;
  bad.tiers.assign(3, tier::device);
  EXPECT_THROW(static_cast<void>(chain_actions(bad, 4)), logic_error);
  bad.tiers[1] = tier::recompute;
  EXPECT_THROW(static_cast<void>(chain_actions(bad, 3)), logic_error);
}

TEST(MixedSchedule, MixesDeviceHostAndRecomputeForUnequalSteps)
{
  // 12 steps of unequal layers; the device holds a quarter of the tape, the host a quarter: the
  // cheapest schedule keeps some layers on each level and recomputes the rest.
  schedule_model m;
  std::size_t tape = 0;
  for (std::size_t i = 0; i < 12; ++i) {
    std::size_t const bytes = (i % 3 + 1) * 1024;
    m.steps.push_back({1.0, 1.2, 2.0, bytes});
    tape += bytes;
  }
  m.host_layer_ms.assign(12, 0.5);
  m.state_bytes = 512;
  m.device_bytes = tape / 4;
  m.host_bytes = tape / 4;
  m.write_ms[1] = m.read_ms[1] = 0.3;
  schedule const s = optimal_schedule(m);
  std::size_t counts[3] = {0, 0, 0};
  for (layer_fate f : s.fate) { ++counts[static_cast<int>(f)]; }
  EXPECT_GT(counts[0], 0u);
  EXPECT_GT(counts[1], 0u);
  EXPECT_GT(counts[2], 0u);
  EXPECT_LE(s.peak_device_bytes, m.device_bytes);
  EXPECT_LE(s.peak_host_bytes, m.host_bytes);
  EXPECT_DOUBLE_EQ(evaluate_schedule(m, s.actions, s.unit_bytes), s.predicted_ms);
}

TEST(MixedSchedule, ForcedChoicesAndBadInput)
{
  schedule_model m;
  m.steps.assign(6, step_cost{1.0, 1.0, 1.0, 100});
  m.state_bytes = 100;
  m.device_bytes = 1000;
  m.host_bytes = 1000;
  m.host_layers = false;
  m.checkpoints[0] = m.checkpoints[1] = false;
  schedule const store = optimal_schedule(m);  // every layer on the device
  for (layer_fate f : store.fate) { EXPECT_EQ(f, layer_fate::device); }
  EXPECT_DOUBLE_EQ(store.predicted_ms, 12.0);
  m.device_bytes = 300;  // three layers and the working one: no schedule without checkpoints
  EXPECT_THROW(static_cast<void>(optimal_schedule(m)), budget_error);

  schedule_model bad = m;
  bad.steps.clear();
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  bad = m;
  bad.state_bytes = 0;
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  bad = m;
  bad.steps[2].layer_bytes = 0;
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  // Sizes whose rounding to units wrapped past SIZE_MAX (a division by zero, or a schedule over
  // its budget), and costs whose sums are not numbers: refused, not planned.
  std::size_t const all = static_cast<std::size_t>(-1);
  bad = m;
  bad.state_bytes = all;
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  bad = m;
  bad.unit_bytes = all;
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  bad = m;
  bad.steps[1].layer_bytes = all - 16;
  EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error);
  for (double const cost : {std::nan(""), -1.0, 1e307, std::numeric_limits<double>::infinity()}) {
    bad = m;
    bad.steps[3].forward_ms = cost;
    EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error) << cost;
  }
  // A copy may cost infinity (a level without bandwidth: never chosen), not NaN or less than 0.
  for (double const cost : {std::nan(""), -1.0}) {
    bad = m;
    bad.write_ms[1] = cost;
    EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error) << cost;
    bad = m;
    bad.host_layer_ms.assign(6, 0.0);
    bad.host_layer_ms[0] = cost;
    EXPECT_THROW(static_cast<void>(optimal_schedule(bad)), logic_error) << cost;
  }
  bad = m;
  bad.device_bytes = 1000;  // every layer fits, as in the first plan above
  bad.write_ms[1] = std::numeric_limits<double>::infinity();
  bad.host_layer_ms.assign(6, std::numeric_limits<double>::infinity());
  EXPECT_NO_THROW(static_cast<void>(optimal_schedule(bad)));
}

TEST(MixedSchedule, ReplayRejectsInvalidSchedules)
{
  schedule_model m;
  m.steps.assign(3, step_cost{1.0, 1.0, 1.0, 100});
  m.state_bytes = 100;
  m.device_bytes = 200;
  schedule const s = optimal_schedule(m);
  // Drop each action in turn: every shorter sequence is invalid.
  for (std::size_t drop = 0; drop < s.actions.size(); ++drop) {
    std::vector<schedule_action> broken = s.actions;
    broken.erase(broken.begin() + static_cast<std::ptrdiff_t>(drop));
    EXPECT_THROW(static_cast<void>(evaluate_schedule(m, broken, s.unit_bytes)), logic_error)
      << "without action " << drop << " (" << to_string(s.actions[drop]) << ")";
  }
  // Over budget.
  m.device_bytes = 100;
  EXPECT_THROW(static_cast<void>(evaluate_schedule(m, s.actions, s.unit_bytes)), logic_error);
}

/// optimal_schedule(m), checked: it replays at its predicted cost within both budgets.
schedule planned(schedule_model const& m)
{
  schedule s = optimal_schedule(m);
  EXPECT_DOUBLE_EQ(evaluate_schedule(m, s.actions, s.unit_bytes), s.predicted_ms);
  EXPECT_LE(s.peak_device_bytes, m.device_bytes);
  EXPECT_LE(s.peak_host_bytes, m.host_bytes);
  return s;
}

TEST(MixedSchedule, LongChainsOfUnequalLayersAreNoWorseThanTheirLargestLayerEverywhere)
{
  // 300 layers shrinking from 64 KiB to 16 KiB (as a packed LSTM's), a 4 KiB state, a device
  // budget of two fifths of the tape: the tables of unequal steps need a unit of a large share of
  // the budget, in which every 4 KiB checkpoint costs as much as a whole layer. The schedule of
  // equal steps as large as the largest fits, counted finely, and is no more expensive.
  schedule_model m;
  std::size_t tape = 0;
  for (std::size_t i = 0; i < 300; ++i) {
    std::size_t const bytes = (64 - (i * 48) / 300) * 1024;
    double const share = static_cast<double>(bytes) / (64 * 1024);
    m.steps.push_back({1.0 * share, 1.2 * share, 2.0 * share, bytes});
    tape += bytes;
  }
  m.state_bytes = 4096;
  m.device_bytes = tape * 2 / 5;
  m.host_layers = false;
  m.checkpoints[1] = false;
  schedule const s = planned(m);

  schedule_model largest = m;
  step_cost const first = m.steps.front();  // the largest and costliest
  largest.steps.assign(m.steps.size(), first);
  schedule const uniform = optimal_schedule(largest);
  double const uniform_cost = evaluate_schedule(m, uniform.actions, uniform.unit_bytes);
  EXPECT_LE(s.predicted_ms, uniform_cost);
  // Two fifths of the tape hold at least a quarter of the layers however they are chosen, and
  // no step needs to run untaped more than once.
  std::size_t device = 0;
  std::size_t untaped = 0;
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    device += s.fate[i] == layer_fate::device ? 1 : 0;
    untaped += s.recomputed[i];
    EXPECT_LE(s.recomputed[i], 1u) << "step " << i;
  }
  EXPECT_GE(device, m.steps.size() / 4);
  EXPECT_LE(untaped, m.steps.size() - device);
}

TEST(MixedSchedule, LongChainsAreNoWorseThanRevolveWithTheCheckpointsTheBudgetHolds)
{
  // 4000 equal steps, a budget of 60 states: the tables need a unit of a third of the budget, in
  // which the optimiser can hold only three checkpoints. Revolve with 60, counted exactly, is a
  // schedule of the class; the optimiser's is no more expensive.
  schedule_model m;
  m.steps.assign(4000, step_cost{1.0, 1.2, 2.0, 4096});
  m.state_bytes = 4096;
  m.device_bytes = 60 * 4096;
  m.write_ms[0] = m.read_ms[0] = 0.01;
  m.host_layers = false;
  m.checkpoints[1] = false;
  schedule const s = planned(m);
  double const revolve = evaluate_schedule(m, revolve_actions(4000, 60), 4096);
  EXPECT_LE(s.predicted_ms, revolve);
  std::size_t untaped = 0;
  for (std::size_t r : s.recomputed) { untaped += r; }
  EXPECT_LE(untaped, revolve_forward_steps(4000, 60));
}

TEST(MixedSchedule, LongChainsKeepEveryLayerWhenTheBudgetsHoldThemAll)
{
  // 4000 equal steps whose layers fit a quarter on the device and the rest on the host, their
  // copies hidden (no host cost): keeping them all recomputes nothing, and the optimiser, in the
  // coarse unit this length needs, must find that; with room to spare on the host, and with
  // exactly the 3999 kept layers (the working layer is neither's): 1000 on the device, 2999 there.
  for (std::size_t const host_layers : {std::size_t{3000}, std::size_t{2999}}) {
    SCOPED_TRACE(std::to_string(host_layers) + " layers' room on the host");
    schedule_model m;
    m.steps.assign(4000, step_cost{1.0, 1.2, 2.0, 4096});
    m.host_layer_ms.assign(4000, 0.0);
    m.state_bytes = 4096;
    m.device_bytes = 1000 * 4096;
    m.host_bytes = host_layers * 4096;
    m.write_ms[0] = m.read_ms[0] = 0.01;
    m.write_ms[1] = m.read_ms[1] = 0.05;
    schedule const s = planned(m);
    std::size_t untaped = 0;
    for (std::size_t r : s.recomputed) { untaped += r; }
    EXPECT_EQ(untaped, 0u);
    EXPECT_NEAR(s.predicted_ms, 4000 * (1.2 + 2.0), 1e-6);
  }
}

/// `steps` layers shrinking from 64 KiB to 20 KiB in 4 KiB steps (a packed LSTM's shape), each
/// step's times in proportion to its traffic (its layer and twice a 4 KiB state), device only.
schedule_model shrinking_chain(std::size_t steps)
{
  schedule_model m;
  for (std::size_t i = 0; i < steps; ++i) {
    std::size_t const bytes = (64 - 4 * ((i * 12) / steps)) * 1024;
    double const share = static_cast<double>(bytes + 8192) / (72 * 1024);
    m.steps.push_back({1.0 * share, 1.2 * share, 2.0 * share, bytes});
  }
  m.state_bytes = 4096;
  m.write_ms[0] = m.read_ms[0] = 0.05;
  m.host_layers = false;
  m.checkpoints[1] = false;
  return m;
}

double store_ms(schedule_model const& m)
{
  double sum = 0;
  for (step_cost const& s : m.steps) { sum += s.aug_forward_ms + s.reverse_ms; }
  return sum;
}

TEST(MixedSchedule, LongChainsComeWithinAFewPercentOfTheOptimumInTheFinestUnit)
{
  // 100 unequal steps: every size is a multiple of 4 KiB, so the tables in 4 KiB units give the
  // optimum of the class, but at 100 steps they are too large for the work limit and the
  // optimiser counts in 16 KiB. Its schedules of the steps in blocks keep a fine unit: the
  // overhead over keeping every layer stays within 5 % of the optimum's (in the coarse unit
  // alone it was 11 % and 25 % above).
  for (double const share : {0.4, 0.6}) {
    schedule_model m = shrinking_chain(100);
    std::size_t tape = 0;
    for (step_cost const& s : m.steps) { tape += s.layer_bytes; }
    m.device_bytes = static_cast<std::size_t>(static_cast<double>(tape) * share);
    schedule const plan = planned(m);

    schedule_model finest = m;
    finest.unit_bytes = 4096;
    schedule const optimum = optimal_schedule(finest);
    double const floor = store_ms(m);
    EXPECT_GE(plan.predicted_ms, optimum.predicted_ms - 1e-9) << "share " << share;
    EXPECT_LE(plan.predicted_ms - floor, 1.05 * (optimum.predicted_ms - floor)) << "share " << share;
  }
}

TEST(MixedSchedule, LongChainsInBlocksKeepTheirLayersOnBothLevelsWithinTheBudgets)
{
  // 300 unequal steps with host memory too (copies that do not all hide, checkpoints on both
  // levels): whatever the plan, it replays at its predicted cost within both budgets, every step
  // reversed once from a layer taped from the right state.
  schedule_model m = shrinking_chain(300);
  std::size_t tape = 0;
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    tape += m.steps[i].layer_bytes;
    m.host_layer_ms.push_back(i % 3 == 0 ? 0.4 : 0.0);
  }
  m.device_bytes = tape / 5;
  m.host_bytes = tape / 4;
  m.host_layers = true;
  m.checkpoints[1] = true;
  m.write_ms[1] = m.read_ms[1] = 0.2;
  schedule const s = planned(m);
  std::size_t host = 0;
  for (layer_fate f : s.fate) { host += f == layer_fate::host ? 1 : 0; }
  EXPECT_GT(host, 0u) << "the host holds a quarter of the tape: some layers go there";
  // No worse than the same chain without the host. Nothing guarantees that in general (each
  // model's plan is the best of its candidates), but this chain's did not hold in the coarse unit
  // alone: 864 against 859 ms.
  schedule_model device_only = m;
  device_only.host_layers = false;
  device_only.checkpoints[1] = false;
  device_only.host_bytes = 0;
  EXPECT_LE(s.predicted_ms, optimal_schedule(device_only).predicted_ms);
}

TEST(MixedSchedule, AModelPlannedAgainIsFoundAndAnyChangedFieldIsSolvedAfresh)
{
  // A model no other test plans: costs drawn from a fresh seed.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  schedule_model m;
  for (std::size_t i = 0; i < 10; ++i) {
    m.steps.push_back({cost(rng), cost(rng), cost(rng), (i % 3 + 1) * 1024});
    m.host_layer_ms.push_back(cost(rng));
  }
  m.state_bytes = 512;
  m.device_bytes = 6 * 1024;
  m.host_bytes = 6 * 1024;
  m.write_ms[0] = m.read_ms[0] = 0.1;
  m.write_ms[1] = m.read_ms[1] = 0.4;

  schedule_cache_stats const before = schedule_cache_counts();
  schedule const first = optimal_schedule(m);
  schedule const again = optimal_schedule(m);
  schedule_cache_stats const after = schedule_cache_counts();
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_EQ(after.hits, before.hits + 1);
  ASSERT_EQ(again.actions.size(), first.actions.size());
  for (std::size_t k = 0; k < first.actions.size(); ++k) { EXPECT_EQ(to_string(again.actions[k]), to_string(first.actions[k])); }
  EXPECT_EQ(again.predicted_ms, first.predicted_ms);

  // Every field the optimiser reads is part of the key: a model changed in any one is solved.
  std::vector<std::pair<char const*, std::function<void(schedule_model&)>>> const changes{
    {"a step's untaped forward", [](schedule_model& x) { x.steps[3].forward_ms += 0.25; }},
    {"a step's taped forward", [](schedule_model& x) { x.steps[3].aug_forward_ms += 0.25; }},
    {"a step's reverse", [](schedule_model& x) { x.steps[3].reverse_ms += 0.25; }},
    {"a step's layer", [](schedule_model& x) { x.steps[3].layer_bytes += 512; }},
    {"one step more", [](schedule_model& x) { x.steps.push_back(x.steps.back()); x.host_layer_ms.push_back(0.5); }},
    {"the state", [](schedule_model& x) { x.state_bytes += 512; }},
    {"the device budget", [](schedule_model& x) { x.device_bytes += 1024; }},
    {"the host budget", [](schedule_model& x) { x.host_bytes += 1024; }},
    {"a device checkpoint's write", [](schedule_model& x) { x.write_ms[0] += 0.1; }},
    {"a host checkpoint's write", [](schedule_model& x) { x.write_ms[1] += 0.1; }},
    {"a device checkpoint's read", [](schedule_model& x) { x.read_ms[0] += 0.1; }},
    {"a host checkpoint's read", [](schedule_model& x) { x.read_ms[1] += 0.1; }},
    {"a host layer's cost", [](schedule_model& x) { x.host_layer_ms[5] += 0.1; }},
    {"device layers", [](schedule_model& x) { x.device_layers = false; }},
    {"host layers", [](schedule_model& x) { x.host_layers = false; }},
    {"device checkpoints", [](schedule_model& x) { x.checkpoints[0] = false; }},
    {"host checkpoints", [](schedule_model& x) { x.checkpoints[1] = false; }},
    {"the unit", [](schedule_model& x) { x.unit_bytes = 512; }},
  };
  for (auto const& [what, change] : changes) {
    static_cast<void>(optimal_schedule(m));  // the unchanged model is among those kept
    schedule_model changed = m;
    change(changed);
    schedule_cache_stats const was = schedule_cache_counts();
    try {
      static_cast<void>(optimal_schedule(changed));
    } catch (budget_error const&) {
    }
    schedule_cache_stats const is = schedule_cache_counts();
    EXPECT_EQ(is.misses, was.misses + 1) << what;
    EXPECT_EQ(is.hits, was.hits) << what;
  }
  // The outcome "no schedule fits" is kept too, and thrown again.
  schedule_model tight = m;
  tight.device_bytes = 0;
  tight.host_bytes = 0;
  tight.checkpoints[0] = tight.checkpoints[1] = false;
  EXPECT_THROW(static_cast<void>(optimal_schedule(tight)), budget_error);
  schedule_cache_stats const was = schedule_cache_counts();
  EXPECT_THROW(static_cast<void>(optimal_schedule(tight)), budget_error);
  EXPECT_EQ(schedule_cache_counts().hits, was.hits + 1);
}

TEST(MixedSchedule, ThreadsPlanningAtOnceGetTheSameSchedules)
{
  std::vector<schedule_model> models;
  for (std::size_t n = 20; n < 36; ++n) {
    schedule_model m;
    for (std::size_t i = 0; i < n; ++i) { m.steps.push_back({1.0, 1.5, 2.0, (i % 4 + 1) * 256}); }
    m.state_bytes = 256;
    m.device_bytes = n * 128;
    m.host_bytes = n * 64;
    m.write_ms[1] = m.read_ms[1] = 0.3;
    models.push_back(m);
  }
  std::vector<double> expect;
  for (schedule_model const& m : models) { expect.push_back(optimal_schedule(m).predicted_ms); }
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t r = 0; r < 3; ++r) {
        for (std::size_t k = 0; k < models.size(); ++k) {
          std::size_t const i = (k * (t + 1) + r) % models.size();  // each thread its own order
          got[t].push_back(optimal_schedule(models[i]).predicted_ms - expect[i]);
        }
      }
    });
  }
  for (std::thread& th : threads) { th.join(); }
  for (std::vector<double> const& g : got) {
    for (double d : g) { EXPECT_EQ(d, 0.0); }
  }
}

TEST(MixedSchedule, LargeChainsPlanQuickly)
{
  schedule_model m;
  for (std::size_t i = 0; i < 200; ++i) { m.steps.push_back({1.0, 1.1, 2.0, (i % 4 + 1) * 4096}); }
  m.host_layer_ms.assign(200, 0.2);
  m.state_bytes = 4096;
  m.device_bytes = 20 * 4096;
  m.host_bytes = 100 * 4096;
  m.write_ms[1] = m.read_ms[1] = 0.5;
  schedule const s = planned(m);
}

// ---------------------------------------------------------------------------------------------
// Mutation-testing additions.

TEST(MixedSchedule, TheLastEightModelsPlannedAreAllKept)
{
  // docs/tiers.md ("Plans are kept"): the last eight models. Eight models no other test plans,
  // each planned once: the first of them is still found.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  std::vector<schedule_model> models(8);
  for (schedule_model& m : models) {
    for (std::size_t i = 0; i < 6; ++i) { m.steps.push_back({cost(rng), cost(rng), cost(rng), 1024}); }
    m.state_bytes = 512;
    m.device_bytes = 4096;
    m.host_layers = false;
    m.checkpoints[1] = false;
    static_cast<void>(optimal_schedule(m));
  }
  schedule_cache_stats const before = schedule_cache_counts();
  static_cast<void>(optimal_schedule(models.front()));
  EXPECT_EQ(schedule_cache_counts().hits, before.hits + 1);
  EXPECT_EQ(schedule_cache_counts().misses, before.misses);
}

TEST(MixedSchedule, TheKeptOutcomesHoldNoMoreBytesThanTheLimit)
{
  // docs/tiers.md ("Plans are kept"): the cache is bounded in bytes too. Models no other test
  // plans (costs from a fresh seed): 60 steps hold about 11 KiB with their schedule, 100 about 21.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  auto model = [&](std::size_t steps) {
    schedule_model m;
    for (std::size_t i = 0; i < steps; ++i) { m.steps.push_back({cost(rng), cost(rng), cost(rng), 1024}); }
    m.state_bytes = 512;
    m.device_bytes = 8192;
    m.host_layers = false;
    m.checkpoints[1] = false;
    return m;
  };
  std::size_t const limit = std::size_t{40} << 10;
  EXPECT_EQ(set_schedule_cache_limit(limit), default_schedule_cache_bytes);
  std::vector<schedule_model> models;
  for (int k = 0; k < 6; ++k) {
    models.push_back(model(60));
    static_cast<void>(optimal_schedule(models.back()));
    EXPECT_LE(schedule_cache_counts().bytes, limit);
  }
  schedule_cache_stats const full = schedule_cache_counts();
  EXPECT_GE(full.entries, 2u);
  EXPECT_LT(full.entries, 6u) << "six models of about 11 KiB in 40 KiB";
  EXPECT_GT(full.bytes, full.entries * 60 * sizeof(step_cost));
  // The most recent is found, the first was forgotten.
  schedule_cache_stats before = schedule_cache_counts();
  static_cast<void>(optimal_schedule(models.back()));
  EXPECT_EQ(schedule_cache_counts().hits, before.hits + 1);
  before = schedule_cache_counts();
  static_cast<void>(optimal_schedule(models.front()));
  EXPECT_EQ(schedule_cache_counts().misses, before.misses + 1);

  // A lower limit forgets what no longer fits; an outcome larger than the limit is not kept; 0
  // keeps nothing.
  schedule_cache_stats const now = schedule_cache_counts();
  EXPECT_EQ(set_schedule_cache_limit(now.bytes - 1), limit);
  EXPECT_LT(schedule_cache_counts().entries, now.entries);
  EXPECT_LT(schedule_cache_counts().bytes, now.bytes);
  set_schedule_cache_limit(std::size_t{16} << 10);
  static_cast<void>(optimal_schedule(models.back()));  // kept: one model of 11 KiB fits
  schedule_model const large = model(100);
  static_cast<void>(optimal_schedule(large));
  before = schedule_cache_counts();
  static_cast<void>(optimal_schedule(large));
  EXPECT_EQ(schedule_cache_counts().misses, before.misses + 1);
  EXPECT_LE(schedule_cache_counts().bytes, std::size_t{16} << 10);
  before = schedule_cache_counts();
  static_cast<void>(optimal_schedule(models.back()));  // and not pushed out by the one too large
  EXPECT_EQ(schedule_cache_counts().hits, before.hits + 1);
  EXPECT_EQ(set_schedule_cache_limit(0), std::size_t{16} << 10);
  EXPECT_EQ(schedule_cache_counts().entries, 0u);
  EXPECT_EQ(schedule_cache_counts().bytes, 0u);
  set_schedule_cache_limit(default_schedule_cache_bytes);
}

TEST(MixedSchedule, LongChainsCheckpointOnTheHostWhenTheDeviceHoldsNoCheckpoint)
{
  // No device memory beyond the working layer, 1 MiB of host memory for 1 KiB states. Past the
  // tables (5000 steps) no schedule was found at all; at 4000 the tables' coarse unit (two host
  // units) cost 16 times Revolve over the host's 1024 checkpoints.
  for (std::size_t const n : {std::size_t{4000}, std::size_t{5000}}) {
    schedule_model m;
    m.steps.assign(n, step_cost{0.01, 0.01, 0.01, 1024});
    m.state_bytes = 1024;
    m.device_bytes = 0;
    m.host_bytes = std::size_t{1} << 20;
    m.write_ms[0] = m.read_ms[0] = 1e-6;
    m.write_ms[1] = m.read_ms[1] = 5e-5;
    schedule const s = planned(m);
    double const host_revolve = evaluate_schedule(m, revolve_actions(n, 1024, level::host), 1024);
    EXPECT_LE(s.predicted_ms, host_revolve + 1e-9) << n << " steps";
    EXPECT_EQ(s.checkpoints[0], 0u);
    EXPECT_GT(s.checkpoints[1], 1000u);
  }
}

TEST(MixedSchedule, MoreMemoryThanTheWholeTapeNeverCoarsensTheUnit)
{
  // A terabyte for 50 layers of 4 KiB: memory beyond every layer and checkpoint is never used, so
  // the tables stay in the finest unit (4 KiB) and keep every layer.
  schedule_model m;
  m.steps.assign(50, step_cost{1.0, 1.2, 2.0, 4096});
  m.state_bytes = 4096;
  m.device_bytes = std::size_t{1} << 40;
  m.host_bytes = std::size_t{1} << 40;
  schedule const s = planned(m);
  EXPECT_EQ(s.unit_bytes, 4096u);
  for (layer_fate f : s.fate) { EXPECT_EQ(f, layer_fate::device); }
  EXPECT_NEAR(s.predicted_ms, 50 * (1.2 + 2.0), 1e-9);

  // A budget of 2^64 - 1 bytes ("unlimited") over 400 unequal steps: the unit doubled until it
  // wrapped to 0 and the optimiser divided by it (SIGFPE).
  schedule_model u;
  double kept = 0;
  for (std::size_t i = 0; i < 400; ++i) {
    u.steps.push_back({1.0, 1.0 + double(i % 2), 1.0, 1024});
    kept += u.steps.back().aug_forward_ms + u.steps.back().reverse_ms;
  }
  u.state_bytes = 1024;
  u.write_ms[1] = u.read_ms[1] = 0.1;
  u.device_bytes = u.host_bytes = std::numeric_limits<std::size_t>::max();
  schedule const all = planned(u);
  for (layer_fate f : all.fate) { EXPECT_EQ(f, layer_fate::device); }
  EXPECT_NEAR(all.predicted_ms, kept, 1e-9);
}

}  // namespace
}  // namespace tapeflow
