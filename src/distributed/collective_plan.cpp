// SPDX-License-Identifier: Apache-2.0
// One schedule for every rank (tapeflow/detail/collective_plan.hpp).
#include <tapeflow/detail/collective_plan.hpp>

#include <tapeflow/bandwidth.hpp>
#include <tapeflow/tiers.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace tapeflow::detail {

namespace {

std::size_t least_budget(distributed::communicator& comm, std::size_t budget)
{
  constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  std::size_t const least = distributed::min_over_ranks(comm, budget == 0 ? unlimited : budget);
  return least == unlimited ? 0 : least;
}

template <class T>
void mix(std::uint64_t& hash, T const& value)
{
  hash = distributed::fingerprint(&value, sizeof value, hash);
}

}  // namespace

void agree_plan_inputs(distributed::communicator& comm, chain_options& options)
{
  // What decides which meetings planning holds must be the same everywhere, or the ranks would
  // meet in different orders: checked first, so that a difference is named, not a hang or a
  // meeting of mismatched sizes.
  std::uint64_t chosen = distributed::fingerprint(nullptr, 0);
  mix(chosen, options.policy);
  mix(chosen, options.measure_steps);
  mix(chosen, options.step_costs.size());
  distributed::require_same(comm, chosen, "the chain's policy, measure_steps and number of step costs");
  options.budget_bytes = least_budget(comm, options.budget_bytes);
  options.host_budget_bytes = least_budget(comm, options.host_budget_bytes);
  // The cost model prices copies only when the tape may leave the device: without budgets, and
  // without offload asked for, every rank keeps it all there, and nothing is measured.
  bool const priced = options.budget_bytes != 0 || options.host_budget_bytes != 0 ||
                      options.policy == tape_policy::offload || options.measure_steps;
  if (!priced) { return; }
  if (options.bw.h2d_GBps <= 0 || options.bw.d2h_GBps <= 0 || options.bw.d2d_GBps <= 0) {
    options.bw = measure_bandwidths(options.kind);
  }
  std::vector<double> bw{-options.bw.h2d_GBps, -options.bw.d2h_GBps, -options.bw.d2d_GBps};
  distributed::max_over_ranks(comm, bw);  // the greatest negation: the least bandwidth
  options.bw = {-bw[0], -bw[1], -bw[2]};
}

void agree_step_costs(distributed::communicator& comm, std::vector<step_cost>& costs)
{
  std::vector<double> ms;
  ms.reserve(costs.size() * 3);
  for (step_cost const& c : costs) {
    ms.push_back(c.forward_ms);
    ms.push_back(c.aug_forward_ms);
    ms.push_back(c.reverse_ms);
  }
  distributed::max_over_ranks(comm, ms);
  for (std::size_t i = 0; i < costs.size(); ++i) {
    costs[i].forward_ms = ms[3 * i];
    costs[i].aug_forward_ms = ms[3 * i + 1];
    costs[i].reverse_ms = ms[3 * i + 2];
  }
}

std::uint64_t schedule_fingerprint(chain_stats const& stats, std::size_t steps)
{
  std::uint64_t hash = distributed::fingerprint(nullptr, 0);
  mix(hash, stats.policy);
  mix(hash, steps);
  mix(hash, stats.tiers.ring_slots);
  mix(hash, stats.tiers.prefetch_distance);
  mix(hash, stats.tiers.snapshots);
  for (tier const t : stats.tiers.tiers) { mix(hash, t); }
  for (std::size_t t = 0; t < steps; ++t) {
    pipeline_plan const& p = step_plan(stats, t);
    mix(hash, p.records);
    mix(hash, p.tile_records);
  }
  for (schedule_action const& a : chain_actions(stats.tiers, steps)) {
    mix(hash, a.kind);
    mix(hash, a.step);
    mix(hash, a.to);
    mix(hash, a.where);
    mix(hash, a.kept);
  }
  return hash;
}

}  // namespace tapeflow::detail
