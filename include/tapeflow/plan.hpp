// SPDX-License-Identifier: Apache-2.0
// The pipeline planner: tile size, pipeline depth and launch shape from a record size and the
// device's limits.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/views.hpp>

#include <cstddef>
#include <string>

namespace tapeflow {

/// The deepest pipeline a reverse kernel supports (stages of shared memory in flight).
inline constexpr int max_pipeline_stages = 8;
/// Register double-buffering (targets without async copy) holds at most this many 16-byte chunks
/// per thread, which bounds the tile size of the plain pipeline.
inline constexpr int max_register_chunks = 8;
/// Shared memory per block the planner leaves to what the pipelines declare statically (the
/// cuda::pipeline state, the bulk pipeline's barriers: a few bytes per stage), so that a plan's
/// dynamic staging plus the static part stays within the block's limit.
inline constexpr std::size_t pipeline_static_smem_bytes = 1024;

/// How the CPU backend hands a reverse its tiles (cpu::reverse_tiles). GPU backends always stage.
enum class cpu_staging {
  /// Each tile is read where it lies, and the tiles of a layer are spread over the CPU's threads
  /// (cpu::threads()). The default: on a CPU a copy into a ring buys nothing the caches and the
  /// hardware prefetchers do not already do.
  in_place,
  /// Tiles are copied into a ring of `stages` slots by a persistent staging thread and consumed
  /// in order on the calling thread: the GPU pipeline's flow control, run on a CPU.
  ring,
};

[[nodiscard]] constexpr char const* to_string(cpu_staging s) noexcept
{
  return s == cpu_staging::in_place ? "in-place" : "ring";
}

/// What a caller asks of the planner. Zero means "choose for me".
struct pipeline_request {
  std::size_t record_bytes{0};   ///< sizeof(record); a positive multiple of 16
  std::size_t records{0};        ///< records per layer
  std::size_t tile_records{0};   ///< records per tile
  int stages{0};                 ///< tiles in flight per block, >= 2
  int block_threads{0};          ///< threads per block (GPU backends)
  bool force_plain{false};       ///< use register double-buffering even where async copy exists
  /// Stage tiles with the sm_90 bulk-copy engine (cp.async.bulk + mbarrier) where the device has
  /// it; elsewhere the plan keeps cp.async (a preference, so portable code may always ask). The
  /// binary must hold sm_90 code for the reverse kernel: an sm_80-only build traps there.
  bool bulk_copy{false};
  /// CPU backend: in place (default) or through the staging ring.
  cpu_staging staging{cpu_staging::in_place};
  /// Records a reverse reads on each side of its tile besides the tile's own (a stencil's
  /// neighbours; periodic: the layer wraps around). Every stage, on the CPU ring and in the device
  /// pipelines (device::tile_pipeline::reverse_windows), holds the tile with its halos; the planner
  /// fits that window into the staging memory (and, for register double-buffering, the registers).
  std::size_t halo_records{0};
};

/// What the planner decided: how a layer is tiled and how its reverse kernel is launched.
struct pipeline_plan {
  backend kind{backend::cpu};
  std::size_t record_bytes{0};
  std::size_t records{0};
  std::size_t tile_records{0};
  std::size_t tiles{0};
  int stages{0};
  int block_threads{0};
  int grid_blocks{0};           ///< persistent grid: each block walks its tiles last-first
  std::size_t smem_bytes{0};    ///< stages * tile bytes
  bool async_copy{false};       ///< cp.async pipeline (else register double-buffering)
  bool bulk_copy{false};        ///< async tiles staged by the bulk-copy engine (sm_90)
  cpu_staging staging{cpu_staging::in_place};  ///< CPU backend: how tiles reach the reverse
  std::size_t halo_records{0};  ///< records readable on each side of a tile (a stencil's halo)

  [[nodiscard]] tile_layout layout() const noexcept { return {records, tile_records}; }
  [[nodiscard]] std::size_t tile_bytes() const noexcept { return tile_records * record_bytes; }
  /// Records one staged tile occupies with its halo on both sides.
  [[nodiscard]] std::size_t window_records() const noexcept { return tile_records + 2 * halo_records; }
  /// One line a person can read: "tiles of 2048 records (32 KiB) x 3 stages, grid 264 x 256".
  [[nodiscard]] std::string describe() const;
};

/// Plans the tiling and staging of layers of `request.records` records on `limits`' device.
/// Throws logic_error for sizes of zero, records that are not a multiple of 16 bytes, and
/// explicit tile/stage/thread settings the device cannot hold.
[[nodiscard]] pipeline_plan plan_pipeline(device_limits const& limits, pipeline_request const& request);

}  // namespace tapeflow
