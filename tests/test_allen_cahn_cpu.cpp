// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on the CPU backend against finite differences and an independent implementation.
#include "reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;
using testing::real;

ac::options cpu_options()
{
  ac::options o;
  o.kind = backend::cpu;
  o.poison = true;
  return o;
}

struct shape {
  std::size_t n;
  std::size_t steps;
};

void PrintTo(shape const& s, std::ostream* os) { *os << "n = " << s.n << ", T = " << s.steps; }

class AllenCahnCpu : public ::testing::TestWithParam<shape> {};

TEST_P(AllenCahnCpu, F64GradientMatchesCentralFiniteDifferences)
{
  auto const [n, steps] = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u0 = testing::random_state<double>(n * n, seed);
  ac::gradient_result<double> const r = ac::gradient(ac::problem{n, steps}, u0, cpu_options());

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

INSTANTIATE_TEST_SUITE_P(Shapes, AllenCahnCpu,
                         ::testing::Values(shape{1, 3}, shape{2, 4}, shape{3, 5}, shape{7, 6}, shape{16, 4},
                                           shape{33, 3}),
                         [](auto const& param_info) {
                           return "n" + std::to_string(param_info.param.n) + "_T" + std::to_string(param_info.param.steps);
                         });

TEST(AllenCahnCpuReference, F64MatchesTheIndependentImplementationTo1e10)
{
  for (shape s : {shape{5, 20}, shape{31, 12}, shape{64, 25}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("n " + std::to_string(s.n) + ", seed " + std::to_string(seed));
    std::vector<double> const u0 = testing::random_state<double>(s.n * s.n, seed);
    std::vector<real> const expect = testing::reference_gradient(testing::widen(u0), {s.n, s.steps});
    ac::gradient_result<double> const r = ac::gradient(ac::problem{s.n, s.steps}, u0, cpu_options());
    EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-10);
  }
}

TEST(AllenCahnCpuReference, F32MatchesF64AndTheReference)
{
  std::size_t const n = 48;
  std::size_t const steps = 30;
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u64 = testing::random_state<double>(n * n, seed);
  std::vector<float> const u32(u64.begin(), u64.end());
  std::vector<real> const expect = testing::reference_gradient(testing::widen(u32), {n, steps});
  ac::gradient_result<float> const r32 = ac::gradient(ac::problem{n, steps}, u32, cpu_options());
  ac::gradient_result<double> const r64 = ac::gradient(ac::problem{n, steps}, u64, cpu_options());
  EXPECT_LT(testing::relative_error(r32.gradient, expect), 1e-4);
  EXPECT_LT(testing::relative_error(r32.gradient, r64.gradient), 1e-4);
  EXPECT_NEAR(r32.loss, r64.loss, 1e-4 * r64.loss);
}

TEST(AllenCahnCpuReference, EveryTilingGivesTheSameBits)
{
  std::size_t const n = 37;  // 1369 cells: 343 f32 records, 685 f64 records; no tile divides them
  std::size_t const steps = 7;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::gradient_result<float> const base = ac::gradient(ac::problem{n, steps}, u0, cpu_options());
  for (auto [tile, stages] : {std::pair<std::size_t, int>{1, 2}, {7, 3}, {64, 8}, {1000, 2}}) {
    for (cpu_staging staging : {cpu_staging::in_place, cpu_staging::ring}) {
      for (std::size_t threads : {1u, 3u}) {
        cpu::set_threads(threads);
        ac::options o = cpu_options();
        o.pipeline.tile_records = tile;
        o.pipeline.stages = stages;
        o.pipeline.staging = staging;
        ac::gradient_result<float> const r = ac::gradient(ac::problem{n, steps}, u0, o);
        cpu::set_threads(0);
        EXPECT_EQ(r.chain.plan.tile_records, tile);
        EXPECT_EQ(r.chain.plan.stages, stages);
        EXPECT_EQ(r.chain.plan.staging, staging);
        EXPECT_EQ(r.staging.tiles, steps * r.chain.plan.tiles);
        EXPECT_EQ(r.staging.staged_tiles, staging == cpu_staging::ring ? steps * r.chain.plan.tiles : 0u);
        EXPECT_EQ(std::memcmp(r.gradient.data(), base.gradient.data(), base.gradient.size() * sizeof(float)), 0)
          << "tiles of " << tile << ", " << stages << " stages, " << to_string(staging) << ", " << threads
          << " threads";
      }
    }
  }
}

TEST(AllenCahnCpuReference, CapturedReverseGivesTheSameBits)
{
  std::size_t const n = 21;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::options o = cpu_options();
  ac::gradient_result<float> const plain = ac::gradient(ac::problem{n, 11}, u0, o);
  o.capture_reverse = true;
  ac::gradient_result<float> const replayed = ac::gradient(ac::problem{n, 11}, u0, o);
  EXPECT_EQ(replayed.chain.program_launches, 1u);
  EXPECT_EQ(std::memcmp(replayed.gradient.data(), plain.gradient.data(), u0.size() * sizeof(float)), 0);
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
}

TEST(AllenCahnCpuReference, PrimalMatchesTheForwardOfTheGradientRun)
{
  std::size_t const n = 20;
  std::vector<double> const u0 = testing::random_state<double>(n * n, testing::fresh_seed());
  std::vector<double> const uT = ac::primal(ac::problem{n, 9}, u0, cpu_options());
  std::vector<real> ref = testing::widen(u0);
  for (int s = 0; s < 9; ++s) { ref = testing::reference_step(ref, {n, 9}); }
  EXPECT_LT(testing::relative_error(uT, ref), 1e-14);
  EXPECT_EQ(ac::loss(uT), ac::gradient(ac::problem{n, 9}, u0, cpu_options()).loss);
}

TEST(AllenCahnCpuReference, StatsDescribeTheTape)
{
  std::size_t const n = 30;
  std::vector<float> const u0 = testing::random_state<float>(n * n, testing::fresh_seed());
  ac::gradient_result<float> const r = ac::gradient(ac::problem{n, 5}, u0, cpu_options());
  EXPECT_EQ(r.chain.steps, 5u);
  EXPECT_EQ(r.chain.plan.records, 225u);  // 900 cells, 4 per record
  EXPECT_EQ(r.chain.layer_bytes, 225u * 16);
  EXPECT_EQ(r.chain.tape_bytes, 5 * 225u * 16);
  EXPECT_EQ(r.chain.peak_tape_bytes, r.chain.tape_bytes);
  EXPECT_GE(r.peak_device_bytes, r.chain.tape_bytes);
  EXPECT_LE(r.staging.max_in_flight, static_cast<std::size_t>(r.chain.plan.stages));
}

TEST(AllenCahnCpuErrors, BadInputIsATypedError)
{
  std::vector<float> const u0(16, 0.5f);
  ac::options const o = cpu_options();
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{5, 3}, u0, o)), logic_error);   // 16 != 25
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{0, 3}, u0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{4, 0}, u0, o)), logic_error);
  ac::options budget = o;
  budget.budget_bytes = 32;  // less than one 64-byte layer
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{4, 3}, u0, budget)), budget_error);
  ac::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{4, 3}, u0, hip)), unavailable_error);
  ac::options stages = o;
  stages.pipeline.stages = 9;
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{4, 3}, u0, stages)), logic_error);
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(ac::gradient(ac::problem{4, 3}, u0, o)));
}

}  // namespace
}  // namespace tapeflow
