// SPDX-License-Identifier: Apache-2.0
// What every registered workload must do, tested from its description on the backend under test
// (tests/target.hpp: the CPU backend in tapeflow_tests, the GPU and its emulated twin in the GPU
// test executables): its gradient against central differences in double, its session run again
// giving the same bits and allocating nothing, every value written, bad inputs as typed errors
// that leak nothing; a chain's every policy giving the store policy's bits within its budget; and
// on a GPU, the CPU backend's gradient.
#include "common.hpp"
#include "registered.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/workloads/common/segment_trials.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tapeflow {
namespace {

namespace wl = workloads;


template <class D>
struct runs_on_target : std::bool_constant<!testing::on_gpu || wl::described<D>::gpu> {};
template <class D>
struct chain_on_target : std::bool_constant<runs_on_target<D>::value && D::tape == wl::tape_kind::chain> {};

using on_target = wl::keep_descriptions<runs_on_target, wl::registered_workloads>::type;
using chains_on_target = wl::keep_descriptions<chain_on_target, wl::registered_workloads>::type;

/// D's options on `kind`, nothing poisoned (EveryValueIsWritten poisons).
template <class D>
typename D::options options_on(backend kind)
{
  return testing::options_on<typename D::options>(kind, false);
}

using testing::all_finite;
using testing::same_bits;

std::size_t allocations(backend kind)
{
  return device_memory_usage(kind).allocations + host_memory_usage(kind).allocations;
}

template <class D>
class Workload : public testing::on_target<> {};
TYPED_TEST_SUITE_P(Workload);

TYPED_TEST_P(Workload, GradientMatchesCentralDifferencesInDouble)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE(std::string{D::text.name} + ", seed " + std::to_string(seed));
  std::vector<std::vector<double>> const x = D::template random_inputs<double>(p, seed);
  auto run = D::template open<double>(p, options_on<D>(testing::target));
  wl::outcome<double> const r = wl::gradient_of(*run, wl::views_of(x), {});
  ASSERT_EQ(r.gradients.size(), D::gradients(p).size());
  ASSERT_LE(r.gradients.size(), x.size());

  // A random direction v over the differentiated inputs (the first ones, as many as gradients),
  // <dL/dx, v> against (L(x + hv) - L(x - hv)) / 2h: truncation O(h^2) ~ 1e-10, rounding ~1e-11 |L|.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<std::vector<double>> v(r.gradients.size());
  double dot = 0;
  double scale = std::fabs(static_cast<double>(r.loss));
  for (std::size_t a = 0; a < v.size(); ++a) {
    ASSERT_EQ(r.gradients[a].size(), x[a].size()) << "gradient " << a << " is not shaped like input " << a;
    for (double g : r.gradients[a]) {
      v[a].push_back(unit(rng));
      dot += g * v[a].back();
      scale += std::fabs(g * v[a].back());
    }
  }
  double const h = 1e-5;
  auto loss_at = [&](double sign) {
    std::vector<std::vector<double>> moved = x;
    for (std::size_t a = 0; a < v.size(); ++a) {
      for (std::size_t i = 0; i < v[a].size(); ++i) { moved[a][i] += sign * h * v[a][i]; }
    }
    run->load(wl::views_of(moved), {});
    run->primal({});
    return static_cast<double>(run->loss({}));
  };
  double const fd = (loss_at(1) - loss_at(-1)) / (2 * h);
  EXPECT_NEAR(dot, fd, 1e-7 * scale);
  // The primal's loss is the gradient run's.
  run->load(wl::views_of(x), {});
  run->primal({});
  EXPECT_NEAR(static_cast<double>(run->loss({})), static_cast<double>(r.loss), 1e-12 * scale);
}

TYPED_TEST_P(Workload, EveryValueIsWritten)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  auto o = options_on<D>(testing::target);
  o.poison = true;  // every buffer the kernels write starts as NaN
  if constexpr (D::precisions == wl::precision::f64_only) {
    std::vector<std::vector<double>> const x64 = D::template random_inputs<double>(p, testing::fresh_seed());
    auto run = D::template open<double>(p, o);
    wl::outcome<double> const r = wl::gradient_of(*run, wl::views_of(x64), {});
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_TRUE(all_finite(r.gradients)) << "an element was never written";
  } else {
    std::vector<std::vector<float>> const x = D::template random_inputs<float>(p, testing::fresh_seed());
    auto run = D::template open<float>(p, o);
    wl::outcome<float> const r = wl::gradient_of(*run, wl::views_of(x), {});
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_TRUE(all_finite(r.gradients)) << "an element was never written";
  }
}

TYPED_TEST_P(Workload, ASessionRunsAgainToTheSameBitsAndAllocatesNothing)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  std::vector<std::vector<double>> const x = D::template random_inputs<double>(p, testing::fresh_seed());
  auto run = D::template open<double>(p, options_on<D>(testing::target));
  wl::outcome<double> const first = wl::gradient_of(*run, wl::views_of(x), {});
  std::size_t const before = allocations(testing::target);
  wl::outcome<double> const second = wl::gradient_of(*run, wl::views_of(x), {});
  EXPECT_EQ(allocations(testing::target), before) << "a session's second gradient allocated";
  EXPECT_TRUE(same_bits(first.gradients, second.gradients));
  EXPECT_EQ(first.loss, second.loss);
  wl::tape_report const planned = D::template plan<double>(p, options_on<D>(testing::target));
  EXPECT_LE(second.report.tape_bytes, planned.tape_bytes) << "the run wrote more tape than its plan";
  EXPECT_GT(second.report.tape_bytes, 0u);
}

TYPED_TEST_P(Workload, WrongInputsAreTypedErrorsAndNothingLeaks)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  std::size_t const baseline = device_memory_usage(testing::target).current_bytes;
  {
    std::vector<std::vector<double>> x = D::template random_inputs<double>(p, testing::fresh_seed());
    auto run = D::template open<double>(p, options_on<D>(testing::target));
    std::vector<std::vector<double>> short_one = x;
    short_one.front().pop_back();
    EXPECT_THROW(run->load(wl::views_of(short_one), {}), logic_error);
    std::vector<std::vector<double>> missing = x;
    missing.pop_back();
    if (missing.empty()) { missing.push_back({}); }
    EXPECT_THROW(run->load(wl::views_of(missing), {}), logic_error);
    EXPECT_THROW(run->reverse({}), logic_error) << "a reverse with no forward to reverse";
    // The session still runs.
    wl::outcome<double> const r = wl::gradient_of(*run, wl::views_of(x), {});
    EXPECT_TRUE(all_finite(r.gradients));
  }
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, baseline);
}

REGISTER_TYPED_TEST_SUITE_P(Workload, GradientMatchesCentralDifferencesInDouble, EveryValueIsWritten,
                            ASessionRunsAgainToTheSameBitsAndAllocatesNothing,
                            WrongInputsAreTypedErrorsAndNothingLeaks);


INSTANTIATE_TYPED_TEST_SUITE_P(Registered, Workload, testing::gtest_types<on_target>::type, testing::description_name);

/// The chain workloads: every policy gives the store policy's bits, within its budgets.
template <class D>
class ChainWorkload : public Workload<D> {};
TYPED_TEST_SUITE_P(ChainWorkload);

TYPED_TEST_P(ChainWorkload, EveryPolicyGivesTheStoreBitsWithinItsBudget)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  std::vector<std::vector<double>> const x = D::template random_inputs<double>(p, testing::fresh_seed());
  auto o = options_on<D>(testing::target);
  o.policy = tape_policy::store;
  wl::outcome<double> const store = wl::gradient_of(*D::template open<double>(p, o), wl::views_of(x), {});
  std::size_t const tape = store.report.chain->tape_bytes;
  for (tape_policy policy : {tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
    SCOPED_TRACE(to_string(policy));
    o.policy = policy;
    o.budget_bytes = tape / 3;
    o.host_budget_bytes = policy == tape_policy::offload ? tape : tape / 2;  // offload keeps every layer there
    o.host_tier_on_cpu = true;  // the host tier's part of auto's schedule runs on the CPU too
    o.bw = {50.0, 50.0, 20.0};  // fixed, so the plan does not depend on the machine
    wl::outcome<double> const r = wl::gradient_of(*D::template open<double>(p, o), wl::views_of(x), {});
    SCOPED_TRACE(r.report.chain->tiers.describe());
    EXPECT_TRUE(same_bits(r.gradients, store.gradients));
    EXPECT_EQ(r.loss, store.loss);
    EXPECT_LE(r.report.chain->peak_tape_bytes, o.budget_bytes);
    EXPECT_LE(r.report.chain->host_tape_bytes, o.host_budget_bytes);
  }
}

REGISTER_TYPED_TEST_SUITE_P(ChainWorkload, EveryPolicyGivesTheStoreBitsWithinItsBudget);
INSTANTIATE_TYPED_TEST_SUITE_P(Registered, ChainWorkload, testing::gtest_types<chains_on_target>::type, testing::description_name);

/// The stencil workloads: --segment measure times its candidates on the backend under test, runs
/// the fastest, and gives the bits of one step per layer.
template <class D>
struct stencil_on_target
  : std::bool_constant<runs_on_target<D>::value && std::is_base_of_v<wl::stencil_options, typename D::options>> {};
using stencils_on_target = wl::keep_descriptions<stencil_on_target, wl::registered_workloads>::type;

template <class D>
class StencilWorkload : public Workload<D> {};
TYPED_TEST_SUITE_P(StencilWorkload);

TYPED_TEST_P(StencilWorkload, MeasuredSegmentsRunTheFastestTrialWithTheOneStepBits)
{
  using D = TypeParam;
  auto const p = D::test_problem();
  std::vector<std::vector<double>> const x = D::template random_inputs<double>(p, testing::fresh_seed());
  auto o = options_on<D>(testing::target);
  o.policy = tape_policy::store;
  wl::outcome<double> const one_step = wl::gradient_of(*D::template open<double>(p, o), wl::views_of(x), {});
  EXPECT_EQ((wl::settle_segment<D, double>(p, o).segment), 1) << "nothing to settle without measure_segment";

  o.measure_segment = true;
  wl::segment_measurement m;
  auto const settled = wl::settle_segment<D, double>(p, o, &m);
  SCOPED_TRACE(m.describe());
  EXPECT_FALSE(settled.measure_segment);
  EXPECT_EQ(settled.segment, m.chosen);
  EXPECT_EQ(m.chosen, wl::fastest_segment(m.trials));
  ASSERT_FALSE(m.trials.empty());
  EXPECT_EQ(m.trials.front().segment, 1) << "one step per layer is always a candidate";
  EXPECT_EQ(m.steps, static_cast<std::size_t>(m.trials.back().segment));
  EXPECT_LE(m.steps, p.steps);
  for (std::size_t i = 0; i < m.trials.size(); ++i) {
    EXPECT_TRUE(std::isfinite(m.trials[i].ms_per_step) && m.trials[i].ms_per_step > 0) << m.trials[i].segment;
    if (i > 0) { EXPECT_LT(m.trials[i - 1].segment, m.trials[i].segment); }
  }
  EXPECT_GT(m.wall_ms, 0);
  wl::outcome<double> const r = wl::gradient_of(*D::template open<double>(p, settled), wl::views_of(x), {});
  EXPECT_TRUE(same_bits(r.gradients, one_step.gradients));
  EXPECT_EQ(r.loss, one_step.loss);
}

REGISTER_TYPED_TEST_SUITE_P(StencilWorkload, MeasuredSegmentsRunTheFastestTrialWithTheOneStepBits);
INSTANTIATE_TYPED_TEST_SUITE_P(Registered, StencilWorkload, testing::gtest_types<stencils_on_target>::type,
                               testing::description_name);

#if defined(TAPEFLOW_TEST_ON_GPU)
/// On a GPU: the CPU backend's gradient, in f32 and (where the workload runs it) f64.
template <class D>
class GpuWorkload : public Workload<D> {};
TYPED_TEST_SUITE_P(GpuWorkload);

template <class D, class T>
void expect_cpu_gradient(double tolerance)
{
  auto const p = D::test_problem();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::vector<T>> const x = D::template random_inputs<T>(p, seed);
  wl::outcome<T> const gpu = wl::gradient_of(*D::template open<T>(p, options_on<D>(testing::target)), wl::views_of(x), {});
  wl::outcome<T> const cpu = wl::gradient_of(*D::template open<T>(p, options_on<D>(backend::cpu)), wl::views_of(x), {});
  ASSERT_EQ(gpu.gradients.size(), cpu.gradients.size());
  for (std::size_t a = 0; a < gpu.gradients.size(); ++a) {
    EXPECT_LT(testing::relative_error(gpu.gradients[a], cpu.gradients[a]), tolerance) << "gradient " << a;
  }
  EXPECT_NEAR(static_cast<double>(gpu.loss), static_cast<double>(cpu.loss),
              tolerance * std::fabs(static_cast<double>(cpu.loss)));
}

TYPED_TEST_P(GpuWorkload, GradientIsTheCpuBackends)
{
  using D = TypeParam;
  if constexpr (D::precisions == wl::precision::f32_f64) { expect_cpu_gradient<D, float>(1e-4); }
  expect_cpu_gradient<D, double>(1e-10);
}

REGISTER_TYPED_TEST_SUITE_P(GpuWorkload, GradientIsTheCpuBackends);
INSTANTIATE_TYPED_TEST_SUITE_P(Registered, GpuWorkload, testing::gtest_types<on_target>::type, testing::description_name);
#endif

}  // namespace
}  // namespace tapeflow
