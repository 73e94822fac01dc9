// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/chain.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/policy.hpp>

namespace tapeflow {

std::string_view to_string(tape_policy policy) noexcept
{
  switch (policy) {
    case tape_policy::automatic: return "auto";
    case tape_policy::store: return "store";
    case tape_policy::offload: return "offload";
    case tape_policy::recompute: return "recompute";
  }
  return "unknown";
}

tape_policy parse_policy(std::string_view name)
{
  for (tape_policy p : {tape_policy::automatic, tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    if (name == to_string(p)) { return p; }
  }
  TAPEFLOW_FAIL(logic_error, "unknown policy '" + std::string{name} + "' (expected auto, store, offload or recompute)");
}

tape_policy resolve_policy(tape_policy requested, std::size_t tape_bytes, std::size_t budget_bytes)
{
  if (requested == tape_policy::offload || requested == tape_policy::recompute) {
    TAPEFLOW_FAIL(unavailable_error, "policy '" + std::string{to_string(requested)} +
                                       "' is not available yet: this build keeps every layer on the device "
                                       "(policy 'store')");
  }
  if (budget_bytes != 0 && tape_bytes > budget_bytes) {
    TAPEFLOW_FAIL_BYTES(budget_error,
                  "the tape needs " + std::to_string(tape_bytes) + " bytes on the device; the budget is " +
                    std::to_string(budget_bytes) + " bytes and no other tier is available yet",
                  tape_bytes);
  }
  return tape_policy::store;
}

chain_stats plan_chain(std::size_t record_bytes, std::size_t records_per_step, std::size_t steps,
                       chain_options const& options)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::plan_chain");
  TAPEFLOW_EXPECTS(steps > 0, "a chain needs at least one step");
  TAPEFLOW_EXPECTS(records_per_step > 0, "a chain step must write at least one record");
  pipeline_request request = options.pipeline;
  request.record_bytes = record_bytes;
  request.records = records_per_step;
  chain_stats stats;
  stats.kind = options.kind;
  stats.plan = plan_pipeline(query_device_limits(options.kind), request);
  stats.steps = steps;
  TAPEFLOW_EXPECTS(records_per_step <= static_cast<std::size_t>(-1) / record_bytes,
                   "a layer of " + std::to_string(records_per_step) + " records overflows");
  stats.layer_bytes = layer_bytes(record_bytes, records_per_step);
  TAPEFLOW_EXPECTS(stats.layer_bytes <= static_cast<std::size_t>(-1) / steps,
                   "the tape's size overflows: " + std::to_string(steps) + " layers of " +
                     std::to_string(stats.layer_bytes) + " bytes");
  stats.tape_bytes = stats.layer_bytes * steps;
  stats.budget_bytes = options.budget_bytes;
  stats.policy = resolve_policy(options.policy, stats.tape_bytes, options.budget_bytes);
  return stats;
}

}  // namespace tapeflow
