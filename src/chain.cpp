// SPDX-License-Identifier: Apache-2.0
// plan_chain: a chain's sizes checked, its layers tiled (plan.hpp), its step costs given or
// estimated, its layers placed in tiers (tiers.hpp). What tapeflow::chain runs, before it runs.
#include <tapeflow/bandwidth.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/tiers.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tapeflow {

chain_stats plan_chain(std::size_t record_bytes, std::size_t records_per_step, std::size_t steps,
                       std::size_t state_bytes, chain_options const& options)
{
  TAPEFLOW_EXPECTS(steps > 0, "a chain needs at least one step");  // the list form reads 0 as one
  return plan_chain(record_bytes, std::vector<std::size_t>{records_per_step}, state_bytes, options, steps);
}

chain_stats plan_chain(std::size_t record_bytes, std::vector<std::size_t> const& records_per_step,
                       std::size_t state_bytes, chain_options const& options, std::size_t steps)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::plan_chain");
  bool const one_size = records_per_step.size() == 1;
  TAPEFLOW_EXPECTS(one_size || steps == 0 || steps == records_per_step.size(),
                   "plan_chain: " + std::to_string(records_per_step.size()) + " record counts for " +
                     std::to_string(steps) + " steps");
  if (!one_size || steps == 0) { steps = records_per_step.size(); }  // one entry and no count: one step
  TAPEFLOW_EXPECTS(steps > 0, "a chain needs at least one step");
  TAPEFLOW_EXPECTS(state_bytes > 0, "a chain's state must hold at least one byte");
  TAPEFLOW_EXPECTS(state_bytes <= max_plan_bytes, "a chain's state of " + std::to_string(state_bytes) +
                                                    " bytes is past what the planners take (2^56)");
  std::size_t largest = 0;
  for (std::size_t records : records_per_step) {
    TAPEFLOW_EXPECTS(records > 0, "a chain step must write at least one record");
    TAPEFLOW_EXPECTS(records <= static_cast<std::size_t>(-1) / record_bytes,
                     "a layer of " + std::to_string(records) + " records overflows");
    largest = std::max(largest, records);
  }
  bool const uniform =
    std::all_of(records_per_step.begin(), records_per_step.end(), [&](std::size_t r) { return r == largest; });
  pipeline_request request = options.pipeline;
  request.record_bytes = record_bytes;
  request.records = largest;
  device_limits const limits = query_device_limits(options.kind);
  chain_stats stats;
  stats.kind = options.kind;
  stats.plan = plan_pipeline(limits, request);
  stats.steps = steps;
  stats.layer_bytes = layer_bytes(record_bytes, largest);
  if (uniform) {
    TAPEFLOW_EXPECTS(stats.layer_bytes <= static_cast<std::size_t>(-1) / steps,
                     "the tape's size overflows: " + std::to_string(steps) + " layers of " +
                       std::to_string(stats.layer_bytes) + " bytes");
    stats.tape_bytes = stats.layer_bytes * steps;
  } else {
    // Layers of different sizes: each tiled on its own (one plan per distinct size).
    std::map<std::size_t, pipeline_plan> plans;
    stats.step_plans.reserve(steps);
    for (std::size_t records : records_per_step) {
      auto it = plans.find(records);
      if (it == plans.end()) {
        request.records = records;
        it = plans.emplace(records, plan_pipeline(limits, request)).first;
      }
      stats.step_plans.push_back(it->second);
      std::size_t const bytes = layer_bytes(record_bytes, records);
      TAPEFLOW_EXPECTS(bytes <= static_cast<std::size_t>(-1) - stats.tape_bytes, "the tape's size overflows");
      stats.tape_bytes += bytes;
    }
  }
  stats.budget_bytes = options.budget_bytes;

  tier_request tiers;
  tiers.policy = options.policy;
  tiers.state_bytes = state_bytes;
  // Nothing runs on less than the staging a layer's reverse needs: its staged tiles (one tile
  // and its halo, read in place on the CPU), or the layer if smaller.
  std::size_t const staging =
    stats.plan.smem_bytes != 0 ? stats.plan.smem_bytes : stats.plan.window_records() * stats.plan.record_bytes;
  tiers.min_device_bytes = std::min(staging, stats.layer_bytes);
  tiers.budgets = {options.budget_bytes, options.host_budget_bytes};
  // A copy into host memory saves nothing on the CPU backend: `auto` keeps to the device there.
  tiers.host_helps = options.kind != backend::cpu || options.host_tier_on_cpu;
  bool const fits_as_stored = options.budget_bytes == 0 || stats.tape_bytes <= options.budget_bytes;
  // Costs shape every plan but the device tier's: measure the bandwidths only when they matter.
  bool const needs_costs = options.policy != tape_policy::store &&
                           !(options.policy == tape_policy::automatic && fits_as_stored);
  tiers.bw = options.bw;
  if (needs_costs && (tiers.bw.h2d_GBps <= 0 || tiers.bw.d2h_GBps <= 0 || tiers.bw.d2d_GBps <= 0)) {
    tiers.bw = measure_bandwidths(options.kind);
  }
  // A step reads and writes the state and writes (or reads) its layer: estimate its time from
  // the traffic at the device's copy bandwidth (a copy moves each byte twice).
  auto const step_ms = [&](std::size_t bytes) {
    return tiers.bw.d2d_GBps > 0 ? static_cast<double>(2 * state_bytes + bytes) / (2.0 * tiers.bw.d2d_GBps * 1e6)
                                 : 0.0;
  };
  std::vector<step_cost> const& measured = options.step_costs;
  TAPEFLOW_EXPECTS(measured.size() <= 1 || measured.size() == steps,
                   "chain_options::step_costs needs one entry, or one per step (" + std::to_string(steps) + ")");
  for (step_cost const& c : measured) {
    TAPEFLOW_EXPECTS(plannable_ms(c.forward_ms) && plannable_ms(c.aug_forward_ms) && plannable_ms(c.reverse_ms),
                     "chain_options::step_costs must be finite, from 0 to 1e12 ms");
  }
  auto const layer_of = [&](std::size_t t, std::size_t bytes) {
    if (measured.empty()) { return layer_info{bytes, step_ms(bytes), step_ms(bytes)}; }
    step_cost const& c = measured.size() == 1 ? measured[0] : measured[t];
    // One measured step stands for all: taped forward and reverse scale with the layer's size.
    double const scale = measured.size() == 1 && c.layer_bytes > 0 && c.layer_bytes != bytes
                           ? static_cast<double>(bytes) / static_cast<double>(c.layer_bytes)
                           : 1.0;
    return layer_info{bytes, c.forward_ms, c.reverse_ms * scale, c.aug_forward_ms * scale};
  };
  if (uniform && measured.size() <= 1) {
    tiers.layers.assign(steps, layer_of(0, stats.layer_bytes));
  } else {
    for (std::size_t t = 0; t < steps; ++t) {
      tiers.layers.push_back(layer_of(t, layer_bytes(record_bytes, records_per_step[uniform ? 0 : t])));
    }
  }
  stats.tiers = plan_tiers(tiers);
  stats.policy = stats.tiers.policy;
  TAPEFLOW_EXPECTS(!options.capture_reverse || stats.policy == tape_policy::store,
                   "capture_reverse needs every layer on the device (policy store); the plan chose '" +
                     std::string{to_string(stats.policy)} + "'");
  stats.step_costs = measured;
  stats.host_tape_bytes = stats.tiers.host_bytes;
  return stats;
}

}  // namespace tapeflow
