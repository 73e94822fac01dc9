// SPDX-License-Identifier: Apache-2.0
// Enzyme split-mode interop, device side: the staged slots in the reverse (a thread's slot in the
// forward is enzyme::slot, tapeflow/enzyme.hpp). Enzyme's calls themselves are in tapeflow/enzyme_abi.hpp (enzyme::augmented_forward
// and enzyme::reverse, with the slot's compile-time size); docs/enzyme.md.
#pragma once

#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/device/views.hpp>
#include <tapeflow/enzyme.hpp>

#include <cstddef>

namespace tapeflow::enzyme {

/// Slots of a layer's reader: visits every slot, last tile first, staged in shared memory through
/// the tile pipeline; `f(i, slot)` runs on one thread per slot with `slot` in shared memory.
template <int Stages, class F>
__device__ void for_each_slot_reverse(tape_reader<chunk> layer, std::size_t tape_bytes, F&& f)
{
  std::size_t const per_slot = slot_chunks(tape_bytes);
  device::tile_pipeline<chunk, Stages>::reverse(
    layer, [&](std::size_t, chunk const* staged, std::size_t first, std::size_t count) {
      std::size_t const first_slot = first / per_slot;
      std::size_t const slots = count / per_slot;
      for (std::size_t i = threadIdx.x; i < slots; i += blockDim.x) {
        f(first_slot + i, static_cast<void const*>(staged + i * per_slot));
      }
    });
}

}  // namespace tapeflow::enzyme
