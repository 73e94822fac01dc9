// SPDX-License-Identifier: Apache-2.0
// RK4 particles on the backend under test (tests/target.hpp): the arena against the global-stack
// baseline, and the arena's host tier; on the CPU backend also the step adjoint and the whole
// gradient against central finite differences in long double, data-dependent trip counts, errors
// and injected faults; on a GPU also the arena against the CPU backend.
#include "common.hpp"

#include <tapeflow/workloads/rk4.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#if !defined(TAPEFLOW_TEST_ON_GPU)
#include <tapeflow/fault.hpp>

#include <algorithm>
#endif

namespace tapeflow {
namespace {

namespace rk = workloads::rk4;

/// Steps per arena chunk: several chunks in the small problems of the CPU tests, a GPU's in its.
constexpr std::size_t chunk_steps = testing::on_gpu ? 16 : 8;

rk::options on(backend kind, rk::method m = rk::method::arena)
{
  rk::options o = testing::options_on<rk::options>(kind);  // a record read but never written: a NaN gradient
  o.tape = m;
  o.chunk_steps = chunk_steps;
  return o;
}

class Rk4 : public testing::on_target<> {};

/// Fresh random particles: positions in [-1, 1]^3, velocities of speed 0.5 to 1.5.
template <class T>
std::vector<T> random_particles(std::size_t count, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> pos(-1.0, 1.0);
  std::normal_distribution<double> dir(0.0, 1.0);
  std::uniform_real_distribution<double> spd(0.5, 1.5);
  std::vector<T> y(6 * count);
  for (std::size_t p = 0; p < count; ++p) {
    double d[3] = {dir(rng), dir(rng), dir(rng)};
    double const norm = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + 1e-12;
    double const s = spd(rng);
    for (int i = 0; i < 3; ++i) {
      y[6 * p + i] = static_cast<T>(pos(rng));
      y[6 * p + 3 + i] = static_cast<T>(s * d[i] / norm);
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

/// What the backend under test held before a test: the CPU backend holds nothing between tests.
std::size_t device_bytes_held() { return testing::on_gpu ? device_memory_usage(testing::target).current_bytes : 0; }

void expect_no_bytes_held(std::size_t device_baseline)
{
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, device_baseline);
  EXPECT_EQ(host_memory_usage(testing::target).current_bytes, 0u);
}

TEST_F(Rk4, ArenaAndGlobalStackAgree)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::size_t const baseline = device_bytes_held();
  rk::problem p;
  p.particles = testing::on_gpu ? 20000 : 77;
  p.max_steps = testing::on_gpu ? 200 : 45;
  auto const lo = static_cast<std::uint32_t>(testing::on_gpu ? 16 : 1);
  std::vector<float> const y0 = random_particles<float>(p.particles, seed);
  std::vector<float> const budgets = rk::budgets_for_steps(
    p, y0, random_targets(p.particles, lo, static_cast<std::uint32_t>(p.max_steps), seed), on(testing::target));
  rk::gradient_result<float> const arena = rk::gradient(p, y0, budgets, on(testing::target));
  rk::gradient_result<float> const stack = rk::gradient(p, y0, budgets, on(testing::target, rk::method::global_stack));
  EXPECT_EQ(stack.steps, arena.steps);
  ASSERT_TRUE(testing::all_finite(arena.gradient));
  ASSERT_TRUE(testing::all_finite(stack.gradient));
  EXPECT_EQ(stack.tape_bytes, p.particles * p.max_steps * sizeof(rk::step_record<float>));
#if defined(TAPEFLOW_TEST_ON_GPU)
  EXPECT_GT(std::set<std::uint32_t>(arena.steps.begin(), arena.steps.end()).size(), 100u);
  // The same regions of math.hpp; only the kernels around them differ (the compiler may contract
  // them differently), so agreement to rounding, not bits (the CPU backend checks bits).
  EXPECT_LT(testing::relative_error(arena.gradient, stack.gradient), 1e-5);
  EXPECT_NEAR(arena.loss, stack.loss, 1e-6f * stack.loss);
#else
  EXPECT_TRUE(testing::same_bits(stack.gradient, arena.gradient));
#endif
  expect_no_bytes_held(baseline);
}

TEST_F(Rk4, TheHostTierGivesTheSameBitsAndReleasesEverything)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::size_t const baseline = device_bytes_held();
  rk::problem p;
  p.particles = testing::on_gpu ? 10000 : 90;
  p.max_steps = 10 * chunk_steps;
  std::vector<double> const y0 = random_particles<double>(p.particles, seed);
  std::vector<std::uint32_t> targets =
    random_targets(p.particles, 1, static_cast<std::uint32_t>(p.max_steps), seed);
  targets[3] = static_cast<std::uint32_t>(p.max_steps);  // ten chunks
  std::vector<double> const budgets = rk::budgets_for_steps(p, y0, targets, on(testing::target));
  rk::gradient_result<double> const device = rk::gradient(p, y0, budgets, on(testing::target));
  EXPECT_EQ(device.arena.slot_limit, 0u);
  std::size_t const chunk = device.arena.chunk_bytes;
  // Device slots for the ten chunks, and how far ahead the reverse prefetches (CPU: every
  // distance; GPU: the default).
  std::vector<std::pair<std::size_t, std::size_t>> rings;
  for (std::size_t slots : testing::on_gpu ? std::vector<std::size_t>{1, 2, 4} : std::vector<std::size_t>{1, 2, 3, 5}) {
    for (std::size_t distance : testing::on_gpu ? std::vector<std::size_t>{rk::options{}.prefetch_distance}
                                                : std::vector<std::size_t>{0, 1, 4}) {
      rings.emplace_back(slots, distance);
    }
  }
  for (auto [slots, distance] : rings) {
    rk::options o = on(testing::target);
    o.device_budget_bytes = slots * chunk;
    o.prefetch_distance = distance;
    rk::gradient_result<double> const r = rk::gradient(p, y0, budgets, o);
    SCOPED_TRACE(r.arena.describe());
    EXPECT_TRUE(testing::same_bits(r.gradient, device.gradient));
    EXPECT_EQ(r.arena.device_slots, slots);
    EXPECT_GT(r.arena.chunks_to_host, 0u);
    EXPECT_EQ(r.arena.prefetches, 10 - slots);
  }
  expect_no_bytes_held(baseline);
  rk::options tight = on(testing::target);
  tight.device_budget_bytes = chunk / 2;
  EXPECT_THROW(static_cast<void>(rk::gradient(p, y0, budgets, tight)), budget_error);
  expect_no_bytes_held(baseline);
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
// ---- the CPU backend ---------------------------------------------------------------------------
using testing::real;

/// One particle's loss 0.5 (|x|^2 + |v|^2) after its loop, in long double; `steps` gets its trips.
real particle_loss(rk::params<real> const& k, rk::state<real> y, real budget, std::uint32_t& steps)
{
  steps = rk::primal_region<real>(0, &y, &budget, k);
  real sum = 0;
  for (int i = 0; i < 3; ++i) { sum += y.x[i] * y.x[i] + y.v[i] * y.v[i]; }
  return sum / 2;
}

TEST(Rk4Math, HessianVectorProductIsTheDerivativeOfTheAcceleration)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::params<real> const k = rk::params_of<real>(rk::problem{});
  std::vector<real> const r = testing::random_state<real>(6, seed);
  real const x[3] = {r[0], r[1], r[2]};
  real const u[3] = {r[3], r[4], r[5]};
  real hv[3];
  rk::hess_vec(k.pot, x, u, hv);
  real const h = 1e-6L;
  real xp[3], xm[3], ap[3], am[3];
  for (int i = 0; i < 3; ++i) { xp[i] = x[i] + h * u[i]; xm[i] = x[i] - h * u[i]; }
  rk::accel(k.pot, xp, ap);
  rk::accel(k.pot, xm, am);
  for (int i = 0; i < 3; ++i) {  // a = -grad V
    EXPECT_NEAR(static_cast<double>(hv[i]), static_cast<double>(-(ap[i] - am[i]) / (2 * h)), 1e-9) << i;
  }
}

TEST(Rk4Math, StepAdjointMatchesCentralDifferencesInLongDouble)
{
  rk::params<real> const k = rk::params_of<real>(rk::problem{});
  for (int trial = 0; trial < 5; ++trial) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<real> const r = testing::random_state<real>(12, seed);
    rk::state<real> const y{{r[0], r[1], r[2]}, {r[3], r[4], r[5]}};
    rk::state<real> const g{{r[6], r[7], r[8]}, {r[9], r[10], r[11]}};
    for (real dt : {0.01L, 0.1L}) {
      rk::state<real> const adj = rk::rk4_step_adjoint(k.pot, dt, y, g);
      auto dot = [&](rk::state<real> const& a) {
        real s = 0;
        for (int i = 0; i < 3; ++i) { s += g.x[i] * a.x[i] + g.v[i] * a.v[i]; }
        return s;
      };
      real const h = 1e-6L;
      for (int c = 0; c < 6; ++c) {
        rk::state<real> yp = y, ym = y;
        (c < 3 ? yp.x[c] : yp.v[c - 3]) += h;
        (c < 3 ? ym.x[c] : ym.v[c - 3]) -= h;
        real const fd = (dot(rk::rk4_step(k.pot, dt, yp)) - dot(rk::rk4_step(k.pot, dt, ym))) / (2 * h);
        real const got = c < 3 ? adj.x[c] : adj.v[c - 3];
        EXPECT_NEAR(static_cast<double>(got), static_cast<double>(fd), 1e-9 * (1 + std::fabs(static_cast<double>(fd))))
          << "component " << c << ", dt " << static_cast<double>(dt);
      }
    }
  }
}

TEST_F(Rk4, GradientMatchesCentralDifferencesInLongDouble)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 6;
  p.max_steps = 60;
  std::vector<double> const y0 = random_particles<double>(p.particles, seed);
  std::vector<std::uint32_t> const targets = random_targets(p.particles, 5, 55, seed + 1);
  std::vector<double> const budgets = rk::budgets_for_steps(p, y0, targets, on(testing::target));
  rk::gradient_result<double> const r = rk::gradient(p, y0, budgets, on(testing::target));
  ASSERT_EQ(r.steps, targets);

  rk::params<real> const k = rk::params_of<real>(p);
  real const h = 1e-6L;
  std::size_t checked = 0;
  std::size_t skipped = 0;
  for (std::size_t q = 0; q < p.particles; ++q) {
    rk::state<real> y{};
    for (int i = 0; i < 3; ++i) {
      y.x[i] = y0[6 * q + i];
      y.v[i] = y0[6 * q + 3 + i];
    }
    real const budget = budgets[q];
    std::uint32_t n = 0;
    static_cast<void>(particle_loss(k, y, budget, n));
    ASSERT_EQ(n, targets[q]) << "particle " << q << ": long double takes another trip count";
    for (int c = 0; c < 6; ++c) {
      rk::state<real> yp = y, ym = y;
      (c < 3 ? yp.x[c] : yp.v[c - 3]) += h;
      (c < 3 ? ym.x[c] : ym.v[c - 3]) -= h;
      std::uint32_t np = 0, nm = 0;
      real const lp = particle_loss(k, yp, budget, np);
      real const lm = particle_loss(k, ym, budget, nm);
      if (np != n || nm != n) {  // +-h moved the stop: L jumps there, no derivative to compare
        ++skipped;
        continue;
      }
      real const fd = (lp - lm) / (2 * h);
      double const got = r.gradient[6 * q + static_cast<std::size_t>(c)];
      EXPECT_NEAR(got, static_cast<double>(fd), 1e-7 * (1 + std::fabs(static_cast<double>(fd))))
        << "particle " << q << " (" << n << " steps), component " << c;
      ++checked;
    }
  }
  // Budgets sit half a step from either stop, so a perturbation of 1e-6 never moves it.
  EXPECT_EQ(skipped, 0u) << "components skipped because +-h changed the trip count";
  EXPECT_EQ(checked, 6 * p.particles);
}

TEST_F(Rk4, F32GradientIsCloseToF64)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 40;
  p.max_steps = 50;
  std::vector<double> const y64 = random_particles<double>(p.particles, seed);
  std::vector<double> const b64 =
    rk::budgets_for_steps(p, y64, random_targets(p.particles, 1, 50, seed), on(testing::target));
  std::vector<float> const y32(y64.begin(), y64.end());
  std::vector<float> const b32(b64.begin(), b64.end());
  rk::gradient_result<double> const g64 = rk::gradient(p, y64, b64, on(testing::target));
  rk::gradient_result<float> const g32 = rk::gradient(p, y32, b32, on(testing::target));
  EXPECT_EQ(g32.steps, g64.steps);
  EXPECT_LT(testing::relative_error(g32.gradient, g64.gradient), 1e-4);
  EXPECT_NEAR(g32.loss, g64.loss, 1e-5 * g64.loss);
}

TEST_F(Rk4, TripCountsDifferPerParticleAndMatchThePrimal)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 100;
  p.max_steps = 64;
  std::vector<float> const y0 = random_particles<float>(p.particles, seed);
  std::vector<std::uint32_t> const targets = random_targets(p.particles, 1, 64, seed);
  std::vector<float> const budgets = rk::budgets_for_steps(p, y0, targets, on(testing::target));
  rk::gradient_result<float> const r = rk::gradient(p, y0, budgets, on(testing::target));
  EXPECT_EQ(r.steps, targets);
  EXPECT_GT(std::set<std::uint32_t>(r.steps.begin(), r.steps.end()).size(), 20u);
  rk::primal_result<float> const primal = rk::primal(p, y0, budgets, on(testing::target));
  EXPECT_EQ(primal.steps, r.steps);
  EXPECT_EQ(primal.loss, r.loss);  // the taped forward computes the same final states
  EXPECT_EQ(r.arena.chunks, (*std::max_element(targets.begin(), targets.end()) + chunk_steps - 1) / chunk_steps);
  // Clamp: with unbounded budgets every particle stops at max_steps.
  std::vector<float> const huge(p.particles, 1e30f);
  EXPECT_EQ(rk::gradient(p, y0, huge, on(testing::target)).steps, std::vector<std::uint32_t>(p.particles, 64u));
}

TEST_F(Rk4, BadInputAndBudgetsAreTypedErrorsAndLeaveNothingBehind)
{
  rk::problem p;
  p.particles = 40;
  p.max_steps = 40;
  std::vector<float> const y0 = random_particles<float>(p.particles, testing::fresh_seed());
  std::vector<float> const budgets(p.particles, 0.3f);
  rk::options const o = on(testing::target);
  EXPECT_THROW(static_cast<void>(rk::gradient(p, std::vector<float>(6 * 39), budgets, o)), logic_error);
  EXPECT_THROW(static_cast<void>(rk::gradient(p, y0, std::vector<float>(39, 1.0f), o)), logic_error);
  std::vector<float> nan_budget = budgets;
  nan_budget[5] = std::nanf("");
  EXPECT_THROW(static_cast<void>(rk::gradient(p, y0, nan_budget, o)), logic_error);
  rk::problem bad = p;
  bad.dt = 0;
  EXPECT_THROW(static_cast<void>(rk::gradient(bad, y0, budgets, o)), logic_error);
  bad = p;
  bad.max_steps = 0;
  EXPECT_THROW(static_cast<void>(rk::gradient(bad, y0, budgets, o)), logic_error);
  bad = p;
  bad.wells.push_back({{0, 0, 0}, 1, 1});
  EXPECT_THROW(static_cast<void>(rk::gradient(bad, y0, budgets, o)), logic_error);
  bad = p;
  bad.wells[0].sigma = 0;
  EXPECT_THROW(static_cast<void>(rk::gradient(bad, y0, budgets, o)), logic_error);
  EXPECT_THROW(static_cast<void>(rk::budgets_for_steps(p, y0, std::vector<std::uint32_t>(40, 41), o)), logic_error);

  std::vector<float> const long_budgets(p.particles, 1e30f);  // every particle runs 40 steps: 5 chunks
  std::size_t const chunk = 2 * chunk_steps * 32 * sizeof(rk::step_record<float>);
  rk::options ring = o;
  ring.device_budget_bytes = chunk - 16;
  EXPECT_THROW(static_cast<void>(rk::gradient(p, y0, long_budgets, ring)), budget_error);
  ring.device_budget_bytes = 2 * chunk;
  ring.host_budget_bytes = 2 * chunk;
  try {
    static_cast<void>(rk::gradient(p, y0, long_budgets, ring));
    ADD_FAILURE() << "no error";
  } catch (budget_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("exceed the host budget"), std::string::npos) << e.what();
  }
  expect_no_bytes_held(0);
  ring.host_budget_bytes = 5 * chunk;
  EXPECT_NO_THROW(static_cast<void>(rk::gradient(p, y0, long_budgets, ring)));
  expect_no_bytes_held(0);
}

std::string site_name(fault::site s)
{
  switch (s) {
    case fault::site::device_allocation: return "device_allocation";
    case fault::site::host_allocation: return "host_allocation";
    case fault::site::copy: return "copy";
  }
  return "unknown";
}

class Rk4Faults : public testing::on_target<::testing::TestWithParam<fault::site>> {};

TEST_P(Rk4Faults, EveryFailurePointIsATypedErrorOrTheSameBitsAndReleasesEverything)
{
  fault::site const site = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rk::problem p;
  p.particles = 50;
  p.max_steps = 40;
  std::vector<float> const y0 = random_particles<float>(p.particles, seed);
  std::vector<float> const budgets =
    rk::budgets_for_steps(p, y0, random_targets(p.particles, 1, 40, seed), on(testing::target));
  rk::options o = on(testing::target);
  o.device_budget_bytes = 2 * 2 * chunk_steps * 32 * sizeof(rk::step_record<float>);  // a ring of 2 chunk slots
  std::vector<float> const expect = rk::gradient(p, y0, budgets, on(testing::target)).gradient;
  std::size_t failures = 0;
  for (std::size_t n = 1;; ++n) {
    std::size_t const before = fault::injected(site);
    try {
      fault::scoped_failure const armed(site, n);
      rk::gradient_result<float> const r = rk::gradient(p, y0, budgets, o);
      EXPECT_TRUE(testing::same_bits(r.gradient, expect)) << "n " << n;
      if (fault::injected(site) == before) { break; }
    } catch (out_of_memory const&) {
      EXPECT_NE(site, fault::site::copy);
      ++failures;
    } catch (platform_error const& e) {
      EXPECT_EQ(site, fault::site::copy);
      EXPECT_EQ(e.name(), "tapeflow_injected_copy_fault");
      ++failures;
    }
    expect_no_bytes_held(0);
    ASSERT_LT(n, 1000u);
  }
  EXPECT_GT(failures, 0u);
  expect_no_bytes_held(0);
}

INSTANTIATE_TEST_SUITE_P(Sites, Rk4Faults,
                         ::testing::Values(fault::site::device_allocation, fault::site::host_allocation,
                                           fault::site::copy),
                         [](auto const& param_info) { return site_name(param_info.param); });

#else
// ---- a GPU -------------------------------------------------------------------------------------

/// The arena's gradient, trip counts, loss and chunks against the CPU backend's, for 1 particle to
/// many blocks of them.
template <class T>
void expect_the_cpu_backends_gradient(double tolerance)
{
  for (std::size_t particles : {1, 31, 33, 1000, 5000}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("particles " + std::to_string(particles) + ", seed " + std::to_string(seed));
    rk::problem p;
    p.particles = particles;
    p.max_steps = 100;
    std::vector<T> const y0 = random_particles<T>(particles, seed);
    rk::options cpu = on(backend::cpu);
    cpu.poison = false;
    std::vector<T> const budgets = rk::budgets_for_steps(p, y0, random_targets(particles, 1, 100, seed), cpu);
    rk::gradient_result<T> const gpu = rk::gradient(p, y0, budgets, on(testing::target));
    rk::gradient_result<T> const ref = rk::gradient(p, y0, budgets, cpu);
    ASSERT_TRUE(testing::all_finite(gpu.gradient)) << "a record was read that was never written";
    EXPECT_EQ(gpu.steps, ref.steps);
    EXPECT_LT(testing::relative_error(gpu.gradient, ref.gradient), tolerance);
    EXPECT_NEAR(gpu.loss, ref.loss, tolerance * ref.loss);
    EXPECT_EQ(gpu.arena.chunks, ref.arena.chunks);
  }
}

TEST_F(Rk4, F32ArenaMatchesTheCpuReference) { expect_the_cpu_backends_gradient<float>(1e-4); }
TEST_F(Rk4, F64ArenaMatchesTheCpuReference) { expect_the_cpu_backends_gradient<double>(1e-10); }
#endif

}  // namespace
}  // namespace tapeflow
