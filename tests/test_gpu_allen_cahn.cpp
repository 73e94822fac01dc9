// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on the GPU (CUDA, or HIP in a HIP build) against the CPU reference backend and the independent implementation.
// Skipped (with the reason) when no device is present.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#if defined(TAPEFLOW_EMULATED)
#include <tapeflow/emulated/runtime.hpp>
#endif

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;
using testing::real;

class GpuAllenCahn : public ::testing::Test {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
  }
  static ac::options on(backend kind)
  {
    ac::options o;
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

TEST_F(GpuAllenCahn, PartialsOnTheTapeGiveTheReferenceGradientUnderEveryPolicy)
{
  ac::problem const p{96, 12};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u0 = testing::random_state<double>(p.n * p.n, seed);
  std::vector<real> const expect = testing::reference_gradient(testing::widen(u0), {p.n, p.steps});
  std::size_t const layer = ac::records_for<double>(p.n * p.n) * sizeof(ac::record<double>);
  for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    SCOPED_TRACE(to_string(policy));
    ac::options o = on(testing::gpu);
    o.content = ac::tape_content::partials;
    o.policy = policy;
    if (policy != tape_policy::store) { o.budget_bytes = 4 * layer; }
    ac::gradient_result<double> const r = ac::gradient(p, u0, o);
    ASSERT_TRUE(all_finite(r.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-10);
  }
}

TEST_F(GpuAllenCahn, MixedScheduleOfDeviceHostAndRecomputedLayersGivesTheStoreBits)
{
  // The tape is 10x the device budget and the host holds a quarter of it: auto's schedule keeps
  // layers on the device and on the host (through the copy streams) and recomputes the rest.
  ac::problem const p{32, 60};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::options o = on(testing::gpu);
  o.bw = {50.0, 50.0, 20.0};  // fixed, so the plan does not depend on the machine
  o.policy = tape_policy::store;
  ac::gradient_result<float> const store = ac::gradient(p, u0, o);
  o.policy = tape_policy::automatic;
  o.budget_bytes = store.chain.tape_bytes / 10;
  o.host_budget_bytes = store.chain.tape_bytes / 4;
  ac::gradient_result<float> const r = ac::gradient(p, u0, o);
  SCOPED_TRACE(r.chain.tiers.describe());
  EXPECT_EQ(r.chain.policy, tape_policy::mixed);
  EXPECT_GT(r.chain.tiers.count(tier::device), 0u);
  EXPECT_GT(r.chain.tiers.count(tier::host), 0u);
  EXPECT_GT(r.chain.tiers.count(tier::recompute), 0u);
  EXPECT_EQ(std::memcmp(r.gradient.data(), store.gradient.data(), u0.size() * sizeof(float)), 0);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  EXPECT_LE(r.chain.host_tape_bytes, o.host_budget_bytes);
  EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host));
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
}

TEST_F(GpuAllenCahn, BulkCopyPipelineGivesTheCpuGradient)
{
  device_limits const limits = query_device_limits(testing::gpu);
  if (!limits.bulk_copy) { GTEST_SKIP() << "no bulk-copy engine on " << limits.name << " (needs sm_90)"; }
  for (int stages : {2, 3, 4}) {
    ac::problem const p{257, 9};
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("stages " + std::to_string(stages) + ", seed " + std::to_string(seed));
    std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, seed);
    ac::options o = on(testing::gpu);
    o.policy = tape_policy::store;
    o.pipeline.bulk_copy = true;
    o.pipeline.stages = stages;
    o.pipeline.tile_records = 300;  // tiles that neither divide the layer nor a block
    ac::gradient_result<float> const gpu = ac::gradient(p, u0, o);
    ASSERT_TRUE(gpu.chain.plan.bulk_copy) << gpu.chain.plan.describe();
    ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
    ASSERT_TRUE(all_finite(gpu.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
  }
}

#if defined(TAPEFLOW_EMULATED)
/// Makes the emulated device report other code for every kernel while in scope: an older
/// architecture (a binary built for sm_80 only, on this sm_90 device) or a lower thread limit (a
/// kernel that needs many registers).
class emulated_kernels {
 public:
  emulated_kernels(int binary_version, int max_threads) : previous_(emu::current_settings())
  {
    emu::settings next = previous_;
    next.kernel_binary_version = binary_version;
    next.kernel_max_threads = max_threads;
    emu::configure(next);
  }
  ~emulated_kernels() { emu::configure(previous_); }
  emulated_kernels(emulated_kernels const&) = delete;
  emulated_kernels& operator=(emulated_kernels const&) = delete;

 private:
  emu::settings previous_;
};
#endif

// A plan the reverse kernel cannot launch (more threads than its registers allow) is refused
// with a typed error that names the kernel's limit, before the launch; a plan within it runs. On
// the emulated device the reverse kernel plays one limited to 704 threads (Allen–Cahn f32's
// register-double-buffered reverse used 92 registers on an H100, which is about that).
TEST_F(GpuAllenCahn, ABlockLargerThanTheKernelAllowsIsATypedErrorNamingTheLimit)
{
#if defined(TAPEFLOW_EMULATED)
  emulated_kernels const limited(90, 704);
#endif
  ac::problem const p{97, 4};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
  for (int threads : {512, 1024}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    ac::options o = on(testing::gpu);
    o.policy = tape_policy::store;
    o.pipeline.force_plain = true;
    o.pipeline.stages = 2;
    o.pipeline.block_threads = threads;
    try {
      ac::gradient_result<float> const gpu = ac::gradient(p, u0, o);
      EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
#if defined(TAPEFLOW_EMULATED)
      EXPECT_LE(threads, 704) << "the emulated kernel allows 704 threads, and the launch went ahead";
#endif
    } catch (logic_error const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("threads per block on this device"), std::string::npos) << what;
#if defined(TAPEFLOW_EMULATED)
      EXPECT_GT(threads, 704) << what;
      EXPECT_NE(what.find("at most 704"), std::string::npos) << what;
#endif
    }
  }
}

#if defined(TAPEFLOW_EMULATED)
// A binary built for sm_80 only runs sm_80 code on an sm_90 device, where the bulk pipeline would
// trap: the chain asks the step whether its reverse kernel's loaded code runs it, and grants
// cp.async instead. (tape_bound's variant list does the same; test_gpu_pipeline checks that a
// bulk launch of older code is refused.)
TEST_F(GpuAllenCahn, BulkCopyIsNotGrantedWhereTheKernelIsOlderCode)
{
  ac::problem const p{65, 5};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::options o = on(testing::gpu);
  o.policy = tape_policy::store;
  o.pipeline.bulk_copy = true;
  ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
  {
    emulated_kernels const sm80(80, 0);
    ac::gradient_result<float> const gpu = ac::gradient(p, u0, o);
    EXPECT_FALSE(gpu.chain.plan.bulk_copy) << gpu.chain.plan.describe();
    EXPECT_TRUE(gpu.chain.plan.async_copy) << gpu.chain.plan.describe();
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
  }
  ac::gradient_result<float> const gpu = ac::gradient(p, u0, o);
  EXPECT_TRUE(gpu.chain.plan.bulk_copy) << "sm_90 code on an sm_90 device: " << gpu.chain.plan.describe();
  EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
}
#endif

TEST_F(GpuAllenCahn, F32GradientMatchesTheCpuReference)
{
  for (auto [n, steps] : {std::pair<std::size_t, std::size_t>{1, 3}, {3, 4}, {33, 10}, {100, 20}, {257, 15}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("n " + std::to_string(n) + ", seed " + std::to_string(seed));
    std::vector<float> const u0 = testing::random_state<float>(n * n, seed);
    ac::gradient_result<float> const gpu = ac::gradient(ac::problem{n, steps}, u0, on(testing::gpu));
    ac::gradient_result<float> const cpu = ac::gradient(ac::problem{n, steps}, u0, on(backend::cpu));
    ASSERT_TRUE(all_finite(gpu.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
    EXPECT_NEAR(gpu.loss, cpu.loss, 1e-5 * cpu.loss);
  }
}

TEST_F(GpuAllenCahn, F64GradientMatchesTheIndependentImplementation)
{
  for (auto [n, steps] : {std::pair<std::size_t, std::size_t>{5, 7}, {64, 12}, {129, 9}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("n " + std::to_string(n) + ", seed " + std::to_string(seed));
    std::vector<double> const u0 = testing::random_state<double>(n * n, seed);
    ac::gradient_result<double> const gpu = ac::gradient(ac::problem{n, steps}, u0, on(testing::gpu));
    ASSERT_TRUE(all_finite(gpu.gradient));
    EXPECT_LT(testing::relative_error(gpu.gradient, testing::reference_gradient(testing::widen(u0), {n, steps})),
              1e-10);
  }
}

TEST_F(GpuAllenCahn, EveryPipelineVariantAgrees)
{
  std::size_t const n = 211;
  std::size_t const steps = 6;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::gradient_result<float> const base = ac::gradient(ac::problem{n, steps}, u0, on(testing::gpu));
  struct variant {
    std::size_t tile;
    int stages;
    int threads;
    bool plain;
  };
  // Eight stages of 320 16-byte records (40 KiB) fit the 48 KiB a block gets without opt-in.
  for (variant v : {variant{1, 2, 32, false}, variant{37, 3, 64, false}, variant{320, 8, 256, false},
                    variant{100, 5, 128, false}, variant{0, 0, 0, true}, variant{77, 2, 96, true}}) {
    device_limits const limits = query_device_limits(testing::gpu);
    if ((!limits.async_copy && !v.plain) || (v.threads % limits.warp_size) != 0) { continue; }  // not on this device
    ac::options o = on(testing::gpu);
    o.pipeline.tile_records = v.tile;
    o.pipeline.stages = v.stages;
    o.pipeline.block_threads = v.threads;
    o.pipeline.force_plain = v.plain;
    ac::gradient_result<float> const r = ac::gradient(ac::problem{n, steps}, u0, o);
    EXPECT_EQ(r.chain.plan.async_copy, !v.plain);
    // Each cell's adjoint is computed by the same expression whatever the tiling: same bits.
    EXPECT_EQ(std::memcmp(r.gradient.data(), base.gradient.data(), base.gradient.size() * sizeof(float)), 0)
      << "tile " << v.tile << ", stages " << v.stages << ", plain " << v.plain;
  }
}

TEST_F(GpuAllenCahn, CapturedReverseIsACudaGraphWithTheSameBits)
{
  std::size_t const n = 64;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::options o = on(testing::gpu);
  o.policy = tape_policy::store;
  ac::gradient_result<float> const plain = ac::gradient(ac::problem{n, 40}, u0, o);
  o.capture_reverse = true;
  ac::gradient_result<float> const graph = ac::gradient(ac::problem{n, 40}, u0, o);
  EXPECT_TRUE(graph.chain.graph_captured);
  EXPECT_EQ(graph.chain.program_launches, 1u);
  EXPECT_EQ(std::memcmp(graph.gradient.data(), plain.gradient.data(), u0.size() * sizeof(float)), 0);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
}

TEST_F(GpuAllenCahn, RunsAreBitwiseDeterministicAndReleaseTheirMemory)
{
  std::size_t const n = 300;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  std::size_t const baseline = device_memory_usage(testing::gpu).current_bytes;
  ac::gradient_result<float> const first = ac::gradient(ac::problem{n, 10}, u0, on(testing::gpu));
  for (int i = 0; i < 3; ++i) {
    ac::gradient_result<float> const again = ac::gradient(ac::problem{n, 10}, u0, on(testing::gpu));
    EXPECT_EQ(std::memcmp(again.gradient.data(), first.gradient.data(), first.gradient.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, baseline);
  EXPECT_GE(first.peak_device_bytes, first.chain.tape_bytes);
}

TEST_F(GpuAllenCahn, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  std::vector<float> const u0 = testing::random_state<float>(64, testing::fresh_seed());
  ac::options budget = on(testing::gpu);
  budget.budget_bytes = 100;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, budget)), budget_error);
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{9, 5}, u0, on(testing::gpu))), logic_error);
  ac::options too_big = on(testing::gpu);
  too_big.pipeline.tile_records = 1 << 20;
  too_big.pipeline.stages = 4;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, too_big)), logic_error);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, on(testing::gpu))));
}

}  // namespace
}  // namespace tapeflow
