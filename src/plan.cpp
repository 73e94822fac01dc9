// SPDX-License-Identifier: Apache-2.0
// The pipeline planner. GPU: 256-thread blocks, tiles of about 8 KiB, up to 4 stages, as much of
// the multiprocessor's shared memory as leaves room for two resident blocks, a persistent grid of
// (multiprocessors x resident blocks). CPU: tiles of about 64 KiB read in place by every CPU thread,
// or, asked for, through a staging ring of 4 stages consumed by the calling thread.
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/plan.hpp>

#include <algorithm>
#include <cstdio>

namespace tapeflow {
namespace {

constexpr int gpu_block_threads = 256;
constexpr std::size_t gpu_tile_bytes = 8 * 1024;
constexpr std::size_t cpu_tile_bytes = 64 * 1024;
constexpr int default_stages = 4;
constexpr int gpu_resident_blocks = 2;

std::string bytes_text(std::size_t bytes)
{
  char text[32];
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) {
    std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
  } else {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  }
  return text;
}

std::size_t round_down(std::size_t value, std::size_t multiple) { return value / multiple * multiple; }

}  // namespace

std::string pipeline_plan::describe() const
{
  std::string text = std::to_string(records) + " records of " + std::to_string(record_bytes) + " B in " +
                     std::to_string(tiles) + (tiles == 1 ? " tile" : " tiles") + " of " +
                     std::to_string(tile_records) + " (" + bytes_text(tile_bytes()) + ")";
  if (kind == backend::cpu && staging == cpu_staging::in_place) {
    // Nothing staged: the stages are what a ring would use, not worth a mention.
  } else {
    text += ", " + std::to_string(stages) + " stages";
    if (kind != backend::cpu) { text += " (" + bytes_text(smem_bytes) + " staged)"; }
  }
  if (kind == backend::cpu) {
    std::string const halo =
      halo_records == 0 ? "" : ", halo of " + std::to_string(halo_records) + " records on each side";
    if (staging == cpu_staging::ring) {
      return text + " (" + bytes_text(smem_bytes) + " staged)" + halo + ", staging ring with a persistent worker";
    }
    return text + halo + ", read in place by " + std::to_string(grid_blocks) +
           (grid_blocks == 1 ? " thread" : " threads");
  }
  return text + ", grid " + std::to_string(grid_blocks) + " x " + std::to_string(block_threads) +
         (bulk_copy ? ", bulk-copy pipeline" : async_copy ? ", cp.async pipeline" : ", register double-buffering");
}

pipeline_plan plan_pipeline(device_limits const& limits, pipeline_request const& request)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::plan_pipeline");
  TAPEFLOW_EXPECTS(request.record_bytes > 0 && request.record_bytes % record_alignment == 0,
                   "record size " + std::to_string(request.record_bytes) +
                     " bytes is not a positive multiple of 16 bytes");
  TAPEFLOW_EXPECTS(request.records > 0, "a layer needs at least one record");
  TAPEFLOW_EXPECTS(request.stages == 0 || (request.stages >= 2 && request.stages <= max_pipeline_stages),
                   "pipeline stages must be between 2 and " + std::to_string(max_pipeline_stages) + ", got " +
                     std::to_string(request.stages));
  TAPEFLOW_EXPECTS(request.block_threads >= 0, "block threads must not be negative");
  TAPEFLOW_EXPECTS(request.staging == cpu_staging::in_place || request.staging == cpu_staging::ring,
                   "CPU staging is in_place or ring, not cpu_staging(" +
                     std::to_string(static_cast<int>(request.staging)) + ")");
  TAPEFLOW_EXPECTS(limits.kind == backend::cpu || limits.kind == backend::cuda || limits.kind == backend::hip,
                   "the device's backend is cpu, cuda or hip, not backend(" +
                     std::to_string(static_cast<int>(limits.kind)) + ")");
  bool const gpu = limits.kind != backend::cpu;
  TAPEFLOW_EXPECTS(request.halo_records <= request.records,
                   "a halo of " + std::to_string(request.halo_records) + " records is larger than the layer's " +
                     std::to_string(request.records) + " records");

  pipeline_plan plan;
  plan.kind = limits.kind;
  plan.record_bytes = request.record_bytes;
  plan.records = request.records;
  plan.halo_records = request.halo_records;
  plan.staging = gpu ? cpu_staging::ring : request.staging;
  bool const cpu_ring = !gpu && plan.staging == cpu_staging::ring;
  plan.async_copy = limits.async_copy && !request.force_plain;
  plan.bulk_copy = plan.async_copy && request.bulk_copy && limits.bulk_copy;

  // Threads per block.
  if (!gpu) {
    TAPEFLOW_EXPECTS(request.block_threads <= 1, "the CPU backend runs one consumer thread per block");
    plan.block_threads = 1;
  } else if (request.block_threads != 0) {
    TAPEFLOW_EXPECTS(request.block_threads <= limits.max_threads_per_block &&
                       request.block_threads % limits.warp_size == 0,
                     std::to_string(request.block_threads) + " threads per block: the device allows multiples of " +
                       std::to_string(limits.warp_size) + " up to " + std::to_string(limits.max_threads_per_block));
    plan.block_threads = request.block_threads;
  } else {
    plan.block_threads = std::min(gpu_block_threads, limits.max_threads_per_block);
  }

  // Shared memory a block may stage into: without opt-in, less what the pipelines declare
  // statically (their barriers and pipeline state), and leaving room for resident blocks.
  std::size_t const per_block =
    gpu ? limits.shared_mem_per_block - std::min(limits.shared_mem_per_block / 2, pipeline_static_smem_bytes)
        : limits.shared_mem_per_block;
  std::size_t const smem_limit =
    gpu ? std::min(per_block, limits.shared_mem_per_multiprocessor / gpu_resident_blocks) : per_block;
  std::size_t const tile_limit_plain =
    static_cast<std::size_t>(plan.block_threads) * max_register_chunks * record_alignment;

  // Register double-buffering holds one tile in registers and one in shared memory: two stages.
  bool const plain = gpu && !plan.async_copy;
  TAPEFLOW_EXPECTS(!plain || request.stages == 0 || request.stages == 2,
                   "register double-buffering (" +
                     (limits.async_copy ? std::string{"asked for with force_plain"}
                                        : "no async copy on " + limits.name) +
                     ") has exactly 2 stages, not " + std::to_string(request.stages));
  plan.stages = plain ? 2 : request.stages != 0 ? request.stages : default_stages;
  if (request.tile_records != 0) {
    plan.tile_records = request.tile_records;
  } else {
    std::size_t const target = gpu ? gpu_tile_bytes : cpu_tile_bytes;
    std::size_t tile = std::max<std::size_t>(1, target / request.record_bytes);
    if (tile >= static_cast<std::size_t>(plan.block_threads)) { tile = round_down(tile, plan.block_threads); }
    // No tile larger than the layer (rounded to whole blocks).
    std::size_t const whole = (request.records + plan.block_threads - 1) / plan.block_threads * plan.block_threads;
    tile = std::min(tile, whole);
    // Fit the staging memory: fewer stages first (never below 2), then smaller tiles. A tile is
    // staged with its halo on both sides. (The CPU tiles in place as it would stage, so both ways
    // of reading see the same tiles.)
    std::size_t const halo2 = 2 * request.halo_records;
    while (!plain && request.stages == 0 && plan.stages > 2 &&
           plan.stages * (tile + halo2) * request.record_bytes > smem_limit) {
      --plan.stages;
    }
    while (tile > 1 && (plain ? 1 : plan.stages) * (tile + halo2) * request.record_bytes > smem_limit) {
      tile = std::max<std::size_t>(1, tile / 2);
    }
    if (plain) {  // the registers hold the tile's window: the tile and its halos
      while (tile > 1 && (tile + halo2) * request.record_bytes > tile_limit_plain) {
        tile = std::max<std::size_t>(1, tile / 2);
      }
    }
    plan.tile_records = tile;
  }

  TAPEFLOW_EXPECTS(plan.tile_records <= static_cast<std::size_t>(-1) / request.record_bytes / max_pipeline_stages / 2,
                   "a tile of " + std::to_string(plan.tile_records) + " records overflows");
  std::size_t const window_bytes = plan.window_records() * request.record_bytes;
  if (gpu || cpu_ring) {
    plan.smem_bytes = static_cast<std::size_t>(plain ? 1 : plan.stages) * window_bytes;
    TAPEFLOW_EXPECTS(plan.smem_bytes <= per_block,
                     std::to_string(plain ? 1 : plan.stages) + " staged tiles of " +
                       std::to_string(plan.window_records()) + " records x " + std::to_string(request.record_bytes) +
                       " B = " + std::to_string(plan.smem_bytes) + " bytes of staging; " + limits.name + " leaves " +
                       std::to_string(per_block) + " bytes per block for staging");
  }
  TAPEFLOW_EXPECTS(!plain || window_bytes <= tile_limit_plain,
                   "a tile of " + std::to_string(window_bytes) + " bytes (with its halos) exceeds the " +
                     std::to_string(tile_limit_plain) + " bytes register double-buffering holds per block");

  plan.tiles = plan.layout().tiles();
  if (gpu) {
    int by_threads = std::max(1, limits.max_threads_per_multiprocessor / plan.block_threads);
    int by_smem = static_cast<int>(std::min<std::size_t>(
      1024, limits.shared_mem_per_multiprocessor / std::max<std::size_t>(1, plan.smem_bytes + 1024)));
    int const resident = std::max(1, std::min(by_threads, by_smem));
    std::size_t const grid = static_cast<std::size_t>(limits.multiprocessors) * static_cast<std::size_t>(resident);
    plan.grid_blocks = static_cast<int>(std::min(plan.tiles, grid));
  } else if (cpu_ring) {
    plan.grid_blocks = 1;  // one consumer: the calling thread
  } else {
    plan.grid_blocks = static_cast<int>(std::min<std::size_t>(plan.tiles, static_cast<std::size_t>(limits.multiprocessors)));
  }
  return plan;
}

}  // namespace tapeflow
