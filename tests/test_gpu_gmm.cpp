// SPDX-License-Identifier: Apache-2.0
// GMM on the GPU against the CPU reference backend. CUDA only (the GPU path reduces through CUB);
// skipped (with the reason) when no device is present, and in a HIP build.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/gmm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tapeflow {
namespace {

namespace gm = workloads::gmm;

class GpuGmm : public ::testing::Test {
 protected:
  void SetUp() override
  {
#if defined(TAPEFLOW_HAS_HIP)
    GTEST_SKIP() << "GPU test skipped: the GMM workload's GPU path is CUDA only (CUB)";
#else
    TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
#endif
  }
  static gm::options on(backend kind)
  {
    gm::options o;
    o.kind = kind;
    o.poison = true;  // every tape record must be written by the forward kernel
    return o;
  }
};

bool all_finite(gm::gradient_result const& r)
{
  for (auto const* v : {&r.d_alphas, &r.d_means, &r.d_icf}) {
    for (double x : *v) {
      if (!std::isfinite(x)) { return false; }
    }
  }
  return std::isfinite(r.objective);
}

void expect_close(gm::gradient_result const& gpu, gm::gradient_result const& cpu, double tol)
{
  EXPECT_NEAR(gpu.objective, cpu.objective, 1e-12 * std::max(1.0, std::fabs(cpu.objective)));
  EXPECT_LT(testing::relative_error(gpu.d_alphas, cpu.d_alphas), tol);
  EXPECT_LT(testing::relative_error(gpu.d_means, cpu.d_means), tol);
  EXPECT_LT(testing::relative_error(gpu.d_icf, cpu.d_icf), tol);
}

struct shape {
  std::size_t d, k, n;
};

TEST_F(GpuGmm, ObjectiveAndGradientMatchTheCpuReference)
{
  // d > 64 and d > 128 cover several blocks of S_k; N not a multiple of any tile.
  for (shape s : {shape{2, 1, 1}, shape{3, 3, 7}, shape{5, 3, 7}, shape{2, 5, 1000}, shape{10, 25, 1000},
                  shape{64, 4, 777}, shape{70, 3, 300}, shape{130, 2, 201}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("d " + std::to_string(s.d) + " K " + std::to_string(s.k) + " N " + std::to_string(s.n) +
                 ", seed " + std::to_string(seed));
    gm::problem p{s.d, s.k, s.n};
    p.m = static_cast<int>(seed % 3);
    gm::inputs const in = gm::random_inputs(p, seed);
    gm::gradient_result const gpu = gm::gradient(p, in, on(testing::gpu));
    gm::gradient_result const cpu = gm::gradient(p, in, on(backend::cpu));
    ASSERT_TRUE(all_finite(gpu)) << "a value was never written";
    expect_close(gpu, cpu, 1e-10);
    EXPECT_NEAR(gm::objective(p, in, on(testing::gpu)), cpu.objective, 1e-12 * std::max(1.0, std::fabs(cpu.objective)));
    EXPECT_EQ(gpu.tape_bytes, gpu.plan.records * 16);
  }
}

TEST_F(GpuGmm, EveryPipelineVariantAgrees)
{
  gm::problem const p{9, 4, 3001};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  gm::gradient_result const cpu = gm::gradient(p, in, on(backend::cpu));
  device_limits const limits = query_device_limits(testing::gpu);
  struct variant {
    std::size_t tile;
    int stages;
    bool plain;
  };
  for (variant v : {variant{32, 2, false}, variant{96, 3, false}, variant{256, 4, false}, variant{64, 8, false},
                    variant{0, 0, true}, variant{128, 2, true}}) {
    if (!limits.async_copy && !v.plain) { continue; }
    gm::options o = on(testing::gpu);
    o.pipeline.tile_records = v.tile;
    o.pipeline.stages = v.stages;
    o.pipeline.force_plain = v.plain;
    gm::gradient_result const r = gm::gradient(p, in, o);
    SCOPED_TRACE("tile " + std::to_string(v.tile) + ", stages " + std::to_string(v.stages));
    EXPECT_EQ(r.plan.async_copy, !v.plain);
    ASSERT_TRUE(all_finite(r));
    expect_close(r, cpu, 1e-10);
  }
}

TEST_F(GpuGmm, RunsAreBitwiseReproducibleAndReleaseTheirMemory)
{
  gm::problem const p{20, 50, 2000};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  std::size_t const baseline = device_memory_usage(testing::gpu).current_bytes;
  gm::gradient_result const first = gm::gradient(p, in, on(testing::gpu));
  for (int i = 0; i < 3; ++i) {
    gm::gradient_result const again = gm::gradient(p, in, on(testing::gpu));
    EXPECT_EQ(again.objective, first.objective);
    EXPECT_EQ(std::memcmp(again.d_icf.data(), first.d_icf.data(), first.d_icf.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(again.d_means.data(), first.d_means.data(), first.d_means.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(again.d_alphas.data(), first.d_alphas.data(), first.d_alphas.size() * sizeof(double)), 0);
  }
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, baseline);
  EXPECT_GE(first.peak_device_bytes, first.tape_bytes);
}

TEST_F(GpuGmm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  gm::problem const p{4, 3, 100};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  gm::inputs short_x = in;
  short_x.x.pop_back();
  EXPECT_THROW(static_cast<void>(gm::gradient(p, short_x, on(testing::gpu))), logic_error);
  gm::options threads = on(testing::gpu);
  threads.pipeline.block_threads = 128;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, threads)), logic_error);
  gm::options huge = on(testing::gpu);
  huge.pipeline.tile_records = 1 << 12;  // 64 KiB tiles: no room in shared memory
  huge.pipeline.stages = 4;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, huge)), logic_error);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(gm::gradient(p, in, on(testing::gpu))));
}

}  // namespace
}  // namespace tapeflow
