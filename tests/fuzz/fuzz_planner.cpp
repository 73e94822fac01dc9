// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: random layer sizes, costs, budgets, bandwidths and device limits into the
// planners. Every plan must place every layer, respect the budgets and keep a valid prefetch
// order; Revolve schedules must replay and be optimal; the schedule a chain runs for every plan
// must replay as a valid one; nothing may crash (fuzz_schedule.cpp: the optimiser on its own). Well-formed tier requests may fail only with
// budget_error; bad pipeline requests only with tapeflow's typed errors.
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/tiers.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include "require.hpp"

#include <cstdint>
#include <limits>
#include <vector>

namespace {

using tapeflow::fuzz::require;

void check_tiers(FuzzedDataProvider& in)
{
  using namespace tapeflow;
  tier_request r;
  r.policy = static_cast<tape_policy>(in.ConsumeIntegralInRange<int>(0, 3));
  std::size_t const n = in.ConsumeIntegralInRange<std::size_t>(1, 64);
  bool const uniform = in.ConsumeBool();
  std::size_t const common = in.ConsumeIntegralInRange<std::size_t>(1, std::size_t{1} << 30);
  for (std::size_t i = 0; i < n; ++i) {
    layer_info l;
    l.tape_bytes = uniform ? common : in.ConsumeIntegralInRange<std::size_t>(1, std::size_t{1} << 30);
    l.forward_ms = in.ConsumeFloatingPointInRange<double>(0.0, 100.0);
    l.reverse_ms = in.ConsumeFloatingPointInRange<double>(0.0, 100.0);
    r.layers.push_back(l);
  }
  r.state_bytes = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::size_t>(1, std::size_t{1} << 30) : 0;
  r.min_device_bytes = in.ConsumeIntegralInRange<std::size_t>(0, std::size_t{1} << 20);
  r.budgets.device_bytes = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::size_t>(1, std::size_t{1} << 36);
  r.budgets.host_bytes = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::size_t>(1, std::size_t{1} << 36);
  r.bw.h2d_GBps = in.ConsumeFloatingPointInRange<double>(0.0, 1000.0);
  r.bw.d2h_GBps = in.ConsumeFloatingPointInRange<double>(0.0, 1000.0);
  r.bw.d2d_GBps = in.ConsumeFloatingPointInRange<double>(0.0, 10000.0);

  // Every request built here is well-formed (layers, sizes that do not overflow, no 'mixed'
  // policy), so the only error plan_tiers may raise is budget_error: a logic_error would be one of
  // the planner's own schedules failing its replay, and it aborts the fuzzer.
  tier_plan p;
  try {
    p = plan_tiers(r);
  } catch (budget_error const&) {
    return;
  }
  require(p.tiers.size() == n, "every layer placed");
  require(p.policy != tape_policy::automatic, "policy resolved");
  std::size_t total = 0;
  std::size_t placed = 0;
  for (layer_info const& l : r.layers) { total += l.tape_bytes; }
  for (std::size_t b : p.bytes_per_tier) { placed += b; }
  require(placed == total, "bytes per tier add up to the tape");
  if (r.budgets.device_bytes != 0) { require(p.device_bytes <= r.budgets.device_bytes, "device budget respected"); }
  if (r.budgets.host_bytes != 0) { require(p.host_bytes <= r.budgets.host_bytes, "host budget respected"); }
  require(p.count(tier::host) == 0 || (p.ring_slots >= 1 && p.prefetch_distance < p.ring_slots),
          "a ring with a prefetch distance below its size");
  require(p.ring_slots <= p.count(tier::host), "no more ring slots than offloaded layers");
  if (r.policy == tape_policy::store) { require(p.count(tier::device) == n, "store keeps every layer"); }
  if (!p.mixed.actions.empty()) {
    // The optimiser's schedule (auto's mixed plans, recompute over unequal layers).
    require(p.mixed.fate.size() == n && p.mixed.recomputed.size() == n, "a schedule covers every step");
    require(p.predicted_ms == p.mixed.predicted_ms, "the plan predicts its schedule's time");
    require(p.policy == tape_policy::mixed || p.policy == tape_policy::recompute, "schedules are mixed or recompute");
  } else if (p.policy == tape_policy::recompute && p.snapshots > 0) {
    require(p.snapshots <= n, "no more snapshots than layers");
    require(p.recompute_steps == revolve_forward_steps(n, p.snapshots), "Revolve's count");
  }
  if (r.state_bytes > 0) {
    // A chain runs every plan as one schedule (chain_actions): it must replay as a valid one,
    // every step taped from the right state and reversed once, last first (an invalid schedule
    // is a logic_error, which aborts the fuzzer).
    schedule_model m;
    for (layer_info const& l : r.layers) { m.steps.push_back({l.forward_ms, l.forward_ms, l.reverse_ms, l.tape_bytes}); }
    m.state_bytes = r.state_bytes;
    m.device_bytes = m.host_bytes = std::numeric_limits<std::size_t>::max() / 4;
    static_cast<void>(evaluate_schedule(m, chain_actions(p, n), 1));
  }
  static_cast<void>(p.describe());
}

void check_revolve(FuzzedDataProvider& in)
{
  using namespace tapeflow;
  std::size_t const l = in.ConsumeIntegralInRange<std::size_t>(1, 300);
  std::size_t const s = in.ConsumeIntegralInRange<std::size_t>(1, 40);
  std::vector<revolve_action> const schedule = revolve_schedule(l, s);
  require(count_forward_steps(schedule) == revolve_forward_steps(l, s), "schedule is optimal");
  std::size_t where = 0;
  std::size_t next = l;
  std::vector<long> slot(std::min(l, s), -1);
  for (revolve_action const& a : schedule) {
    switch (a.op) {
      case revolve_op::store:
        require(where == a.from && a.slot < slot.size() && slot[a.slot] == -1, "store");
        slot[a.slot] = static_cast<long>(a.from);
        break;
      case revolve_op::restore:
        require(a.slot < slot.size() && slot[a.slot] == static_cast<long>(a.from), "restore");
        where = a.from;
        break;
      case revolve_op::advance:
        require(where == a.from && a.from < a.to, "advance");
        where = a.to;
        break;
      case revolve_op::taped:
        require(where == a.from && a.from + 1 == next, "taped");
        where = a.from + 1;
        break;
      case revolve_op::reverse:
        require(a.from + 1 == next, "reverse order");
        --next;
        break;
      case revolve_op::release:
        require(a.slot < slot.size() && slot[a.slot] == static_cast<long>(a.from), "release");
        slot[a.slot] = -1;
        break;
    }
  }
  require(next == 0, "every step reversed");
}

void check_greedy(FuzzedDataProvider& in)
{
  using namespace tapeflow;
  std::size_t const n = in.ConsumeIntegralInRange<std::size_t>(1, 64);
  std::vector<layer_info> layers(n);
  for (layer_info& l : layers) {
    l.tape_bytes = in.ConsumeIntegralInRange<std::size_t>(1, 1 << 20);
    l.forward_ms = in.ConsumeFloatingPointInRange<double>(0.0, 10.0);
  }
  std::size_t const budget = in.ConsumeIntegralInRange<std::size_t>(1, 1 << 24);
  std::vector<bool> evicted;
  try {
    evicted = greedy_eviction(layers, budget);
  } catch (budget_error const&) {
    return;
  }
  require(evicted.size() == n, "one decision per layer");
  std::size_t resident = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!evicted[i]) { resident += layers[i].tape_bytes; }
  }
  require(resident <= budget, "greedy eviction keeps the budget");
}

void check_pipeline(FuzzedDataProvider& in)
{
  using namespace tapeflow;
  device_limits d;
  d.kind = in.ConsumeBool() ? backend::cuda : backend::cpu;
  d.name = "fuzzed";
  d.multiprocessors = in.ConsumeIntegralInRange<int>(1, 256);
  d.shared_mem_per_block = in.ConsumeIntegralInRange<std::size_t>(1, 1 << 20);
  d.shared_mem_per_multiprocessor = in.ConsumeIntegralInRange<std::size_t>(1, 1 << 20);
  d.max_threads_per_block = in.ConsumeIntegralInRange<int>(1, 1024);
  d.max_threads_per_multiprocessor = in.ConsumeIntegralInRange<int>(1, 4096);
  d.warp_size = in.ConsumeBool() ? 32 : 64;
  d.async_copy = in.ConsumeBool();
  pipeline_request q;
  q.record_bytes = 16 * in.ConsumeIntegralInRange<std::size_t>(0, 256);
  q.records = in.ConsumeIntegralInRange<std::size_t>(0, std::size_t{1} << 40);
  q.tile_records = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::size_t>(0, 1 << 20);
  q.stages = in.ConsumeIntegralInRange<int>(0, 10);
  q.block_threads = in.ConsumeIntegralInRange<int>(0, 2048);
  q.force_plain = in.ConsumeBool();
  try {
    pipeline_plan const p = plan_pipeline(d, q);
    require(p.smem_bytes <= d.shared_mem_per_block, "staging fits the block");
    require(p.stages >= 2 && p.stages <= max_pipeline_stages, "stages in range");
    require(p.tiles * p.tile_records >= p.records, "tiles cover the layer");
    require(p.grid_blocks >= 1, "a grid");
  } catch (logic_error const&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: check_tiers(in); break;
    case 1: check_revolve(in); break;
    case 2: check_greedy(in); break;
    default: check_pipeline(in); break;
  }
  return 0;
}
