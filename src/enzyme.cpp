// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/enzyme.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tapeflow::enzyme::detail {

// The host side of the cache hooks (include/tapeflow/enzyme_abi.hpp): augmented_forward sets the
// calling thread's cursor for one call.
cache_cursor*& current_cache() noexcept
{
  thread_local cache_cursor* cursor = nullptr;
  return cursor;
}

namespace {
cache_cursor& cursor_or_abort(char const* hook) noexcept
{
  cache_cursor* const c = current_cache();
  if (c == nullptr) {
    std::fprintf(stderr, "tapeflow: %s called outside tapeflow::enzyme::augmented_forward (no cache region)\n", hook);
    std::abort();
  }
  return *c;
}
}  // namespace

}  // namespace tapeflow::enzyme::detail

extern "C" {
// Called only from Enzyme-generated code (tapeflow's pass routes its cache allocations here).
void* tapeflow_enzyme_cache_alloc(std::size_t bytes)
{
  return tapeflow::enzyme::detail::cursor_or_abort("tapeflow_enzyme_cache_alloc").allocate(bytes);
}
void* tapeflow_enzyme_cache_realloc(void* p, std::size_t bytes)
{
  return tapeflow::enzyme::detail::cursor_or_abort("tapeflow_enzyme_cache_realloc").reallocate(p, bytes);
}
void tapeflow_enzyme_cache_free(void*) {}  // regions are rewound by the next augmented forward, not freed
}

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

cache_pool::cache_pool(backend kind, std::size_t layers, std::size_t slots, std::size_t region_bytes, stream_view s)
  : layers_(layers), slots_(slots), region_bytes_(region_bytes)
{
  TAPEFLOW_EXPECTS(layers > 0 && slots > 0 && region_bytes > 0, "an Enzyme cache pool needs layers, slots and bytes");
  TAPEFLOW_EXPECTS(region_bytes % 16 == 0, "an Enzyme cache region is whole 16-byte blocks, not " +
                                             std::to_string(region_bytes) + " bytes");
  TAPEFLOW_EXPECTS(slots <= static_cast<std::size_t>(-1) / region_bytes / layers,
                   std::to_string(layers) + " x " + std::to_string(slots) + " regions of " +
                     std::to_string(region_bytes) + " bytes overflow");
  regions_ = device_buffer(kind, layers * slots * region_bytes, s);
  status_ = device_buffer(kind, sizeof(cache_status), s);
  reset(s);
}

cache_view cache_pool::view(std::size_t layer) noexcept
{
  return cache_view{regions_.data_as<unsigned char>() + layer * slots_ * region_bytes_, region_bytes_, slots_,
                    status_.data_as<cache_status>()};
}

void cache_pool::reset(stream_view s) { status_.fill(0, s); }

void cache_pool::check(stream_view s)
{
  cache_status status{};
  status_.download(&status, sizeof status, s);
  if (status.overflows == 0) { return; }
  reset(s);
  TAPEFLOW_FAIL_BYTES(budget_error, std::to_string(status.overflows) + " Enzyme cache allocations did not fit their slot's " +
                                std::to_string(region_bytes_) + "-byte region: a slot needs at least " +
                                std::to_string(status.needed) + " bytes (the layer's results are void)",
                     static_cast<std::size_t>(status.needed));
}

}  // namespace tapeflow::enzyme
