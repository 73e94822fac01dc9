// SPDX-License-Identifier: Apache-2.0
// Enzyme split-mode interop, device side: a thread's tape slot in the forward, the staged slots in
// the reverse. With Enzyme's plugin (TAPEFLOW_WITH_ENZYME), kernels pass the slot straight to
// `__enzyme_augmentfwd(..., enzyme_tape, slot)` and the staged slot to `__enzyme_reverse(..., tape)`.
#pragma once

#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/device/views.hpp>
#include <tapeflow/enzyme.hpp>

#include <cstddef>

namespace tapeflow::enzyme {

/// Thread `i`'s slot (slot_bytes(tape_bytes) bytes) in a writing layer.
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline void* slot(tape_writer<chunk> layer, std::size_t tape_bytes,
                                                     std::size_t i) noexcept
{
  return layer.data() + i * slot_chunks(tape_bytes);
}

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

#if defined(TAPEFLOW_WITH_ENZYME)
// Enzyme's split-mode entry points (declared as Enzyme documents them; the plugin resolves them).
extern __device__ int enzyme_allocated;
extern __device__ int enzyme_tape;
extern __device__ int enzyme_dup;
extern __device__ int enzyme_const;
template <class Return, class... Args>
__device__ Return __enzyme_augmentfwd(void*, Args...);
template <class Return, class... Args>
__device__ Return __enzyme_reverse(void*, Args...);
template <class... Args>
std::size_t __enzyme_augmentsize(void*, Args...);
#endif
