// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 on the CPU backend: the collision adjoint and the full gradient against central finite
// differences of an independent long-double implementation, conservation, every policy, bad input.
#include "reference.hpp"

#include <tapeflow/workloads/lbm.hpp>
#include <tapeflow/workloads/lbm/math.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/revolve.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace tapeflow {
namespace {

namespace lbm = workloads::lbm;
using testing::real;

static_assert(sizeof(lbm::record<float>) == 16 && lbm::cells_per_record<float> == 2,
              "f32 records: the velocities of 2 cells in one chunk");
static_assert(sizeof(lbm::record<double>) == 16 && lbm::cells_per_record<double> == 1,
              "f64 records: the velocity of 1 cell in one chunk");

// ---- an independent long-double D2Q9 (none of the library's code) ----------------------------
constexpr int ref_cx[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
constexpr int ref_cy[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
constexpr real ref_w[9] = {4.0L / 9, 1.0L / 9, 1.0L / 9, 1.0L / 9, 1.0L / 9, 1.0L / 36, 1.0L / 36, 1.0L / 36, 1.0L / 36};

void ref_collide(real const* f, real omega, real* post)
{
  real rho = 0;
  real mx = 0;
  real my = 0;
  for (int i = 0; i < 9; ++i) {
    rho += f[i];
    mx += ref_cx[i] * f[i];
    my += ref_cy[i] * f[i];
  }
  real const ux = mx / rho;
  real const uy = my / rho;
  for (int i = 0; i < 9; ++i) {
    real const cu = ref_cx[i] * ux + ref_cy[i] * uy;
    real const feq = ref_w[i] * rho * (1 + 3 * cu + 4.5L * cu * cu - 1.5L * (ux * ux + uy * uy));
    post[i] = (1 - omega) * f[i] + omega * feq;
  }
}

struct lattice {
  std::size_t nx;
  std::size_t ny;
  std::size_t steps;
  double tau;
};

void PrintTo(lattice const& l, std::ostream* os)
{
  *os << l.nx << "x" << l.ny << " T" << l.steps << " tau " << l.tau;
}

std::vector<real> ref_step(std::vector<real> const& f, lattice const& l)
{
  std::size_t const cells = l.nx * l.ny;
  real const omega = 1 / static_cast<real>(l.tau);
  std::vector<real> next(f.size());
  for (std::size_t y = 0; y < l.ny; ++y) {
    for (std::size_t x = 0; x < l.nx; ++x) {
      real in[9];
      real post[9];
      for (int i = 0; i < 9; ++i) { in[i] = f[i * cells + y * l.nx + x]; }
      ref_collide(in, omega, post);
      for (int i = 0; i < 9; ++i) {
        std::size_t const xn = (x + l.nx + ref_cx[i]) % l.nx;
        std::size_t const yn = (y + l.ny + ref_cy[i]) % l.ny;
        next[i * cells + yn * l.nx + xn] = post[i];
      }
    }
  }
  return next;
}

real ref_loss(std::vector<real> f, lattice const& l)
{
  for (std::size_t s = 0; s < l.steps; ++s) { f = ref_step(f, l); }
  real sum = 0;
  for (real v : f) { sum += v * v; }
  return sum / 2;
}

/// Central differences of the long-double loss, every input.
std::vector<real> ref_fd_gradient(std::vector<real> f, lattice const& l, real h)
{
  std::vector<real> fd(f.size());
  for (std::size_t k = 0; k < f.size(); ++k) {
    real const saved = f[k];
    f[k] = saved + h;
    real const up = ref_loss(f, l);
    f[k] = saved - h;
    real const down = ref_loss(f, l);
    f[k] = saved;
    fd[k] = (up - down) / (2 * h);
  }
  return fd;
}

lbm::options cpu_options()
{
  lbm::options o;
  o.kind = backend::cpu;
  o.poison = true;  // every output and tape element must be written
  return o;
}

lbm::problem problem_of(lattice const& l) { return lbm::problem{l.nx, l.ny, l.steps, l.tau}; }

// ---- the collision adjoint -------------------------------------------------------------------

TEST(LbmCollision, AdjointMatchesCentralFiniteDifferencesInLongDouble)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> r(-1.0, 1.0);
  for (real tau : {0.51L, 0.8L, 1.0L, 1.7L}) {
    real const omega = 1 / tau;
    for (int trial = 0; trial < 25; ++trial) {
      // A random pre-collision state near equilibrium: rho = 1 +- 0.1, |u| < 0.1.
      real const rho = 1 + 0.1L * r(rng);
      real const ux = 0.07L * r(rng);
      real const uy = 0.07L * r(rng);
      real f[9];
      real gbar[9];
      for (int i = 0; i < 9; ++i) {
        real const cu = ref_cx[i] * ux + ref_cy[i] * uy;
        f[i] = ref_w[i] * rho * (1 + 3 * cu + 4.5L * cu * cu - 1.5L * (ux * ux + uy * uy)) * (1 + 0.05L * r(rng));
        gbar[i] = r(rng);
      }
      // The adjoint takes only the velocity the forward computes (and tapes) from f.
      real g[9];
      lbm::collide_adjoint<real>(lbm::moments_of(f).u, gbar, omega, g);

      // d/df_j of J = sum_i gbar_i post_i(f).
      real const h = 1e-6L;
      real worst = 0;
      real scale = 0;
      for (int j = 0; j < 9; ++j) {
        real post[9];
        real fp[9];
        std::copy(f, f + 9, fp);
        fp[j] = f[j] + h;
        ref_collide(fp, omega, post);
        real up = 0;
        for (int i = 0; i < 9; ++i) { up += gbar[i] * post[i]; }
        fp[j] = f[j] - h;
        ref_collide(fp, omega, post);
        real down = 0;
        for (int i = 0; i < 9; ++i) { down += gbar[i] * post[i]; }
        real const fd = (up - down) / (2 * h);
        worst = std::max(worst, std::fabs(g[j] - fd));
        scale = std::max(scale, std::fabs(fd));
      }
      EXPECT_LT(static_cast<double>(worst / scale), 1e-9) << "tau " << static_cast<double>(tau) << ", trial " << trial;
    }
  }
}

TEST(LbmCollision, PrimalMatchesTheIndependentCollision)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  lbm::problem const one{1, 1, 1, 0.7};
  std::vector<double> const f = lbm::random_state<double>(one, seed);
  double in[9];
  double post[9];
  real in_ref[9];
  real post_ref[9];
  for (int i = 0; i < 9; ++i) { in_ref[i] = in[i] = f[i]; }
  lbm::collide(in, 1 / 0.7, post);
  ref_collide(in_ref, 1 / 0.7L, post_ref);
  for (int i = 0; i < 9; ++i) { EXPECT_NEAR(post[i], static_cast<double>(post_ref[i]), 1e-15) << "direction " << i; }
}

// ---- the full gradient -----------------------------------------------------------------------

class LbmCpu : public ::testing::TestWithParam<lattice> {};

TEST_P(LbmCpu, F64GradientMatchesCentralFiniteDifferences)
{
  lattice const l = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const f0 = lbm::random_state<double>(problem_of(l), seed);
  lbm::gradient_result<double> const r = lbm::gradient(problem_of(l), f0, cpu_options());

  // Long-double central differences: truncation O(h^2) ~ 1e-12, rounding ~1e-19 L / h ~ 1e-12.
  std::vector<real> const u = testing::widen(f0);
  std::vector<real> const fd = ref_fd_gradient(u, l, 1e-6L);
  EXPECT_LT(testing::relative_error(r.gradient, fd), 1e-8);
  real const expect = ref_loss(u, l);
  EXPECT_NEAR(r.loss, static_cast<double>(expect), 1e-13 * static_cast<double>(expect));
}

TEST_P(LbmCpu, F32GradientMatchesCentralFiniteDifferences)
{
  lattice const l = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> const f0 = lbm::random_state<float>(problem_of(l), seed);
  lbm::gradient_result<float> const r = lbm::gradient(problem_of(l), f0, cpu_options());
  // The exact gradient at the (f32) inputs; f32 arithmetic over T steps is good to ~1e-6.
  std::vector<real> const u = testing::widen(f0);
  std::vector<real> const fd = ref_fd_gradient(u, l, 1e-6L);
  EXPECT_LT(testing::relative_error(r.gradient, fd), 2e-5);
  real const expect = ref_loss(u, l);
  EXPECT_NEAR(r.loss, static_cast<double>(expect), 1e-6 * static_cast<double>(expect));
}

INSTANTIATE_TEST_SUITE_P(Lattices, LbmCpu,
                         ::testing::Values(lattice{8, 6, 5, 0.8}, lattice{1, 1, 3, 0.8}, lattice{2, 3, 4, 0.6},
                                           lattice{5, 7, 6, 1.3}, lattice{9, 2, 3, 0.51}),
                         [](auto const& param_info) {
                           lattice const& l = param_info.param;
                           return std::to_string(l.nx) + "x" + std::to_string(l.ny) + "_T" + std::to_string(l.steps) +
                                  "_tau" + std::to_string(static_cast<int>(l.tau * 100));
                         });

TEST(LbmCpuReference, PrimalMatchesTheIndependentImplementationAndTheGradientRun)
{
  lattice const l{13, 11, 20, 0.8};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const f0 = lbm::random_state<double>(problem_of(l), seed);
  std::vector<double> const fT = lbm::primal(problem_of(l), f0, cpu_options());
  std::vector<real> ref = testing::widen(f0);
  for (std::size_t s = 0; s < l.steps; ++s) { ref = ref_step(ref, l); }
  EXPECT_LT(testing::relative_error(fT, ref), 1e-13);
  // The untaped primal and the augmented forward run the same per-cell code: the same bits.
  EXPECT_EQ(lbm::loss(fT), lbm::gradient(problem_of(l), f0, cpu_options()).loss);
}

template <class T>
void expect_conservation(double tolerance)
{
  lattice const l{32, 24, 40, 0.7};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(problem_of(l), seed);
  std::vector<T> const fT = lbm::primal(problem_of(l), f0, cpu_options());
  std::size_t const cells = l.nx * l.ny;
  auto moments = [&](std::vector<T> const& f) {
    double m[3] = {0, 0, 0};  // mass, x and y momentum
    for (std::size_t k = 0; k < f.size(); ++k) {
      int const i = static_cast<int>(k / cells);
      m[0] += f[k];
      m[1] += ref_cx[i] * static_cast<double>(f[k]);
      m[2] += ref_cy[i] * static_cast<double>(f[k]);
    }
    return std::vector<double>{m[0], m[1], m[2]};
  };
  std::vector<double> const before = moments(f0);
  std::vector<double> const after = moments(fT);
  // BGK conserves mass and momentum per cell; streaming moves them. Only rounding changes them.
  EXPECT_NEAR(after[0], before[0], tolerance * before[0]) << "mass";
  EXPECT_NEAR(after[1], before[1], tolerance * before[0]) << "x momentum";
  EXPECT_NEAR(after[2], before[2], tolerance * before[0]) << "y momentum";
  // And the state did change: the check above is not vacuous.
  EXPECT_GT(testing::relative_error(fT, f0), 1e-3);
}

TEST(LbmCpuReference, F64PrimalConservesMassAndMomentum) { expect_conservation<double>(1e-13); }
TEST(LbmCpuReference, F32PrimalConservesMassAndMomentum) { expect_conservation<float>(1e-5); }

TEST(LbmCpuReference, StatsDescribeTheTape)
{
  lbm::problem const p{10, 7, 4, 0.8};
  std::vector<float> const f32 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::gradient_result<float> const r = lbm::gradient(p, f32, cpu_options());
  EXPECT_EQ(r.chain.steps, 4u);
  EXPECT_EQ(r.chain.plan.records, 35u);  // one record per 2 cells
  EXPECT_EQ(r.chain.layer_bytes, 35u * 16);
  EXPECT_EQ(r.chain.tape_bytes, 4 * 35u * 16);
  EXPECT_EQ(r.chain.peak_tape_bytes, r.chain.tape_bytes);
  EXPECT_EQ(r.staging.tiles, 4 * r.chain.plan.tiles);
  EXPECT_GE(r.peak_device_bytes, r.chain.tape_bytes);
  std::vector<double> const f64 = lbm::random_state<double>(p, testing::fresh_seed());
  EXPECT_EQ(lbm::gradient(p, f64, cpu_options()).chain.layer_bytes, 70u * 16);
  EXPECT_EQ(lbm::plan<double>(p, cpu_options()).tape_bytes, 4 * 70u * 16);
}

TEST(LbmCpuReference, TheTapeHoldsOnlyTheVelocity)
{
  // 8 bytes per cell and step in f32 (2 floats), 16 in f64 (2 doubles): nothing else is taped.
  for (lbm::problem const p : {lbm::problem{16, 12, 3, 0.8}, lbm::problem{1, 1, 2, 0.8}, lbm::problem{7, 5, 4, 0.8}}) {
    std::size_t const cells = p.cells();
    SCOPED_TRACE(std::to_string(p.nx) + "x" + std::to_string(p.ny));
    chain_stats const f32 = lbm::gradient(p, lbm::random_state<float>(p, testing::fresh_seed()), cpu_options()).chain;
    // An odd number of cells pads the layer's last record by one cell.
    EXPECT_EQ(f32.layer_bytes, (cells + cells % 2) * 8);
    EXPECT_EQ(f32.tape_bytes, p.steps * (cells + cells % 2) * 8);
    EXPECT_EQ(lbm::plan<float>(p, cpu_options()).tape_bytes, f32.tape_bytes);
    chain_stats const f64 =
      lbm::gradient(p, lbm::random_state<double>(p, testing::fresh_seed()), cpu_options()).chain;
    EXPECT_EQ(f64.layer_bytes, cells * 16);
    EXPECT_EQ(f64.tape_bytes, p.steps * cells * 16);
    EXPECT_EQ(lbm::plan<double>(p, cpu_options()).tape_bytes, f64.tape_bytes);
  }
}

TEST(LbmCpuReference, EveryTilingGivesTheSameBits)
{
  lbm::problem const p{11, 9, 6, 0.8};  // 99 cells, 50 records (f32): no tile below divides them
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::gradient_result<float> const base = lbm::gradient(p, f0, cpu_options());
  for (auto [tile, stages] : {std::pair<std::size_t, int>{1, 2}, {7, 3}, {64, 8}, {1000, 2}}) {
    lbm::options o = cpu_options();
    o.pipeline.tile_records = tile;
    o.pipeline.stages = stages;
    lbm::gradient_result<float> const r = lbm::gradient(p, f0, o);
    EXPECT_EQ(r.chain.plan.tile_records, tile);
    EXPECT_EQ(std::memcmp(r.gradient.data(), base.gradient.data(), base.gradient.size() * sizeof(float)), 0)
      << "tiles of " << tile << ", " << stages << " stages";
  }
}

// ---- every policy ----------------------------------------------------------------------------

struct tier_case {
  tape_policy policy;
  int percent;  // of the full tape
};

void PrintTo(tier_case const& c, std::ostream* os) { *os << to_string(c.policy) << " at " << c.percent << " %"; }

template <class T>
void expect_same_gradient_under(tier_case c)
{
  // 48 steps: a quarter of the tape holds one layer and two snapshots of the state (each 4.5 layers).
  lbm::problem const p{12, 10, 48, 0.8};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(p, seed);
  lbm::options base = cpu_options();
  base.pipeline.tile_records = 16;
  base.pipeline.stages = 2;
  base.bw = {5.0, 5.0, 20.0};
  base.policy = tape_policy::store;
  lbm::gradient_result<T> const reference = lbm::gradient(p, f0, base);

  lbm::options o = base;
  o.policy = c.policy;
  o.budget_bytes = reference.chain.tape_bytes * static_cast<std::size_t>(c.percent) / 100;
  lbm::gradient_result<T> const r = lbm::gradient(p, f0, o);
  SCOPED_TRACE(r.chain.tiers.describe());
  EXPECT_EQ(std::memcmp(r.gradient.data(), reference.gradient.data(), f0.size() * sizeof(T)), 0);
  EXPECT_EQ(r.loss, reference.loss);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host));
  if (c.policy != tape_policy::automatic) { EXPECT_EQ(r.chain.policy, c.policy); }
  if (c.percent < 100) {
    // The budget does not hold the tape: some layers left the device.
    EXPECT_NE(r.chain.policy, tape_policy::store);
    EXPECT_LT(r.chain.tiers.count(tier::device), p.steps);
  }
  if (r.chain.policy == tape_policy::recompute) {
    EXPECT_EQ(r.chain.recompute_steps, revolve_forward_steps(p.steps, r.chain.tiers.snapshots));
    if (c.percent < 100) { EXPECT_GT(r.chain.recompute_steps, 0u); }
  } else if (r.chain.policy == tape_policy::mixed) {
    EXPECT_EQ(r.chain.recompute_steps, r.chain.tiers.recompute_steps);  // as planned
  } else {
    EXPECT_EQ(r.chain.recompute_steps, 0u);
  }
  if (r.chain.policy == tape_policy::offload && c.percent < 100) { EXPECT_GT(r.chain.prefetches, 0u); }
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
}

class LbmTiers : public ::testing::TestWithParam<tier_case> {};

TEST_P(LbmTiers, F32SameGradientBitsAsStoreWithinTheBudget) { expect_same_gradient_under<float>(GetParam()); }
TEST_P(LbmTiers, F64SameGradientBitsAsStoreWithinTheBudget) { expect_same_gradient_under<double>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
  PoliciesAndBudgets, LbmTiers,
  ::testing::Values(tier_case{tape_policy::store, 100}, tier_case{tape_policy::automatic, 100},
                    tier_case{tape_policy::automatic, 25}, tier_case{tape_policy::offload, 100},
                    tier_case{tape_policy::offload, 25}, tier_case{tape_policy::recompute, 100},
                    tier_case{tape_policy::recompute, 25}),
  [](auto const& param_info) {
    return std::string{to_string(param_info.param.policy)} + "_" + std::to_string(param_info.param.percent);
  });

TEST(LbmCpuReference, CapturedReverseGivesTheSameBits)
{
  lbm::problem const p{9, 8, 7, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::options o = cpu_options();
  lbm::gradient_result<float> const plain = lbm::gradient(p, f0, o);
  o.capture_reverse = true;
  lbm::gradient_result<float> const replayed = lbm::gradient(p, f0, o);
  EXPECT_EQ(replayed.chain.program_launches, 1u);
  EXPECT_EQ(std::memcmp(replayed.gradient.data(), plain.gradient.data(), f0.size() * sizeof(float)), 0);
}

// ---- bad input -------------------------------------------------------------------------------

TEST(LbmCpuErrors, BadProblemsAreTypedErrors)
{
  lbm::problem const good{4, 3, 2, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(good, testing::fresh_seed());
  lbm::options const o = cpu_options();
  auto with = [&](auto change) {
    lbm::problem p = good;
    change(p);
    return p;
  };
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.nx = 0; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.ny = 0; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.steps = 0; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.tau = 0.5; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.tau = 0.2; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(with([](lbm::problem& p) { p.tau = -1; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(
                 with([](lbm::problem& p) { p.tau = std::numeric_limits<double>::quiet_NaN(); }), f0, o)),
               logic_error);
  // Wrong input lengths: one plane's worth (nx*ny), one value short, one value over.
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, std::vector<float>(12, 0.1f), o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, std::vector<float>(f0.begin(), f0.end() - 1), o)), logic_error);
  std::vector<float> longer = f0;
  longer.push_back(0.1f);
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, longer, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::primal(good, longer, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::primal(with([](lbm::problem& p) { p.tau = 0.5; }), f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::plan<float>(with([](lbm::problem& p) { p.nx = 0; }), o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::random_state<float>(with([](lbm::problem& p) { p.ny = 0; }), 1)), logic_error);

  lbm::options budget = o;
  budget.budget_bytes = 64;  // less than one 96-byte layer (12 cells, 6 records)
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, f0, budget)), budget_error);
  lbm::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, f0, hip)), unavailable_error);
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(lbm::gradient(good, f0, o)));
}

}  // namespace
}  // namespace tapeflow
