// SPDX-License-Identifier: Apache-2.0
// The Burgers workload (a stencil whose reverse reads its neighbours' values through a halo) on
// the backend under test (tests/target.hpp): against central finite differences of an independent
// long-double implementation, its tape, its segments, bad input; on the CPU backend also its halo
// staged in place and through the CPU's staging ring. On a GPU its step is the stencil library's.
#include "common.hpp"

#include <tapeflow/workloads/burgers.hpp>
#include <tapeflow/workloads/burgers/stencil.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace bg = workloads::burgers;
using testing::real;

bg::options on(backend kind) { return testing::options_on<bg::options>(kind); }

class Burgers : public testing::on_target<> {};

/// The scheme of kernels/burgers/math.hpp written out again, in long double, none of its code.
real reference_loss(std::vector<real> u, bg::problem const& p)
{
  std::size_t const n = u.size();
  real const a = p.a;
  real const b = p.b;
  for (std::size_t s = 0; s < p.steps; ++s) {
    std::vector<real> next(n);
    for (std::size_t j = 0; j < n; ++j) {
      real const l = u[(j + n - 1) % n];
      real const r = u[(j + 1) % n];
      next[j] = u[j] - a * u[j] * (r - l) + b * (r - 2 * u[j] + l);
    }
    u = next;
  }
  real sum = 0;
  for (real v : u) { sum += v * v; }
  return sum / 2;
}

std::vector<real> finite_differences(std::vector<real> const& u0, bg::problem const& p)
{
  std::vector<real> g(u0.size());
  real const h = 1e-6L;
  for (std::size_t j = 0; j < u0.size(); ++j) {
    std::vector<real> up = u0;
    std::vector<real> down = u0;
    up[j] += h;
    down[j] -= h;
    g[j] = (reference_loss(up, p) - reference_loss(down, p)) / (2 * h);
  }
  return g;
}

TEST_F(Burgers, GradientMatchesFiniteDifferences)
{
  // 1, 2 and 3 cells (a record wraps onto itself), odd sizes (a partial last record), several tiles.
  for (std::size_t n : {1u, 2u, 3u, 17u, 64u}) {
    bg::problem const p{n, 9};
    std::vector<double> const u0 = bg::random_state<double>(p, testing::fresh_seed());
    bg::gradient_result<double> const r = bg::gradient(p, u0, on(testing::target));
    std::vector<real> const expect = finite_differences(testing::widen(u0), p);
    EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-8) << n << " cells";
    EXPECT_NEAR(r.loss, static_cast<double>(reference_loss(testing::widen(u0), p)), 1e-12 * r.loss);
  }
}

TEST_F(Burgers, EachValueIsTapedOnce)
{
  bg::problem const p{1000, 6};
  std::vector<float> const u0 = bg::random_state<float>(p, 3);
  bg::gradient_result<float> const r = bg::gradient(p, u0, on(testing::target));
  EXPECT_EQ(r.chain.layer_bytes, 250u * 16);  // 1000 f32 values, 4 to a record: the state, once
  EXPECT_EQ(r.chain.tape_bytes, 6 * 250u * 16);
  // On the CPU, declared by the step and read through its tiles' windows; on a GPU, the stencil
  // library's tiles read their halos themselves.
  EXPECT_EQ(r.chain.plan.halo_records, testing::on_gpu ? 0u : 1u);
}

TEST_F(Burgers, SegmentsGiveTheOneStepBitsWithATapeOfOneStatePerSegment)
{
  // Segments of k steps (docs/stencils.md): the layer of a segment is its checkpoint, its reverse
  // recomputes the k states on chip. Every k, the planner's too, and the mixed schedule at segment
  // granularity give the one-step layers' gradient.
  bg::problem const p{1531, 13};  // a partial last record and tile
  std::vector<float> const u0 = bg::random_state<float>(p, testing::fresh_seed());
  bg::options one = on(testing::target);
  one.policy = tape_policy::store;
  std::size_t const layer = bg::records_for<float>(p.n) * sizeof(bg::record<float>);
  testing::expect_segments_give_the_one_step_bits(
    one, {0, 2, 5, 13}, layer, [&](bg::options const& o) { return bg::gradient(p, u0, o); },
    [&](bg::options const& o) { return bg::segment_plan_of<float>(p, o); });
  bg::options longer = one;
  longer.segment = 14;
  EXPECT_THROW(static_cast<void>(bg::gradient(p, u0, longer)), logic_error) << "a segment past the last step";
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

#if !defined(TAPEFLOW_TEST_ON_GPU)

TEST_F(Burgers, InPlaceAndTheRingWithItsHaloGiveTheSameBitsUnderEveryPolicy)
{
  bg::problem const p{203, 12};  // 51 f32 records: tiles of 5 leave a partial one, and wrap at both ends
  std::vector<float> const u0 = bg::random_state<float>(p, testing::fresh_seed());
  bg::gradient_result<float> const base = bg::gradient(p, u0, on(testing::target));
  for (cpu_staging staging : {cpu_staging::in_place, cpu_staging::ring}) {
    for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
      for (std::size_t threads : {1u, 3u}) {
        SCOPED_TRACE(std::string{to_string(staging)} + ", " + std::string{to_string(policy)} + ", " +
                     std::to_string(threads) + " threads");
        testing::scoped_cpu_threads const pool(threads);
        bg::options o = on(testing::target);
        o.pipeline.staging = staging;
        o.pipeline.tile_records = 5;
        o.pipeline.stages = 3;
        o.policy = policy;
        bg::gradient_result<float> const r = bg::gradient(p, u0, o);
        EXPECT_TRUE(testing::same_bits(r.gradient, base.gradient));
        EXPECT_EQ(r.staging.staged_tiles, staging == cpu_staging::ring ? p.steps * r.chain.plan.tiles : 0u);
      }
    }
  }
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}
#endif

TEST_F(Burgers, PrimalMatchesTheReference)
{
  bg::problem const p{50, 7};
  std::vector<double> const u0 = bg::random_state<double>(p, testing::fresh_seed());
  std::vector<double> const uT = bg::primal(p, u0, on(testing::target));
  EXPECT_NEAR(bg::loss(uT), static_cast<double>(reference_loss(testing::widen(u0), p)), 1e-13);
}

TEST_F(Burgers, BadInputIsATypedError)
{
  std::vector<float> const u0(8, 0.1f);
  bg::options const o = on(testing::target);
  EXPECT_THROW(static_cast<void>(bg::gradient(bg::problem{9, 3}, u0, o)), logic_error);  // 8 != 9
  EXPECT_THROW(static_cast<void>(bg::gradient(bg::problem{8, 0}, u0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(bg::gradient(bg::problem{8, 3, 0.1, 0.6}, u0, o)), logic_error);  // unstable
  EXPECT_THROW(static_cast<void>(bg::gradient(bg::problem{8, 3, NAN, 0.2}, u0, o)), logic_error);
  bg::options negative = o;
  negative.segment = -1;
  EXPECT_THROW(static_cast<void>(bg::gradient(bg::problem{8, 3}, u0, negative)), logic_error);
  EXPECT_THROW(static_cast<void>(bg::plan<float>(bg::problem{8, 3}, negative)), logic_error);
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

}  // namespace
}  // namespace tapeflow
