// SPDX-License-Identifier: Apache-2.0
// Enzyme split-mode interop, host side. Enzyme's augmented forward writes an opaque per-thread tape
// of a size known at compile time (`enzyme_allocated, sizeof(T)`) or at run time
// (`__enzyme_augmentsize`); its reverse reads it back. tapeflow gives each thread a *slot* of that
// size in a tiled layer (one record per thread, in 16-byte chunks) and stages whole slots back
// into shared memory for the reverse. See docs/enzyme.md and include/tapeflow/device/enzyme.cuh.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::enzyme {

/// The unit a slot is made of: 16 bytes, the unit of async copies and coalesced writes.
using chunk = value_record<std::uint32_t, 4>;

/// Bytes of one thread's slot for an Enzyme tape of `tape_bytes`: rounded up to whole chunks.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t slot_bytes(std::size_t tape_bytes) noexcept
{
  return (tape_bytes + sizeof(chunk) - 1) / sizeof(chunk) * sizeof(chunk);
}

/// Chunks in one slot.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t slot_chunks(std::size_t tape_bytes) noexcept
{
  return slot_bytes(tape_bytes) / sizeof(chunk);
}

/// A pipeline request for layers of `slots` slots of an Enzyme tape of `tape_bytes`: the records
/// are chunks, and every tile holds whole slots (the planner picks how many). Pass it as a chain's
/// `pipeline` option. Throws logic_error for a zero size or a slot the device cannot stage.
[[nodiscard]] pipeline_request slot_pipeline(device_limits const& limits, std::size_t tape_bytes, std::size_t slots,
                                             pipeline_request overrides = {});

}  // namespace tapeflow::enzyme
