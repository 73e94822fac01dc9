// SPDX-License-Identifier: Apache-2.0
// The distributed tests, written once against the backend under test (target.hpp): ranks_cpu.cpp
// includes them for the CPU backend, ranks_device.cu for this build's GPU and the emulated device
// (each rank's slab run by kernels, its ghost planes staged through pinned memory). Each program
// runs as every rank of an MPI run (mpi_main.cpp), which CTest starts with 1, 2, 3 and 4
// ranks (label "mpi"; tests/CMakeLists.txt). What they hold tapeflow to (docs/distributed.md):
//   - the communicator: rank-ordered gathers and sums, a ring exchange, a silent peer that ends in
//     distributed_error within the timeout rather than a hang, a rank that fails before an
//     allgather heard of by every other rank inside it;
//   - stencil segments on slabs: every rank's part of the gradient and of the final state is the
//     same bits as the reference over the whole grid (and so as one rank's run), for 1-, 2- and
//     3-D stencils, gather and scatter adjoints, periodic and fixed grids, slabs of unequal size,
//     under store, recompute, offload and auto with a budget;
//   - one schedule: ranks given different budgets plan with the least and agree; ranks that
//     ask for different policies, measure_steps or step costs, or would run different schedules,
//     or cut by different process grids, raise distributed_error on every rank before the first
//     step;
//   - stencils with coefficients: the coefficients' ghost planes give every rank's part of u_T,
//     dL/du_0 and dL/dc the bits of one process's, in both adjoint forms;
//   - a workload: the wave equation over the ranks gives one process's loss and dL/dm;
//   - failure: a rank whose step throws makes every other rank raise distributed_error naming it.
#pragma once

#include "../stencil/reference.hpp"
#include "../stencil/slab_step.hpp"
#include "../stencil/stencils.hpp"
#include "../target.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/distributed/mpi.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/workloads/wave.hpp>
#include <tapeflow/workloads/wave/description.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow::testing {
namespace {

using namespace tapeflow::testing::stencils;
namespace dist = tapeflow::distributed;
using ac = allen_cahn_2d<float>;

std::shared_ptr<dist::mpi_communicator> world(std::chrono::milliseconds timeout = std::chrono::seconds(60))
{
  return std::make_shared<dist::mpi_communicator>(MPI_COMM_WORLD, timeout);
}

// ---- the communicator (once, in the CPU program) --------------------------------------------------

#if !defined(TAPEFLOW_TEST_ON_GPU)

TEST(Communicator, GathersInRankOrderAndSumsInRankOrder)
{
  auto const comm = world();
  int const p = comm->size();
  std::vector<int> const ranks = dist::gather_all(*comm, comm->rank() * 10 + 1);
  ASSERT_EQ(int(ranks.size()), p);
  for (int r = 0; r < p; ++r) { EXPECT_EQ(ranks[std::size_t(r)], r * 10 + 1); }
  EXPECT_EQ(dist::min_over_ranks(*comm, std::size_t(100 + comm->rank())), 100u);
  EXPECT_EQ(dist::max_over_ranks(*comm, 0.5 * comm->rank()), 0.5 * (p - 1));
  // Summands whose total depends on the order: 1e16, then p - 1 ones; rank order gives 1e16 + ...
  double const mine = comm->rank() == 0 ? 1e16 : 1.0;
  double expected = 0;
  for (int r = 0; r < p; ++r) { expected += r == 0 ? 1e16 : 1.0; }
  EXPECT_EQ(dist::sum_in_rank_order(*comm, mine), expected);
  // Element-wise: the first element as above, the second each rank's index; in float too.
  std::vector<double> values{mine, double(comm->rank())};
  dist::sum_in_rank_order(*comm, values);
  EXPECT_EQ(values, (std::vector<double>{expected, 0.5 * p * (p - 1)}));
  std::vector<float> floats{static_cast<float>(comm->rank()) + 0.5f};
  dist::sum_in_rank_order(*comm, floats);
  EXPECT_EQ(floats[0], 0.5f * static_cast<float>(p * p));
  std::vector<double> highest{0.5 * comm->rank(), -1.0 * comm->rank()};
  dist::max_over_ranks(*comm, highest);
  EXPECT_EQ(highest, (std::vector<double>{0.5 * (p - 1), 0.0})) << "rank 0's values count too";
  if (p > 1) {
    std::vector<double> uneven(std::size_t(comm->rank()), 1.0);  // rank r holds r values
    EXPECT_THROW(dist::max_over_ranks(*comm, uneven), logic_error) << "lists of different lengths, on every rank";
    EXPECT_THROW(dist::sum_in_rank_order(*comm, uneven), logic_error) << "the same, summed";
  }
}

TEST(Communicator, ExchangesAroundARing)
{
  auto const comm = world();
  int const p = comm->size();
  int const next = (comm->rank() + 1) % p;
  int const prev = (comm->rank() + p - 1) % p;
  std::vector<double> const mine{double(comm->rank()), -1.0 * comm->rank()};
  std::vector<double> from_prev(2, 0.0);
  comm->exchange({{next, 3, mine.data(), sizeof(double) * 2}}, {{prev, 3, from_prev.data(), sizeof(double) * 2}});
  EXPECT_EQ(from_prev[0], double(prev));
  EXPECT_EQ(from_prev[1], -1.0 * prev);
  EXPECT_THROW(comm->exchange({{p, 0, mine.data(), 8}}, {}), logic_error) << "a rank past the last";
  EXPECT_THROW(dist::mpi_communicator(MPI_COMM_WORLD, std::chrono::milliseconds(0)), logic_error) << "no timeout";
  EXPECT_THROW(comm->exchange({{next, 32767, mine.data(), 8}}, {}), logic_error) << "the failure tag";
  // Two exchanges pending at once, finished in the other order; a ticket finishes once.
  std::vector<double> from_next(2, 0.0);
  dist::exchange_ticket const first =
    comm->start_exchange({{next, 4, mine.data(), sizeof(double) * 2}}, {{prev, 4, from_prev.data(), sizeof(double) * 2}});
  dist::exchange_ticket const second =
    comm->start_exchange({{prev, 5, mine.data(), sizeof(double) * 2}}, {{next, 5, from_next.data(), sizeof(double) * 2}});
  comm->finish_exchange(second);
  comm->finish_exchange(first);
  EXPECT_EQ(from_next[0], double(next));
  EXPECT_EQ(from_prev[0], double(prev));
  EXPECT_THROW(comm->finish_exchange(first), logic_error) << "finished twice";
}

TEST(Communicator, ASilentPeerEndsInADistributedErrorWithinTheTimeout)
{
  auto const comm = world(std::chrono::milliseconds(500));
  if (comm->size() < 2) { GTEST_SKIP() << "needs two ranks"; }
  if (comm->rank() == 0) {
    double never = 0;
    auto const start = std::chrono::steady_clock::now();
    try {
      comm->exchange({}, {{1, 7, &never, sizeof never}});
      ADD_FAILURE() << "a receive no one sends to completed";
    } catch (distributed_error const& e) {
      EXPECT_EQ(e.failed_rank(), -1);
      EXPECT_NE(std::string(e.what()).find("no progress"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_TRUE(comm->broken());
    EXPECT_THROW(static_cast<void>(dist::gather_all(*comm, 1)), distributed_error) << "a broken communicator";
  }
}

TEST(Communicator, ARankThatFailsBeforeAnAllgatherMakesEveryOtherRankRaiseInIt)
{
  // The others wait in an allgather the failed rank never joins: they hear of the failure there
  // and take their messages back. (Over MPI_Iallgather, whose request MPI lets no one cancel,
  // taking it back was MPI's fatal error on some of them.)
  auto const comm = world(std::chrono::seconds(30));
  if (comm->size() < 2) { GTEST_SKIP() << "needs two ranks"; }
  int const failing = comm->size() - 1;
  if (comm->rank() == failing) {
    comm->announce_failure("it gave up before the allgather");
    EXPECT_TRUE(comm->broken());
    return;
  }
  auto const start = std::chrono::steady_clock::now();
  try {
    static_cast<void>(dist::gather_all(*comm, comm->rank()));
    ADD_FAILURE() << "an allgather without rank " << failing << " completed";
  } catch (distributed_error const& e) {
    EXPECT_EQ(e.failed_rank(), failing) << e.what();
    EXPECT_NE(std::string(e.what()).find("it gave up before the allgather"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "heard of it only at the timeout";
}

#endif

// ---- stencil segments on slabs ---------------------------------------------------------------------

/// Bytes of one rank's layer: the widest part's values (of the process grid `requested`, 0 x 0
/// the default), in whole records.
template <class T>
std::size_t rank_layer_bytes(st::grid<T> const& g, int dims, int fields, int ranks, st::ranks_grid requested = {})
{
  st::ranks_grid const grid = st::ranks_grid_of(ranks, dims, requested);
  auto const widest = [](std::size_t cells, int parts) { return (cells + std::size_t(parts) - 1) / std::size_t(parts); };
  std::size_t const outer = widest(g.extent(dims - 1), grid.outer);
  std::size_t const inner = dims == 1 ? 1 : widest(g.extent(dims - 2), grid.inner);
  std::size_t const values = outer * inner * (dims == 3 ? g.nx : 1) * std::size_t(fields);
  return (values + values_per_chunk<T> - 1) / values_per_chunk<T> * values_per_chunk<T> * sizeof(T);
}

/// One process's u_T and dL/du_0 over the whole grid, the bits every rank's part must have: the
/// reference, where it and the kernels are compiled alike (the CPU backend, the emulated device); on
/// a GPU, whose compiler may contract the kernels' arithmetic into FMAs unlike the host's, one rank's
/// slab of the whole grid on that GPU (checked against the reference within rounding).
template <class S, class T = typename S::value_type>
gradient_of<T> one_process(S const& s, st::grid<T> const& g, std::size_t steps, std::vector<T> const& u0)
{
  gradient_of<T> const reference = reference_gradient(s, g, steps, u0);
  if (reference_bits_hold) { return reference; }
  gradient_of<T> const one = slab_gradient(s, g, steps, run_settings{}, u0, std::make_shared<dist::single_rank>());
  std::size_t const values = g.cells() * S::fields;
  gradient_of<T> whole;
  whole.final_state.assign(one.final_state.begin(), one.final_state.begin() + std::ptrdiff_t(values));
  whole.gradient.assign(one.gradient.begin(), one.gradient.begin() + std::ptrdiff_t(values));
  double const rounding = sizeof(T) == 4 ? 1e-5 : 1e-12;
  EXPECT_LT(relative_difference(whole.final_state, reference.final_state), rounding) << "one GPU process's u_T";
  EXPECT_LT(relative_difference(whole.gradient, reference.gradient), rounding) << "one GPU process's gradient";
  return whole;
}

/// Every policy and the given segment lengths on this run's ranks, bit for bit against one process
/// over the whole grid.
template <class S, class T = typename S::value_type>
void check_slabs(S const& s, st::grid<T> const& g, std::size_t steps, std::vector<int> const& lengths, double lo,
                 double hi, std::shared_ptr<dist::communicator> comm = world(), st::ranks_grid ranks = {})
{
  std::vector<T> const u0 = random_state<T>(g.cells() * S::fields, 20261124u + unsigned(g.cells()), lo, hi);
  gradient_of<T> const whole = one_process(s, g, steps, u0);
  st::block const mine = rank_block(g, S::dims, *comm, ranks);
  for (int k : lengths) {
    for (tape_policy policy : {tape_policy::store, tape_policy::recompute, tape_policy::offload, tape_policy::automatic}) {
      SCOPED_TRACE("k = " + std::to_string(k) + ", policy " + std::string(to_string(policy)) + ", rank " +
                   std::to_string(comm->rank()) + " of " + std::to_string(comm->size()));
      run_settings r{k, policy, 0, ranks};
      std::size_t const segments = (steps + std::size_t(k) - 1) / std::size_t(k);
      if (policy == tape_policy::automatic) {
        // A budget of two layers: auto has to recompute, and plans the same on every rank.
        std::size_t const layer = rank_layer_bytes(g, S::dims, S::fields, comm->size(), ranks);
        r.budget_bytes = 2 * layer + layer * std::size_t(comm->rank());  // unequal: the least counts
        if (segments < 3) { continue; }
      }
      gradient_of<T> const got = slab_gradient(s, g, steps, r, u0, comm);
      std::vector<T> const want_state = part_values(whole.final_state, g, S::dims, S::fields, mine, got.final_state.size());
      std::vector<T> const want_gradient = part_values(whole.gradient, g, S::dims, S::fields, mine, got.gradient.size());
      EXPECT_TRUE(same_bits(got.final_state, want_state)) << "off by " << relative_difference(got.final_state, want_state);
      EXPECT_TRUE(same_bits(got.gradient, want_gradient)) << "off by " << relative_difference(got.gradient, want_gradient);
      EXPECT_EQ(got.stats.steps, segments);
      if (policy == tape_policy::automatic) {
        EXPECT_LT(got.stats.tiers.count(tier::device), segments) << "auto within two layers keeps fewer on the device";
      }
    }
  }
}

TEST(Slabs, AllenCahnPeriodicGivesTheBitsOfTheWholeGrid)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  allen_cahn_2d<float> const s{{0.1f, 0.2f}};
  check_slabs(s, st::grid<float>{23, 29, 1}, 7, {1, 3}, -1.0, 1.0);
}

TEST(Slabs, AllenCahnOnAFixedGridInDouble)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  allen_cahn_2d<double> const s{{0.1, 0.2}};
  check_slabs(s, st::grid<double>{13, 26, 1, st::boundary::fixed, 0.25}, 6, {2}, -1.0, 1.0);
}

TEST(Slabs, ScatterAdjointIn1dPeriodicAndFixed)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  burgers_1d<float> const s{0.3f, 0.1f};
  check_slabs(s, st::grid<float>{61}, 9, {1, 3}, 0.0, 1.0);
  check_slabs(s, st::grid<float>{45, 1, 1, st::boundary::fixed, 0.5f}, 5, {2}, 0.0, 1.0);
}

TEST(Slabs, ScatterAdjointIn2dWithSkewedTapsOnAFixedGrid)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  advection_2d<float> const s{0.2f, 0.1f};
  check_slabs(s, st::grid<float>{19, 19, 1, st::boundary::fixed, -0.5f}, 5, {2}, -1.0, 1.0);
}

TEST(Slabs, ACommunicatorOfDeviceMemoryGivesTheSameBits)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // MPI told that it moves device memory (the emulated device's is host memory, which it does): a
  // device runner hands it the state's faces and the planes its kernels read, without staging.
  auto const direct = std::make_shared<recording_ranks>(world(), true);
  allen_cahn_2d<float> const s{{0.1f, 0.2f}};
  check_slabs(s, st::grid<float>{23, 29, 1}, 7, {1, 3}, -1.0, 1.0, direct);
  EXPECT_FALSE(direct->sent.empty());
}

TEST(Slabs, TwoFieldsIn3d)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  gray_scott_3d<float> const s{0.1f, 0.05f, 0.04f, 0.06f};
  check_slabs(s, st::grid<float>{6, 7, 13}, 4, {2}, 0.0, 1.0);
}

// ---- blocks: the ranks as a process grid ----------------------------------------------------------------

/// The process grids of `ranks` ranks a test tries: the default, and, where they differ from it,
/// every rank a row (slabs along the last axis) and every rank a column (the axis before it cut
/// alone, the last one whole and periodic over one rank).
std::vector<st::ranks_grid> process_grids(int ranks)
{
  std::vector<st::ranks_grid> grids{{}};
  if (ranks > 1) {
    grids.push_back({ranks, 1});
    grids.push_back({1, ranks});
  }
  return grids;
}

std::string name_of(st::ranks_grid g) { return g.outer == 0 ? "default" : std::to_string(g.outer) + "x" + std::to_string(g.inner); }

TEST(Blocks, EveryProcessGridGivesTheBitsOfTheWholeGrid)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  for (st::ranks_grid const grid : process_grids(world()->size())) {
    SCOPED_TRACE("process grid " + name_of(grid));
    // k = 3 reads 3 cells past a face and grows every level's box on both cut axes: the corners'
    // ghost cells feed the levels near a block's corners.
    check_slabs(allen_cahn_2d<float>{{0.1f, 0.2f}}, st::grid<float>{23, 29, 1}, 7, {1, 3}, -1.0, 1.0, world(), grid);
    check_slabs(advection_2d<float>{0.2f, 0.1f}, st::grid<float>{19, 19, 1, st::boundary::fixed, -0.5f}, 5, {2}, -1.0,
                1.0, world(), grid);
    check_slabs(gray_scott_3d<float>{0.1f, 0.05f, 0.04f, 0.06f}, st::grid<float>{6, 13, 13}, 4, {2}, 0.0, 1.0, world(),
                grid);
  }
}

TEST(Blocks, ABlockThinnerAcrossThanTheSegmentReadsIsRefused)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world();
  if (comm->size() == 1) { GTEST_SKIP() << "one rank cuts nothing across"; }
  st::grid<float> const g{std::size_t(4 * comm->size()), 64, 1};  // columns of 4 cells, rows of 64
  st::segment_request request;
  request.k = 3;  // reads 5 cells past each face
  request.ranks = {1, comm->size()};
  EXPECT_THROW(static_cast<void>(st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *comm)),
               logic_error);
  request.k = 0;  // the planner keeps to what fits
  st::segment_plan const p = st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *world());
  EXPECT_LE(st::deepest_halo(st::segment_shape{p.k, st::reach::of<ac>()}), 4);
  EXPECT_EQ(p.ranks.outer, 1);
  EXPECT_EQ(p.ranks.inner, comm->size());
  request.ranks = {comm->size() + 1, 1};
  EXPECT_THROW(static_cast<void>(st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *world())),
               logic_error)
    << "a process grid of more ranks than the run's";
}

TEST(Blocks, RanksThatCutByDifferentProcessGridsAllRaise)
{
  // P x 1 on rank 0 and 1 x P on the others: parts of equal size on a square grid, so the layers
  // and the schedules agree, but each rank's neighbours would not (a hang in the first exchange).
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world(std::chrono::seconds(30));
  if (comm->size() == 1) { GTEST_SKIP() << "one rank has one process grid"; }
  st::grid<float> const g{std::size_t(8 * comm->size()), std::size_t(8 * comm->size()), 1};
  st::segment_request request;
  request.k = 2;
  request.ranks = comm->rank() == 0 ? st::ranks_grid{comm->size(), 1} : st::ranks_grid{1, comm->size()};
  try {
    static_cast<void>(st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *comm));
    ADD_FAILURE() << "rank " << comm->rank() << " planned";
  } catch (distributed_error const& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks disagree on the process grid"), std::string::npos) << e.what();
  }
}

/// On this run's ranks, every rank's part of u_T, dL/du_0 and dL/dc is the bits of one process's
/// over the whole grid, under store and recompute, for one-step and 3-step segments.
template <class S>
void check_slab_rates(S const& s, st::grid<double> const& g, std::size_t steps)
{
  auto const comm = world();
  std::vector<double> const u0 = random_state<double>(g.cells(), 31u, 0.1, 0.9);
  std::vector<double> const c = random_state<double>(g.cells(), 32u, 0.2, 1.5);
  st::block const mine = rank_block(g, S::dims, *comm);
  for (int k : {1, 3}) {
    rates_run const whole = run_rates(s, g, steps, k, tape_policy::store, u0, c, nullptr);
    for (tape_policy policy : {tape_policy::store, tape_policy::recompute}) {
      SCOPED_TRACE("k = " + std::to_string(k) + ", policy " + std::string(to_string(policy)) + ", rank " +
                   std::to_string(comm->rank()) + " of " + std::to_string(comm->size()));
      rates_run const got = run_rates(s, g, steps, k, policy, u0, c, comm);
      std::vector<double> const want_state = part_values(whole.state.final_state, g, S::dims, 1, mine, got.state.final_state.size());
      std::vector<double> const want_gradient = part_values(whole.state.gradient, g, S::dims, 1, mine, got.state.gradient.size());
      std::vector<double> const want_dc = part_values(whole.dc, g, S::dims, 1, mine, got.dc.size());
      EXPECT_TRUE(same_bits(got.state.final_state, want_state));
      EXPECT_TRUE(same_bits(got.state.gradient, want_gradient))
        << "off by " << relative_difference(got.state.gradient, want_gradient);
      EXPECT_TRUE(same_bits(got.dc, want_dc)) << "off by " << relative_difference(got.dc, want_dc);
    }
  }
}

TEST(Slabs, CoefficientsGiveTheBitsOfTheWholeGridInBothAdjointForms)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // Rates per cell, whose ghost planes the ranks exchange once; the adjoint reads them at its taps
  // (gather) or at the reading cell (scatter), so a rank reads its neighbours' rates. The source
  // sits near a face of the first slab.
  for (auto const& g : {st::grid<double>{37, 1, 1}, st::grid<double>{31, 1, 1, st::boundary::fixed, 0.3}}) {
    SCOPED_TRACE(std::string(st::to_string(g.edge)));
    check_slab_rates(logistic_1d_gather<double>{{0.2, 6}}, g, 8);
    check_slab_rates(logistic_1d_scatter<double>{{0.2, 6}}, g, 8);
  }
}

TEST(Slabs, AParameterEveryRankHoldsHasItsAdjointSummedInRankOrder)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  // One rate θ for every cell of a logistic line, held by every rank: dL/dθ is Σ dL/dc over the
  // cells. Each rank adds its own cells' part in cell order; sum_in_rank_order adds the parts.
  auto const comm = world();
  logistic_1d_gather<double> const s{{0.2, 6}};
  st::grid<double> const g{37, 1, 1};
  std::vector<double> const u0 = random_state<double>(g.cells(), 33u, 0.1, 0.9);
  std::vector<double> const theta(g.cells(), 0.7);
  auto const dl_dtheta = [&] {
    rates_run const r = run_rates(s, g, 8, 3, tape_policy::recompute, u0, theta, comm);
    std::vector<double> mine{0.0};
    for (double d : r.dc) { mine[0] += d; }
    dist::sum_in_rank_order(*comm, mine);
    return mine[0];
  };
  double const first = dl_dtheta();
  EXPECT_EQ(dl_dtheta(), first) << "the same run gives the same bits";
  rates_run const whole = run_rates(s, g, 8, 3, tape_policy::store, u0, theta, nullptr);
  double one = 0;
  for (double d : whole.dc) { one += d; }
  EXPECT_NE(one, 0.0);
  EXPECT_NEAR(first, one, 1e-13 * std::abs(one)) << "one process adds the cells in another order";
}

TEST(Slabs, ASegmentDeeperThanTheThinnestSlabIsRefusedOnEveryRank)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world();
  st::grid<float> const g{16, std::size_t(4 * comm->size()), 1};  // slabs of 4 planes
  st::segment_request request;
  request.k = 3;  // reads 5 planes past each face
  request.ranks = {comm->size(), 1};
  EXPECT_THROW(static_cast<void>(st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *comm)),
               logic_error);
  request.k = 0;  // the planner keeps to what fits (on a new communicator: the refusal broke the last)
  st::segment_plan const p = st::plan_slab_segments<ac>(g, 6, query_device_limits(target), request, *world());
  EXPECT_LE(st::deepest_halo(st::segment_shape{p.k, st::reach::of<ac>()}), 4);
}

// ---- a workload over ranks ----------------------------------------------------------------------------

TEST(Workloads, TheWaveOverRanksGivesTheOneProcessLossAndGradient)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  namespace wv = workloads::wave;
  // In 2-D the receivers' row lies on the first slab; in 3-D on a middle one. Each rank reads its
  // neighbours' m through the coefficients' ghost planes, and only the rank with the receivers
  // records traces; m and d are the same on every rank (the same seed).
  wv::problem flat;
  flat.nx = 14;
  flat.ny = 17;
  flat.steps = 10;
  flat.peak_frequency = 0.3;
  wv::problem cube = wv::description::test_problem();
  cube.nz = 13;
  cube.steps = 6;
  for (wv::problem const& p : {flat, cube}) {
    SCOPED_TRACE(wv::description::size_key(p, "f32"));
    std::vector<std::vector<float>> const in = wv::description::random_inputs<float>(p, 41u);
    wv::options one;
    one.kind = target;
    one.poison = true;
    one.policy = tape_policy::store;
    wv::gradient_result<float> const want = wv::gradient(p, in[0], in[1], one);  // one process, one step a layer
    auto const ranks = world();
    // Every policy at each segment length; auto within two of this rank's layers (a state of two
    // fields on the widest slab), unequal over the ranks: the least counts.
    std::size_t const layer = rank_layer_bytes(st::grid<float>{p.nx, p.ny, p.nz}, p.nz > 1 ? 3 : 2, 2, ranks->size());
    for (auto const& [k, policy] : {std::pair{1, tape_policy::store}, std::pair{1, tape_policy::offload},
                                   std::pair{2, tape_policy::recompute}, std::pair{2, tape_policy::automatic}}) {
      wv::options o = one;
      o.segment = k;
      o.ranks = ranks;
      o.policy = policy;
      o.budget_bytes = policy == tape_policy::automatic ? (2 + std::size_t(ranks->rank())) * layer : 0;
      SCOPED_TRACE("segment " + std::to_string(k) + ", policy " + std::string(to_string(policy)) + " on rank " +
                   std::to_string(o.ranks->rank()) + " of " + std::to_string(o.ranks->size()));
      wv::gradient_result<float> const got = wv::gradient(p, in[0], in[1], o);
      EXPECT_EQ(got.loss, want.loss);
      if (on_gpu && !emulated) {
        EXPECT_LT(relative_difference(got.gradient, want.gradient), 1e-6) << "kernels compiled apart may contract apart";
      } else {
        EXPECT_TRUE(same_bits(got.gradient, want.gradient)) << "off by " << relative_difference(got.gradient, want.gradient);
      }
    }
  }
}

// ---- one schedule -----------------------------------------------------------------------------------

TEST(OneSchedule, RanksWithDifferentBudgetsPlanWithTheLeast)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world();
  ac const s{{0.1f, 0.2f}};
  st::grid<float> const g{16, 24, 1};
  std::vector<float> const u0 = random_state<float>(g.cells(), 5u, -1.0, 1.0);
  std::size_t const layer = rank_layer_bytes(g, 2, 1, comm->size());
  std::size_t const least = 3 * layer;
  run_settings r{1, tape_policy::automatic, least + std::size_t(comm->rank()) * 5 * layer};
  gradient_of<float> const got = slab_gradient(s, g, 12, r, u0, comm);
  EXPECT_EQ(got.stats.budget_bytes, least) << "every rank plans with the least budget";
  EXPECT_LT(got.stats.tiers.count(tier::device), got.stats.steps) << "the least budget moves layers off the device";
  // What each rank did, beyond what it planned: the same on every rank.
  struct done {
    std::size_t recomputed, prefetched;
  };
  for (done const& other : dist::gather_all(*comm, done{got.stats.recompute_steps, got.stats.prefetches})) {
    EXPECT_EQ(other.recomputed, got.stats.recompute_steps) << "steps recomputed";
    EXPECT_EQ(other.prefetched, got.stats.prefetches) << "layers prefetched";
  }
  gradient_of<float> const whole = one_process(s, g, 12, u0);
  st::block const mine = rank_block(g, 2, *comm);
  EXPECT_TRUE(same_bits(got.gradient, part_values(whole.gradient, g, 2, 1, mine, got.gradient.size())));
}

TEST(OneSchedule, RanksThatWouldRunDifferentSchedulesAllRaiseBeforeTheFirstStep)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world();
  if (comm->size() < 2) { GTEST_SKIP() << "needs two ranks"; }
  ac const s{{0.1f, 0.2f}};
  st::grid<float> const g{16, 24, 1};
  st::segment_plan const plan =
    st::plan_slab_segments<ac>(g, 8, query_device_limits(target), st::segment_request{1, {8, 8, 1}, 64, 0}, *comm);
  auto step = make_slab_segments(s, g, plan, comm);
  chain_options o;
  o.kind = target;
  o.collective = comm;
  // Program bugs, each caught on every rank before anything runs: what decides which meetings
  // planning holds (the policy, measure_steps, step costs given on some ranks only), and then the
  // schedule itself (tiles of another size on one rank).
  auto const raises = [&](chain_options const& differing, char const* says) {
    SCOPED_TRACE(says);
    try {
      chain<decltype(step)> c(step, step.segments(), differing);
      ADD_FAILURE() << "a chain was made on rank " << comm->rank();
    } catch (distributed_error const& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  chain_options policy = o;
  policy.policy = comm->rank() == 0 ? tape_policy::store : tape_policy::recompute;
  raises(policy, "the chain's policy, measure_steps and number of step costs");
  chain_options measured = o;
  measured.policy = tape_policy::automatic;
  measured.measure_steps = comm->rank() == 0;
  raises(measured, "the chain's policy, measure_steps and number of step costs");
  chain_options costs = o;
  if (comm->rank() == 0) { costs.step_costs = {step_cost{1.0, 2.0, 3.0}}; }
  raises(costs, "the chain's policy, measure_steps and number of step costs");
  chain_options tiles = o;
  tiles.pipeline.tile_records = comm->rank() == 0 ? 32 : 64;
  raises(tiles, "the chain's schedule");
}

// ---- failure ------------------------------------------------------------------------------------------

/// Segments whose forward throws on one rank at one segment, as a bad input or a failed
/// allocation would.
template <class Base>
struct failing_step : Base {
  failing_step(Base base, int this_rank, int fails_on, std::size_t segment)
    : Base(std::move(base)), rank(this_rank), failing_rank(fails_on), failing_segment(segment)
  {
  }
  int rank;
  int failing_rank;
  std::size_t failing_segment;

  void forward(std::size_t j, typename Base::value_type const* in, typename Base::value_type* out, stream_view st) const
  {
    fail_at(j);
    Base::forward(j, in, out, st);
  }
  void augmented_forward(std::size_t j, typename Base::value_type const* in, typename Base::value_type* out,
                         tape_writer<typename Base::record_type> tape, stream_view st) const
  {
    fail_at(j);
    Base::augmented_forward(j, in, out, tape, st);
  }
  void fail_at(std::size_t j) const
  {
    if (rank == failing_rank && j == failing_segment) { throw logic_error("segment " + std::to_string(j) + " failed"); }
  }
};

TEST(Failure, ARankWhoseStepThrowsMakesEveryRankRaise)
{
  if constexpr (on_gpu) { TAPEFLOW_REQUIRE_DEVICE(target); }
  auto const comm = world(std::chrono::seconds(30));
  ac const s{{0.1f, 0.2f}};
  st::grid<float> const g{16, 24, 1};
  st::segment_plan const plan =
    st::plan_slab_segments<ac>(g, 6, query_device_limits(target), st::segment_request{2, {8, 8, 1}, 64, 0}, *comm);
  using base = decltype(make_slab_segments(s, g, plan, comm));
  failing_step<base> const step(make_slab_segments(s, g, plan, comm), comm->rank(), comm->size() - 1, 1);
  chain_options o;
  o.kind = target;
  o.collective = comm;
  chain<failing_step<base>> c(step, step.segments(), o);
  std::vector<float> const u0 = random_state<float>(step.state_size(), 3u, -1.0, 1.0);
  device_buffer state(target, u0.size() * sizeof(float), {});
  state.upload(u0.data(), u0.size() * sizeof(float), {});
  auto const start = std::chrono::steady_clock::now();
  if (comm->rank() == comm->size() - 1) {
    EXPECT_THROW(c.forward(state), logic_error);
  } else {
    try {
      c.forward(state);
      ADD_FAILURE() << "rank " << comm->rank() << " finished a forward whose rank " << comm->size() - 1 << " failed";
    } catch (distributed_error const& e) {
      EXPECT_EQ(e.failed_rank(), comm->size() - 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("segment 1 failed"), std::string::npos) << e.what();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "failing took as long as a timeout";
}

}  // namespace
}  // namespace tapeflow::testing

