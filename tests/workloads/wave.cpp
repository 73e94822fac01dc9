// SPDX-License-Identifier: Apache-2.0
// The wave workload in the stencil library's segments (kernels/wave/stencil.hpp, segments.hpp) on
// the backend under test (tests/target.hpp): every segment length, under store and under auto in
// a tight budget, gives the one-step chain's loss and dL/dm, in 2-D and 3-D, with a tape of one
// state per segment; auto takes segments where they move fewer bytes; the session of a slab on one
// rank gives the same bits; a stencil with coefficients refuses to run without them. What every workload must do (the gradient against
// finite differences, every policy, bad input) is tests/workloads/contract.cpp's.
#include "common.hpp"

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stencil/cpu.hpp>
#include <tapeflow/workloads/wave.hpp>
#include <tapeflow/workloads/wave/description.hpp>
#include <tapeflow/workloads/wave/segments.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace wv = workloads::wave;

wv::options on(backend kind) { return testing::options_on<wv::options>(kind); }

/// The one-step chain under store on the backend under test: what segments must match.
wv::options one_step_store()
{
  wv::options o = on(testing::target);
  o.policy = tape_policy::store;
  return o;
}

/// A 2-D problem of nx x ny cells and `steps` steps, the wavelet peaking at `peak_frequency`.
wv::problem flat(std::size_t nx, std::size_t ny, std::size_t steps, double peak_frequency = wv::problem{}.peak_frequency)
{
  wv::problem p;
  p.nx = nx;
  p.ny = ny;
  p.steps = steps;
  p.peak_frequency = peak_frequency;
  return p;
}

class Wave : public testing::on_target<> {};

struct inputs {
  std::vector<float> m;
  std::vector<float> d;
};

inputs random_inputs(wv::problem const& p)
{
  auto v = wv::description::random_inputs<float>(p, testing::fresh_seed());
  return {std::move(v[0]), std::move(v[1])};
}

/// Bytes of one layer of segments: the state (u_{t-1}, u_t), in 16-byte records.
std::size_t segment_layer(wv::problem const& p)
{
  return (2 * p.cells() + values_per_chunk<float> - 1) / values_per_chunk<float> * 16;
}

/// Segments of each of `ks` steps (on tiles of `tile` cells: 0, the planner's) against the one-step
/// chain.
void expect_segments_give_the_chain_bits(wv::problem const& p, std::vector<int> const& ks,
                                         stencil::tile_extent tile = {0, 0, 0})
{
  inputs const in = random_inputs(p);
  wv::options one = one_step_store();
  one.segment_tile = tile;
  testing::expect_segments_give_the_one_step_bits(
    one, ks, segment_layer(p), [&](wv::options const& o) { return wv::gradient(p, in.m, in.d, o); },
    [&](wv::options const& o) { return *wv::segments_of<float>(p, o); });
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

TEST_F(Wave, TwoDimensionalSegmentsGiveTheOneStepBits)
{
  // The source at the centre, the receivers on row 1 and the misfit at every step: the wavelet
  // peaks at step 4 of 17, so every segment's steps carry source, signal and misfit.
  expect_segments_give_the_chain_bits(flat(23, 14, 17, 0.25), {2, 3, 5});
  // On tiles small enough that some of them are inner tiles (their boxes inside the grid: run by the
  // tile program compiled without the fixed edge's code) and the others not.
  expect_segments_give_the_chain_bits(flat(23, 14, 17, 0.25), {2, 3}, {5, 4, 1});
}

TEST_F(Wave, ThreeDimensionalSegmentsGiveTheOneStepBits)
{
  // Two fields in 3-D: a GPU's 48 KiB holds 3 steps (on tiles of one cell), the CPU more.
  expect_segments_give_the_chain_bits(wv::description::test_problem(),
                                      testing::on_gpu ? std::vector<int>{2, 3} : std::vector<int>{2, 4});
  // Inner tiles among the others (as in 2-D).
  wv::problem p = wv::description::test_problem();
  p.ny = p.nz = 8;
  expect_segments_give_the_chain_bits(p, {2}, {2, 1, 1});
}

TEST_F(Wave, OneRanksSlabGivesTheOneStepBits)
{
  // The session of one rank's slab (the whole grid, its coefficients' ghost planes exchanged with
  // itself, the loss and dL/dm through the slab session) without MPI; docs/distributed.md's tests
  // run 1 to 4 ranks under mpiexec.
  wv::problem const p = flat(12, 10, 9, 0.3);
  inputs const in = random_inputs(p);
  wv::options o = one_step_store();
  auto const want = wv::gradient(p, in.m, in.d, o);
  o.ranks = std::make_shared<distributed::single_rank>();
  for (int k : {1, 3}) {
    SCOPED_TRACE("segment " + std::to_string(k));
    o.segment = k;
    auto const got = wv::gradient(p, in.m, in.d, o);
    EXPECT_EQ(got.loss, want.loss);
    if (testing::on_gpu && !testing::emulated) {
      EXPECT_LT(testing::relative_error(got.gradient, want.gradient), 1e-6) << "kernels compiled apart may contract apart";
    } else {
      EXPECT_EQ(got.gradient, want.gradient);
    }
    EXPECT_EQ(got.chain.steps, (p.steps + std::size_t(k) - 1) / std::size_t(k));
  }
}

TEST_F(Wave, AutoTakesSegmentsWhereTheyCostLess)
{
  wv::problem const p = flat(40, 36, 20);
  wv::options o = on(testing::target);
  o.segment = 0;
  auto const plan = wv::segments_of<float>(p, o);
  ASSERT_TRUE(plan.has_value()) << "segments cost less than the one-step chain's 8 states and 2 cell updates a step";
  EXPECT_TRUE(plan->beats_one_step(wv::one_step_states_per_step)) << plan->describe();
  EXPECT_LT(plan->states_per_step, wv::one_step_states_per_step);
  EXPECT_GT(plan->k, 1);
  chain_stats const planned = wv::plan<float>(p, o);
  EXPECT_EQ(planned.steps, plan->segments);
  EXPECT_EQ(planned.layer_bytes, segment_layer(p));
  o.segment = 1;
  EXPECT_FALSE(wv::segments_of<float>(p, o).has_value());
  EXPECT_EQ(wv::plan<float>(p, o).steps, p.steps);
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
TEST(WaveStencil, RefusesToRunWithoutItsCoefficients)
{
  wv::problem const p = flat(8, 6, 4);
  namespace st = tapeflow::stencil;
  using S = wv::stencil<float, 2>;
  st::grid<float> const g = wv::grid_of<float>(p);
  st::segment_request r;
  r.k = 2;
  st::segment_plan const plan = st::plan_segments<S>(g, p.steps, query_device_limits(backend::cpu), r);
  std::vector<float> m(p.cells(), 0.5f);
  std::vector<float> traces(p.steps * p.receivers());
  std::vector<float> wavelet(p.steps);
  S const s{wv::geometry_of<float>(p), traces.data(), traces.data(), wavelet.data()};
  EXPECT_THROW(static_cast<void>(st::make_cpu_segments(s, g, plan)), logic_error) << "no coefficients";
  auto const step = st::make_cpu_segments(s, g, plan, nullptr, st::coefficient_view<float>{m.data()});
  EXPECT_EQ(step.parameter_size(), p.cells());
}
#endif

}  // namespace
}  // namespace tapeflow
