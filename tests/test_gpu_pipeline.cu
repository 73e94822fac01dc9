// SPDX-License-Identifier: Apache-2.0
// The device tile pipeline on a real GPU: every record of a layer is staged exactly once, with the
// right contents, by each pipeline variant and many tile/stage/grid shapes. Skipped (with the
// reason) when no CUDA device is present.
#include "gpu_backend.hpp"
#include "random_layer.cuh"

#include <tapeflow/backend.hpp>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/tape.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#if defined(TAPEFLOW_EMULATED)
#include <tapeflow/emulated/runtime.hpp>
#endif

namespace tapeflow {
namespace {

using rec = testing::digest_record;
using testing::digest;

// Each thread reads the staged records from the far end of the tile (record count-1-i for i = its
// index), so it reads what other threads of the block staged: a pipeline that publishes a tile
// before every thread's part of it landed, or refills a slot someone still reads, fails here.
template <int Stages>
__global__ void stage_kernel(tape_reader<rec> tape, unsigned* sums, unsigned* visits, unsigned* owner)
{
  device::tile_pipeline<rec, Stages>::reverse(
    tape, [&](std::size_t tile, rec const* staged, std::size_t first, std::size_t count) {
      if (threadIdx.x == 0) { owner[tile] = blockIdx.x; }
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        std::size_t const mirrored = count - 1 - i;
        rec const v = staged[mirrored];
        sums[first + mirrored] = digest(v);
        atomicAdd(visits + first + mirrored, 1u);
      }
    });
}

struct case_shape {
  std::size_t records;
  std::size_t tile_records;
  int stages;
  int block_threads;
  bool plain;
  bool bulk{false};  ///< the sm_90 bulk-copy pipeline, where the device has it (else cp.async)
  bool refills{false};  ///< every block consumes at least 4 x stages tiles (checked on the plan)
};

// Records enough that each block of the persistent grid walks many more tiles than it has stages
// (tiles of 32, 64 threads): 2^22 on a GPU (about 31 tiles a block on an H100), 2^16 on the
// emulated device's 4 multiprocessors (16 a block).
#if defined(TAPEFLOW_EMULATED)
constexpr std::size_t many_tiles = std::size_t{1} << 16;
#else
constexpr std::size_t many_tiles = std::size_t{1} << 22;
#endif

void PrintTo(case_shape const& c, std::ostream* os)
{
  *os << c.records << " records, tiles of " << c.tile_records << ", " << c.stages << " stages, " << c.block_threads
      << " threads" << (c.plain ? ", plain" : "") << (c.bulk ? ", bulk copies" : "")
      << (c.refills ? ", many tiles a block" : "");
}

class SM80_TilePipeline : public ::testing::TestWithParam<case_shape> {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  }
};

TEST_P(SM80_TilePipeline, StagesEveryRecordOnceLastTileFirst)
{
  case_shape const c = GetParam();
  device_limits const limits = query_device_limits(gpu_backend);
  pipeline_request request{sizeof(rec), c.records, c.tile_records, c.stages, c.block_threads, c.plain};
  request.bulk_copy = c.bulk;
  pipeline_plan const plan = plan_pipeline(limits, request);
  EXPECT_EQ(plan.bulk_copy, c.bulk && limits.bulk_copy);
  if (c.refills) {
    // Slots are refilled many times over in every block: where ordering bugs between a slot's
    // release and its next fill live.
    ASSERT_GE(plan.tiles, 4u * static_cast<std::size_t>(std::max(plan.stages, 2)) * plan.grid_blocks)
      << plan.describe();
  }

  tape t(gpu_backend);
  testing::random_layer const data(t, c.records, plan.tile_records);
  layer& l = data.on_device;

  device_buffer sums(gpu_backend, c.records * sizeof(unsigned), {});
  device_buffer visits(gpu_backend, c.records * sizeof(unsigned), {});
  device_buffer owner(gpu_backend, plan.tiles * sizeof(unsigned), {});
  sums.fill(0xFF, {});
  visits.fill(0, {});
  owner.fill(0xFF, {});
  device::with_tile_pipeline<rec>(plan, [&](auto stages) {
    constexpr int S = decltype(stages)::value;
    device::launch(stage_kernel<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, {}, l.reader<rec>(),
      sums.data_as<unsigned>(), visits.data_as<unsigned>(), owner.data_as<unsigned>());
  });
  std::vector<unsigned> got_sums(c.records), got_visits(c.records), got_owner(plan.tiles);
  sums.download(got_sums.data(), sums.size(), {});
  visits.download(got_visits.data(), visits.size(), {});
  owner.download(got_owner.data(), owner.size(), {});
  for (std::size_t i = 0; i < c.records; ++i) {
    rec const& v = data.host[i];
    ASSERT_EQ(got_visits[i], 1u) << "record " << i;
    ASSERT_EQ(got_sums[i], digest(v)) << i;
  }
  for (std::size_t tile = 0; tile < plan.tiles; ++tile) {
    EXPECT_EQ(got_owner[tile], (plan.tiles - 1 - tile) % static_cast<std::size_t>(plan.grid_blocks)) << tile;
  }
}

#if defined(TAPEFLOW_EMULATED)
// A bulk-copy kernel loaded as older code (a binary built for sm_80 only, on an sm_90 device)
// would trap inside the kernel: the launch path refuses it first, with the kernel's name.
TEST(SM80_TilePipelineLaunch, BulkCopiesOfOlderCodeAreRefusedBeforeTheLaunch)
{
  TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  device_limits const limits = query_device_limits(gpu_backend);
  pipeline_request request{sizeof(rec), 4096, 64, 2, 64, false};
  request.bulk_copy = true;
  pipeline_plan const plan = plan_pipeline(limits, request);
  ASSERT_TRUE(plan.bulk_copy);
  tape t(gpu_backend);
  layer& l = t.push<rec>(request.records, plan.tile_records);
  l.fill(0x5A, {});
  l.commit();
  device_buffer sums(gpu_backend, request.records * sizeof(unsigned), {});
  device_buffer visits(gpu_backend, request.records * sizeof(unsigned), {});
  device_buffer owner(gpu_backend, plan.tiles * sizeof(unsigned), {});
  visits.fill(0, {});
  auto const run = [&] {
    device::with_tile_pipeline<rec>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(stage_kernel<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, {}, l.reader<rec>(),
        sums.data_as<unsigned>(), visits.data_as<unsigned>(), owner.data_as<unsigned>());
    });
  };
  auto const kernel_for = [](auto stages) { return stage_kernel<decltype(stages)::value>; };
  emu::settings const previous = emu::current_settings();
  emu::settings sm80 = previous;
  sm80.kernel_virtual_arch = 80;  // a binary built for sm_80 only: compute_80 code compiled for sm_90
  emu::configure(sm80);
  try {
    run();
    ADD_FAILURE() << "a bulk-copy kernel of sm_80 code was launched";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("compiled as compute_80 code"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(device::bulk_copy_runs(kernel_for));
  emu::configure(previous);
  EXPECT_TRUE(device::bulk_copy_runs(kernel_for));
  run();  // sm_90 code: the same launch goes ahead and stages every record once
  std::vector<unsigned> got(request.records);
  visits.download(got.data(), visits.size(), {});
  for (std::size_t i = 0; i < got.size(); ++i) { ASSERT_EQ(got[i], 1u) << "record " << i; }
}
#endif

case_shape const shapes[] = {
#if defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
  {1, 0, 0, 0, false},          {1000, 0, 0, 0, false},        {1 << 20, 0, 0, 0, false},
  {12345, 37, 2, 64, false},    {12345, 256, 3, 256, false},   {100003, 512, 4, 128, false},
  {99999, 100, 5, 96, false},   {77777, 64, 6, 32, false},     {65536, 128, 7, 256, false},
  {300000, 256, 8, 256, false},
  {1, 0, 0, 0, false, true},    {12345, 37, 2, 64, false, true}, {100003, 512, 4, 128, false, true},
  {77777, 64, 6, 32, false, true},
  {many_tiles, 32, 2, 64, false, false, true}, {many_tiles, 32, 3, 64, false, false, true},
  {many_tiles, 32, 2, 64, false, true, true},  {many_tiles, 32, 4, 64, false, true, true},
#endif
  {1, 0, 0, 0, true},           {12345, 37, 2, 64, true},      {1 << 20, 0, 0, 0, true},
  {54321, 2048, 2, 256, true},   {many_tiles, 32, 2, 64, true, false, true},
};

INSTANTIATE_TEST_SUITE_P(
  Shapes, SM80_TilePipeline, ::testing::ValuesIn(shapes),
  [](auto const& param_info) {
    case_shape const& c = param_info.param;
    return std::string{c.plain ? "plain" : c.bulk ? "bulk" : "async"} + (c.refills ? "_refills" : "") + "_r" +
           std::to_string(c.records) + "_t" +
           std::to_string(c.tile_records) + "_s" + std::to_string(c.stages) + "_b" + std::to_string(c.block_threads);
  });

}  // namespace
}  // namespace tapeflow
