// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 on the backend under test (tests/target.hpp): every policy and budget giving the store
// policy's bits, every tiling, bad input; on the CPU backend also the collision adjoint and the
// full gradient against central finite differences of an independent long-double implementation,
// conservation, the tape's size and the captured reverse; on a GPU also the CPU backend's gradient
// and primal, for f32 and f64.
#include "common.hpp"

#include <tapeflow/workloads/lbm.hpp>
#include <tapeflow/workloads/lbm/stencil.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/revolve.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#if !defined(TAPEFLOW_TEST_ON_GPU)
#include <tapeflow/workloads/lbm/math.hpp>

#include <algorithm>
#include <random>
#endif

namespace tapeflow {
namespace {

namespace lbm = workloads::lbm;

lbm::options on(backend kind) { return testing::options_on<lbm::options>(kind); }

class Lbm : public testing::on_target<> {};

/// What a policy's chain promises whatever the precision: the budget kept, the policy resolved,
/// prefetches for the host's layers, layers off the device when the budget does not hold the tape,
/// Revolve's recomputations (or the mixed schedule's, as planned), nothing left allocated.
void expect_the_policy_did_what_it_says(chain_stats const& r, tape_policy policy, int percent,
                                        std::size_t budget_bytes, std::size_t steps)
{
  EXPECT_LE(r.peak_tape_bytes, budget_bytes);
  EXPECT_EQ(r.prefetches, r.tiers.count(tier::host));
  if (policy != tape_policy::automatic) { EXPECT_EQ(r.policy, policy); }
  if (percent < 100) {
    // The budget does not hold the tape: some layers left the device.
    EXPECT_NE(r.policy, tape_policy::store);
    EXPECT_LT(r.tiers.count(tier::device), steps);
  }
  if (r.policy == tape_policy::recompute) {
    EXPECT_EQ(r.recompute_steps, revolve_forward_steps(steps, r.tiers.snapshots));
    if (percent < 100) { EXPECT_GT(r.recompute_steps, 0u); }
  } else if (r.policy == tape_policy::mixed) {
    EXPECT_EQ(r.recompute_steps, r.tiers.recompute_steps);  // as planned
  } else {
    EXPECT_EQ(r.recompute_steps, 0u);
  }
  if (r.policy == tape_policy::offload && percent < 100) { EXPECT_GT(r.prefetches, 0u); }
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

/// Every policy at the full tape and at a quarter of it gives the store policy's bits within its
/// budget, and does what it says. 48 steps: a quarter of the tape holds one layer and two snapshots of the state
/// (each 4.5 layers). On the CPU a small lattice in tiles of 16 records and two stages, on a GPU a
/// lattice of many blocks; on a GPU the store policy's gradient is also the CPU backend's.
template <class T>
void expect_every_policy_gives_the_store_bits()
{
  lbm::problem const p = testing::on_gpu ? lbm::problem{96, 80, 48, 0.8} : lbm::problem{12, 10, 48, 0.8};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(p, seed);
  lbm::options base = on(testing::target);
#if !defined(TAPEFLOW_TEST_ON_GPU)
  base.pipeline.tile_records = 16;
  base.pipeline.stages = 2;
#endif
  base.bw = {5.0, 5.0, 20.0};  // fixed, so the plans do not depend on the machine
  base.policy = tape_policy::store;
  lbm::gradient_result<T> const store = lbm::gradient(p, f0, base);
  ASSERT_TRUE(testing::all_finite(store.gradient)) << "an element was never written";
  EXPECT_EQ(store.chain.layer_bytes, p.cells() * 2 * sizeof(T));  // the velocity of each cell, nothing else
#if defined(TAPEFLOW_TEST_ON_GPU)
  lbm::gradient_result<T> const cpu = lbm::gradient(p, f0, on(backend::cpu));
  EXPECT_LT(testing::relative_error(store.gradient, cpu.gradient), sizeof(T) == 4 ? 1e-4 : 1e-12);
#endif
  for (auto [policy, percent] : {std::pair<tape_policy, int>{tape_policy::store, 100}, {tape_policy::automatic, 100},
                                 {tape_policy::automatic, 25}, {tape_policy::offload, 100}, {tape_policy::offload, 25},
                                 {tape_policy::recompute, 100}, {tape_policy::recompute, 25}}) {
    lbm::options o = base;
    o.policy = policy;
    o.budget_bytes = store.chain.tape_bytes * static_cast<std::size_t>(percent) / 100;
    lbm::gradient_result<T> const r = lbm::gradient(p, f0, o);
    SCOPED_TRACE(std::string{to_string(policy)} + " at " + std::to_string(percent) + " %: " + r.chain.tiers.describe());
    ASSERT_TRUE(testing::all_finite(r.gradient));
    // The same kernels on the same device, whatever tier the layer lived in: the same bits.
    EXPECT_TRUE(testing::same_bits(r.gradient, store.gradient));
    EXPECT_EQ(r.loss, store.loss);
    expect_the_policy_did_what_it_says(r.chain, policy, percent, o.budget_bytes, p.steps);
  }
}

TEST_F(Lbm, F32EveryPolicyGivesTheStoreBitsWithinItsBudget) { expect_every_policy_gives_the_store_bits<float>(); }
TEST_F(Lbm, F64EveryPolicyGivesTheStoreBitsWithinItsBudget) { expect_every_policy_gives_the_store_bits<double>(); }

TEST_F(Lbm, EveryPipelineVariantGivesTheSameBits)
{
  using v = testing::pipeline_variant;
  // CPU: tiles and stages over 11 x 9 cells (50 f32 records: no tile divides them); GPU: also
  // block sizes, async copies and register double-buffering, over 131 x 77 cells.
  std::vector<v> const variants =
    testing::on_gpu ? std::vector<v>{v{1, 2, 32}, v{37, 3, 64}, v{256, 4, 256}, v{0, 0, 0, true}, v{77, 2, 96, true}}
                    : std::vector<v>{v{1, 2}, v{7, 3}, v{64, 8}, v{1000, 2}};
  lbm::problem const p = testing::on_gpu ? lbm::problem{131, 77, 5, 0.8} : lbm::problem{11, 9, 6, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::gradient_result<float> const base = lbm::gradient(p, f0, on(testing::target));
  for (v const& variant : variants) {
    if (!variant.runs_on_target()) { continue; }
    SCOPED_TRACE("tiles of " + std::to_string(variant.tile) + ", " + std::to_string(variant.stages) + " stages, " +
                 std::to_string(variant.threads) + " threads" + (variant.plain ? ", plain" : ""));
    lbm::options o = on(testing::target);
    variant.apply(o.pipeline);
    lbm::gradient_result<float> const r = lbm::gradient(p, f0, o);
#if defined(TAPEFLOW_TEST_ON_GPU)
    EXPECT_EQ(r.chain.plan.async_copy, !variant.plain);
#else
    EXPECT_EQ(r.chain.plan.tile_records, variant.tile);
#endif
    EXPECT_TRUE(testing::same_bits(r.gradient, base.gradient));
  }
}

TEST_F(Lbm, SegmentsGiveTheOneStepBitsWithATapeOfOneStatePerSegment)
{
  // Segments of k steps on the stencil library (kernels/lbm/stencil.hpp): the step pulls where the
  // one-step chain pushes, its layer is the state once per segment where the chain's is every
  // step's velocities, and the reverse recomputes the velocities from the state. Every k, and the
  // mixed schedule at segment granularity, give the one-step chain's gradient. A GPU's 48 KiB of
  // shared memory per block holds 4 steps of 9 fields (on tiles of a few cells); the CPU also
  // takes a segment of every step.
  lbm::problem const p{13, 10, 11, 0.7};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::options one = on(testing::target);
  one.policy = tape_policy::store;
  std::size_t const layer = (p.values() + values_per_chunk<float> - 1) / values_per_chunk<float> * 16;
  testing::expect_segments_give_the_one_step_bits(
    one, testing::on_gpu ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3, 11}, layer, [&](lbm::options const& o) { return lbm::gradient(p, f0, o); },
    [&](lbm::options const& o) { return lbm::segment_plan_of<float>(p, o); });
  lbm::options longer = one;
  longer.segment = 12;
  EXPECT_THROW(static_cast<void>(lbm::gradient(p, f0, longer)), logic_error) << "a segment past the last step";
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

TEST_F(Lbm, AutoTakesWhicheverOfSegmentsAndVelocitiesCostsLess)
{
  lbm::problem const p{12, 9, 10, 0.8};
  lbm::options o = on(testing::target);
  o.policy = tape_policy::store;
  o.segment = 0;
  for (bool f64 : {false, true}) {
    SCOPED_TRACE(f64 ? "f64" : "f32");
    stencil::segment_plan const sp = f64 ? lbm::segment_plan_of<double>(p, o) : lbm::segment_plan_of<float>(p, o);
    double const moved = sp.states_per_step;
    bool const segments = sp.cost_per_step() < lbm::one_step_states_per_step + 2.0 * sp.work_weight();
    EXPECT_EQ(f64 ? lbm::on_stencil_library<double>(p, o) : lbm::on_stencil_library<float>(p, o), segments);
    // The chain runs one layer per segment, or one per step with the velocities as its layer.
    chain_stats const planned = f64 ? lbm::plan<double>(p, o) : lbm::plan<float>(p, o);
    std::size_t const k = static_cast<std::size_t>(f64 ? lbm::segment_plan_of<double>(p, o).k
                                                       : lbm::segment_plan_of<float>(p, o).k);
    EXPECT_EQ(planned.steps, segments ? (p.steps + k - 1) / k : p.steps) << moved << " states a step";
    EXPECT_EQ(planned.layer_bytes == p.cells() * 2 * (f64 ? 8 : 4), !segments);
  }
  // The CPU's f32 segments fit 3 steps in its cache share and move under half the chain's bytes.
  if (testing::target == backend::cpu) { EXPECT_TRUE(lbm::on_stencil_library<float>(p, o)); }
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::options store = o;
  store.segment = 1;
  std::vector<float> const chosen = lbm::gradient(p, f0, o).gradient;
  std::vector<float> const chain = lbm::gradient(p, f0, store).gradient;
  if (testing::on_gpu && !testing::emulated) {
    EXPECT_LT(testing::relative_error(chosen, chain), 1e-6) << "kernels compiled apart may contract apart";
  } else {
    EXPECT_EQ(chosen, chain);
  }
}

TEST_F(Lbm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  lbm::problem const good{4, 3, 2, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(good, testing::fresh_seed());
  lbm::options const o = on(testing::target);
  double const nan = std::numeric_limits<double>::quiet_NaN();
  // nx, ny or T 0, tau <= 0.5 or NaN; and another lattice's input length.
  for (lbm::problem const& bad : {lbm::problem{0, 3, 2, 0.8}, lbm::problem{4, 0, 2, 0.8}, lbm::problem{4, 3, 0, 0.8},
                                  lbm::problem{4, 3, 2, 0.5}, lbm::problem{4, 3, 2, 0.2}, lbm::problem{4, 3, 2, -1},
                                  lbm::problem{4, 3, 2, nan}, lbm::problem{4, 4, 2, 0.8}}) {
    EXPECT_THROW(static_cast<void>(lbm::gradient(bad, f0, o)), logic_error)
      << bad.nx << "x" << bad.ny << " T" << bad.steps << " tau " << bad.tau;
  }
  // Wrong input lengths: one plane's worth (nx*ny), one value short, one value over.
  std::vector<float> longer = f0;
  longer.push_back(0.1f);
  std::vector<float> const shorter(f0.begin(), f0.end() - 1);
  for (std::vector<float> const& wrong : {std::vector<float>(12, 0.1f), shorter, longer}) {
    EXPECT_THROW(static_cast<void>(lbm::gradient(good, wrong, o)), logic_error) << wrong.size() << " values";
  }
  EXPECT_THROW(static_cast<void>(lbm::primal(good, longer, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::primal(lbm::problem{4, 3, 2, 0.5}, f0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(lbm::plan<float>(lbm::problem{0, 3, 2, 0.8}, o)), logic_error);

  lbm::options budget = o;
  budget.budget_bytes = 64;  // less than one 96-byte layer (12 cells, 6 records)
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, f0, budget)), budget_error);
#if !defined(TAPEFLOW_TEST_ON_GPU)
  EXPECT_THROW(static_cast<void>(lbm::random_state<float>(lbm::problem{4, 0, 2, 0.8}, 1)), logic_error);
  lbm::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(lbm::gradient(good, f0, hip)), unavailable_error);
#endif
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(lbm::gradient(good, f0, o)));
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
// ---- the CPU backend ---------------------------------------------------------------------------
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

class LbmLattices : public testing::on_target<::testing::TestWithParam<lattice>> {};

/// The gradient in T against long-double central differences at the same (T) inputs, within
/// `gradient_tolerance` (relative), and the loss within `loss_tolerance`.
template <class T>
void check_against_central_differences(lattice const& l, double gradient_tolerance, double loss_tolerance)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(problem_of(l), seed);
  lbm::gradient_result<T> const r = lbm::gradient(problem_of(l), f0, on(testing::target));
  std::vector<real> const u = testing::widen(f0);
  std::vector<real> const fd = ref_fd_gradient(u, l, 1e-6L);
  EXPECT_LT(testing::relative_error(r.gradient, fd), gradient_tolerance);
  real const expect = ref_loss(u, l);
  EXPECT_NEAR(r.loss, static_cast<double>(expect), loss_tolerance * static_cast<double>(expect));
}

TEST_P(LbmLattices, F64GradientMatchesCentralFiniteDifferences)
{
  // Long-double central differences: truncation O(h^2) ~ 1e-12, rounding ~1e-19 L / h ~ 1e-12.
  check_against_central_differences<double>(GetParam(), 1e-8, 1e-13);
}

TEST_P(LbmLattices, F32GradientMatchesCentralFiniteDifferences)
{
  // The exact gradient at the (f32) inputs; f32 arithmetic over T steps is good to ~1e-6.
  check_against_central_differences<float>(GetParam(), 2e-5, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Lattices, LbmLattices,
                         ::testing::Values(lattice{8, 6, 5, 0.8}, lattice{1, 1, 3, 0.8}, lattice{2, 3, 4, 0.6},
                                           lattice{5, 7, 6, 1.3}, lattice{9, 2, 3, 0.51}),
                         [](auto const& param_info) {
                           lattice const& l = param_info.param;
                           return std::to_string(l.nx) + "x" + std::to_string(l.ny) + "_T" + std::to_string(l.steps) +
                                  "_tau" + std::to_string(static_cast<int>(l.tau * 100));
                         });

TEST_F(Lbm, PrimalMatchesTheIndependentImplementationAndTheGradientRun)
{
  lattice const l{13, 11, 20, 0.8};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const f0 = lbm::random_state<double>(problem_of(l), seed);
  std::vector<double> const fT = lbm::primal(problem_of(l), f0, on(testing::target));
  std::vector<real> ref = testing::widen(f0);
  for (std::size_t s = 0; s < l.steps; ++s) { ref = ref_step(ref, l); }
  EXPECT_LT(testing::relative_error(fT, ref), 1e-13);
  // The untaped primal and the augmented forward run the same per-cell code: the same bits.
  EXPECT_EQ(lbm::loss(fT), lbm::gradient(problem_of(l), f0, on(testing::target)).loss);
}

template <class T>
void expect_conservation(double tolerance)
{
  lattice const l{32, 24, 40, 0.7};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> const f0 = lbm::random_state<T>(problem_of(l), seed);
  std::vector<T> const fT = lbm::primal(problem_of(l), f0, on(testing::target));
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

TEST_F(Lbm, F64PrimalConservesMassAndMomentum) { expect_conservation<double>(1e-13); }
TEST_F(Lbm, F32PrimalConservesMassAndMomentum) { expect_conservation<float>(1e-5); }

TEST_F(Lbm, StatsDescribeTheTape)
{
  lbm::problem const p{10, 7, 4, 0.8};
  std::vector<float> const f32 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::gradient_result<float> const r = lbm::gradient(p, f32, on(testing::target));
  EXPECT_EQ(r.chain.steps, 4u);
  EXPECT_EQ(r.chain.plan.records, 35u);  // one record per 2 cells
  EXPECT_EQ(r.chain.layer_bytes, 35u * 16);
  EXPECT_EQ(r.chain.tape_bytes, 4 * 35u * 16);
  EXPECT_EQ(r.chain.peak_tape_bytes, r.chain.tape_bytes);
  EXPECT_EQ(r.staging.tiles, 4 * r.chain.plan.tiles);
  EXPECT_GE(r.peak_device_bytes, r.chain.tape_bytes);
  std::vector<double> const f64 = lbm::random_state<double>(p, testing::fresh_seed());
  EXPECT_EQ(lbm::gradient(p, f64, on(testing::target)).chain.layer_bytes, 70u * 16);
  EXPECT_EQ(lbm::plan<double>(p, on(testing::target)).tape_bytes, 4 * 70u * 16);
}

TEST_F(Lbm, TheTapeHoldsOnlyTheVelocity)
{
  // 8 bytes per cell and step in f32 (2 floats), 16 in f64 (2 doubles): nothing else is taped.
  for (lbm::problem const p : {lbm::problem{16, 12, 3, 0.8}, lbm::problem{1, 1, 2, 0.8}, lbm::problem{7, 5, 4, 0.8}}) {
    std::size_t const cells = p.cells();
    SCOPED_TRACE(std::to_string(p.nx) + "x" + std::to_string(p.ny));
    chain_stats const f32 =
      lbm::gradient(p, lbm::random_state<float>(p, testing::fresh_seed()), on(testing::target)).chain;
    // An odd number of cells pads the layer's last record by one cell.
    EXPECT_EQ(f32.layer_bytes, (cells + cells % 2) * 8);
    EXPECT_EQ(f32.tape_bytes, p.steps * (cells + cells % 2) * 8);
    EXPECT_EQ(lbm::plan<float>(p, on(testing::target)).tape_bytes, f32.tape_bytes);
    chain_stats const f64 =
      lbm::gradient(p, lbm::random_state<double>(p, testing::fresh_seed()), on(testing::target)).chain;
    EXPECT_EQ(f64.layer_bytes, cells * 16);
    EXPECT_EQ(f64.tape_bytes, p.steps * cells * 16);
    EXPECT_EQ(lbm::plan<double>(p, on(testing::target)).tape_bytes, f64.tape_bytes);
  }
}

TEST_F(Lbm, CapturedReverseGivesTheSameBits)
{
  lbm::problem const p{9, 8, 7, 0.8};
  std::vector<float> const f0 = lbm::random_state<float>(p, testing::fresh_seed());
  lbm::options o = on(testing::target);
  lbm::gradient_result<float> const plain = lbm::gradient(p, f0, o);
  o.capture_reverse = true;
  lbm::gradient_result<float> const replayed = lbm::gradient(p, f0, o);
  EXPECT_EQ(replayed.chain.program_launches, 1u);
  EXPECT_TRUE(testing::same_bits(replayed.gradient, plain.gradient));
}

#else
// ---- a GPU -------------------------------------------------------------------------------------

/// The GPU's gradient, loss and primal against the CPU backend's, on lattices of one cell to many
/// blocks.
template <class T>
void expect_the_cpu_backends_gradient(double tolerance)
{
  for (auto [nx, ny, steps] : {std::array<std::size_t, 3>{1, 1, 3}, {8, 6, 5}, {33, 17, 10}, {100, 64, 12},
                               {257, 129, 6}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE(std::to_string(nx) + "x" + std::to_string(ny) + " T" + std::to_string(steps) + ", seed " +
                 std::to_string(seed));
    lbm::problem const p{nx, ny, steps, 0.8};
    std::vector<T> const f0 = lbm::random_state<T>(p, seed);
    lbm::gradient_result<T> const gpu = lbm::gradient(p, f0, on(testing::target));
    lbm::gradient_result<T> const cpu = lbm::gradient(p, f0, on(backend::cpu));
    ASSERT_TRUE(testing::all_finite(gpu.gradient)) << "an element was never written";
    EXPECT_LT(testing::relative_error(gpu.gradient, cpu.gradient), tolerance);
    EXPECT_NEAR(gpu.loss, cpu.loss, tolerance * cpu.loss);
    std::vector<T> const primal_gpu = lbm::primal(p, f0, on(testing::target));
    EXPECT_LT(testing::relative_error(primal_gpu, lbm::primal(p, f0, on(backend::cpu))), tolerance);
  }
}

TEST_F(Lbm, F32GradientMatchesTheCpuReference) { expect_the_cpu_backends_gradient<float>(1e-4); }
TEST_F(Lbm, F64GradientMatchesTheCpuReference) { expect_the_cpu_backends_gradient<double>(1e-12); }
#endif

}  // namespace
}  // namespace tapeflow
