// SPDX-License-Identifier: Apache-2.0
// The tier planner, and every policy and budget end to end on the CPU backend.
#include "reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/fault.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/tiers.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;

constexpr std::size_t MiB = std::size_t{1} << 20;

tier_request chain_request(tape_policy policy, std::size_t layers, std::size_t budget)
{
  tier_request r;
  r.policy = policy;
  r.layers.assign(layers, layer_info{4 * MiB, 1.0, 1.0});
  r.state_bytes = 4 * MiB;
  r.min_device_bytes = 64 * 1024;
  r.budgets.device_bytes = budget;
  r.bw = {20.0, 20.0, 1000.0};  // 4 MiB copies take ~0.2 ms: fully hidden behind 1 ms steps
  return r;
}

void expect_placed(tier_plan const& p, tier_request const& r)
{
  ASSERT_EQ(p.tiers.size(), r.layers.size());
  std::size_t bytes = 0;
  for (std::size_t b : p.bytes_per_tier) { bytes += b; }
  std::size_t total = 0;
  for (layer_info const& l : r.layers) { total += l.tape_bytes; }
  EXPECT_EQ(bytes, total);
  if (r.budgets.device_bytes != 0) { EXPECT_LE(p.device_bytes, r.budgets.device_bytes) << p.describe(); }
  EXPECT_NE(p.policy, tape_policy::automatic);
  EXPECT_FALSE(p.describe().empty());
}

TEST(TierPlanner, StoreKeepsEverythingOrFails)
{
  tier_request r = chain_request(tape_policy::store, 10, 0);
  tier_plan const p = plan_tiers(r);
  expect_placed(p, r);
  EXPECT_EQ(p.count(tier::device), 10u);
  EXPECT_EQ(p.device_bytes, 40 * MiB);
  r.budgets.device_bytes = 39 * MiB;
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), budget_error);
}

TEST(TierPlanner, CostsThatAreNotNumbersAndStatesPastItsSizesAreRefused)
{
  for (tape_policy policy : {tape_policy::store, tape_policy::automatic, tape_policy::recompute}) {
    for (double const cost : {std::nan(""), -5.0, 1e300}) {
      tier_request r = chain_request(policy, 5, 10 * MiB);
      r.layers[2].forward_ms = cost;  // planned as an overhead of NaN, or of -3 ms
      EXPECT_THROW(static_cast<void>(plan_tiers(r)), logic_error) << to_string(policy) << " " << cost;
    }
    tier_request r = chain_request(policy, 5, 10 * MiB);
    r.state_bytes = static_cast<std::size_t>(-1);
    EXPECT_THROW(static_cast<void>(plan_tiers(r)), logic_error) << to_string(policy);
  }
}

TEST(TierPlanner, APolicyOutsideTheEnumIsRefused)
{
  // Not planned as auto, which the switch over the policies would fall through to.
  EXPECT_THROW(static_cast<void>(plan_tiers(chain_request(static_cast<tape_policy>(5), 5, 0))), logic_error);
  EXPECT_EQ(plan_tiers(chain_request(tape_policy::offload, 5, 0)).policy, tape_policy::offload);
}

TEST(TierPlanner, OffloadUsesARingThatFitsTheBudget)
{
  tier_request r = chain_request(tape_policy::offload, 10, 9 * MiB);
  tier_plan const p = plan_tiers(r);
  expect_placed(p, r);
  EXPECT_EQ(p.count(tier::host), 10u);
  EXPECT_EQ(p.host_bytes, 40 * MiB);
  EXPECT_GE(p.ring_slots, 1u);
  EXPECT_LE(p.ring_slots * 4 * MiB, 9 * MiB);
  EXPECT_EQ(p.prefetch_distance + 1, p.ring_slots);
  r.budgets.host_bytes = 39 * MiB;  // not every layer fits in pinned memory
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), budget_error);
  r.budgets = {3 * MiB, 0};  // not even one slot
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), budget_error);
}

TEST(TierPlanner, ACopyBoundRingTakesTheLastRingThatTiesWithoutTryingEach)
{
  // Copies of 4 MiB at 1 GB/s (4.2 ms) behind reverses of 1 ns: the copy engine is the
  // bottleneck from a lead of two layers on. Forced offload without a budget sends every layer to
  // the host, so every bigger ring ties, up to one of every layer; the planner jumps there instead
  // of trying each ring over every layer (10^5 layers: half a minute).
  tier_request r = chain_request(tape_policy::offload, 3000, 0);
  for (layer_info& l : r.layers) { l.reverse_ms = 1e-6; }
  r.bw.h2d_GBps = r.bw.d2h_GBps = 1.0;
  tier_plan const p = plan_tiers(r);
  EXPECT_EQ(p.count(tier::host), 3000u);
  EXPECT_EQ(p.ring_slots, 3000u);
  double const copy = static_cast<double>(4 * MiB) / 1e6;
  EXPECT_NEAR(p.overhead_ms, 3000 * copy - 3000 * 1.0 + 3000 * copy - 3000 * 1e-6, 1e-6);
  // With a budget of 100 layers, the most slots it holds.
  r.budgets.device_bytes = 100 * 4 * MiB;
  tier_plan const q = plan_tiers(r);
  EXPECT_EQ(q.ring_slots, 100u);
  EXPECT_EQ(q.count(tier::host), 3000u);
  EXPECT_NEAR(q.overhead_ms, p.overhead_ms, 1e-6);
}

TEST(TierPlanner, SlowCopiesGetALongerPrefetchDistance)
{
  tier_request fast = chain_request(tape_policy::offload, 20, 0);
  tier_request slow = fast;
  slow.bw.h2d_GBps = 1.0;  // 4 MiB take ~4 ms: four layers of reverse compute
  EXPECT_GT(plan_tiers(slow).prefetch_distance, plan_tiers(fast).prefetch_distance);
  slow.budgets.device_bytes = 12 * MiB;  // but never more slots than the budget holds
  EXPECT_EQ(plan_tiers(slow).ring_slots, 3u);
}

TEST(TierPlanner, RecomputeRunsRevolveWithTheSnapshotsTheBudgetHolds)
{
  tier_request r = chain_request(tape_policy::recompute, 100, 4 * MiB + 5 * 4 * MiB);
  tier_plan const p = plan_tiers(r);
  expect_placed(p, r);
  EXPECT_EQ(p.count(tier::recompute), 100u);
  EXPECT_EQ(p.snapshots, 5u);
  EXPECT_EQ(p.recompute_steps, revolve_forward_steps(100, 5));
  EXPECT_EQ(p.recompute_steps, 316u);
  EXPECT_EQ(p.device_bytes, 24 * MiB);
  // Its estimated cost over store: the untaped steps, and a device copy of the state for every
  // snapshot stored and restored.
  std::size_t copies = 0;
  for (revolve_action const& a : revolve_schedule(100, 5)) {
    copies += a.op == revolve_op::store || a.op == revolve_op::restore ? 1 : 0;
  }
  EXPECT_GT(copies, 5u);
  double const copy = static_cast<double>(4 * MiB) / (r.bw.d2d_GBps * 1e6);
  EXPECT_NEAR(p.overhead_ms, 316 * 1.0 + static_cast<double>(copies) * copy, 1e-9);
  r.budgets.device_bytes = 7 * MiB;  // one layer, no room for the initial state
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), budget_error);

  // Without a budget, every step's state, as many as 2^64 bytes hold: 256 states of 2^56 bytes
  // made the device bytes wrap to the one layer's.
  tier_request huge = chain_request(tape_policy::recompute, 256, 0);
  huge.state_bytes = max_plan_bytes;
  tier_plan const h = plan_tiers(huge);
  EXPECT_EQ(h.snapshots, 255u);
  EXPECT_EQ(h.device_bytes, 4 * MiB + 255 * max_plan_bytes);
}

TEST(TierPlanner, AutomaticStoresWhatFitsAndRunsTheOptimiserForTheRest)
{
  tier_request r = chain_request(tape_policy::automatic, 10, 0);
  EXPECT_EQ(plan_tiers(r).policy, tape_policy::store);
  r.budgets.device_bytes = 20 * MiB;  // half the tape
  tier_plan const mixed = plan_tiers(r);
  expect_placed(mixed, r);
  EXPECT_EQ(mixed.policy, tape_policy::mixed);
  EXPECT_GT(mixed.count(tier::device), 0u);
  EXPECT_GT(mixed.count(tier::host), 0u);  // copies hide behind 1 ms steps: no recomputation
  EXPECT_EQ(mixed.count(tier::recompute), 0u);
  EXPECT_EQ(mixed.recompute_steps, 0u);
  EXPECT_EQ(mixed.predicted_ms, mixed.mixed.predicted_ms);
  // Never worse than the host split or Revolve the planner would have forced.
  for (tape_policy forced : {tape_policy::offload, tape_policy::recompute}) {
    tier_request f = r;
    f.policy = forced;
    EXPECT_LE(mixed.predicted_ms, plan_tiers(f).predicted_ms + 1e-9) << to_string(forced);
  }
  // With a crawling copy engine, recomputation is cheaper: no layer goes to the host.
  r.bw.h2d_GBps = r.bw.d2h_GBps = 0.01;
  tier_plan const slow = plan_tiers(r);
  EXPECT_EQ(slow.count(tier::host), 0u);
  EXPECT_GT(slow.count(tier::recompute), 0u);
  // Without host memory for the layers, recomputation is the only way.
  r.bw = {20.0, 20.0, 1000.0};
  r.budgets.host_bytes = MiB;
  EXPECT_EQ(plan_tiers(r).count(tier::host), 0u);
  // Where a copy to the host saves nothing (the CPU backend), auto never uses it.
  r.budgets.host_bytes = 0;
  r.host_helps = false;
  tier_plan const cpu = plan_tiers(r);
  EXPECT_EQ(cpu.count(tier::host), 0u);
  EXPECT_EQ(cpu.mixed.checkpoints[1], 0u);
  EXPECT_GT(cpu.count(tier::recompute), 0u);
  // A request for 'mixed' is a mistake: it is what auto resolves to.
  r.policy = tape_policy::mixed;
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), logic_error);
}

TEST(TierPlanner, ChainsLongerThanTheTablesGetTheMixedScheduleNoWorseThanTheHostSplitOrRevolve)
{
  // 5000 equal steps: too long for the optimiser's tables; planned with the steps in blocks and
  // by the candidates of docs/tiers.md ("Long chains").
  tier_request r = chain_request(tape_policy::automatic, max_schedule_steps(true) + 1000, 40 * MiB);
  tier_plan const p = plan_tiers(r);
  expect_placed(p, r);
  EXPECT_EQ(p.policy, tape_policy::mixed) << p.describe();
  // The host holds every layer and the copies hide behind the steps: nothing is recomputed and
  // nothing costs more than keeping every layer, as under the host split.
  EXPECT_EQ(p.recompute_steps, 0u);
  EXPECT_NEAR(p.overhead_ms, 0.0, 1e-9);
  // Without the host: fewer untaped steps than Revolve with the snapshots the budget holds
  // (it keeps layers too; Revolve only checkpoints).
  r.host_helps = false;
  tier_plan const device = plan_tiers(r);
  expect_placed(device, r);
  EXPECT_EQ(device.policy, tape_policy::mixed) << device.describe();
  r.policy = tape_policy::recompute;
  tier_plan const revolve = plan_tiers(r);
  EXPECT_EQ(revolve.snapshots, 9u);
  EXPECT_LT(device.recompute_steps, revolve.recompute_steps);
  // 500 unequal steps under recompute: the schedule on the device alone, fewer untaped steps
  // than Revolve over the largest layer.
  tier_request u = chain_request(tape_policy::recompute, max_schedule_steps(false) + 100, 40 * MiB);
  u.layers[7].tape_bytes = 2 * MiB;
  tier_plan const q = plan_tiers(u);
  expect_placed(q, u);
  EXPECT_EQ(q.policy, tape_policy::recompute);
  EXPECT_FALSE(q.mixed.actions.empty());
  EXPECT_LT(q.recompute_steps, revolve_forward_steps(u.layers.size(), 9));
  // The optimiser plans such chains itself: within the budget, at its own prediction.
  schedule_model m;
  m.steps.assign(max_schedule_steps(false) + 1, step_cost{1.0, 1.0, 1.0, 10});
  m.steps[3].layer_bytes = 20;
  m.state_bytes = 10;
  m.device_bytes = 100;
  m.host_layers = false;
  m.checkpoints[1] = false;
  schedule const s = optimal_schedule(m);
  EXPECT_DOUBLE_EQ(evaluate_schedule(m, s.actions, s.unit_bytes), s.predicted_ms);
  EXPECT_LE(s.peak_device_bytes, m.device_bytes);
}

TEST(TierPlanner, BadRequestsAreTypedErrors)
{
  tier_request r = chain_request(tape_policy::automatic, 4, 32 * 1024);  // below one tile x depth
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), budget_error);
  r.layers.clear();
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), logic_error);
  r = chain_request(tape_policy::store, 2, 0);
  r.layers[1].tape_bytes = 0;
  EXPECT_THROW(static_cast<void>(plan_tiers(r)), logic_error);
}

TEST(GreedyEviction, KeepsTheBudgetAndEvictsCheapLargeStaleLayersFirst)
{
  std::vector<layer_info> layers{{100, 50.0, 0}, {100, 1.0, 0}, {100, 50.0, 0}, {100, 50.0, 0}};
  std::vector<bool> const evicted = greedy_eviction(layers, 300);
  EXPECT_EQ(evicted, (std::vector<bool>{false, true, false, false}));  // the cheap one goes
  EXPECT_THROW(static_cast<void>(greedy_eviction({{500, 1.0, 0}}, 300)), budget_error);
}

TEST(GreedyEviction, LayersAllAlikeAreEvictedOldestFirstWithoutScanningTheResidentOnes)
{
  // Alike layers score by staleness alone: the oldest goes first. 20 000 layers, 5000 resident:
  // the first 15 000 are evicted (the scan per eviction made 10^5 layers take 20 s).
  std::vector<layer_info> const layers(20000, layer_info{1024, 0.5, 1.0});
  std::vector<bool> const evicted = greedy_eviction(layers, 5000 * 1024 + 512);
  for (std::size_t i = 0; i < layers.size(); ++i) { ASSERT_EQ(evicted[i], i < 15000) << i; }
}

TEST(GreedyEviction, RandomLayersAlwaysFitAndEveryLayerIsPlaced)
{
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t const n = 1 + rng() % 40;
    std::vector<layer_info> layers(n);
    std::size_t largest = 0;
    for (layer_info& l : layers) {
      l.tape_bytes = 1 + rng() % 1000;
      l.forward_ms = 0.01 + static_cast<double>(rng() % 1000) / 10.0;
      largest = std::max(largest, l.tape_bytes);
    }
    std::size_t const budget = largest + rng() % 3000;
    std::vector<bool> const evicted = greedy_eviction(layers, budget);
    ASSERT_EQ(evicted.size(), n);
    // Replay: the resident bytes never exceed the budget (evicted layers leave for good).
    std::size_t resident = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!evicted[i]) { resident += layers[i].tape_bytes; }
    }
    EXPECT_LE(resident, budget);
    tier_request r;
    r.policy = tape_policy::recompute;
    r.layers = layers;
    r.budgets.device_bytes = budget;
    tier_plan const p = plan_tiers(r);
    expect_placed(p, r);
  }
}

// ---------------------------------------------------------------------------------------------
// Every policy and budget through the chain, on Allen–Cahn.

struct tier_case {
  tape_policy policy;
  int percent;  // of the full tape
};

/// Store-all on the CPU backend with poisoned buffers, tiles of 16 records in 2 stages, and the
/// copy bandwidths `bw` for the planner: what the tier tests compare every policy against.
ac::options poisoned_store_on_cpu(bandwidths bw)
{
  ac::options o;
  o.kind = backend::cpu;
  o.poison = true;
  o.pipeline.tile_records = 16;
  o.pipeline.stages = 2;
  o.bw = bw;
  o.policy = tape_policy::store;
  return o;
}

class AllenCahnTiers : public ::testing::TestWithParam<tier_case> {};

TEST_P(AllenCahnTiers, SameGradientBitsAsStoreAllWithinTheBudget)
{
  tier_case const c = GetParam();
  std::size_t const n = 29;  // 841 cells: 211 f32 records, 3376-byte layers
  std::size_t const steps = 12;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::options const base = poisoned_store_on_cpu({5.0, 5.0, 20.0});
  ac::gradient_result<float> const reference = ac::gradient(ac::problem{n, steps}, u0, base);

  ac::options o = base;
  o.policy = c.policy;
  o.budget_bytes = reference.chain.tape_bytes * static_cast<std::size_t>(c.percent) / 100;
  if (c.policy == tape_policy::automatic && c.percent == 10) {
    // A tenth of the tape holds neither a layer and a snapshot of the state nor anything but a
    // host ring, and auto never offloads on the CPU backend: it says so.
    try {
      static_cast<void>(ac::gradient(ac::problem{n, steps}, u0, o));
      ADD_FAILURE() << "auto should not fit a tenth of the tape on the CPU backend";
    } catch (budget_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("ask for offload"), std::string::npos) << e.what();
    }
    o.host_tier_on_cpu = true;  // where host memory helps, auto offloads
  }
  ac::gradient_result<float> const r = ac::gradient(ac::problem{n, steps}, u0, o);
  SCOPED_TRACE(r.chain.tiers.describe());
  EXPECT_EQ(std::memcmp(r.gradient.data(), reference.gradient.data(), u0.size() * sizeof(float)), 0);
  EXPECT_EQ(r.loss, reference.loss);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  EXPECT_GT(r.chain.peak_tape_bytes, 0u);
  EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host));
  if (r.chain.policy == tape_policy::recompute) {
    EXPECT_EQ(r.chain.recompute_steps, revolve_forward_steps(steps, r.chain.tiers.snapshots));
  } else if (r.chain.policy == tape_policy::mixed) {
    EXPECT_EQ(r.chain.recompute_steps, r.chain.tiers.recompute_steps);  // as planned
    if (!o.host_tier_on_cpu) { EXPECT_EQ(r.chain.tiers.count(tier::host), 0u); }  // auto on the CPU
  } else {
    EXPECT_EQ(r.chain.recompute_steps, 0u);
  }
  if (c.policy != tape_policy::automatic) { EXPECT_EQ(r.chain.policy, c.policy); }
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
}

TEST(MixedTiers, ATapeTenTimesTheDeviceBudgetMixesDeviceHostAndRecomputeWithTheSameBits)
{
  // The case: the tape is 10x the device budget, the host holds a quarter of it. On the
  // CPU backend auto leaves the host out, so host_tier_on_cpu lets it in to run that path here.
  std::size_t const n = 32;  // 4 KiB state, 4 KiB layers
  std::size_t const steps = 60;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  // a layer's copy hides behind a step: host layers are cheap
  ac::options const base = poisoned_store_on_cpu({50.0, 50.0, 20.0});
  ac::gradient_result<float> const reference = ac::gradient(ac::problem{n, steps}, u0, base);

  ac::options o = base;
  o.policy = tape_policy::automatic;
  o.host_tier_on_cpu = true;
  o.budget_bytes = reference.chain.tape_bytes / 10;
  o.host_budget_bytes = reference.chain.tape_bytes / 4;
  ac::gradient_result<float> const r = ac::gradient(ac::problem{n, steps}, u0, o);
  SCOPED_TRACE(r.chain.tiers.describe());
  EXPECT_EQ(r.chain.policy, tape_policy::mixed);
  EXPECT_GT(r.chain.tiers.count(tier::device), 0u);
  EXPECT_GT(r.chain.tiers.count(tier::host), 0u);
  EXPECT_GT(r.chain.tiers.count(tier::recompute), 0u);
  EXPECT_EQ(std::memcmp(r.gradient.data(), reference.gradient.data(), u0.size() * sizeof(float)), 0);
  EXPECT_EQ(r.loss, reference.loss);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  EXPECT_LE(r.chain.host_tape_bytes, o.host_budget_bytes);
  EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host));
  EXPECT_EQ(r.chain.recompute_steps, r.chain.tiers.recompute_steps);
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
  EXPECT_EQ(host_memory_usage(backend::cpu).current_bytes, 0u);

  // A slow copy engine (every D2H and H2D copy 2 ms late) changes when copies land, not the bits:
  // the events order every slot's writes, copies out, prefetches and reads.
  {
    fault::scoped_cpu_copy_delay const slow(std::chrono::milliseconds(2));
    ac::gradient_result<float> const delayed = ac::gradient(ac::problem{n, steps}, u0, o);
    EXPECT_EQ(std::memcmp(delayed.gradient.data(), reference.gradient.data(), u0.size() * sizeof(float)), 0);
    EXPECT_EQ(delayed.chain.prefetches, r.chain.prefetches);
    // The mixed schedule's host layers go through the same host tier as forced offload's, so
    // the compute stream's waits for slots and prefetches are timed here too.
    EXPECT_GT(delayed.chain.stall_ms, 2.0);
  }

  // Pinned memory that cannot be had (the n-th pinned allocation fails, for every n): the chain
  // plans again without host memory and gives the same bits, holding nothing afterwards.
  std::size_t fallbacks = 0;
  for (std::size_t k = 1;; ++k) {
    std::size_t const before = fault::injected(fault::site::host_allocation);
    ac::gradient_result<float> failed;
    {
      fault::scoped_failure const armed(fault::site::host_allocation, k);
      failed = ac::gradient(ac::problem{n, steps}, u0, o);
    }
    EXPECT_EQ(std::memcmp(failed.gradient.data(), reference.gradient.data(), u0.size() * sizeof(float)), 0) << k;
    EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
    EXPECT_EQ(host_memory_usage(backend::cpu).current_bytes, 0u);
    if (fault::injected(fault::site::host_allocation) == before) { break; }  // the k-th never came
    ++fallbacks;
    EXPECT_NE(failed.chain.fallback.find("pinned memory unavailable"), std::string::npos) << k;
    EXPECT_EQ(failed.chain.tiers.count(tier::host), 0u) << k;
    EXPECT_LE(failed.chain.peak_tape_bytes, o.budget_bytes) << k;
    ASSERT_LT(k, 1000u);
  }
  EXPECT_GT(fallbacks, 0u);

  // Without host_tier_on_cpu, auto keeps to device memory on the CPU backend.
  o.host_tier_on_cpu = false;
  ac::gradient_result<float> const cpu = ac::gradient(ac::problem{n, steps}, u0, o);
  EXPECT_EQ(cpu.chain.tiers.count(tier::host), 0u);
  EXPECT_EQ(cpu.chain.tiers.mixed.checkpoints[1], 0u);
  EXPECT_EQ(cpu.chain.host_tape_bytes, 0u);
  EXPECT_EQ(std::memcmp(cpu.gradient.data(), reference.gradient.data(), u0.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(
  PoliciesAndBudgets, AllenCahnTiers,
  ::testing::Values(tier_case{tape_policy::store, 100}, tier_case{tape_policy::automatic, 100},
                    tier_case{tape_policy::automatic, 50}, tier_case{tape_policy::automatic, 25},
                    tier_case{tape_policy::automatic, 10}, tier_case{tape_policy::offload, 100},
                    tier_case{tape_policy::offload, 50}, tier_case{tape_policy::offload, 25},
                    tier_case{tape_policy::offload, 10}, tier_case{tape_policy::recompute, 100},
                    tier_case{tape_policy::recompute, 50}, tier_case{tape_policy::recompute, 25}),
  [](auto const& param_info) {
    return std::string{to_string(param_info.param.policy)} + "_" + std::to_string(param_info.param.percent);
  });

TEST(AllenCahnTierFlow, OffloadStaysCorrectWithASlowCopyEngineAndReportsTheStall)
{
  std::size_t const n = 40;
  std::size_t const steps = 10;
  std::vector<double> const u0 = testing::random_state<double>(n * n, testing::fresh_seed());
  ac::options o;
  o.kind = backend::cpu;
  o.poison = true;
  o.policy = tape_policy::offload;
  o.bw = {5.0, 5.0, 20.0};
  o.budget_bytes = 2 * (n * n / 2) * 16;  // a ring of two layers
  ac::gradient_result<double> const fast = ac::gradient(ac::problem{n, steps}, u0, o);
  ac::gradient_result<double> slow;
  {
    fault::scoped_cpu_copy_delay const delay(std::chrono::milliseconds(3));
    slow = ac::gradient(ac::problem{n, steps}, u0, o);
  }
  EXPECT_EQ(std::memcmp(slow.gradient.data(), fast.gradient.data(), u0.size() * sizeof(double)), 0);
  EXPECT_EQ(slow.chain.tiers.ring_slots, 2u);
  EXPECT_EQ(slow.chain.prefetches, steps);
  // Every layer's copies took 3 ms each way while a step computes in microseconds: the compute
  // waited for most of them.
  EXPECT_GT(slow.chain.stall_ms, 20.0);
  EXPECT_LE(slow.chain.peak_tape_bytes, o.budget_bytes);
  std::vector<testing::real> const expect = testing::reference_gradient(testing::widen(u0), {n, steps});
  EXPECT_LT(testing::relative_error(slow.gradient, expect), 1e-10);
}

TEST(AllenCahnTierFlow, RecomputeCountsAndTimesItsSteps)
{
  std::size_t const n = 16;
  std::size_t const steps = 30;
  std::vector<double> const u0 = testing::random_state<double>(n * n, testing::fresh_seed());
  ac::options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::recompute;
  std::size_t const state = n * n * sizeof(double);
  std::size_t const layer = n * n / 2 * 16;
  o.budget_bytes = layer + 3 * state;  // three snapshots
  ac::gradient_result<double> const r = ac::gradient(ac::problem{n, steps}, u0, o);
  EXPECT_EQ(r.chain.tiers.snapshots, 3u);
  EXPECT_EQ(r.chain.recompute_steps, revolve_forward_steps(30, 3));
  EXPECT_GT(r.chain.recompute_ms, 0.0);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  std::vector<testing::real> const expect = testing::reference_gradient(testing::widen(u0), {n, steps});
  EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-10);
}

// ---------------------------------------------------------------------------------------------
// The cost model's terms and the choices that hinge on them (each test below failed on a mutant
// of the planner that the tests before it let through).

TEST(TierPlanner, AOneSlotRingHidesNoCopyBehindTheReverse)
{
  // 20 layers whose H2D copy takes 2 ms against 1 ms of reverse: with one slot (prefetch distance
  // 0) a copy leads by no layer, so the reverse waits for each in full (docs/tiers.md: a copy
  // hides only behind the compute of the layers it leads by); with two, each hides behind one
  // layer's reverse and what is left is the copies' excess over the reverse.
  tier_request r = chain_request(tape_policy::offload, 20, 4 * MiB);
  r.bw.h2d_GBps = static_cast<double>(4 * MiB) / 2e6;  // 2 ms a layer
  r.bw.d2h_GBps = 1000.0;
  double const d2h = static_cast<double>(4 * MiB) / (1000.0 * 1e6);
  tier_plan const one = plan_tiers(r);
  ASSERT_EQ(one.ring_slots, 1u);
  EXPECT_NEAR(one.overhead_ms, 20 * 2.0 + 20 * d2h, 1e-9);
  r.budgets.device_bytes = 8 * MiB;
  tier_plan const two = plan_tiers(r);
  ASSERT_EQ(two.ring_slots, 2u);
  EXPECT_NEAR(two.overhead_ms, 20 * 2.0 - 20 * 1.0, 1e-9);
}

TEST(TierPlanner, AutoOnATapeThatIsNoChainTakesTheHiddenHostSplitFillingTheBudget)
{
  // No state to checkpoint: auto picks the cheaper of the host split and greedy recomputation.
  // Copies hide behind 1 ms steps, so the split costs nothing while recomputation costs a forward
  // per evicted layer; the split keeps the last layers on the device beside its ring, as many as
  // fill the budget exactly.
  tier_request r = chain_request(tape_policy::automatic, 10, 20 * MiB);
  r.state_bytes = 0;
  tier_plan const p = plan_tiers(r);
  expect_placed(p, r);
  EXPECT_EQ(p.policy, tape_policy::offload) << p.describe();
  EXPECT_EQ(p.count(tier::recompute), 0u);
  EXPECT_NEAR(p.overhead_ms, 0.0, 1e-12);
  EXPECT_EQ(p.device_bytes, 20 * MiB) << p.describe();
  EXPECT_EQ((p.count(tier::device) + p.ring_slots) * 4 * MiB, 20 * MiB) << p.describe();
  for (std::size_t i = 0; i < p.count(tier::device); ++i) { EXPECT_EQ(p.tiers[9 - i], tier::device) << i; }
}

TEST(GreedyEviction, APlanCostsTheEvictedLayersForwardAndRoomToRebuildOne)
{
  // Layer 1 is cheap to run again and goes; its overhead is its forward (run again), not its
  // reverse (run in any plan), and the device holds the three resident layers and the one being
  // rebuilt, never more than the budget.
  tier_request r;
  r.policy = tape_policy::recompute;
  r.layers = {{100, 5.0, 1.0}, {100, 0.5, 7.0}, {100, 5.0, 1.0}, {100, 5.0, 1.0}};
  r.budgets.device_bytes = 350;
  tier_plan const p = plan_tiers(r);
  EXPECT_EQ(p.tiers, (std::vector<tier>{tier::device, tier::recompute, tier::device, tier::device}));
  EXPECT_EQ(p.recompute_steps, 1u);
  EXPECT_DOUBLE_EQ(p.overhead_ms, 0.5);
  EXPECT_EQ(p.device_bytes, std::min<std::size_t>(350, 3 * 100 + 100));
}

TEST(MixedTiers, AHostLayersCopyOutHidesOnlyBehindTheNextStepsFasterForward)
{
  // docs/tiers.md: a host layer costs max(0, D2H - min(f, a) of the next step) + max(0, H2D - b of
  // the next step). Untaped forwards of 1 ms, taped ones of 3 ms and a 1.5 ms D2H copy: 0.5 ms
  // per host layer (the copy may have only an untaped step to hide behind), not nothing.
  tier_request r = chain_request(tape_policy::automatic, 10, 20 * MiB);
  for (layer_info& l : r.layers) { l.aug_forward_ms = 3.0; }
  r.bw.d2h_GBps = static_cast<double>(4 * MiB) / 1.5e6;
  tier_plan const p = plan_tiers(r);
  ASSERT_EQ(p.policy, tape_policy::mixed) << p.describe();
  ASSERT_GT(p.count(tier::host), 0u) << p.describe();
  schedule_model m;  // the same chain and costs, budgets aside (a schedule's cost does not read them)
  m.steps.assign(10, step_cost{1.0, 3.0, 1.0, 4 * MiB});
  m.host_layer_ms.assign(10, 0.5);
  m.state_bytes = 4 * MiB;
  m.device_bytes = m.host_bytes = 1000 * MiB;
  m.write_ms[0] = m.read_ms[0] = static_cast<double>(4 * MiB) / (r.bw.d2d_GBps * 1e6);
  m.write_ms[1] = 1.5;
  m.read_ms[1] = static_cast<double>(4 * MiB) / (r.bw.h2d_GBps * 1e6);
  EXPECT_NEAR(evaluate_schedule(m, p.mixed.actions, p.mixed.unit_bytes), p.predicted_ms, 1e-9);
}

}  // namespace
}  // namespace tapeflow
