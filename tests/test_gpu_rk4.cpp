// SPDX-License-Identifier: Apache-2.0
// RK4 particles on the GPU (CUDA, or HIP in a HIP build): the arena against the CPU reference, the
// arena against the global-stack baseline, and the host tier on the device. Skipped (with the
// reason) when no device is present.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/rk4.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace tapeflow {
namespace {

namespace rk = workloads::rk4;

class GpuRk4 : public ::testing::Test {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
  }
};

rk::options on(backend kind, rk::method m = rk::method::arena)
{
  rk::options o;
  o.kind = kind;
  o.tape = m;
  o.chunk_steps = 16;
  o.poison = true;  // a record read but never written turns the gradient into NaN
  return o;
}

template <class T>
std::vector<T> random_particles(std::size_t count, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> pos(-1.0, 1.0);
  std::uniform_real_distribution<double> vel(-0.9, 0.9);
  std::vector<T> y(6 * count);
  for (std::size_t p = 0; p < count; ++p) {
    for (int i = 0; i < 3; ++i) {
      y[6 * p + i] = static_cast<T>(pos(rng));
      y[6 * p + 3 + i] = static_cast<T>(vel(rng));
    }
  }
  return y;
}

std::vector<std::uint32_t> random_targets(std::size_t count, std::uint32_t lo, std::uint32_t hi, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> dist(lo, hi);
  std::vector<std::uint32_t> t(count);
  for (auto& n : t) { n = dist(rng); }
  return t;
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
void arena_matches_cpu(double tolerance)
{
  for (std::size_t particles : {1, 31, 33, 1000, 5000}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("particles " + std::to_string(particles) + ", seed " + std::to_string(seed));
    rk::problem p;
    p.particles = particles;
    p.max_steps = 100;
    std::vector<T> const y0 = random_particles<T>(particles, seed);
    rk::options cpu;
    cpu.chunk_steps = 16;
    std::vector<T> const budgets = rk::budgets_for_steps(p, y0, random_targets(particles, 1, 100, seed), cpu);
    rk::gradient_result<T> const gpu = rk::gradient(p, y0, budgets, on(testing::gpu));
    rk::gradient_result<T> const ref = rk::gradient(p, y0, budgets, cpu);
    ASSERT_TRUE(all_finite(gpu.gradient)) << "a record was read that was never written";
    EXPECT_EQ(gpu.steps, ref.steps);
    EXPECT_LT(testing::relative_error(gpu.gradient, ref.gradient), tolerance);
    EXPECT_NEAR(gpu.loss, ref.loss, tolerance * ref.loss);
    EXPECT_EQ(gpu.arena.chunks, ref.arena.chunks);
  }
}

TEST_F(GpuRk4, F32ArenaMatchesTheCpuReference) { arena_matches_cpu<float>(1e-4); }

TEST_F(GpuRk4, F64ArenaMatchesTheCpuReference) { arena_matches_cpu<double>(1e-10); }

TEST_F(GpuRk4, ArenaAndGlobalStackAgree)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 20000;
  p.max_steps = 200;
  std::vector<float> const y0 = random_particles<float>(p.particles, seed);
  std::vector<float> const budgets =
    rk::budgets_for_steps(p, y0, random_targets(p.particles, 16, 200, seed), on(testing::gpu));
  rk::gradient_result<float> const arena = rk::gradient(p, y0, budgets, on(testing::gpu));
  rk::gradient_result<float> const stack = rk::gradient(p, y0, budgets, on(testing::gpu, rk::method::global_stack));
  EXPECT_EQ(arena.steps, stack.steps);
  EXPECT_GT(std::set<std::uint32_t>(arena.steps.begin(), arena.steps.end()).size(), 100u);
  ASSERT_TRUE(all_finite(arena.gradient));
  ASSERT_TRUE(all_finite(stack.gradient));
  // The same regions of math.hpp; only the kernels around them differ (the compiler may contract
  // them differently), so agreement to rounding, not bits (the CPU test checks bits).
  EXPECT_LT(testing::relative_error(arena.gradient, stack.gradient), 1e-5);
  EXPECT_NEAR(arena.loss, stack.loss, 1e-6f * stack.loss);
}

TEST_F(GpuRk4, TheHostTierOnTheDeviceGivesTheSameBitsAndReleasesEverything)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 10000;
  p.max_steps = 160;
  std::vector<double> const y0 = random_particles<double>(p.particles, seed);
  std::vector<std::uint32_t> targets = random_targets(p.particles, 1, 160, seed);
  targets[0] = 160;  // ten chunks of 16
  std::vector<double> const budgets = rk::budgets_for_steps(p, y0, targets, on(testing::gpu));
  std::size_t const baseline = device_memory_usage(testing::gpu).current_bytes;
  rk::gradient_result<double> const device = rk::gradient(p, y0, budgets, on(testing::gpu));
  for (std::size_t slots : {1, 2, 4}) {
    rk::options o = on(testing::gpu);
    o.device_budget_bytes = slots * device.arena.chunk_bytes;
    rk::gradient_result<double> const r = rk::gradient(p, y0, budgets, o);
    SCOPED_TRACE(r.arena.describe());
    EXPECT_EQ(r.arena.device_slots, slots);
    EXPECT_EQ(r.arena.prefetches, 10 - slots);
    EXPECT_EQ(std::memcmp(r.gradient.data(), device.gradient.data(), device.gradient.size() * sizeof(double)), 0);
  }
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, baseline);
  EXPECT_EQ(host_memory_usage(testing::gpu).current_bytes, 0u);
  rk::options tight = on(testing::gpu);
  tight.device_budget_bytes = device.arena.chunk_bytes / 2;
  EXPECT_THROW(static_cast<void>(rk::gradient(p, y0, budgets, tight)), budget_error);
  EXPECT_EQ(device_memory_usage(testing::gpu).current_bytes, baseline);
}

}  // namespace
}  // namespace tapeflow
