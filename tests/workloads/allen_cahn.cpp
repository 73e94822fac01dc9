// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on the backend under test (tests/target.hpp): against the independent long-double
// implementation (tests/reference.hpp), every tiling, the captured reverse and bad input; on the
// CPU backend also central differences of every element, the primal and the tape's stats; on a GPU
// also the CPU backend's gradient, partials on the tape, the mixed schedule, bulk copies and the
// kernel's launch limits.
#include "common.hpp"
#include "../emulated_settings.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/workloads/allen_cahn/stencil.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#if defined(TAPEFLOW_EMULATED)
#include <tapeflow/emulated/runtime.hpp>
#endif

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;
using testing::real;

ac::options on(backend kind) { return testing::options_on<ac::options>(kind); }

struct shape {
  std::size_t n;
  std::size_t steps;
};

class AllenCahn : public testing::on_target<> {};

TEST_F(AllenCahn, F64GradientMatchesTheIndependentImplementation)
{
  for (shape s : {shape{5, 7}, shape{5, 20}, shape{31, 12}, shape{64, 12}, shape{64, 25}, shape{129, 9}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("n " + std::to_string(s.n) + ", T " + std::to_string(s.steps) + ", seed " + std::to_string(seed));
    std::vector<double> const u0 = testing::random_state<double>(s.n * s.n, seed);
    ac::gradient_result<double> const r = ac::gradient(ac::problem{s.n, s.steps}, u0, on(testing::target));
    ASSERT_TRUE(testing::all_finite(r.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(r.gradient, testing::reference_gradient(testing::widen(u0), {s.n, s.steps})),
              1e-10);
  }
}

TEST_F(AllenCahn, F32GradientMatchesF64AndTheIndependentImplementation)
{
  for (shape s : {shape{1, 3}, shape{3, 4}, shape{33, 10}, shape{48, 30}, shape{100, 20}, shape{257, 15}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("n " + std::to_string(s.n) + ", T " + std::to_string(s.steps) + ", seed " + std::to_string(seed));
    ac::problem const p{s.n, s.steps};
    std::vector<double> const u64 = testing::random_state<double>(s.n * s.n, seed);
    std::vector<float> const u32(u64.begin(), u64.end());
    ac::gradient_result<float> const r32 = ac::gradient(p, u32, on(testing::target));
    ac::gradient_result<double> const r64 = ac::gradient(p, u64, on(backend::cpu));
    ASSERT_TRUE(testing::all_finite(r32.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(r32.gradient, testing::reference_gradient(testing::widen(u32), {s.n, s.steps})),
              1e-4);
    EXPECT_LT(testing::relative_error(r32.gradient, r64.gradient), 1e-4);
    EXPECT_NEAR(r32.loss, r64.loss, 1e-4 * r64.loss);
#if defined(TAPEFLOW_TEST_ON_GPU)
    ac::gradient_result<float> const cpu = ac::gradient(p, u32, on(backend::cpu));
    EXPECT_LT(testing::relative_error(r32.gradient, cpu.gradient), 1e-4);
    EXPECT_NEAR(r32.loss, cpu.loss, 1e-5 * cpu.loss);
#endif
  }
}

TEST_F(AllenCahn, EveryPipelineVariantGivesTheSameBits)
{
  using v = testing::pipeline_variant;
  // CPU: tiles and stages, in place and through the staging ring, on one and three threads, over
  // 37^2 cells (343 f32 records: no tile divides them). GPU: tiles, stages and block sizes, async
  // copies and register double-buffering (eight stages of 320 records, 40 KiB, fit the 48 KiB a
  // block gets without opt-in), over 211^2 cells.
  std::vector<v> variants;
#if defined(TAPEFLOW_TEST_ON_GPU)
  variants = {v{1, 2, 32}, v{37, 3, 64}, v{320, 8, 256}, v{100, 5, 128}, v{0, 0, 0, true}, v{77, 2, 96, true}};
#else
  for (auto [tile, stages] : {std::pair<std::size_t, int>{1, 2}, {7, 3}, {64, 8}, {1000, 2}}) {
    for (cpu_staging staging : {cpu_staging::in_place, cpu_staging::ring}) {
      for (std::size_t threads : {1u, 3u}) { variants.push_back(v{tile, stages, 0, false, staging, threads}); }
    }
  }
#endif
  std::size_t const n = testing::on_gpu ? 211 : 37;
  std::size_t const steps = testing::on_gpu ? 6 : 7;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::gradient_result<float> const base = ac::gradient(ac::problem{n, steps}, u0, on(testing::target));
  for (v const& variant : variants) {
    if (!variant.runs_on_target()) { continue; }
    SCOPED_TRACE("tiles of " + std::to_string(variant.tile) + ", " + std::to_string(variant.stages) + " stages, " +
                 std::to_string(variant.threads) + " threads" + (variant.plain ? ", plain" : "") + ", " +
                 std::string{to_string(variant.staging)} + ", " + std::to_string(variant.cpu_threads) + " CPU threads");
    ac::options o = on(testing::target);
    variant.apply(o.pipeline);
    testing::scoped_cpu_threads const threads(variant.cpu_threads);
    ac::gradient_result<float> const r = ac::gradient(ac::problem{n, steps}, u0, o);
#if defined(TAPEFLOW_TEST_ON_GPU)
    EXPECT_EQ(r.chain.plan.async_copy, !variant.plain);
#else
    EXPECT_EQ(r.chain.plan.tile_records, variant.tile);
    EXPECT_EQ(r.chain.plan.stages, variant.stages);
    EXPECT_EQ(r.chain.plan.staging, variant.staging);
    EXPECT_EQ(r.staging.tiles, steps * r.chain.plan.tiles);
    EXPECT_EQ(r.staging.staged_tiles, variant.staging == cpu_staging::ring ? steps * r.chain.plan.tiles : 0u);
#endif
    // Each cell's adjoint is computed by the same expression whatever the tiling: the same bits.
    EXPECT_TRUE(testing::same_bits(r.gradient, base.gradient));
  }
}

TEST_F(AllenCahn, CapturedReverseGivesTheSameBitsInOneLaunch)
{
  for (shape s : {shape{21, 11}, shape{64, 40}}) {
    SCOPED_TRACE("n " + std::to_string(s.n) + ", T " + std::to_string(s.steps));
    std::vector<float> const u0 = testing::random_state<float>(s.n * s.n, testing::fresh_seed());
    ac::options o = on(testing::target);
    o.policy = tape_policy::store;
    ac::gradient_result<float> const plain = ac::gradient(ac::problem{s.n, s.steps}, u0, o);
    o.capture_reverse = true;
    ac::gradient_result<float> const replayed = ac::gradient(ac::problem{s.n, s.steps}, u0, o);
#if defined(TAPEFLOW_TEST_ON_GPU)
    EXPECT_TRUE(replayed.chain.graph_captured) << "a CUDA Graph";
#endif
    EXPECT_EQ(replayed.chain.program_launches, 1u);
    EXPECT_TRUE(testing::same_bits(replayed.gradient, plain.gradient));
    EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
  }
}

TEST_F(AllenCahn, SegmentsGiveTheOneStepBitsWithATapeOfOneStatePerSegment)
{
  // Segments of k steps (docs/stencils.md): the layer of a segment is its checkpoint, its reverse
  // recomputes the k states on chip. Every k, the planner's too, and the mixed schedule at segment
  // granularity give the one-step layers' gradient.
  ac::problem const p{48, 13};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::options one = on(testing::target);
  one.policy = tape_policy::store;
  std::size_t const layer = ac::records_for<float>(p.n * p.n) * sizeof(ac::record<float>);
  testing::expect_segments_give_the_one_step_bits(
    one, {0, 2, 5, 7}, layer, [&](ac::options const& o) { return ac::gradient(p, u0, o); },
    [&](ac::options const& o) { return ac::segment_plan_of<float>(p, o); });
#if defined(TAPEFLOW_TEST_ON_GPU)
  // A tile's block of 96 or 512 threads (--segment-threads) sweeps its levels in other runs: the
  // same bits as 256.
  ac::options k4 = one;
  k4.segment = 4;
  std::vector<float> const by_256 = ac::gradient(p, u0, k4).gradient;
  for (int threads : {96, 512}) {
    ac::options t = k4;
    t.segment_threads = threads;
    EXPECT_EQ(ac::segment_plan_of<float>(p, t).block_threads, threads);
    EXPECT_TRUE(testing::same_bits(ac::gradient(p, u0, t).gradient, by_256)) << threads << " threads";
  }
#endif
  ac::options partials = one;
  partials.segment = 2;
  partials.content = ac::tape_content::partials;
  EXPECT_THROW(static_cast<void>(ac::gradient(p, u0, partials)), logic_error) << "segments tape values";
  ac::options longer = one;
  longer.segment = 14;
  EXPECT_THROW(static_cast<void>(ac::gradient(p, u0, longer)), logic_error) << "a segment past the last step";
}

TEST_F(AllenCahn, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  std::vector<float> const u0 = testing::random_state<float>(64, testing::fresh_seed());
  ac::options const o = on(testing::target);
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{9, 5}, u0, o)), logic_error);  // 64 != 81
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{0, 5}, u0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 0}, u0, o)), logic_error);
  ac::options budget = o;
  budget.budget_bytes = 100;  // less than one 256-byte layer
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, budget)), budget_error);
#if defined(TAPEFLOW_TEST_ON_GPU)
  ac::options too_big = o;
  too_big.pipeline.tile_records = 1 << 20;
  too_big.pipeline.stages = 4;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, too_big)), logic_error);
#else
  ac::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, hip)), unavailable_error);
  ac::options stages = o;
  stages.pipeline.stages = 9;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, stages)), logic_error);
#endif
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(ac::gradient(ac::problem{8, 5}, u0, o)));
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
// ---- the CPU backend ---------------------------------------------------------------------------

void PrintTo(shape const& s, std::ostream* os) { *os << "n = " << s.n << ", T = " << s.steps; }

class AllenCahnShapes : public testing::on_target<::testing::TestWithParam<shape>> {};

TEST_P(AllenCahnShapes, F64GradientMatchesCentralFiniteDifferences)
{
  auto const [n, steps] = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u0 = testing::random_state<double>(n * n, seed);
  ac::gradient_result<double> const r = ac::gradient(ac::problem{n, steps}, u0, on(testing::target));

  // Central differences of the long-double primal: truncation O(h^2) ~ 1e-10, rounding ~1e-14.
  testing::reference_problem const p{n, steps};
  std::vector<real> u = testing::widen(u0);
  std::vector<real> fd(u.size());
  real const h = 1e-5L;
  for (std::size_t k = 0; k < u.size(); ++k) {
    real const saved = u[k];
    u[k] = saved + h;
    real const up = testing::reference_loss(u, p);
    u[k] = saved - h;
    real const down = testing::reference_loss(u, p);
    u[k] = saved;
    fd[k] = (up - down) / (2 * h);
  }
  EXPECT_LT(testing::relative_error(r.gradient, fd), 1e-6);
  EXPECT_NEAR(static_cast<double>(r.loss), static_cast<double>(testing::reference_loss(u, p)),
              1e-12 * static_cast<double>(testing::reference_loss(u, p)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AllenCahnShapes,
                         ::testing::Values(shape{1, 3}, shape{2, 4}, shape{3, 5}, shape{7, 6}, shape{16, 4},
                                           shape{33, 3}),
                         [](auto const& param_info) {
                           return "n" + std::to_string(param_info.param.n) + "_T" + std::to_string(param_info.param.steps);
                         });

TEST_F(AllenCahn, PrimalMatchesTheForwardOfTheGradientRun)
{
  std::size_t const n = 20;
  std::vector<double> const u0 = testing::random_state<double>(n * n, testing::fresh_seed());
  std::vector<double> const uT = ac::primal(ac::problem{n, 9}, u0, on(testing::target));
  std::vector<real> ref = testing::widen(u0);
  for (int s = 0; s < 9; ++s) { ref = testing::reference_step(ref, {n, 9}); }
  EXPECT_LT(testing::relative_error(uT, ref), 1e-14);
  EXPECT_EQ(ac::loss(uT), ac::gradient(ac::problem{n, 9}, u0, on(testing::target)).loss);
}

TEST_F(AllenCahn, StatsDescribeTheTape)
{
  std::size_t const n = 30;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::gradient_result<float> const r = ac::gradient(ac::problem{n, 5}, u0, on(testing::target));
  EXPECT_EQ(r.chain.steps, 5u);
  EXPECT_EQ(r.chain.plan.records, 225u);  // 900 cells, 4 per record
  EXPECT_EQ(r.chain.layer_bytes, 225u * 16);
  EXPECT_EQ(r.chain.tape_bytes, 5 * 225u * 16);
  EXPECT_EQ(r.chain.peak_tape_bytes, r.chain.tape_bytes);
  EXPECT_GE(r.peak_device_bytes, r.chain.tape_bytes);
  EXPECT_LE(r.staging.max_in_flight, static_cast<std::size_t>(r.chain.plan.stages));
}

#else
// ---- a GPU -------------------------------------------------------------------------------------

TEST_F(AllenCahn, PartialsOnTheTapeGiveTheReferenceGradientUnderEveryPolicy)
{
  ac::problem const p{96, 12};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u0 = testing::random_state<double>(p.n * p.n, seed);
  std::vector<real> const expect = testing::reference_gradient(testing::widen(u0), {p.n, p.steps});
  std::size_t const layer = ac::records_for<double>(p.n * p.n) * sizeof(ac::record<double>);
  for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    SCOPED_TRACE(to_string(policy));
    ac::options o = on(testing::target);
    o.content = ac::tape_content::partials;
    o.policy = policy;
    if (policy != tape_policy::store) { o.budget_bytes = 4 * layer; }
    ac::gradient_result<double> const r = ac::gradient(p, u0, o);
    ASSERT_TRUE(testing::all_finite(r.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-10);
  }
}

TEST_F(AllenCahn, MixedScheduleOfDeviceHostAndRecomputedLayersGivesTheStoreBits)
{
  // The tape is 10x the device budget and the host holds a quarter of it: auto's schedule keeps
  // layers on the device and on the host (through the copy streams) and recomputes the rest.
  ac::problem const p{32, 60};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::options o = on(testing::target);
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
  EXPECT_TRUE(testing::same_bits(r.gradient, store.gradient));
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  EXPECT_LE(r.chain.host_tape_bytes, o.host_budget_bytes);
  EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host));
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

TEST_F(AllenCahn, BulkCopyPipelineGivesTheCpuGradient)
{
  device_limits const limits = query_device_limits(testing::target);
  if (!limits.bulk_copy) { GTEST_SKIP() << "no bulk-copy engine on " << limits.name << " (needs sm_90)"; }
  for (int stages : {2, 3, 4}) {
    ac::problem const p{257, 9};
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("stages " + std::to_string(stages) + ", seed " + std::to_string(seed));
    std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, seed);
    ac::options o = on(testing::target);
    o.policy = tape_policy::store;
    o.pipeline.bulk_copy = true;
    o.pipeline.stages = stages;
    o.pipeline.tile_records = 300;  // tiles that neither divide the layer nor a block
    ac::gradient_result<float> const gpu = ac::gradient(p, u0, o);
    ASSERT_TRUE(gpu.chain.plan.bulk_copy) << gpu.chain.plan.describe();
    ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
    ASSERT_TRUE(testing::all_finite(gpu.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), 1e-4);
  }
}

#if defined(TAPEFLOW_EMULATED)
/// Makes the emulated device report other code for every kernel while in scope: an older virtual
/// architecture (a binary built for sm_80 only: its compute_80 PTX compiled for this sm_90 device)
/// or a lower thread limit (a kernel that needs many registers).
testing::emulated_settings emulated_kernels(int virtual_arch, int max_threads)
{
  return testing::emulated_settings([&](emu::settings& s) {
    s.kernel_virtual_arch = virtual_arch;
    s.kernel_max_threads = max_threads;
  });
}
#endif

// A plan the reverse kernel cannot launch (more threads than its registers allow) is refused
// with a typed error that names the kernel's limit, before the launch; a plan within it runs. On
// the emulated device the reverse kernel plays one limited to 704 threads (Allen–Cahn f32's
// register-double-buffered reverse used 92 registers on an H100, which is about that).
TEST_F(AllenCahn, ABlockLargerThanTheKernelAllowsIsATypedErrorNamingTheLimit)
{
#if defined(TAPEFLOW_EMULATED)
  testing::emulated_settings const limited = emulated_kernels(90, 704);
#endif
  ac::problem const p{97, 4};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
  for (int threads : {512, 1024}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    ac::options o = on(testing::target);
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
// A binary built for sm_80 only runs compute_80 code on an sm_90 device, where the bulk pipeline
// is a trap: the chain asks the step whether its reverse kernel's loaded code runs it, and grants
// cp.async instead. (tape_bound's variant list does the same; test_gpu_pipeline checks that a
// bulk launch of older code is refused.)
TEST_F(AllenCahn, BulkCopyIsNotGrantedWhereTheKernelIsOlderCode)
{
  ac::problem const p{65, 5};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, testing::fresh_seed());
  ac::options o = on(testing::target);
  o.policy = tape_policy::store;
  o.pipeline.bulk_copy = true;
  ac::gradient_result<float> const cpu = ac::gradient(p, u0, on(backend::cpu));
  {
    testing::emulated_settings const sm80 = emulated_kernels(80, 0);
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

TEST_F(AllenCahn, RunsAreBitwiseDeterministicAndReleaseTheirMemory)
{
  std::size_t const n = 300;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  std::size_t const baseline = device_memory_usage(testing::target).current_bytes;
  ac::gradient_result<float> const first = ac::gradient(ac::problem{n, 10}, u0, on(testing::target));
  for (int i = 0; i < 3; ++i) {
    ac::gradient_result<float> const again = ac::gradient(ac::problem{n, 10}, u0, on(testing::target));
    EXPECT_TRUE(testing::same_bits(again.gradient, first.gradient));
  }
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, baseline);
  EXPECT_GE(first.peak_device_bytes, first.chain.tape_bytes);
}
#endif

}  // namespace
}  // namespace tapeflow
