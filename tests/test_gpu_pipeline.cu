// SPDX-License-Identifier: Apache-2.0
// The device tile pipeline on a real GPU: every record of a layer is staged exactly once, with the
// right contents, by each pipeline variant and many tile/stage/grid shapes. Skipped (with the
// reason) when no CUDA device is present.
#include <tapeflow/backend.hpp>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/tape.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tapeflow {
namespace {

using rec = value_record<unsigned, 4>;

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
        sums[first + mirrored] = v.values[0] ^ (v.values[1] * 3u) ^ (v.values[2] * 7u) ^ (v.values[3] * 11u);
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
};

void PrintTo(case_shape const& c, std::ostream* os)
{
  *os << c.records << " records, tiles of " << c.tile_records << ", " << c.stages << " stages, " << c.block_threads
      << " threads" << (c.plain ? ", plain" : "") << (c.bulk ? ", bulk copies" : "");
}

class SM80_TilePipeline : public ::testing::TestWithParam<case_shape> {
 protected:
  void SetUp() override
  {
    if (!backend_available(gpu_backend)) {
      GTEST_SKIP() << "GPU test skipped: " << backend_unavailable_reason(gpu_backend);
    }
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

  std::mt19937 rng(std::random_device{}());
  std::vector<rec> host(c.records);
  for (rec& r : host) {
    for (unsigned& v : r.values) { v = static_cast<unsigned>(rng()); }
  }
  tape t(gpu_backend);
  layer& l = t.push<rec>(c.records, plan.tile_records);
  TAPEFLOW_CUDA_TRY(cudaMemcpy(l.writer<rec>().data(), host.data(), c.records * sizeof(rec), cudaMemcpyHostToDevice));
  l.commit();

  device_buffer sums(gpu_backend, c.records * sizeof(unsigned));
  device_buffer visits(gpu_backend, c.records * sizeof(unsigned));
  device_buffer owner(gpu_backend, plan.tiles * sizeof(unsigned));
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
    rec const& v = host[i];
    ASSERT_EQ(got_visits[i], 1u) << "record " << i;
    ASSERT_EQ(got_sums[i], v.values[0] ^ (v.values[1] * 3u) ^ (v.values[2] * 7u) ^ (v.values[3] * 11u)) << i;
  }
  for (std::size_t tile = 0; tile < plan.tiles; ++tile) {
    EXPECT_EQ(got_owner[tile], (plan.tiles - 1 - tile) % static_cast<std::size_t>(plan.grid_blocks)) << tile;
  }
}

case_shape const shapes[] = {
#if defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
  {1, 0, 0, 0, false},          {1000, 0, 0, 0, false},        {1 << 20, 0, 0, 0, false},
  {12345, 37, 2, 64, false},    {12345, 256, 3, 256, false},   {100003, 512, 4, 128, false},
  {99999, 100, 5, 96, false},   {77777, 64, 6, 32, false},     {65536, 128, 7, 256, false},
  {300000, 256, 8, 256, false},
  {1, 0, 0, 0, false, true},    {12345, 37, 2, 64, false, true}, {100003, 512, 4, 128, false, true},
  {77777, 64, 6, 32, false, true},
#endif
  {1, 0, 0, 0, true},           {12345, 37, 2, 64, true},      {1 << 20, 0, 0, 0, true},
  {54321, 2048, 2, 256, true},
};

INSTANTIATE_TEST_SUITE_P(
  Shapes, SM80_TilePipeline, ::testing::ValuesIn(shapes),
  [](auto const& param_info) {
    case_shape const& c = param_info.param;
    return std::string{c.plain ? "plain" : c.bulk ? "bulk" : "async"} + "_r" + std::to_string(c.records) + "_t" +
           std::to_string(c.tile_records) + "_s" + std::to_string(c.stages) + "_b" + std::to_string(c.block_threads);
  });

}  // namespace
}  // namespace tapeflow
