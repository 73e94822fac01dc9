// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 on the GPU (CUDA, or HIP in a HIP build) against the CPU reference backend, for f32 and
// f64 and every tape policy. Skipped (with the reason) when no device is present.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/lbm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tapeflow {
namespace {

namespace lbm = workloads::lbm;

class GpuLbm : public ::testing::Test {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
  }
  static lbm::options on(backend kind)
  {
    lbm::options o;
    o.kind = kind;
    o.poison = true;  // every output and tape element must be written by the kernels
    return o;
  }
};

template <class T>
bool all_finite(std::vector<T> const& v)
{
  for (T x : v) {
    if (!std::isfinite(x)) { return false; }
  }
  return true;
}

struct shape {
  std::size_t nx;
  std::size_t ny;
  std::size_t steps;
};

template <class T>
void expect_gpu_matches_cpu(double tolerance)
{
  for (shape s : {shape{1, 1, 3}, shape{8, 6, 5}, shape{33, 17, 10}, shape{100, 64, 12}, shape{257, 129, 6}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE(std::to_string(s.nx) + "x" + std::to_string(s.ny) + " T" + std::to_string(s.steps) + ", seed " +
                 std::to_string(seed));
    lbm::problem const p{s.nx, s.ny, s.steps, 0.8};
    std::vector<T> const f0 = lbm::random_state<T>(p, seed);
    lbm::options gpu_o;
    gpu_o.kind = testing::gpu;
    gpu_o.poison = true;
    lbm::options cpu_o = gpu_o;
    cpu_o.kind = backend::cpu;
    lbm::gradient_result<T> const gpu = lbm::gradient(p, f0, gpu_o);
    lbm::gradient_result<T> const cpu = lbm::gradient(p, f0, cpu_o);
    ASSERT_TRUE(all_finite(gpu.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), tolerance);
    EXPECT_NEAR(gpu.loss, cpu.loss, tolerance * cpu.loss);
    std::vector<T> const primal_gpu = lbm::primal(p, f0, gpu_o);
    EXPECT_LT(testing::relative_error(primal_gpu, lbm::primal(p, f0, cpu_o)), tolerance);
  }
}

TEST_F(GpuLbm, F32GradientMatchesTheCpuReference) { expect_gpu_matches_cpu<float>(1e-4); }
TEST_F(GpuLbm, F64GradientMatchesTheCpuReference) { expect_gpu_matches_cpu<double>(1e-12); }

template <class T>
void expect_every_policy_agrees()
{
  // 48 steps: a quarter of the tape holds one layer and two snapshots of the state (each 4.5 layers).
  lbm::problem const p{96, 80, 48, 0.8};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(p, seed);
  lbm::options o;
  o.kind = testing::gpu;
  o.poison = true;
  o.policy = tape_policy::store;
  lbm::gradient_result<T> const store = lbm::gradient(p, f0, o);
  EXPECT_EQ(store.chain.layer_bytes, p.cells() * 2 * sizeof(T));  // the velocity of each cell, nothing else
  lbm::options cpu_o = o;
  cpu_o.kind = backend::cpu;
  lbm::gradient_result<T> const cpu = lbm::gradient(p, f0, cpu_o);
  EXPECT_LT(testing::relative_error(store.gradient, cpu.gradient), sizeof(T) == 4 ? 1e-4 : 1e-12);
  for (tape_policy policy : {tape_policy::automatic, tape_policy::offload, tape_policy::recompute}) {
    for (int percent : {100, 25}) {
      lbm::options b = o;
      b.policy = policy;
      b.budget_bytes = store.chain.tape_bytes * static_cast<std::size_t>(percent) / 100;
      lbm::gradient_result<T> const r = lbm::gradient(p, f0, b);
      SCOPED_TRACE(std::string{to_string(policy)} + " at " + std::to_string(percent) + " %: " +
                   r.chain.tiers.describe());
      ASSERT_TRUE(all_finite(r.gradient));
      // The same kernels on the same device, whatever tier the layer lived in: the same bits.
      EXPECT_EQ(std::memcmp(r.gradient.data(), store.gradient.data(), f0.size() * sizeof(T)), 0);
      EXPECT_LE(r.chain.peak_tape_bytes, b.budget_bytes);
      if (percent < 100) { EXPECT_NE(r.chain.policy, tape_policy::store); }
    }
  }
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
}

TEST_F(GpuLbm, F32EveryPolicyGivesTheSameGradient) { expect_every_policy_agrees<float>(); }
TEST_F(GpuLbm, F64EveryPolicyGivesTheSameGradient) { expect_every_policy_agrees<double>(); }

TEST_F(GpuLbm, EveryPipelineVariantAgrees)
{
  lbm::problem const p{131, 77, 5, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::gradient_result<float> const base = lbm::gradient(p, f0, on(testing::gpu));
  struct variant {
    std::size_t tile;
    int stages;
    int threads;
    bool plain;
  };
  for (variant v : {variant{1, 2, 32, false}, variant{37, 3, 64, false}, variant{256, 4, 256, false},
                    variant{0, 0, 0, true}, variant{77, 2, 96, true}}) {
    device_limits const limits = query_device_limits(testing::gpu);
    if ((!limits.async_copy && !v.plain) || (v.threads % limits.warp_size) != 0) { continue; }  // not on this device
    lbm::options o = on(testing::gpu);
    o.pipeline.tile_records = v.tile;
    o.pipeline.stages = v.stages;
    o.pipeline.block_threads = v.threads;
    o.pipeline.force_plain = v.plain;
    lbm::gradient_result<float> const r = lbm::gradient(p, f0, o);
    EXPECT_EQ(r.chain.plan.async_copy, !v.plain);
    EXPECT_EQ(std::memcmp(r.gradient.data(), base.gradient.data(), base.gradient.size() * sizeof(float)), 0)
      << "tile " << v.tile << ", stages " << v.stages << ", plain " << v.plain;
  }
}

TEST_F(GpuLbm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  lbm::problem const p{8, 5, 3, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  EXPECT_THROW(static_cast<void>(lbm::gradient(lbm::problem{8, 5, 3, 0.5}, f0, on(testing::gpu))), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(lbm::problem{8, 6, 3, 0.8}, f0, on(testing::gpu))), logic_error);
  lbm::options budget = on(testing::gpu);
  budget.budget_bytes = 100;
  EXPECT_THROW(static_cast<void>(lbm::gradient(p, f0, budget)), budget_error);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(lbm::gradient(p, f0, on(testing::gpu))));
}

}  // namespace
}  // namespace tapeflow
