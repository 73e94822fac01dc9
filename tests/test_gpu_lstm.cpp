// SPDX-License-Identifier: Apache-2.0
// The LSTM on CUDA (cuBLAS + tapeflow's cell kernels) against the CPU reference backend. Skipped
// (with the reason) when no CUDA device is present, and in HIP builds, where the LSTM has no GPU
// path (no hipBLAS).
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/lstm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace ls = workloads::lstm;

class GpuLstm : public ::testing::Test {
 protected:
  void SetUp() override
  {
    if (testing::gpu != backend::cuda) {
      GTEST_SKIP() << "GPU test skipped: the LSTM's GPU path is CUDA-only (cuBLAS); this build's GPU backend is "
                   << to_string(testing::gpu);
    }
    TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
  }
  static ls::options on(backend kind)
  {
    ls::options o;
    o.kind = kind;
    o.poison = true;  // every state, adjoint and record element must be written by the kernels
    o.bw = {10.0, 10.0, 1000.0};
    return o;
  }
};

template <class T>
struct instance {
  ls::weights<T> params;
  ls::sequence<T> seq;
};

template <class T>
instance<T> random_instance(ls::problem const& p, std::uint64_t seed, bool initial_state)
{
  auto scaled = [](std::vector<T> v, T k) {
    for (T& e : v) { e *= k; }
    return v;
  };
  std::size_t const G = 4 * p.hidden;
  // Weights ~ 1/sqrt(fan-in), as PyTorch initialises them: the gates stay out of saturation.
  T const kw = T(1) / static_cast<T>(std::sqrt(static_cast<double>(p.input)));
  T const ku = T(1) / static_cast<T>(std::sqrt(static_cast<double>(p.hidden)));
  instance<T> in;
  in.params.w = scaled(testing::random_state<T>(G * p.input, seed), kw);
  in.params.u = scaled(testing::random_state<T>(G * p.hidden, seed + 1), ku);
  in.params.b = scaled(testing::random_state<T>(G, seed + 2), ku);
  in.seq.x = testing::random_state<T>(p.steps * p.batch * p.input, seed + 3);
  if (initial_state) {
    in.seq.h0 = testing::random_state<T>(p.batch * p.hidden, seed + 4);
    in.seq.c0 = testing::random_state<T>(p.batch * p.hidden, seed + 5);
  }
  return in;
}

template <class T>
bool all_finite(std::vector<T> const& v)
{
  for (T x : v) {
    if (!std::isfinite(x)) { return false; }
  }
  return true;
}

template <class T>
void expect_close(ls::gradient_result<T> const& gpu, ls::gradient_result<T> const& cpu, double tolerance)
{
  ASSERT_TRUE(all_finite(gpu.gradient.w) && all_finite(gpu.gradient.u) && all_finite(gpu.gradient.b))
    << "an element was never written";
  EXPECT_LT(testing::relative_error(gpu.gradient.w, cpu.gradient.w), tolerance);
  EXPECT_LT(testing::relative_error(gpu.gradient.u, cpu.gradient.u), tolerance);
  EXPECT_LT(testing::relative_error(gpu.gradient.b, cpu.gradient.b), tolerance);
  EXPECT_NEAR(static_cast<double>(gpu.loss), static_cast<double>(cpu.loss),
              tolerance * (1 + std::fabs(static_cast<double>(cpu.loss))));
}

/// The same bits: what the chain promises across policies (the same kernels and GEMMs, with the
/// same shapes and one stream, in the same order; cuBLAS is bitwise reproducible on one GPU).
template <class T>
void expect_same_bits(ls::gradient_result<T> const& got, ls::gradient_result<T> const& want)
{
  auto same = [](std::vector<T> const& a, std::vector<T> const& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  };
  EXPECT_TRUE(same(got.gradient.w, want.gradient.w)) << "dL/dW differs";
  EXPECT_TRUE(same(got.gradient.u, want.gradient.u)) << "dL/dU differs";
  EXPECT_TRUE(same(got.gradient.b, want.gradient.b)) << "dL/db differs";
  EXPECT_EQ(std::memcmp(&got.loss, &want.loss, sizeof(T)), 0) << "the loss differs";
}

TEST_F(GpuLstm, F32GradientAndLossMatchTheCpuReference)
{
  for (ls::problem p : {ls::problem{3, 4, 4, 5}, ls::problem{17, 6, 13, 33}, ls::problem{64, 5, 16, 32},
                        ls::problem{100, 12, 30, 48}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("B " + std::to_string(p.batch) + " T " + std::to_string(p.steps) + " I " + std::to_string(p.input) +
                 " H " + std::to_string(p.hidden) + ", seed " + std::to_string(seed));
    instance<float> const in = random_instance<float>(p, seed, p.batch % 2 == 1);
    ls::gradient_result<float> const gpu = ls::gradient(p, in.params, in.seq, on(testing::gpu));
    ls::gradient_result<float> const cpu = ls::gradient(p, in.params, in.seq, on(backend::cpu));
    expect_close(gpu, cpu, 1e-4);
  }
}

TEST_F(GpuLstm, F64GradientMatchesTheCpuReference)
{
  ls::problem const p{31, 7, 11, 20};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in = random_instance<double>(p, seed, true);
  expect_close(ls::gradient(p, in.params, in.seq, on(testing::gpu)), ls::gradient(p, in.params, in.seq, on(backend::cpu)),
               1e-11);
}

TEST_F(GpuLstm, PrimalMatchesTheCpuReference)
{
  ls::problem const p{40, 9, 12, 24};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), true);
  ls::final_state<float> const gpu = ls::primal(p, in.params, in.seq, on(testing::gpu));
  ls::final_state<float> const cpu = ls::primal(p, in.params, in.seq, on(backend::cpu));
  EXPECT_LT(testing::relative_error(gpu.h, cpu.h), 1e-5);
  EXPECT_LT(testing::relative_error(gpu.c, cpu.c), 1e-5);
}

TEST_F(GpuLstm, EveryPolicyAndPipelineVariantAgrees)
{
  ls::problem const p{50, 10, 20, 40};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), false);
  ls::options base = on(testing::gpu);
  base.policy = tape_policy::store;
  ls::gradient_result<float> const reference = ls::gradient(p, in.params, in.seq, base);
  for (auto [policy, percent] : {std::pair<tape_policy, int>{tape_policy::offload, 100}, {tape_policy::offload, 30},
                                 {tape_policy::recompute, 40}}) {
    ls::options o = base;
    o.policy = policy;
    o.budget_bytes = reference.chain.tape_bytes * static_cast<std::size_t>(percent) / 100;
    ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, o);
    SCOPED_TRACE(std::string{to_string(policy)} + " at " + std::to_string(percent) + " %");
    EXPECT_EQ(r.chain.policy, policy);
    EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
    expect_same_bits(r, reference);
  }
  device_limits const limits = query_device_limits(testing::gpu);
  for (bool plain : {false, true}) {
    if (!plain && !limits.async_copy) { continue; }
    ls::options o = base;
    o.pipeline.tile_records = 37;
    o.pipeline.stages = plain ? 2 : 3;  // register double-buffering has exactly two stages
    o.pipeline.block_threads = 64;
    o.pipeline.force_plain = plain;
    SCOPED_TRACE(plain ? "register double-buffering" : "cp.async pipeline");
    expect_close(ls::gradient(p, in.params, in.seq, o), reference, 1e-6);
  }
}

TEST_F(GpuLstm, PackedSequencesMatchTheCpuReferenceUnderEveryPolicy)
{
  // Layers of unequal size (B_t H records at step t): each tiled on its own, the products over the
  // first B_t columns, the ended sequences' state and adjoint carried by the cell kernels.
  ls::problem p{37, 11, 9, 24};
  p.lengths.resize(p.batch);
  for (std::size_t b = 0; b < p.batch; ++b) { p.lengths[b] = p.steps - (b * p.steps) / p.batch; }  // 11 down to 1
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in64 = random_instance<double>(p, seed, true);
  expect_close(ls::gradient(p, in64.params, in64.seq, on(testing::gpu)),
               ls::gradient(p, in64.params, in64.seq, on(backend::cpu)), 1e-11);

  instance<float> const in = random_instance<float>(p, seed, true);
  ls::options base = on(testing::gpu);
  base.policy = tape_policy::store;
  ls::gradient_result<float> const reference = ls::gradient(p, in.params, in.seq, base);
  ASSERT_EQ(reference.chain.step_plans.size(), p.steps);
  expect_close(reference, ls::gradient(p, in.params, in.seq, on(backend::cpu)), 1e-4);
  for (auto [policy, percent] : {std::pair<tape_policy, int>{tape_policy::offload, 30}, {tape_policy::recompute, 40},
                                 {tape_policy::automatic, 40}}) {
    ls::options o = base;
    o.policy = policy;
    o.budget_bytes = reference.chain.tape_bytes * static_cast<std::size_t>(percent) / 100;
    o.host_budget_bytes = policy == tape_policy::automatic ? reference.chain.tape_bytes / 4 : reference.chain.tape_bytes;
    ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, o);
    SCOPED_TRACE(std::string{to_string(policy)} + " at " + std::to_string(percent) + " %: " + r.chain.tiers.describe());
    EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
    expect_same_bits(r, reference);
  }
  // Planned with measured step costs: the steps with the largest and the smallest layer timed on
  // the device, every step's costs in between.
  ls::options measured = base;
  measured.policy = tape_policy::automatic;
  measured.budget_bytes = reference.chain.tape_bytes * 40 / 100;
  measured.measure_steps = true;
  ls::gradient_result<float> const timed = ls::gradient(p, in.params, in.seq, measured);
  EXPECT_EQ(timed.chain.step_costs.size(), p.steps);
  EXPECT_LE(timed.chain.peak_tape_bytes, measured.budget_bytes);
  expect_same_bits(timed, reference);
  ls::final_state<float> const gpu = ls::primal(p, in.params, in.seq, on(testing::gpu));
  ls::final_state<float> const cpu = ls::primal(p, in.params, in.seq, on(backend::cpu));
  EXPECT_LT(testing::relative_error(gpu.h, cpu.h), 1e-5);
  EXPECT_LT(testing::relative_error(gpu.c, cpu.c), 1e-5);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
}

TEST_F(GpuLstm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  ls::problem const p{8, 5, 6, 7};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), false);
  ls::options budget = on(testing::gpu);
  budget.policy = tape_policy::store;
  budget.budget_bytes = 100;
  EXPECT_THROW(static_cast<void>(ls::gradient(p, in.params, in.seq, budget)), budget_error);
  EXPECT_THROW(static_cast<void>(ls::gradient(ls::problem{8, 5, 6, 8}, in.params, in.seq, on(testing::gpu))),
               logic_error);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(ls::gradient(p, in.params, in.seq, on(testing::gpu))));
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, 0u);
}

}  // namespace
}  // namespace tapeflow
