// SPDX-License-Identifier: Apache-2.0
// The staged reverse with Hopper's bulk-copy engine (sm_90: cp.async.bulk, the 1-D form of TMA):
// one thread per block issues each tile as a single bulk copy into shared memory that completes
// on an mbarrier carrying the byte count; every thread waits on the barrier's phase parity. No
// per-thread address arithmetic or per-thread copy instructions, unlike cp.async.
//
//   bulk_tile_pipeline<R, S>::reverse(tape, consume)   same contract as tile_pipeline<R, S>
//
// Compiled for every architecture; on devices below sm_90 it traps, so hosts must launch it only
// where bulk_copy_supported(limits) (tile_pipeline<R, S> is the portable choice).
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/tile_pipeline.cuh>

#if defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
#include <cuda/barrier>
#define TAPEFLOW_HAS_BULK_PIPELINE 1
#endif

namespace tapeflow::device {

/// True where bulk_tile_pipeline can run: an sm_90+ CUDA device (the binary must also hold sm_90
/// code for the kernel: check cudaFuncAttributes::binaryVersion, as kernels/tape_bound does).
[[nodiscard]] inline bool bulk_copy_supported(device_limits const& limits) noexcept
{
  return limits.kind == backend::cuda && limits.compute_capability >= 90;
}

#if defined(TAPEFLOW_HAS_BULK_PIPELINE)
template <class R, int Stages>
struct bulk_tile_pipeline {
  static_assert(Stages >= 2 && Stages <= max_pipeline_stages, "a tile pipeline needs 2..8 stages");

  static constexpr std::size_t smem_bytes(std::size_t tile_records) noexcept
  {
    return Stages * tile_records * sizeof(R);
  }

  template <class Consume>
  __device__ static void reverse(tape_reader<R> tape, Consume&& consume)
  {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    using barrier = cuda::barrier<cuda::thread_scope_block>;
#pragma nv_diagnostic push
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier full[Stages];  // initialised below by one thread, as init() requires
#pragma nv_diagnostic pop
    R* const slots = staging_slots<R>();
    std::size_t const tile_records = tape.layout().tile_records;
    reverse_tile_order const order{tape.tiles(), blockIdx.x, gridDim.x};
    std::size_t const mine = order.count();

    if (threadIdx.x == 0) {
      for (int s = 0; s < Stages; ++s) { init(&full[s], 1); }  // one arrival per phase: the issuing thread's
      cuda::device::experimental::fence_proxy_async_shared_cta();  // the copy engine sees the initialised barriers
    }
    __syncthreads();

    // Thread 0 only: tile f into slot f % Stages, completing on that slot's barrier.
    auto issue = [&](std::size_t f) {
      std::size_t const tile = order.tile(f);
      barrier& b = full[f % Stages];
      std::size_t const bytes = tape.tile_size(tile) * sizeof(R);
      cuda::device::memcpy_async_tx(slots + (f % Stages) * tile_records, tape.tile(tile),
                                    cuda::aligned_size_t<16>(bytes), b);
      static_cast<void>(cuda::device::barrier_arrive_tx(b, 1, static_cast<std::ptrdiff_t>(bytes)));
    };
    if (threadIdx.x == 0) {
      for (std::size_t f = 0; f < mine && f < static_cast<std::size_t>(Stages); ++f) { issue(f); }
    }
    for (std::size_t k = 0; k < mine; ++k) {
      // The slot's barrier completes a phase per use: use j = k / Stages waits on parity j & 1.
      full[k % Stages].wait_parity(((k / Stages) & 1) != 0);
      std::size_t const tile = order.tile(k);
      consume(tile, static_cast<R const*>(slots + (k % Stages) * tile_records), tape.layout().first(tile),
              tape.tile_size(tile));
      __syncthreads();  // every thread is done with the slot before the engine refills it
      if (threadIdx.x == 0 && k + Stages < mine) { issue(k + Stages); }
    }
#else
    static_cast<void>(tape);
    static_cast<void>(consume);
    __trap();  // launched on a device without bulk copies: the host checks bulk_copy_supported()
#endif
  }
};
#endif  // TAPEFLOW_HAS_BULK_PIPELINE

}  // namespace tapeflow::device
