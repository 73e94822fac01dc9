// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/enzyme.hpp>

#include <string>

namespace tapeflow::enzyme {

pipeline_request slot_pipeline(device_limits const& limits, std::size_t tape_bytes, std::size_t slots,
                               pipeline_request overrides)
{
  TAPEFLOW_EXPECTS(tape_bytes > 0, "an Enzyme tape needs a positive size");
  TAPEFLOW_EXPECTS(slots > 0, "a layer needs at least one slot");
  std::size_t const per_slot = slot_chunks(tape_bytes);
  TAPEFLOW_EXPECTS(slots <= static_cast<std::size_t>(-1) / slot_bytes(tape_bytes),
                   std::to_string(slots) + " slots of " + std::to_string(tape_bytes) + " bytes overflow");
  // Plan as if each slot were one record, then express the tile in chunks: tiles hold whole slots.
  pipeline_request as_slots = overrides;
  as_slots.record_bytes = slot_bytes(tape_bytes);
  as_slots.records = slots;
  pipeline_plan const plan = plan_pipeline(limits, as_slots);
  pipeline_request request = overrides;
  request.tile_records = plan.tile_records * per_slot;
  request.stages = plan.stages;
  request.block_threads = plan.block_threads;
  return request;
}

}  // namespace tapeflow::enzyme
