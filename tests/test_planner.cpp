// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/backend.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>

#include <gtest/gtest.h>

namespace tapeflow {
namespace {

/// An H100-like device, so GPU planning is tested without a GPU.
device_limits hopper()
{
  device_limits d;
  d.kind = backend::cuda;
  d.name = "test sm_90";
  d.multiprocessors = 132;
  d.shared_mem_per_block = 48 * 1024;
  d.shared_mem_per_multiprocessor = 228 * 1024;
  d.max_threads_per_block = 1024;
  d.max_threads_per_multiprocessor = 2048;
  d.warp_size = 32;
  d.global_mem_bytes = std::size_t{80} << 30;
  d.compute_capability = 90;
  d.async_copy = true;
  d.bulk_copy = true;
  return d;
}

device_limits no_async()
{
  device_limits d = hopper();
  d.name = "test, no async copy";
  d.async_copy = false;
  d.bulk_copy = false;
  d.compute_capability = 75;
  return d;
}

TEST(Planner, BulkCopiesAreAPreferenceOnlySm90Grants)
{
  pipeline_request r;
  r.record_bytes = 32;
  r.records = 100000;
  EXPECT_FALSE(plan_pipeline(hopper(), r).bulk_copy);  // not asked
  r.bulk_copy = true;
  pipeline_plan const p = plan_pipeline(hopper(), r);
  EXPECT_TRUE(p.bulk_copy);
  EXPECT_TRUE(p.async_copy);
  EXPECT_NE(p.describe().find("bulk-copy pipeline"), std::string::npos) << p.describe();
  device_limits ampere = hopper();
  ampere.compute_capability = 80;
  ampere.bulk_copy = false;
  EXPECT_FALSE(plan_pipeline(ampere, r).bulk_copy);  // cp.async instead
  EXPECT_TRUE(plan_pipeline(ampere, r).async_copy);
  r.force_plain = true;
  EXPECT_FALSE(plan_pipeline(hopper(), r).bulk_copy);  // register double-buffering wins
  device_limits cpu = hopper();
  cpu.kind = backend::cpu;
  cpu.bulk_copy = false;
  r.force_plain = false;
  EXPECT_FALSE(plan_pipeline(cpu, r).bulk_copy);
}

TEST(Planner, LeavesRoomForThePipelinesStaticSharedMemory)
{
  // 3 stages x 16 KiB is exactly the block's 48 KiB: with the pipeline state beside it the launch
  // would fail, so an explicit request is refused up front and a planned one stays below.
  pipeline_request r;
  r.record_bytes = 16;
  r.records = 1 << 20;
  r.tile_records = 1024;
  r.stages = 3;
  EXPECT_THROW(static_cast<void>(plan_pipeline(hopper(), r)), logic_error);
  r.stages = 2;
  EXPECT_NO_THROW(static_cast<void>(plan_pipeline(hopper(), r)));
  pipeline_request planned;
  planned.record_bytes = 48;
  planned.records = 1 << 20;
  pipeline_plan const p = plan_pipeline(hopper(), planned);
  EXPECT_LE(p.smem_bytes + pipeline_static_smem_bytes, hopper().shared_mem_per_block);
}

void expect_consistent(pipeline_plan const& p, device_limits const& d)
{
  EXPECT_GE(p.stages, 2);
  EXPECT_LE(p.stages, max_pipeline_stages);
  EXPECT_GE(p.tile_records, 1u);
  EXPECT_EQ(p.tiles, (p.records + p.tile_records - 1) / p.tile_records);
  EXPECT_LE(p.smem_bytes, d.shared_mem_per_block - (d.kind == backend::cpu ? 0 : pipeline_static_smem_bytes));
  if (d.kind == backend::cpu && p.staging == cpu_staging::in_place) {
    EXPECT_EQ(p.smem_bytes, 0u);  // nothing staged
  } else {
    EXPECT_EQ(p.smem_bytes, (p.async_copy || d.kind == backend::cpu ? p.stages : 1) * p.window_records() * p.record_bytes);
  }
  EXPECT_GE(p.grid_blocks, 1);
  EXPECT_LE(static_cast<std::size_t>(p.grid_blocks), p.tiles);
}

TEST(Planner, GpuAutoPlanFillsTheDevice)
{
  device_limits const d = hopper();
  pipeline_plan const p = plan_pipeline(d, {16, std::size_t{1} << 22});
  expect_consistent(p, d);
  EXPECT_EQ(p.block_threads, 256);
  EXPECT_EQ(p.tile_records % 256, 0u);
  EXPECT_EQ(p.tile_bytes(), 8u * 1024);
  EXPECT_EQ(p.stages, 4);
  EXPECT_TRUE(p.async_copy);
  // Enough tiles for a persistent grid of several blocks per multiprocessor.
  EXPECT_GE(p.grid_blocks, 2 * d.multiprocessors);
  EXPECT_NE(p.describe().find("cp.async"), std::string::npos);
}

TEST(Planner, SmallLayerGetsOneTileAndOneBlock)
{
  device_limits const d = hopper();
  pipeline_plan const p = plan_pipeline(d, {16, 100});
  expect_consistent(p, d);
  EXPECT_EQ(p.tiles, 1u);
  EXPECT_EQ(p.grid_blocks, 1);
  EXPECT_EQ(p.tile_records, 256u);  // rounded to whole blocks
}

TEST(Planner, LargeRecordsShrinkStagesThenTiles)
{
  device_limits const d = hopper();
  pipeline_plan const p = plan_pipeline(d, {8 * 1024, 1000});
  expect_consistent(p, d);
  EXPECT_EQ(p.tile_records, 1u);
  EXPECT_LE(p.stages * p.tile_bytes(), d.shared_mem_per_block);
}

TEST(Planner, RecordTooLargeForTwoStagesIsAnError)
{
  EXPECT_THROW(static_cast<void>(plan_pipeline(hopper(), {32 * 1024, 10})), logic_error);
}

TEST(Planner, ExplicitSettingsAreKeptOrRejected)
{
  device_limits const d = hopper();
  pipeline_request r{16, 10000, 100, 3, 128};
  pipeline_plan const p = plan_pipeline(d, r);
  expect_consistent(p, d);
  EXPECT_EQ(p.tile_records, 100u);
  EXPECT_EQ(p.stages, 3);
  EXPECT_EQ(p.block_threads, 128);
  EXPECT_EQ(p.tiles, 100u);

  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 0, 1})), logic_error);     // < 2 stages
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 0, 9})), logic_error);     // > 8 stages
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 4096, 4})), logic_error);  // 64 KiB staged
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 0, 0, 100})), logic_error);  // not a warp multiple
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 0, 0, 2048})), logic_error); // too many threads
}

TEST(Planner, BadSizesAreErrors)
{
  device_limits const d = hopper();
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {0, 100})), logic_error);
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {8, 100})), logic_error);
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {24, 100})), logic_error);
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 0})), logic_error);
}

TEST(Planner, ValuesOutsideAnEnumAreErrors)
{
  // A cast integer is not read as the nearest option (a staging past ring ran in place).
  device_limits cpu = hopper();
  cpu.kind = backend::cpu;
  pipeline_request r{16, 100};
  r.staging = static_cast<cpu_staging>(2);
  EXPECT_THROW(static_cast<void>(plan_pipeline(cpu, r)), logic_error);
  r.staging = cpu_staging::ring;
  EXPECT_EQ(plan_pipeline(cpu, r).staging, cpu_staging::ring);
  device_limits odd = hopper();
  odd.kind = static_cast<backend>(3);
  EXPECT_THROW(static_cast<void>(plan_pipeline(odd, {16, 100})), logic_error);
}

TEST(Planner, PlainPipelineHasTwoStagesAndRegisterSizedTiles)
{
  device_limits const d = no_async();
  pipeline_plan const p = plan_pipeline(d, {16, std::size_t{1} << 20});
  expect_consistent(p, d);
  EXPECT_FALSE(p.async_copy);
  EXPECT_EQ(p.stages, 2);
  EXPECT_EQ(p.smem_bytes, p.tile_bytes());
  EXPECT_LE(p.tile_bytes(), static_cast<std::size_t>(p.block_threads) * max_register_chunks * 16);
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 1000, 0, 4})), logic_error);
  // A tile larger than the registers can hold.
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100000, 2048 + 256, 2, 256})), logic_error);
  // Forcing the plain variant where async copy exists.
  pipeline_request forced{16, 5000};
  forced.force_plain = true;
  EXPECT_FALSE(plan_pipeline(hopper(), forced).async_copy);
}

TEST(Planner, CpuPlanReadsInPlaceOrThroughTheRing)
{
  device_limits const d = query_device_limits(backend::cpu);
  EXPECT_EQ(d.kind, backend::cpu);
  EXPECT_EQ(static_cast<std::size_t>(d.multiprocessors), cpu::threads());
  pipeline_plan const p = plan_pipeline(d, {16, 100000});
  expect_consistent(p, d);
  EXPECT_EQ(p.staging, cpu_staging::in_place);
  EXPECT_EQ(p.block_threads, 1);
  EXPECT_EQ(p.tile_bytes(), 64u * 1024);
  // In place every CPU thread takes tiles (as many as there are tiles at most).
  EXPECT_EQ(static_cast<std::size_t>(p.grid_blocks), std::min<std::size_t>(p.tiles, cpu::threads()));
  EXPECT_NE(p.describe().find("read in place by"), std::string::npos) << p.describe();
  EXPECT_EQ(p.describe().find("stages"), std::string::npos) << p.describe();
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, {16, 100, 0, 0, 32})), logic_error);

  pipeline_request ring{16, 100000};
  ring.staging = cpu_staging::ring;
  pipeline_plan const r = plan_pipeline(d, ring);
  expect_consistent(r, d);
  EXPECT_EQ(r.grid_blocks, 1);  // one consumer: the calling thread
  EXPECT_EQ(r.stages, 4);
  EXPECT_EQ(r.tile_records, p.tile_records);  // the same tiles either way
  EXPECT_EQ(r.smem_bytes, 4u * 64 * 1024);
  EXPECT_NE(r.describe().find("staging ring with a persistent worker"), std::string::npos) << r.describe();
}

TEST(Planner, HalosWidenTheStagedWindowOnTheCpuAndOnGpus)
{
  device_limits const d = query_device_limits(backend::cpu);
  pipeline_request ring{16, 100000};
  ring.staging = cpu_staging::ring;
  ring.halo_records = 100;
  pipeline_plan const r = plan_pipeline(d, ring);
  expect_consistent(r, d);
  EXPECT_EQ(r.halo_records, 100u);
  EXPECT_EQ(r.window_records(), r.tile_records + 200);
  EXPECT_LE(r.smem_bytes, d.shared_mem_per_block);
  EXPECT_NE(r.describe().find("halo of 100 records"), std::string::npos) << r.describe();
  ring.halo_records = 100001;
  EXPECT_THROW(static_cast<void>(plan_pipeline(d, ring)), logic_error);  // larger than the layer
  // A GPU stages the same window in every stage of its pipeline, fitted into shared memory.
  pipeline_request gpu{16, 100000};
  gpu.halo_records = 100;
  pipeline_plan const g = plan_pipeline(hopper(), gpu);
  expect_consistent(g, hopper());
  EXPECT_EQ(g.window_records(), g.tile_records + 200);
  EXPECT_EQ(g.smem_bytes, static_cast<std::size_t>(g.stages) * g.window_records() * 16);
  gpu.halo_records = 600;  // wider than the tile the planner would pick: fewer stages, smaller tiles
  pipeline_plan const wide = plan_pipeline(hopper(), gpu);
  expect_consistent(wide, hopper());
  EXPECT_LT(wide.stages, g.stages);
  EXPECT_LT(wide.tile_records, g.tile_records);
  gpu.halo_records = 2000;  // two halos alone overflow shared memory: refused, saying so
  EXPECT_THROW(static_cast<void>(plan_pipeline(hopper(), gpu)), logic_error);
}

TEST(Planner, TileLayoutCoversEveryRecordOnce)
{
  for (std::size_t records : {1u, 7u, 256u, 257u, 1000u}) {
    for (std::size_t tile : {1u, 3u, 256u, 1024u}) {
      tile_layout const l{records, tile};
      std::size_t covered = 0;
      for (std::size_t t = 0; t < l.tiles(); ++t) {
        EXPECT_EQ(l.first(t), covered);
        EXPECT_GE(l.count(t), 1u);
        covered += l.count(t);
      }
      EXPECT_EQ(covered, records) << records << " records, tiles of " << tile;
      EXPECT_EQ(l.count(l.tiles()), 0u);
    }
  }
}

TEST(Backend, NamesRoundTripAndCpuIsAvailable)
{
  for (backend b : {backend::cpu, backend::cuda, backend::hip}) { EXPECT_EQ(parse_backend(to_string(b)), b); }
  EXPECT_THROW(static_cast<void>(parse_backend("tpu")), logic_error);
  EXPECT_TRUE(backend_available(backend::cpu));
  EXPECT_TRUE(backend_unavailable_reason(backend::cpu).empty());
#if defined(TAPEFLOW_HAS_HIP)
  EXPECT_TRUE(backend_compiled(backend::hip));
#else
  EXPECT_FALSE(backend_compiled(backend::hip));
#endif
  if (!backend_available(backend::hip)) {
    EXPECT_THROW(static_cast<void>(query_device_limits(backend::hip)), unavailable_error);
    EXPECT_FALSE(backend_unavailable_reason(backend::hip).empty());
  }
  EXPECT_THROW(static_cast<void>(query_device_limits(backend::cpu, 1)), logic_error);
  EXPECT_FALSE(list_devices().empty());
}

TEST(Planner, GpuGridLeavesTheKilobyteEachResidentBlockReserves)
{
  // CUDA reserves 1 KiB of shared memory per resident block: 228 KiB hold six blocks staging
  // 32 KiB (4 stages of 8 KiB tiles) and 1 KiB each, not seven.
  device_limits const d = hopper();
  pipeline_plan const p = plan_pipeline(d, {16, std::size_t{1} << 22});
  ASSERT_EQ(p.smem_bytes, 32u * 1024);
  EXPECT_EQ(p.grid_blocks, 6 * d.multiprocessors);
}

}  // namespace
}  // namespace tapeflow
