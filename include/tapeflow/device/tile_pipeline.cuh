// SPDX-License-Identifier: Apache-2.0
// The staged reverse: a persistent grid walks a layer's tiles last-first, each block staging its
// next tiles into shared memory while it consumes the current one.
//
//   tile_pipeline<R, S>  (S >= 2)  cp.async on sm_80+ through per-thread cuda::pipeline groups:
//                                  S tiles in flight per block, each thread copying its 16-byte
//                                  chunks; block barriers publish a landed tile and free its slot.
//   tile_pipeline<R, 0>            register double-buffering for targets without async copy: the
//                                  next tile is loaded into registers while the current one is
//                                  consumed from shared memory.
//   tile_pipeline<R, -S>           (bulk_tile_pipeline<R, S>) sm_90's bulk-copy engine: one thread
//                                  issues each tile as one cp.async.bulk into shared memory that
//                                  completes on an mbarrier carrying the byte count; every thread
//                                  waits on the barrier's phase parity. Traps below sm_90.
//
// Reverse kernels read the tape only through these: `reverse(tape, consume)` calls
// `consume(tile, staged, first, count)` in every thread of the block with the tile's records in
// shared memory. A stencil's reverse, which also reads `halo` records on each side of its tile
// (tapeflow/halo.hpp), calls `reverse_windows(tape, halo, consume)`: each stage holds the tile's
// window (window_of: at most two runs of the layer, as it wraps past the end), and `consume(tile,
// window, first, count)` gets it as a tile_window. A plan's `halo_records` and `smem_bytes`
// (plan_pipeline) are what a launch of reverse_windows needs.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/halo.hpp>
#include <tapeflow/plan.hpp>

#if !defined(TAPEFLOW_PLATFORM_HIP)
#include <cuda/barrier>
#include <cuda/pipeline>
#define TAPEFLOW_HAS_ASYNC_PIPELINE 1
#define TAPEFLOW_HAS_BULK_PIPELINE 1
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tapeflow::device {

/// Block `block` of `grid` visits tiles (tiles-1-block), (tiles-1-block-grid), ...: the grid as a
/// whole walks the layer last-first, as the LIFO reverse reads it.
struct reverse_tile_order {
  std::size_t tiles;
  std::size_t block;
  std::size_t grid;

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t count() const noexcept
  {
    return block < tiles ? (tiles - block + grid - 1) / grid : 0;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t tile(std::size_t k) const noexcept
  {
    return tiles - 1 - (block + k * grid);
  }
};

/// The block's dynamic shared memory as staging slots of records.
template <class R>
__device__ R* staging_slots() noexcept
{
  return dynamic_shared<R>();
}

/// The records tile `tile` of `tape` is staged with: the tile and `halo` records on each side.
template <class R>
[[nodiscard]] TAPEFLOW_HOST_DEVICE window_span window_of_tile(tape_reader<R> const& tape, std::size_t tile,
                                                             std::size_t halo) noexcept
{
  return window_of(tape.layout().first(tile), tape.tile_size(tile), halo, tape.layout().records);
}

/// Where a tile's window lies in its layer: `head` records from `origin`, then, where it wraps
/// past the layer's end, the rest from record 0. Counted in 16-byte chunks, as the pipelines copy.
template <class R>
struct staged_window {
  using chunk = uint4;
  static constexpr std::size_t chunks_per_record = sizeof(R) / sizeof(chunk);

  window_span span;
  chunk const* head_source;  ///< the layer from record span.origin
  chunk const* tail_source;  ///< the layer from record 0
  std::size_t head_chunks;
  std::size_t chunks;        ///< the whole window's

  TAPEFLOW_HOST_DEVICE staged_window(tape_reader<R> const& tape, std::size_t tile, std::size_t halo) noexcept
    : span(window_of_tile(tape, tile, halo)),
      head_source(reinterpret_cast<chunk const*>(tape.tile(0) + span.origin)),
      tail_source(reinterpret_cast<chunk const*>(tape.tile(0))),
      head_chunks((span.extent < span.records - span.origin ? span.extent : span.records - span.origin) *
                  chunks_per_record),
      chunks(span.extent * chunks_per_record)
  {
  }
  /// Chunk c of the window, c < chunks.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE chunk const* source(std::size_t c) const noexcept
  {
    return c < head_chunks ? head_source + c : tail_source + (c - head_chunks);
  }
};

/// A tile's plain consumer, given its window: the tile's own records start at window[first].
template <class R, class Consume>
struct tile_of_window {
  Consume& consume;
  __device__ void operator()(std::size_t tile, tile_window<R> const& window, std::size_t first,
                             std::size_t count) const
  {
    consume(tile, &window[first], first, count);
  }
};

/// True where the device has the bulk-copy engine: an sm_90+ CUDA device. The code loaded for the
/// kernel must also be sm_90 (device::bulk_copy_runs in launch.cuh asks cudaFuncGetAttributes, and
/// device::launch refuses a bulk kernel loaded as older code).
[[nodiscard]] inline bool bulk_copy_supported(device_limits const& limits) noexcept
{
  return limits.kind == backend::cuda && limits.compute_capability >= 90;
}

template <class R, int Stages, class = void>
struct tile_pipeline;

#if defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
template <class R, int Stages>
struct tile_pipeline<R, Stages, std::enable_if_t<(Stages > 0)>> {
  static_assert(Stages >= 2 && Stages <= max_pipeline_stages, "a tile pipeline needs 2..8 stages");
  static_assert(sizeof(R) % 16 == 0, "records are whole 16-byte chunks");
  static constexpr bool async = true;

  /// Dynamic shared memory a launch needs for tiles of `tile_records`.
  static constexpr std::size_t smem_bytes(std::size_t tile_records) noexcept
  {
    return Stages * tile_records * sizeof(R);
  }

  /// Each thread copies its 16-byte chunks of a tile (coalesced across the block) as one
  /// cp.async group of its own per-thread pipeline; a block barrier then makes every thread's
  /// chunks of the oldest tile visible to all, and a second one frees its slot for the refill.
  /// (A block-scoped cuda::pipeline, whose stages complete on mbarriers, computed the same
  /// values but compute-sanitizer's synccheck rejected its barrier use on sm_90 and it moved
  /// 16 % fewer bytes per second on an H100: docs/gpu-validation.md.)
  template <class Consume>
  __device__ static void reverse(tape_reader<R> tape, Consume&& consume)
  {
    reverse_windows(tape, 0, tile_of_window<R, Consume>{consume});
  }

  /// The same, each stage holding the tile's window of `halo` records on each side.
  template <class Consume>
  __device__ static void reverse_windows(tape_reader<R> tape, std::size_t halo, Consume&& consume)
  {
    using chunk = uint4;
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();

    R* const slots = staging_slots<R>();
    std::size_t const slot_records = tape.layout().tile_records + 2 * halo;
    reverse_tile_order const order{tape.tiles(), blockIdx.x, gridDim.x};
    std::size_t const mine = order.count();

    std::size_t fetched = 0;
    for (std::size_t k = 0; k < mine; ++k) {
      // Keep Stages tiles in flight: one group per fetch up to k + Stages - 1. Past the block's
      // last tile the groups are empty, so "all but the newest Stages - 1 groups have landed"
      // always means "tile k has landed".
      for (; fetched < k + Stages; ++fetched) {
        pipe.producer_acquire();
        if (fetched < mine) {
          staged_window<R> const w(tape, order.tile(fetched), halo);
          auto* const dst = reinterpret_cast<chunk*>(slots + (fetched % Stages) * slot_records);
          // The window's run from its origin, then (where it wraps) its run from record 0: no
          // test per chunk on the path every tile takes.
          for (std::size_t c = threadIdx.x; c < w.head_chunks; c += blockDim.x) {
            cuda::memcpy_async(dst + c, w.head_source + c, cuda::aligned_size_t<sizeof(chunk)>(sizeof(chunk)), pipe);
          }
          for (std::size_t c = w.head_chunks + threadIdx.x; c < w.chunks; c += blockDim.x) {
            cuda::memcpy_async(dst + c, w.tail_source + (c - w.head_chunks),
                               cuda::aligned_size_t<sizeof(chunk)>(sizeof(chunk)), pipe);
          }
        }
        pipe.producer_commit();
      }
      cuda::pipeline_consumer_wait_prior<Stages - 1>(pipe);  // this thread's chunks of tile k
      __syncthreads();                                         // everyone's chunks of tile k
      std::size_t const tile = order.tile(k);
      consume(tile, tile_window<R>(slots + (k % Stages) * slot_records, window_of_tile(tape, tile, halo)),
              tape.layout().first(tile), tape.tile_size(tile));
      __syncthreads();  // every thread is done with the slot before tile k + Stages refills it
      pipe.consumer_release();
    }
  }
};

#endif  // TAPEFLOW_HAS_ASYNC_PIPELINE

template <class R>
struct tile_pipeline<R, 0, void> {
  static constexpr bool async = false;
  using chunk = uint4;
  static_assert(sizeof(R) % sizeof(chunk) == 0, "records are whole 16-byte chunks");

  static constexpr std::size_t smem_bytes(std::size_t tile_records) noexcept { return tile_records * sizeof(R); }

  template <class Consume>
  __device__ static void reverse(tape_reader<R> tape, Consume&& consume)
  {
    reverse_windows(tape, 0, tile_of_window<R, Consume>{consume});
  }

  /// The same, the slot holding the tile's window of `halo` records on each side (the window, not
  /// just the tile, must fit the registers: with_tile_pipeline checks the plan).
  template <class Consume>
  __device__ static void reverse_windows(tape_reader<R> tape, std::size_t halo, Consume&& consume)
  {
    chunk* const slot = reinterpret_cast<chunk*>(staging_slots<R>());
    reverse_tile_order const order{tape.tiles(), blockIdx.x, gridDim.x};
    std::size_t const mine = order.count();
    chunk held[max_register_chunks];
    window_span held_span{};  // the window `held` holds

    auto load = [&](std::size_t tile) {
      staged_window<R> const w(tape, tile, halo);
      held_span = w.span;
TAPEFLOW_UNROLL
      for (int q = 0; q < max_register_chunks; ++q) {
        std::size_t const c = threadIdx.x + static_cast<std::size_t>(q) * blockDim.x;
        if (c < w.chunks) { held[q] = *w.source(c); }
      }
    };
    auto store = [&]() {  // the held window into the slot; returns where it lies in the layer
      std::size_t const chunks = held_span.extent * staged_window<R>::chunks_per_record;
TAPEFLOW_UNROLL
      for (int q = 0; q < max_register_chunks; ++q) {
        std::size_t const c = threadIdx.x + static_cast<std::size_t>(q) * blockDim.x;
        if (c < chunks) { slot[c] = held[q]; }
      }
      return held_span;
    };

    if (mine == 0) { return; }
    load(order.tile(0));
    for (std::size_t k = 0; k < mine; ++k) {
      std::size_t const tile = order.tile(k);
      __syncthreads();  // every thread is done with the previous tile in shared memory
      window_span const span = store();
      __syncthreads();
      if (k + 1 < mine) { load(order.tile(k + 1)); }  // in flight while this tile is consumed
      consume(tile, tile_window<R>(reinterpret_cast<R const*>(slot), span), tape.layout().first(tile),
              tape.tile_size(tile));
    }
  }
};

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
    reverse_windows(tape, 0, tile_of_window<R, Consume>{consume});
  }

  /// The same, each stage holding the tile's window of `halo` records on each side: one bulk copy
  /// per run of the layer (two where the window wraps), both completing on the slot's barrier.
  template <class Consume>
  __device__ static void reverse_windows(tape_reader<R> tape, std::size_t halo, Consume&& consume)
  {
#if defined(TAPEFLOW_DEVICE_BULK_COPY)
    using barrier = cuda::barrier<cuda::thread_scope_block>;
#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress static_var_with_dynamic_init
#endif
    __shared__ barrier full[Stages];  // initialised below by one thread, as init() requires
#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif
    R* const slots = staging_slots<R>();
    std::size_t const slot_records = tape.layout().tile_records + 2 * halo;
    reverse_tile_order const order{tape.tiles(), blockIdx.x, gridDim.x};
    std::size_t const mine = order.count();

    if (threadIdx.x == 0) {
      for (int s = 0; s < Stages; ++s) { init(&full[s], 1); }  // one arrival per phase: the issuing thread's
      cuda::device::experimental::fence_proxy_async_shared_cta();  // the copy engine sees the initialised barriers
    }
    __syncthreads();

    // Thread 0 only: tile f's window into slot f % Stages, completing on that slot's barrier.
    auto issue = [&](std::size_t f) {
      using chunk = typename staged_window<R>::chunk;
      staged_window<R> const w(tape, order.tile(f), halo);
      barrier& b = full[f % Stages];
      auto* const slot = reinterpret_cast<chunk*>(slots + (f % Stages) * slot_records);
      cuda::device::memcpy_async_tx(slot, w.head_source, cuda::aligned_size_t<16>(w.head_chunks * sizeof(chunk)), b);
      if (w.head_chunks < w.chunks) {  // the window wraps past the end of the layer
        cuda::device::memcpy_async_tx(slot + w.head_chunks, w.tail_source,
                                      cuda::aligned_size_t<16>((w.chunks - w.head_chunks) * sizeof(chunk)), b);
      }
      static_cast<void>(cuda::device::barrier_arrive_tx(b, 1, static_cast<std::ptrdiff_t>(w.chunks * sizeof(chunk))));
    };
    if (threadIdx.x == 0) {
      for (std::size_t f = 0; f < mine && f < static_cast<std::size_t>(Stages); ++f) { issue(f); }
    }
    for (std::size_t k = 0; k < mine; ++k) {
      // The slot's barrier completes a phase per use: use j = k / Stages waits on parity j & 1.
      full[k % Stages].wait_parity(((k / Stages) & 1) != 0);
      std::size_t const tile = order.tile(k);
      consume(tile, tile_window<R>(slots + (k % Stages) * slot_records, window_of_tile(tape, tile, halo)),
              tape.layout().first(tile), tape.tile_size(tile));
      __syncthreads();  // every thread is done with the slot before the engine refills it
      if (threadIdx.x == 0 && k + Stages < mine) { issue(k + Stages); }
    }
#else
    static_cast<void>(tape);
    static_cast<void>(halo);
    static_cast<void>(consume);
    __trap();  // older code: device::launch refuses it (the bulk dispatch requires sm_90 code)
#endif
  }
};

/// The bulk variant as tile_pipeline<R, -S>, so kernels templated on a stage count run it unchanged.
template <class R, int Stages>
struct tile_pipeline<R, Stages, std::enable_if_t<(Stages < 0)>> : bulk_tile_pipeline<R, -Stages> {};
#endif  // TAPEFLOW_HAS_BULK_PIPELINE

}  // namespace tapeflow::device
