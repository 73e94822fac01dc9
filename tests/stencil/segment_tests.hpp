// SPDX-License-Identifier: Apache-2.0
// The stencil segments' tests, written once against the backend under test (target.hpp):
// segments_cpu.cpp includes them for the CPU backend, segments_gpu.cu for this build's GPU and the
// emulated device, each after defining tapeflow::testing::make_segments(stencil, grid, plan), the
// backend's Step of those segments. What they hold the library to (docs/stencils.md):
//   - one-step segments under `store` give the gradient of a plain loop over the cells (a naive
//     reference written here from the stencil's definition), bit for bit where the compilers agree;
//   - every segment length and policy gives the same bits as one-step segments under `store`;
//   - the tape holds one state per segment;
//   - the gradient is the derivative (finite differences in double);
//   - the planner takes a segment that fits on chip and moves fewer bytes, and refuses what cannot.
#pragma once

#include "../emulated_settings.hpp"
#include "../target.hpp"
#include "reference.hpp"
#include "slab_step.hpp"
#include "stencils.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/sweep.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::testing {
namespace {

namespace st = tapeflow::stencil;
using namespace tapeflow::testing::stencils;

// ---- the library's gradient -----------------------------------------------------------------------

/// The gradient through segments of k steps; `forward`, where given, is the forward's tile in
/// place of the plan's.
template <class S, class T = typename S::value_type>
gradient_of<T> segmented_gradient(S const& s, st::grid<T> const& g, std::size_t steps, int k, tape_policy policy,
                                  std::vector<T> const& u0, st::segment_request request = {},
                                  st::tile_extent forward = {0, 0, 0})
{
  request.k = k;
  if (request.tile.x == 0) { request.tile = test_tile(S::dims); }
  request.block_threads = 64;
  st::segment_plan plan = st::plan_segments<S>(g, steps, query_device_limits(target), request);
  if (forward.x != 0) { plan.forward_tile = forward; }
  auto step = make_segments(s, g, plan);
  chain_options o;
  o.kind = target;
  o.policy = policy;
  o.poison = true;
  o.host_tier_on_cpu = policy == tape_policy::offload;
  chain<decltype(step)> c(step, step.segments(), o);
  return run_half_squares(c, target, u0);
}

/// Every segment length and policy against one-step segments under store, and those against the
/// reference; on tiles of `tile` (test_tile's where 0).
template <class S, class T = typename S::value_type>
void check_every_length(S const& s, st::grid<T> const& g, std::size_t steps, std::vector<int> const& lengths,
                        double lo, double hi, st::tile_extent tile = {0, 0, 0})
{
  st::segment_request request;
  request.tile = tile;
  std::vector<T> const u0 = random_state<T>(g.cells() * S::fields, 20261124u + unsigned(g.cells()), lo, hi);
  gradient_of<T> const reference = reference_gradient(s, g, steps, u0);
  gradient_of<T> const one = segmented_gradient(s, g, steps, 1, tape_policy::store, u0, request);
  if (reference_bits_hold) {
    EXPECT_TRUE(same_bits(one.final_state, reference.final_state)) << "one-step segments' final state";
    EXPECT_TRUE(same_bits(one.gradient, reference.gradient))
      << "one-step segments' gradient, off by " << relative_difference(one.gradient, reference.gradient);
  } else {
    EXPECT_LT(relative_difference(one.gradient, reference.gradient), sizeof(T) == 4 ? 1e-5 : 1e-12);
  }
  std::size_t const padded_state =
    (u0.size() + values_per_chunk<T> - 1) / values_per_chunk<T> * values_per_chunk<T> * sizeof(T);
  for (tape_policy policy : {tape_policy::store, tape_policy::recompute, tape_policy::offload}) {
    for (int k : lengths) {
      SCOPED_TRACE("k = " + std::to_string(k) + ", policy " + std::string(to_string(policy)));
      gradient_of<T> const r = segmented_gradient(s, g, steps, k, policy, u0, request);
      EXPECT_TRUE(same_bits(r.final_state, one.final_state));
      EXPECT_TRUE(same_bits(r.gradient, one.gradient))
        << "off by " << relative_difference(r.gradient, one.gradient) << " from one-step segments";
      std::size_t const segments = (steps + std::size_t(k) - 1) / std::size_t(k);
      EXPECT_EQ(r.stats.steps, segments);
      EXPECT_EQ(r.stats.tape_bytes, segments * padded_state) << "the tape is one state per segment";
    }
  }
}

TEST(StencilSegments, AGridOfTwoToTheThirtyTwoTilesIsRefused)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // The kernels number a segment's tiles in 32 bits (tile_range): 2^33 one-cell tiles are refused,
  // and the same line in tiles of 4 cells is planned.
  st::grid<float> const line{std::size_t{1} << 33};
  st::segment_request r;
  r.k = 1;
  r.tile = {1, 1, 1};
  device_limits const limits = query_device_limits(target);
  EXPECT_THROW(static_cast<void>(st::plan_segments<burgers_1d<float>>(line, 2, limits, r)), logic_error);
  r.tile = {4, 1, 1};
  EXPECT_EQ(st::plan_segments<burgers_1d<float>>(line, 2, limits, r).tiles, std::size_t{1} << 31);
}

TEST(StencilSegments, GridsPastTwoToTheSixtyTwoCellsAndUnknownEdgesAreRefused)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  device_limits const limits = query_device_limits(target);
  // 2^32 x 2^32 x 2 cells wrap to 0 (read as "no cells"), 2^33 x (2^31 + 1) to 2^33 (refused for
  // the tiles it would take): both are named as the grid they are.
  for (st::grid<float> const wide : {st::grid<float>{std::size_t{1} << 32, std::size_t{1} << 32, 2},
                                     st::grid<float>{std::size_t{1} << 33, (std::size_t{1} << 31) + 1, 1}}) {
    try {
      static_cast<void>(st::plan_segments<gray_scott_3d<float>>(wide, 2, limits));
      ADD_FAILURE() << wide.nx << " x " << wide.ny << " x " << wide.nz << " was planned";
    } catch (logic_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("cells is past 2^62"), std::string::npos) << e.what();
    }
  }
  st::grid<float> g{16, 16};
  g.edge = static_cast<st::boundary>(2);  // not read as fixed
  EXPECT_THROW(static_cast<void>(st::plan_segments<allen_cahn_2d<float>>(g, 2, limits)), logic_error);
  g.edge = st::boundary::fixed;
  EXPECT_EQ(st::plan_segments<allen_cahn_2d<float>>(g, 2, limits).steps, 2u);
}

TEST(StencilSegments, ATilePastFortyEightKiBOptsInAndGivesTheSameBits)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // Segments of 5 steps on 32 x 32 tiles of a 2-D radius-1 f32 stencil need 56.6 KB on chip: past
  // the 48 KiB every block gets, within what a GPU block gets on opt-in.
  allen_cahn_2d<float> const s{{0.1f, 0.2f}};
  st::grid<float> const g{70, 40, 1};
  std::vector<float> const u0 = random_state<float>(g.cells(), 20261125u, -1.0, 1.0);
  st::segment_request big;
  big.tile = {32, 32, 1};
  big.k = 5;
  device_limits const limits = query_device_limits(target);
  if constexpr (on_gpu) {
    EXPECT_THROW(static_cast<void>(st::plan_segments<allen_cahn_2d<float>>(g, 10, limits, big)), logic_error)
      << "without opting in";
  }
  big.shared_opt_in = true;
  st::segment_plan const plan = st::plan_segments<allen_cahn_2d<float>>(g, 10, limits, big);
  EXPECT_EQ(plan.k, 5);
  if constexpr (on_gpu) { EXPECT_GT(plan.scratch_bytes, std::size_t{48 * 1024}) << plan.describe(); }
  gradient_of<float> const one = segmented_gradient(s, g, 10, 1, tape_policy::store, u0);
  gradient_of<float> const r = segmented_gradient(s, g, 10, 5, tape_policy::store, u0, big);
  EXPECT_TRUE(same_bits(r.final_state, one.final_state));
  EXPECT_TRUE(same_bits(r.gradient, one.gradient)) << "off by " << relative_difference(r.gradient, one.gradient);
}

TEST(StencilSegments, AllenCahnEveryLengthAndPolicyGivesTheBitsOfOneStepSegments)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  allen_cahn_2d<float> const s{{0.1f, 0.2f}};
  check_every_length(s, st::grid<float>{29, 17, 1}, 7, {2, 3, 4, 7}, -1.0, 1.0);
  // Rows of 48 values on tiles 8 wide: at k = 4 the forward's boxes and λ_k's (halo 4) are copied
  // 16 bytes at a time on a GPU, the checkpoint's (halo 7) a value at a time.
  check_every_length(s, st::grid<float>{48, 20, 1}, 6, {4}, -1.0, 1.0, {8, 4, 1});
}

/// Segments of k steps through the forward's tiles `forwards`, each in place of the plan's, give the
/// final state and gradient of the plan's own.
template <class S, class T = typename S::value_type>
void check_forward_tiles(S const& s, st::grid<T> const& g, std::size_t steps, int k,
                         std::vector<st::tile_extent> const& forwards, double lo, double hi)
{
  std::vector<T> const u0 = random_state<T>(g.cells() * S::fields, 20261127u + unsigned(g.cells()), lo, hi);
  gradient_of<T> const planned = segmented_gradient(s, g, steps, k, tape_policy::store, u0);
  for (st::tile_extent const f : forwards) {
    SCOPED_TRACE("the forward on tiles of " + std::to_string(f.x) + "x" + std::to_string(f.y) + "x" +
                 std::to_string(f.z));
    gradient_of<T> const r = segmented_gradient(s, g, steps, k, tape_policy::recompute, u0, {}, f);
    EXPECT_TRUE(same_bits(r.final_state, planned.final_state));
    EXPECT_TRUE(same_bits(r.gradient, planned.gradient))
      << "off by " << relative_difference(r.gradient, planned.gradient);
  }
}

TEST(StencilSegments, APlanWithoutTheForwardsTileIsRefused)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  st::grid<float> const g{16, 16};
  st::segment_plan plan = st::plan_segments<allen_cahn_2d<float>>(g, 4, query_device_limits(target));
  plan.forward_tile = {0, 0, 0};  // a plan built by hand, the forward's tile left out
  try {
    static_cast<void>(make_segments(allen_cahn_2d<float>{{0.1f, 0.2f}}, g, plan));
    ADD_FAILURE() << "a plan without the forward's tile ran";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("forward's tile"), std::string::npos) << e.what();
  }
}

TEST(StencilSegments, TheForwardOnItsOwnTilesGivesTheSameBits)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // The forward holds two levels on chip where the reverse holds k + 2, so a GPU plan gives it
  // longer tiles than the reverse's (plan_segments). Each cell's value is the same expression on
  // any tiling: the forward on tiles longer, wider, odd-sized or larger than the grid gives the
  // same bits (under recompute, which runs the forward again in the reverse sweep).
  allen_cahn_2d<float> const ac{{0.1f, 0.2f}};
  check_forward_tiles(ac, st::grid<float>{29, 17, 1}, 7, 3, {{8, 16, 1}, {16, 8, 1}, {3, 5, 1}, {64, 64, 1}}, -1.0,
                      1.0);
  allen_cahn_2d<double> const fixed{{0.1, 0.2}};
  check_forward_tiles(fixed, st::grid<double>{13, 22, 1, st::boundary::fixed, 0.25}, 6, 2,
                      {{8, 32, 1}, {5, 3, 1}}, -1.0, 1.0);
  burgers_1d<float> const b{0.3f, 0.1f};
  check_forward_tiles(b, st::grid<float>{61, 1, 1, st::boundary::fixed, 0.5f}, 9, 3, {{32, 1, 1}, {7, 1, 1}}, 0.0,
                      1.0);
}

TEST(StencilSegments, AllenCahnOnAFixedGridAndBetweenWalls)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  allen_cahn_2d<double> const s{{0.1, 0.2}};
  check_every_length(s, st::grid<double>{13, 22, 1, st::boundary::fixed, 0.25}, 6, {2, 5}, -1.0, 1.0);
  // Even rows, tiles and halos: boxes copied two doubles at a time on a GPU.
  check_every_length(s, st::grid<double>{24, 12, 1, st::boundary::fixed, 0.25}, 5, {2}, -1.0, 1.0, {6, 4, 1});
}

TEST(StencilSegments, ScatterAdjointIn1dGivesTheBitsOfOneStepSegments)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  burgers_1d<float> const s{0.3f, 0.1f};
  // 11 cells: the halos of 5-step segments wrap around the grid more than once.
  check_every_length(s, st::grid<float>{11}, 9, {2, 4, 5}, 0.0, 1.0);
  check_every_length(s, st::grid<float>{61, 1, 1, st::boundary::fixed, 0.5f}, 9, {3, 9}, 0.0, 1.0);
}

TEST(StencilSegments, ScatterAdjointIn2dWithSkewedTapsOnAFixedGrid)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  advection_2d<float> const s{0.2f, 0.1f};
  check_every_length(s, st::grid<float>{19, 12, 1, st::boundary::fixed, -0.5f}, 5, {2, 5}, -1.0, 1.0);
}

TEST(StencilSegments, TwoFieldsIn3dGiveTheBitsOfOneStepSegments)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  gray_scott_3d<float> const s{0.1f, 0.05f, 0.04f, 0.06f};
  check_every_length(s, st::grid<float>{9, 8, 10}, 4, {2, 3}, 0.0, 1.0);
  check_every_length(s, st::grid<float>{8, 11, 6, st::boundary::fixed, 0.0f}, 3, {3}, 0.0, 1.0);
}

/// One rank's slab (the whole grid, its ghost planes exchanged with itself through `one`, by
/// default the one-rank communicator) against the uncut grid.
template <class S, class T = typename S::value_type>
void check_one_rank_slab(S const& s, st::grid<T> const& g, std::size_t steps, int k,
                         std::shared_ptr<distributed::communicator> one = std::make_shared<distributed::single_rank>())
{
  st::segment_request request;
  request.k = k;
  request.tile = test_tile(S::dims);
  request.block_threads = 64;
  st::segment_plan const plan = st::plan_slab_segments<S>(g, steps, query_device_limits(target), request, *one);
  std::vector<T> const u0 = random_state<T>(g.cells() * S::fields, 11u, -1.0, 1.0);
  gradient_of<T> const whole = reference_gradient(s, g, steps, u0);
  auto step = make_slab_segments(s, g, plan, one);
  ASSERT_EQ(step.state_size(), u0.size());
  chain_options o;
  o.kind = target;
  o.policy = tape_policy::recompute;
  o.poison = true;
  o.collective = one;
  chain<decltype(step)> c(step, step.segments(), o);
  std::vector<T> const gradient = run_half_squares(c, target, u0).gradient;
  if (reference_bits_hold) {
    EXPECT_TRUE(same_bits(gradient, whole.gradient)) << "off by " << relative_difference(gradient, whole.gradient);
  } else {
    EXPECT_LT(relative_difference(gradient, whole.gradient), sizeof(T) == 4 ? 1e-5 : 1e-12);
  }
}

TEST(StencilSegments, AOneRankSlabReadsItsOwnFacesAsGhostPlanes)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  check_one_rank_slab(allen_cahn_2d<float>{{0.1f, 0.2f}}, st::grid<float>{17, 23, 1}, 7, 3);
  check_one_rank_slab(burgers_1d<float>{0.3f, 0.1f}, st::grid<float>{37}, 9, 4);
  check_one_rank_slab(gray_scott_3d<float>{0.1f, 0.05f, 0.04f, 0.06f}, st::grid<float>{5, 6, 9}, 4, 2);
  check_one_rank_slab(advection_2d<float>{0.2f, 0.1f}, st::grid<float>{19, 12, 1, st::boundary::fixed, -0.5f}, 5, 2);
}

/// ⟨dL/du_0, v⟩ against (L(u_0 + h v) - L(u_0 - h v)) / 2h, in double.
template <class S>
void check_finite_differences(S const& s, st::grid<double> const& g, std::size_t steps, int k)
{
  std::size_t const values = g.cells() * S::fields;
  std::vector<double> const u0 = random_state<double>(values, 7u, 0.1, 0.9);
  std::vector<double> const v = random_state<double>(values, 8u, -1.0, 1.0);
  gradient_of<double> const r = segmented_gradient(s, g, steps, k, tape_policy::recompute, u0);
  auto loss = [&](double h) {
    std::vector<double> u(values);
    for (std::size_t i = 0; i < values; ++i) { u[i] = u0[i] + h * v[i]; }
    for (std::size_t t = 0; t < steps; ++t) { u = reference_step(s, g, u); }
    double l = 0;
    for (double x : u) { l += 0.5 * x * x; }
    return l;
  };
  double const h = 1e-6;
  double const fd = (loss(h) - loss(-h)) / (2 * h);
  double ad = 0;
  for (std::size_t i = 0; i < values; ++i) { ad += r.gradient[i] * v[i]; }
  EXPECT_NEAR(ad, fd, 1e-6 * std::max(1.0, std::abs(fd)));
}

TEST(StencilSegments, ACommunicatorOfDeviceMemoryGetsTheStateItselfAndTheSameBits)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // A communicator that exchanges device memory (a CUDA-aware MPI, NCCL) is handed the state's
  // faces where they lie and the planes the kernels read; the bits stay those of the uncut grid.
  auto const direct = std::make_shared<recording_ranks>(std::make_shared<distributed::single_rank>(), true);
  check_one_rank_slab(allen_cahn_2d<float>{{0.1f, 0.2f}}, st::grid<float>{17, 23, 1}, 7, 3, direct);
  check_one_rank_slab(gray_scott_3d<float>{0.1f, 0.05f, 0.04f, 0.06f}, st::grid<float>{5, 6, 9}, 4, 2, direct);
  ASSERT_FALSE(direct->sent.empty());
#if defined(TAPEFLOW_TEST_ON_GPU)
  // The routes themselves: the faces packed on the device and sent from there, received into the
  // planes the kernels read, or both through host memory.
  using T = float;
  st::grid<T> const g{6, 8, 1};
  st::block const whole{st::slab::of(8, 1, 0)};
  std::vector<T> const values = random_state<T>(g.cells(), 3u, -1.0, 1.0);
  device_buffer state(target, values.size() * sizeof(T), {});
  state.upload(values.data(), state.size(), {});
  for (bool device_memory : {true, false}) {
    SCOPED_TRACE(device_memory ? "device memory" : "staged");
    auto const ranks = std::make_shared<recording_ranks>(std::make_shared<distributed::single_rank>(), device_memory);
    st::device_ghosts<T> ghosts(ranks, whole, g, 2, 1, 2);
    EXPECT_EQ(ghosts.direct(), device_memory);
    EXPECT_THROW(static_cast<void>(ghosts.fill(state.data_as<T>(), 3, {})), logic_error)
      << "deeper than it was made for: refused before its faces are packed";
    ASSERT_TRUE(ranks->sent.empty());
    st::ghost_planes<T> const got = ghosts.fill(state.data_as<T>(), 2, {});
    ASSERT_EQ(ranks->sent.size(), 2u);
    ASSERT_EQ(ranks->received.size(), 2u);
    EXPECT_EQ(ranks->received[0] == got.values, device_memory) << "received where the kernels read";
    // Periodic, one rank: the planes below its first are its last two, those above its first two.
    std::vector<T> planes(4 * g.nx);
    TAPEFLOW_CUDA_TRY(cudaMemcpy(planes.data(), got.values, planes.size() * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<T> const want_below(values.end() - 2 * static_cast<std::ptrdiff_t>(g.nx), values.end());
    std::vector<T> const want_above(values.begin(), values.begin() + 2 * static_cast<std::ptrdiff_t>(g.nx));
    EXPECT_EQ(std::vector<T>(planes.begin(), planes.begin() + 2 * static_cast<std::ptrdiff_t>(g.nx)), want_below);
    EXPECT_EQ(std::vector<T>(planes.begin() + 2 * static_cast<std::ptrdiff_t>(g.nx), planes.end()), want_above);
  }
#endif
}

TEST(StencilSegments, GradientIsTheDerivativeByFiniteDifferencesInDouble)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  check_finite_differences(gray_scott_3d<double>{0.1, 0.05, 0.04, 0.06}, st::grid<double>{7, 6, 5}, 5, 2);
  check_finite_differences(burgers_1d<double>{0.3, 0.1}, st::grid<double>{23, 1, 1, st::boundary::fixed, 0.5}, 8, 4);
  check_finite_differences(advection_2d<double>{0.2, 0.1}, st::grid<double>{15, 9}, 6, 3);
}

// ---- coefficients and sites ------------------------------------------------------------------------

/// L = ½ Σ u_T² of logistic_1d from u0 with the rates c, written from its definition (no library code).
template <class S>
double logistic_loss(S const& s, st::grid<double> const& g, std::size_t steps, std::vector<double> u,
                     std::vector<double> const& c)
{
  auto const n = static_cast<std::int64_t>(g.nx);
  auto at = [&](std::vector<double> const& v, std::int64_t x) {
    if (g.edge == st::boundary::periodic) { return v[std::size_t((x % n + n) % n)]; }
    return x < 0 || x >= n ? g.ghost : v[std::size_t(x)];
  };
  for (std::size_t t = 0; t < steps; ++t) {
    std::vector<double> next(u.size());
    for (std::int64_t x = 0; x < n; ++x) {
      double const v = u[std::size_t(x)];
      next[std::size_t(x)] = v + s.nu * (at(u, x - 1) - 2 * v + at(u, x + 1)) + c[std::size_t(x)] * v * (1 - at(u, x + 1)) +
                             (x == s.source ? S::q(t) : 0.0);
    }
    u = next;
  }
  double l = 0;
  for (double x : u) { l += 0.5 * x * x; }
  return l;
}

/// dL/du_0 and dL/dc of S against central differences of logistic_loss along random directions;
/// every k's bits against k = 1's. Returns k = 1's run.
template <class S>
rates_run check_rates(S const& s, st::grid<double> const& g, std::size_t steps)
{
  std::vector<double> const u0 = random_state<double>(g.cells(), 11u, 0.1, 0.9);
  std::vector<double> const c = random_state<double>(g.cells(), 12u, 0.2, 1.5);
  rates_run const one = run_rates(s, g, steps, 1, tape_policy::store, u0, c, nullptr);
  for (int k : {3, 4}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    rates_run const r = run_rates(s, g, steps, k, tape_policy::recompute, u0, c, nullptr);
    EXPECT_TRUE(same_bits(r.state.final_state, one.state.final_state));
    EXPECT_TRUE(same_bits(r.state.gradient, one.state.gradient));
    EXPECT_TRUE(same_bits(r.dc, one.dc)) << "off by " << relative_difference(r.dc, one.dc);
  }
  std::vector<double> const v = random_state<double>(g.cells(), 13u, -1.0, 1.0);
  double const h = 1e-6;
  auto along = [&](std::vector<double> const& base, double by) {
    std::vector<double> x = base;
    for (std::size_t i = 0; i < x.size(); ++i) { x[i] += by * v[i]; }
    return x;
  };
  double const fd_c = (logistic_loss(s, g, steps, u0, along(c, h)) - logistic_loss(s, g, steps, u0, along(c, -h))) / (2 * h);
  double const fd_u = (logistic_loss(s, g, steps, along(u0, h), c) - logistic_loss(s, g, steps, along(u0, -h), c)) / (2 * h);
  double ad_c = 0;
  double ad_u = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    ad_c += one.dc[i] * v[i];
    ad_u += one.state.gradient[i] * v[i];
  }
  EXPECT_NEAR(ad_c, fd_c, 1e-6 * std::max(1.0, std::abs(fd_c))) << "dL/dc";
  EXPECT_NEAR(ad_u, fd_u, 1e-6 * std::max(1.0, std::abs(fd_u))) << "dL/du0";
  return one;
}

TEST(StencilSegments, CoefficientsAndSitesGiveTheDerivativeInBothAdjointForms)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // A reaction rate per cell (a coefficient) and a source switched on at steps 1 to 3 at one cell
  // (a site), on a periodic line and between fixed walls; the gather form reads the rates at its
  // adjoint taps, the scatter form at the cells that read this one.
  for (auto const& g : {st::grid<double>{29, 1, 1}, st::grid<double>{23, 1, 1, st::boundary::fixed, 0.3}}) {
    SCOPED_TRACE(std::string(st::to_string(g.edge)));
    rates_run const gather = check_rates(logistic_1d_gather<double>{{0.2, 5}}, g, 9);
    rates_run const scatter = check_rates(logistic_1d_scatter<double>{{0.2, 5}}, g, 9);
    EXPECT_LT(relative_difference(scatter.dc, gather.dc), 1e-13);
    EXPECT_LT(relative_difference(scatter.state.gradient, gather.state.gradient), 1e-13);
  }
}

#if defined(TAPEFLOW_TEST_ON_GPU)
TEST(StencilSegments, ADeviceRunnerRefusesACpuPlan)
{
  st::segment_plan const cpu = st::plan_segments<allen_cahn_2d<float>>(st::grid<float>{16, 16}, 4,
                                                                       query_device_limits(backend::cpu));
  EXPECT_THROW(static_cast<void>(make_segments(allen_cahn_2d<float>{{0.1f, 0.2f}}, st::grid<float>{16, 16}, cpu)),
               logic_error);
}
#endif

#if defined(TAPEFLOW_EMULATED)
// The plan counts a block's threads and shared memory, not its kernel's registers, which may let
// fewer blocks stay on a multiprocessor: Allen–Cahn's segment reverse holds 70 registers a thread on
// an H100, so 3 blocks of 256 threads fit an SM where the plan counts 8. A persistent grid larger
// than what fits runs its blocks past the first wave as a second, part-empty one. The launches'
// grids are what the device holds at once (played here: 70 registers, 3 blocks on each of the
// emulated device's 4 multiprocessors), and the bits are those of the plan's grid.
TEST(StencilSegments, APersistentGridIsNoLargerThanWhatTheDeviceHoldsAtOnce)
{
  using T = float;
  allen_cahn_2d<T> const s{{0.1f, 0.2f}};
  st::grid<T> const g{70, 61, 1};
  st::segment_request request;
  request.k = 3;
  request.tile = {8, 8, 1};
  request.block_threads = 256;
  st::segment_plan const plan = st::plan_segments<allen_cahn_2d<T>>(g, 6, query_device_limits(target), request);
  ASSERT_EQ(plan.tiles, 72u);
  ASSERT_EQ(plan.grid_blocks, 32) << "8 blocks of 256 threads on each of 4 multiprocessors: " << plan.describe();
  // The forward's tiles are twice as long along y (9 x 4 of them: still more than the 32 blocks
  // the device holds), its grid sized by its own scratch.
  ASSERT_EQ(plan.forward_tile.y, 16) << plan.describe();
  ASSERT_EQ(plan.forward_tiles, 36u);
  ASSERT_EQ(plan.forward_grid_blocks, 32);
  st::device_runner<allen_cahn_2d<T>> const runner(s, g, plan);
  std::size_t const bytes = runner.state_size() * sizeof(T);
  device_buffer u0(target, bytes, {});
  device_buffer lambda_k(target, bytes, {});
  std::random_device fresh;
  std::vector<T> const u0_values = random_state<T>(g.cells(), fresh(), -1.0, 1.0);
  std::vector<T> const lambda_values = random_state<T>(g.cells(), fresh(), -1.0, 1.0);
  u0.upload(u0_values.data(), bytes, {});
  lambda_k.upload(lambda_values.data(), bytes, {});
  struct launched {
    std::uint64_t blocks;
    std::vector<T> u3;
    std::vector<T> lambda0;
  };
  auto const run = [&](int registers, st::device_runner<allen_cahn_2d<T>> const& on) {
    emulated_settings const played([&](emu::settings& e) { e.kernel_registers = registers; });
    device_buffer u3(target, bytes, {});
    device_buffer lambda0(target, bytes, {});
    TAPEFLOW_CUDA_TRY(cudaDeviceSynchronize());
    std::uint64_t const before = emu::current_counters().blocks;
    on.advance(0, 3, u0.data_as<T>(), u3.data_as<T>(), {});
    on.reverse(0, 3, u0.data_as<T>(), lambda_k.data_as<T>(), lambda0.data_as<T>(), nullptr, {});
    TAPEFLOW_CUDA_TRY(cudaDeviceSynchronize());
    launched r{emu::current_counters().blocks - before, std::vector<T>(g.cells()), std::vector<T>(g.cells())};
    u3.download(r.u3.data(), bytes, {});
    lambda0.download(r.lambda0.data(), bytes, {});
    return r;
  };
  // Each call launches two kernels: the inner tiles' and the others'. The forward's inner tiles are
  // 7 x 2 of its 9 x 4 (those whose boxes, 3 cells wider, lie inside the grid), the others 22; the
  // reverse's 7 x 6 of its 9 x 8 (boxes 5 cells wider), the others 30.
  launched const planned = run(0, runner);
  EXPECT_EQ(planned.blocks, (14u + 22u) + (32u + 30u)) << "registers bound nothing: the plan's grid, or a block a tile";
  launched const held = run(70, runner);
  EXPECT_EQ(held.blocks, 2u * (12u + 12u)) << "70 registers: 3 blocks of 256 threads on each of 4 multiprocessors";
  EXPECT_TRUE(same_bits(held.u3, planned.u3));
  EXPECT_TRUE(same_bits(held.lambda0, planned.lambda0));
  // Each kernel's grid is its own plan's: a reverse planned 4 blocks in flight (as a reverse of
  // more scratch would be) runs 4 a launch, the forward still its own 32.
  st::segment_plan few = plan;
  few.grid_blocks = 4;
  launched const fewer = run(0, st::device_runner<allen_cahn_2d<T>>(s, g, few));
  EXPECT_EQ(fewer.blocks, (14u + 22u) + (4u + 4u));
  EXPECT_TRUE(same_bits(fewer.u3, planned.u3));
  EXPECT_TRUE(same_bits(fewer.lambda0, planned.lambda0));
  EXPECT_FALSE(same_bits(held.lambda0, std::vector<T>(g.cells(), T(0)))) << "the reverse wrote its adjoint";
  // A kernel that cannot hold one block of the plan's threads at all is a typed error naming it,
  // before anything launches.
  emulated_settings const narrow([](emu::settings& e) { e.kernel_max_threads = 128; });
  device_buffer u3(target, bytes, {});
  std::uint64_t const launches = emu::current_counters().launches;
  try {
    runner.advance(0, 3, u0.data_as<T>(), u3.data_as<T>(), {});
    ADD_FAILURE() << "a block of 256 threads launched where the kernel runs 128";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run a block of 256 threads"), std::string::npos) << e.what();
  }
  EXPECT_EQ(emu::current_counters().launches, launches);
}
#endif

// The planner is host code: its tests run once, with the CPU backend's.
#if !defined(TAPEFLOW_TEST_ON_GPU)
/// A CUDA device's limits as the planner reads them: 48 KiB of shared memory per block without
/// opt-in, 1024 threads per block, 2048 per multiprocessor.
device_limits gpu_limits(int multiprocessors, std::size_t shared_per_multiprocessor)
{
  device_limits d;
  d.kind = backend::cuda;
  d.multiprocessors = multiprocessors;
  d.shared_mem_per_block = 48 * 1024;
  d.shared_mem_per_multiprocessor = shared_per_multiprocessor;
  d.max_threads_per_block = 1024;
  d.max_threads_per_multiprocessor = 2048;
  return d;
}

/// inner_tiles(reach) holds exactly the tiles whose boxes, `reach` cells wider, lie inside the grid
/// (the tiles the tile program compiled without wrap, ghost and fixed-edge code may run), and
/// tile_range::count_in counts them in every range a call walks: all tiles, or over ranks the
/// interior tiles and the boundary ones. A kernel's tile_walk over each range finds the same tiles,
/// at the same places, as the range read with plain divisions.
template <class S>
void check_inner_tiles(st::grid<typename S::value_type> const& g, st::tile_extent tile, bool block_split)
{
  st::tile_program<S> p{S{}, g, st::reach::of<S>(), tile};
  // Tile n's origin, x fastest, worked out here.
  std::size_t const tx = (g.nx + tile.x - 1) / tile.x;
  std::size_t const ty = (g.ny + tile.y - 1) / tile.y;
  auto const origin = [&](std::size_t n) {
    return std::array<std::int64_t, 3>{static_cast<std::int64_t>((n % tx) * tile.x),
                                       static_cast<std::int64_t>((n / tx % ty) * tile.y),
                                       static_cast<std::int64_t>(n / (tx * ty) * tile.z)};
  };
  auto const origin_of = [](st::box const& b) { return std::array<std::int64_t, 3>{b.x0, b.y0, b.z0}; };
  for (bool split : {false, true}) {
    if (split) {  // a rank's part of a larger grid: its interior and boundary tiles are two ranges
      p.slab.offset = 5;
      p.slab.global = static_cast<std::int64_t>(g.extent(S::dims - 1)) + 9;
      if (block_split) {
        p.slab.inner_offset = 3;
        p.slab.inner_global = static_cast<std::int64_t>(g.extent(S::dims - 2)) + 7;
      }
    }
    for (int reach = 0; reach <= 7; ++reach) {
      SCOPED_TRACE("reach " + std::to_string(reach) + (split ? ", a rank's part" : ""));
      st::tile_rect const inner = p.inner_tiles(reach);
      std::size_t held = 0;
      for (std::size_t n = 0; n < p.tiles(); ++n) {
        ASSERT_EQ(origin_of(p.tile_box(n)), origin(n)) << "tile " << n;
        bool const inside = p.within(st::grown(p.tile_box(n), S::dims, reach));
        EXPECT_EQ(inner.holds(n), inside) << "tile " << n;
        held += inside ? 1 : 0;
      }
      EXPECT_EQ(inner.size(), held);
      std::vector<st::tile_range> ranges{p.all_tiles()};
      if (split) { ranges = {p.interior_tiles(reach), p.boundary_tiles(reach)}; }
      std::size_t counted = 0;
      for (st::tile_range const& range : ranges) {
        std::size_t in_range = 0;
        st::tile_walk const walk(range, inner);
        ASSERT_EQ(walk.size(), range.size());
        for (std::size_t i = 0; i < range.size(); ++i) {
          in_range += inner.holds(range[i]) ? 1 : 0;
          st::tile_place const at = walk[i];
          ASSERT_EQ(origin_of(p.tile_box(at)), origin(range[i])) << "tile " << i << " of the range";
          ASSERT_EQ(walk.inner.holds(at), inner.holds(range[i])) << "tile " << i << " of the range";
        }
        EXPECT_EQ(range.count_in(inner), in_range);
        counted += in_range;
      }
      EXPECT_EQ(counted, held);
      if (split) { EXPECT_EQ(ranges[1].count_in(inner), 0u) << "an inner tile reads no ghost cell"; }
    }
  }
}

TEST(StencilSegments, InnerTilesAreThoseWhoseBoxesLieInsideTheGrid)
{
  // Partial last tiles along every axis; fixed and periodic grids; a slab and a block.
  check_inner_tiles<burgers_1d<float>>(st::grid<float>{61}, {7, 1, 1}, false);
  check_inner_tiles<allen_cahn_2d<float>>(st::grid<float>{29, 17}, {7, 5, 1}, false);
  check_inner_tiles<allen_cahn_2d<float>>(st::grid<float>{29, 17}, {7, 5, 1}, true);
  check_inner_tiles<advection_2d<float>>(st::grid<float>{19, 12, 1, st::boundary::fixed, -0.5f}, {4, 3, 1}, true);
  check_inner_tiles<gray_scott_3d<float>>(st::grid<float>{13, 11, 9}, {3, 2, 2}, false);
  check_inner_tiles<gray_scott_3d<float>>(st::grid<float>{13, 11, 9}, {3, 2, 2}, true);
}

/// A sweep's window (sweep.hpp) against the taps read directly: every run of every column of a box
/// of random values (in 3-D, a box whose rows and planes are padded, as a state's are), each cell's
/// taps in List's order.
template <class List, int Dims>
void check_window(int ex, int ey, int ez)
{
  int const halo = List::radius;
  int const bx = ex + 2 * halo;
  int const by = ey + 2 * halo;
  int const bz = Dims == 3 ? ez + 2 * halo : 1;
  int const fields = [] {
    int f = 0;
    st::for_each_tap<List>([&](auto t, auto) { f = decltype(t)::field + 1 > f ? decltype(t)::field + 1 : f; });
    return f;
  }();
  st::strided<double const> level{nullptr, std::size_t(bx + 3) * std::size_t(by + 1) * std::size_t(bz), bx + 3,
                                  std::ptrdiff_t(bx + 3) * (by + 1)};
  std::vector<double> values(level.field * std::size_t(fields));
  std::mt19937_64 rng(0x5eed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (double& v : values) { v = uniform(rng); }
  level.base = values.data();
  int const along = Dims == 3 ? ez : ey;
  for (int z = 0; z < (Dims == 3 ? 1 : ez); ++z) {
    for (int y = 0; y < (Dims == 3 ? ey : 1); ++y) {
      for (int x = 0; x < ex; ++x) {
        for (int first = 0; first < along; ++first) {
          int const cx = x + halo;
          int const cy = Dims == 3 ? y + halo : first + halo;
          int const cz = Dims == 3 ? first + halo : 0;
          st::column_window<double, List, Dims> window(level, level.at(cx, cy, cz));
          for (int s = first; s < along; ++s) {
            double u[List::size];
            window.next();
            window.gather(u);
            int const sy = Dims == 3 ? cy : cy + (s - first);
            int const sz = Dims == 3 ? cz + (s - first) : 0;
            st::for_each_tap<List>([&](auto t, auto i) {
              using tp = decltype(t);
              double const want = level.at(cx + tp::dx, sy + tp::dy, sz + tp::dz)[std::size_t(tp::field) * level.field];
              ASSERT_EQ(u[decltype(i)::value], want) << "tap " << decltype(i)::value << " of the cell (" << cx << ", "
                                                     << sy << ", " << sz << "), run from " << first;
            });
          }
        }
      }
    }
  }
}

/// LBM D2Q9's pulled taps (kernels/lbm/stencil.hpp): every field at each of the 9 cells around.
template <int... N>
st::taps<st::tap<N % 3 - 1, N / 3 % 3 - 1, 0, N / 9>...> pulled_taps(std::integer_sequence<int, N...>);
using d2q9_pulled_taps = decltype(pulled_taps(std::make_integer_sequence<int, 81>{}));

TEST(StencilSegments, AColumnSweepsWindowHoldsEachCellsTapsAndLoadsOneValueALine)
{
  // Allen–Cahn's five taps lie on three lines along y: the centre's (3 values) and one each beside it.
  using ac = st::tap_lines<allen_cahn_2d<float>::forward_taps, 2>;
  EXPECT_EQ(ac::lines.count, 3);
  EXPECT_EQ(ac::lines.values, 5);
  // Two fields on the same offsets are different lines; in 3-D the lines run along z.
  using gs = st::tap_lines<gray_scott_3d<float>::forward_taps, 3>;
  EXPECT_EQ(gs::lines.count, 10);
  EXPECT_EQ(gs::lines.values, 14);
  using lbm = st::tap_lines<d2q9_pulled_taps, 2>;
  EXPECT_EQ(lbm::lines.count, 27);
  EXPECT_EQ(lbm::lines.values, 81);
  EXPECT_GT(lbm::lines.values, st::tile_program<allen_cahn_2d<float>>::max_window)
    << "LBM's levels run cell by cell: a window of 81 values would spill";
  EXPECT_TRUE(st::tile_program<allen_cahn_2d<float>>::forward_sweeps);
  EXPECT_TRUE(st::tile_program<allen_cahn_2d<float>>::adjoint_sweeps);
  EXPECT_FALSE(st::tile_program<burgers_1d<float>>::forward_sweeps) << "a 1-D level is the run a thread walks";

  check_window<allen_cahn_2d<float>::forward_taps, 2>(5, 7, 1);
  check_window<advection_2d<float>::forward_taps, 2>(4, 6, 1);
  check_window<gray_scott_3d<float>::forward_taps, 3>(3, 4, 5);
  check_window<d2q9_pulled_taps, 2>(3, 5, 1);
}

TEST(StencilSegments, PlannerTakesTheLongestSegmentThatPaysAndFitsOnChip)
{
  device_limits const gpu_like = gpu_limits(132, 228 * 1024);  // an H100's
  using ac = allen_cahn_2d<float>;
  st::segment_plan const p = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like);
  EXPECT_GE(p.k, 3) << p.describe();
  EXPECT_LE(p.scratch_bytes, gpu_like.shared_mem_per_block) << p.describe();
  EXPECT_EQ(p.segments, (100 + std::size_t(p.k) - 1) / std::size_t(p.k));
  EXPECT_LT(p.states_per_step, 2.5) << "a store-every-step gradient moves about 5 states a step";
  st::segment_plan const one = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like, {1});
  EXPECT_EQ(one.k, 1);
  EXPECT_GT(one.states_per_step, 2 * p.states_per_step);
  // A segment one step longer than the chosen one no longer fits, or no longer pays.
  if (p.k < st::max_segment_steps) {
    st::segment_request longer;
    longer.k = p.k + 1;
    try {
      st::segment_plan const q = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like, longer);
      EXPECT_GT(q.states_per_step, 0.95 * p.states_per_step) << q.describe();
    } catch (logic_error const& e) {
      EXPECT_NE(std::string(e.what()).find("bytes on chip"), std::string::npos) << e.what();
    }
  }
  // A long segment asked for shrinks the default tile until it fits; a tile asked for stays.
  st::segment_request eight;
  eight.k = 8;
  st::segment_plan const shrunk = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like, eight);
  EXPECT_EQ(shrunk.k, 8);
  EXPECT_LE(shrunk.scratch_bytes, gpu_like.shared_mem_per_block) << shrunk.describe();
  EXPECT_LT(shrunk.tile.x * shrunk.tile.y, p.tile.x * p.tile.y) << shrunk.describe();
  eight.tile = p.tile;
  EXPECT_THROW(static_cast<void>(st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like, eight)), logic_error);
  // Never longer than the gradient.
  EXPECT_LE(st::plan_segments<ac>(st::grid<float>{8192, 8192}, 2, gpu_like).k, 2);
}

TEST(StencilSegments, TheForwardsTileIsTheReversesLengthenedWhileTheDeviceKeepsItsBlocks)
{
  // Allen–Cahn 8192² f32 at k = 4 on an H100-like device: the reverse on 32 x 32 tiles (k + 2
  // levels, 42.8 KB: 5 blocks an SM), the forward on 32 x 64 (two boxes of 40 x 72: 23 KB, 8
  // blocks of 256 threads, as many as the threads allow and as on 32 x 32); 32 x 128 would hold
  // 43.5 KB, 5 blocks. The forward's grid is sized by its own scratch, not the reverse's.
  device_limits const gpu_like = gpu_limits(132, 228 * 1024);
  using ac = allen_cahn_2d<float>;
  st::segment_request four;
  four.k = 4;
  st::segment_plan const p = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, gpu_like, four);
  ASSERT_EQ(p.tile.x, 32) << p.describe();
  ASSERT_EQ(p.tile.y, 32) << p.describe();
  EXPECT_EQ(p.grid_blocks, 132 * 5);
  EXPECT_EQ(p.forward_tile.x, 32) << p.describe();
  EXPECT_EQ(p.forward_tile.y, 64) << p.describe();
  EXPECT_EQ(p.forward_tile.z, 1);
  EXPECT_EQ(p.forward_tiles, std::size_t{256 * 128});
  EXPECT_EQ(p.forward_scratch_bytes, std::size_t{2 * 40 * 72 * 4});
  EXPECT_EQ(p.forward_grid_blocks, 132 * 8);
  EXPECT_NE(p.describe().find("the forward's tiles 32x64x1"), std::string::npos) << p.describe();
  // The forward's longer tiles read fewer halo cells: the plan counts them.
  double const same_tiles = st::detail::states_per_step(st::segment_shape{4, st::reach::of<ac>()}, p.tile, p.tile, 2);
  EXPECT_LT(p.states_per_step, same_tiles - 0.01) << p.describe();
  // A grid with fewer tiles than the device holds blocks keeps the reverse's: 512² has 256 tiles
  // of 32 x 32 where 1056 blocks fit.
  st::segment_plan const small = st::plan_segments<ac>(st::grid<float>{512, 512}, 100, gpu_like, four);
  EXPECT_EQ(small.forward_tile.y, small.tile.y) << small.describe();
  EXPECT_EQ(small.forward_tiles, small.tiles);
  // 1-D: Burgers 2^26 at k = 8 on tiles of 1024 runs its forward on 2048 (16 KB, 8 blocks).
  st::segment_request eight;
  eight.k = 8;
  st::segment_plan const line = st::plan_segments<burgers_1d<float>>(st::grid<float>{std::size_t{1} << 26}, 100,
                                                                     gpu_like, eight);
  EXPECT_EQ(line.tile.x, 1024) << line.describe();
  EXPECT_EQ(line.forward_tile.x, 2048) << line.describe();
  // The CPU's forward keeps the reverse's tile (its scratch is a cache share, not a block's).
  st::segment_plan const cpu = st::plan_segments<ac>(st::grid<float>{8192, 8192}, 100, query_device_limits(backend::cpu), four);
  EXPECT_EQ(cpu.forward_tile.x, cpu.tile.x);
  EXPECT_EQ(cpu.forward_tile.y, cpu.tile.y);
  EXPECT_EQ(cpu.forward_tiles, cpu.tiles);
}

TEST(StencilSegments, ThePlannersKIsSearchedOverTilesAndNoAskedKMovesFewerBytes)
{
  // A device whose tile holds 8 KiB: one f64 step on the default 32 x 32 tile needs 3 boxes of
  // 34 x 34 values (27 KiB), so the planner must look at smaller tiles; and an H100's 48 KiB.
  device_limits small = gpu_limits(4, 64 * 1024);
  small.shared_mem_per_block = 8 * 1024;
  using ac = allen_cahn_2d<double>;
  for (device_limits const& d : {small, gpu_limits(132, 228 * 1024)}) {
    SCOPED_TRACE(std::to_string(d.shared_mem_per_block) + " B per tile");
    st::segment_plan const p = st::plan_segments<ac>(st::grid<double>{256, 256}, 10, d);
    EXPECT_LE(p.scratch_bytes, d.shared_mem_per_block) << p.describe();
    for (int k = 1; k <= 10; ++k) {
      st::segment_request asked;
      asked.k = k;
      try {
        st::segment_plan const q = st::plan_segments<ac>(st::grid<double>{256, 256}, 10, d, asked);
        EXPECT_GE(q.states_per_step, 0.95 * p.states_per_step) << q.describe() << " against " << p.describe();
      } catch (logic_error const& e) {
        EXPECT_NE(std::string(e.what()).find("bytes on chip"), std::string::npos) << e.what();
      }
    }
  }
  st::segment_plan const p = st::plan_segments<ac>(st::grid<double>{256, 256}, 10, small);
  EXPECT_LT(p.tile.x * p.tile.y, 32 * 32) << p.describe();
  st::segment_request chosen;
  chosen.tile = {32, 32, 1};
  EXPECT_THROW(static_cast<void>(st::plan_segments<ac>(st::grid<double>{256, 256}, 10, small, chosen)), logic_error)
    << "a tile the caller chose stays as chosen";
}

TEST(StencilSegments, TheCpuWeighsTheCellsASegmentUpdatesAsWellAsItsBytes)
{
  // One step updates each cell twice (forward, adjoint); a 1-D radius-1 segment of 2 steps on
  // tiles of 4 updates u_1 on 6 cells and u_2 on 4, then u_1 again on 8, λ_1 on 6 and λ_0 on 4:
  // 28 over 2 steps of 4 cells.
  st::reach const one{1, 1, 1};
  EXPECT_DOUBLE_EQ(st::detail::cells_per_step(st::segment_shape{1, one}, {64, 64, 1}, {64, 64, 1}, 2), 2.0);
  EXPECT_DOUBLE_EQ(st::detail::cells_per_step(st::segment_shape{2, one}, {4, 1, 1}, {4, 1, 1}, 1), 3.5);

  // Gray–Scott 128³ f32 on 16³ CPU tiles: 3 steps would move the fewest bytes (3.83 states a step
  // against 4.25 for 2), but update 4.91 cells a step against 3.40, and cost more (8.74 against 7.65).
  device_limits const cpu = query_device_limits(backend::cpu);
  using gs = gray_scott_3d<float>;
  st::grid<float> const g{128, 128, 128};
  st::segment_request cube;
  cube.tile = {16, 16, 16};
  st::segment_plan const p = st::plan_segments<gs>(g, 16, cpu, cube);
  EXPECT_EQ(p.work_weight(), 1.0);
  EXPECT_EQ(p.k, 2) << p.describe();
  EXPECT_EQ(p.tile.x * p.tile.y * p.tile.z, 16 * 16 * 16) << p.describe();
  EXPECT_DOUBLE_EQ(p.cost_per_step(), p.states_per_step + p.cells_per_step);
  EXPECT_NE(p.describe().find("3.40 cell updates per step"), std::string::npos) << p.describe();
  st::segment_request three = cube;
  three.k = 3;
  st::segment_plan const q = st::plan_segments<gs>(g, 16, cpu, three);
  EXPECT_LT(q.states_per_step, p.states_per_step) << q.describe();
  EXPECT_GT(q.cost_per_step(), p.cost_per_step()) << q.describe();
  // On the default tiles, no asked k costs 5 % less than the planner's, on the CPU, for a 2-D
  // stencil too.
  st::segment_plan const planned = st::plan_segments<gs>(g, 16, cpu);
  st::segment_plan const chosen = st::plan_segments<allen_cahn_2d<float>>(st::grid<float>{4096, 4096}, 16, cpu);
  for (int k = 1; k <= st::max_segment_steps; ++k) {
    st::segment_request asked;
    asked.k = k;
    try {
      st::segment_plan const a = st::plan_segments<gs>(g, 16, cpu, asked);
      EXPECT_GE(a.cost_per_step(), 0.95 * planned.cost_per_step()) << a.describe() << " against " << planned.describe();
    } catch (logic_error const& e) {
      EXPECT_NE(std::string(e.what()).find("bytes on chip"), std::string::npos) << e.what();
    }
    st::segment_plan const flat = st::plan_segments<allen_cahn_2d<float>>(st::grid<float>{4096, 4096}, 16, cpu, asked);
    EXPECT_GE(flat.cost_per_step(), 0.95 * chosen.cost_per_step()) << flat.describe() << " against " << chosen.describe();
  }
  // A segment beats a one-step gradient by its cost: bytes, and twice the cells for the one step.
  EXPECT_TRUE(p.beats_one_step(p.cost_per_step() - 1.99));
  EXPECT_FALSE(p.beats_one_step(p.cost_per_step() - 2.01));
  // A GPU's segments are planned by their bytes alone.
  st::segment_plan const gpu = st::plan_segments<gs>(g, 16, gpu_limits(132, 228 * 1024));
  EXPECT_EQ(gpu.work_weight(), 0.0);
  EXPECT_DOUBLE_EQ(gpu.cost_per_step(), gpu.states_per_step);
}

TEST(StencilSegments, RequestsThatCannotRunAreLogicErrors)
{
  using ac = allen_cahn_2d<float>;
  device_limits const cpu = query_device_limits(backend::cpu);
  st::grid<float> const g{64, 64};
  auto plan = [&](std::size_t steps, st::segment_request r, st::grid<float> grid) {
    return st::plan_segments<ac>(grid, steps, cpu, r);
  };
  EXPECT_THROW(plan(0, {}, g), logic_error);
  EXPECT_THROW(plan(4, {5}, g), logic_error);
  EXPECT_THROW(plan(40, {st::max_segment_steps + 1}, g), logic_error);
  EXPECT_THROW(plan(4, {}, st::grid<float>{0, 64}), logic_error);
  EXPECT_THROW(plan(4, {}, st::grid<float>{64, 64, 2}), logic_error);  // a 2-D stencil on a 3-D grid
  st::segment_request huge;
  huge.k = 16;
  huge.tile = {4096, 4096, 1};
  auto expect_refusal = [&](st::segment_request r, char const* says) {
    try {
      static_cast<void>(plan(40, r, g));
      ADD_FAILURE() << "planned a tile of " << r.tile.x << " x " << r.tile.y << ", k " << r.k;
    } catch (logic_error const& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_refusal(huge, "bytes on chip per tile");
  huge.k = 0;  // the planner's k: not even one step fits
  expect_refusal(huge, "bytes on chip for one step");
  st::segment_request wide;
  wide.tile = {70000, 1, 1};
  expect_refusal(wide, "1 to 65536 cells");
  wide.tile = {-3, 8, 1};
  expect_refusal(wide, "1 to 65536 cells");
}

TEST(StencilSegments, AGpuPlanRefusesMoreThreadsThanTheDeviceRuns)
{
  device_limits const gpu_like = gpu_limits(4, 96 * 1024);
  st::segment_request r;
  for (int threads : {2048, -64}) {
    r.block_threads = threads;
    EXPECT_THROW(static_cast<void>(st::plan_segments<allen_cahn_2d<float>>(st::grid<float>{64, 64}, 8, gpu_like, r)),
                 logic_error)
      << threads << " threads";
  }
  r.block_threads = 512;
  st::segment_plan const p = st::plan_segments<allen_cahn_2d<float>>(st::grid<float>{64, 64}, 8, gpu_like, r);
  EXPECT_EQ(p.block_threads, 512);
  EXPECT_EQ(p.grid_blocks, 4) << "4 tiles of 32 x 32, all resident";
}
#endif

}  // namespace
}  // namespace tapeflow::testing
