// SPDX-License-Identifier: Apache-2.0
// The distributed layer in one process (no MPI needed; part of tapeflow_tests): the one-rank
// communicator, how a grid is cut into slabs, and the schedule fingerprint the ranks compare. A
// one-rank slab on each backend is in tests/stencil/segment_tests.hpp; the runs over several ranks
// are tests/distributed/rank_tests.hpp, under mpiexec.
#include "../stencil/reference.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/chain_options.hpp>
#include <tapeflow/detail/collective_plan.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stencil/cpu.hpp>
#include <tapeflow/stencil/slab.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::testing {
namespace {

namespace st = tapeflow::stencil;
namespace dist = tapeflow::distributed;

TEST(SingleRank, GathersAndExchangesWithItself)
{
  dist::single_rank one;
  EXPECT_EQ(dist::gather_all(one, 42), std::vector<int>{42});
  EXPECT_EQ(dist::sum_in_rank_order(one, 2.5), 2.5);
  std::vector<double> costs{1.0, 3.0};
  dist::max_over_ranks(one, costs);
  EXPECT_EQ(costs, (std::vector<double>{1.0, 3.0}));
  EXPECT_NO_THROW(dist::require_same(one, 7u, "a number"));

  int const a = 1;
  int const b = 2;
  int to_a = 0;
  int to_b = 0;
  // Matched by tag, not by the order they are listed in.
  one.exchange({{0, 5, &b, sizeof b}, {0, 4, &a, sizeof a}}, {{0, 4, &to_a, sizeof to_a}, {0, 5, &to_b, sizeof to_b}});
  EXPECT_EQ(to_a, 1);
  EXPECT_EQ(to_b, 2);
  EXPECT_THROW(one.exchange({}, {{0, 4, &to_a, sizeof to_a}}), logic_error) << "a receive nothing sends to";
  EXPECT_THROW(one.exchange({{0, 4, &a, sizeof a}}, {}), logic_error) << "a send nothing receives";
  EXPECT_THROW(one.exchange({{1, 4, &a, sizeof a}}, {{1, 4, &to_a, sizeof to_a}}), logic_error) << "rank 1 of 1";
  EXPECT_THROW(one.exchange({{0, 32767, &a, sizeof a}}, {{0, 32767, &to_a, sizeof to_a}}), logic_error) << "tag";

  // Exchanges pending together, finished in any order, each once.
  dist::exchange_ticket const first = one.start_exchange({{0, 1, &a, sizeof a}}, {{0, 1, &to_b, sizeof to_b}});
  dist::exchange_ticket const second = one.start_exchange({{0, 1, &b, sizeof b}}, {{0, 1, &to_a, sizeof to_a}});
  EXPECT_NE(first, second);
  one.finish_exchange(second);
  one.finish_exchange(first);
  EXPECT_EQ(to_a, 2);
  EXPECT_EQ(to_b, 1);
  EXPECT_THROW(one.finish_exchange(first), logic_error) << "finished twice";
}

TEST(SingleRank, CollectivelyAnnouncesWhatThrowsAndRethrowsIt)
{
  struct listening : dist::communicator {
    std::string heard;
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return 1; }
    void allgather(void const*, void*, std::size_t) override {}
    dist::exchange_ticket start_exchange(std::vector<dist::outgoing> const&, std::vector<dist::incoming> const&) override
    {
      return 0;
    }
    void finish_exchange(dist::exchange_ticket) override {}
    void announce_failure(std::string const& what) noexcept override { heard = what; }
  } comm;
  EXPECT_EQ(dist::collectively(comm, [] { return 3; }), 3);
  EXPECT_TRUE(comm.heard.empty());
  EXPECT_THROW(dist::collectively(comm, []() -> int { throw logic_error("bad input"); }), logic_error);
  EXPECT_EQ(comm.heard, "bad input");
  comm.heard.clear();
  EXPECT_THROW(dist::collectively(comm, []() -> int { throw distributed_error("known", 2); }), distributed_error);
  EXPECT_TRUE(comm.heard.empty()) << "a distributed error is known to every rank already";
}

TEST(Slab, CutsPlanesEvenlyWithTheRemainderFirst)
{
  std::size_t next = 0;
  for (int r = 0; r < 3; ++r) {
    stencil::slab const s = stencil::slab::of(29, 3, r);
    EXPECT_EQ(s.offset, next);
    EXPECT_EQ(s.extent, r < 2 ? 10u : 9u);
    EXPECT_EQ(s.thinnest(), 9u);
    next += s.extent;
  }
  EXPECT_EQ(next, 29u);
  EXPECT_THROW(static_cast<void>(stencil::slab::of(3, 4, 0)), logic_error) << "a rank with no plane";
  EXPECT_THROW(static_cast<void>(stencil::slab::of(8, 2, 2)), logic_error) << "no such rank";
}

TEST(Blocks, TheDefaultProcessGridIsTheMostSquareWithItsLargerFactorOutside)
{
  auto const grid = [](int ranks, int dims) {
    st::ranks_grid const g = st::ranks_grid_for(ranks, dims);
    return std::to_string(g.outer) + "x" + std::to_string(g.inner);
  };
  EXPECT_EQ(grid(1, 2), "1x1");
  EXPECT_EQ(grid(2, 2), "2x1");
  EXPECT_EQ(grid(3, 3), "3x1");
  EXPECT_EQ(grid(4, 2), "2x2");
  EXPECT_EQ(grid(6, 3), "3x2");
  EXPECT_EQ(grid(12, 2), "4x3");
  EXPECT_EQ(grid(16, 1), "16x1") << "a 1-D grid is cut into slabs only";
  EXPECT_EQ(st::ranks_grid_of(6, 2, {2, 3}).inner, 3);
  EXPECT_THROW(static_cast<void>(st::ranks_grid_of(6, 2, {2, 2})), logic_error) << "4 ranks, not 6";
  EXPECT_THROW(static_cast<void>(st::ranks_grid_of(4, 1, {2, 2})), logic_error) << "a 1-D grid cut twice";
  // Rank r is row r / inner, column r % inner; each axis cut as slab::of cuts it.
  st::block const b = st::block::of(29, 10, {3, 2}, 5);
  EXPECT_EQ(b.outer.rank, 2);
  EXPECT_EQ(b.inner.rank, 1);
  EXPECT_EQ(b.outer.offset, 20u);
  EXPECT_EQ(b.outer.extent, 9u);
  EXPECT_EQ(b.inner.offset, 5u);
  EXPECT_EQ(b.rank(), 5);
  EXPECT_EQ(b.thinnest(), 5u);
  EXPECT_EQ(b.neighbour(+1, +1, true), 0) << "past the last row and column: wraps to rank 0";
  EXPECT_EQ(b.neighbour(+1, 0, false), -1) << "past a fixed grid's edge";
  EXPECT_EQ(b.neighbour(-1, -1, false), 2);
}

TEST(Blocks, ATileRangeWalksItsRectangleOrEverythingElseOnce)
{
  // 5 rows x 4 columns of positions, 3 tiles wide each: numbers (row * 4 + col) * 3 + w.
  for (bool outside : {false, true}) {
    st::tile_range const r{5, 4, 3, 1, 4, 1, 3, outside};
    std::vector<std::size_t> got;
    for (std::size_t i = 0; i < r.size(); ++i) { got.push_back(r[i]); }
    std::vector<std::size_t> want;
    for (std::size_t t = 0; t < 60; ++t) {
      std::size_t const row = t / 12;
      std::size_t const col = (t / 3) % 4;
      bool const in = row >= 1 && row < 4 && col >= 1 && col < 3;
      if (in != outside) { want.push_back(t); }
    }
    EXPECT_EQ(got, want) << (outside ? "outside" : "inside");
  }
  EXPECT_EQ(st::tile_range::all(7).size(), 7u);
  EXPECT_EQ(st::tile_range::all(7)[6], 6u);
}

TEST(Blocks, TheFacesSentAreTheCellsNextToEachSideInTheGhostLayout)
{
  // A block of 3 planes x 4 cells x 2 (rest), depth 1: 8 pieces per field.
  st::ghost_layout const l{1, 3, 4, 2, true};
  EXPECT_EQ(l.values(2), 2 * (2 * 4 * 2 + 2 * 3 * 2 + 4 * 2));
  std::vector<int> state(2 * 3 * 4 * 2);
  for (std::size_t i = 0; i < state.size(); ++i) { state[i] = int(i); }
  auto const cell = [](int f, int o, int i, int r) { return f * 24 + (o * 4 + i) * 2 + r; };
  auto const face = [&](int f, int p, std::size_t v) { return st::face_value(l, state.data(), 24, l.offset(f, p) + v); };
  EXPECT_EQ(face(0, 0, 0), cell(0, 0, 0, 0));       // below: the first plane
  EXPECT_EQ(face(1, 1, 3), cell(1, 2, 1, 1));       // above: the last plane
  EXPECT_EQ(face(0, 2, 2), cell(0, 1, 0, 0));       // left: the first column of every plane
  EXPECT_EQ(face(0, 3, 5), cell(0, 2, 3, 1));       // right: the last column
  EXPECT_EQ(face(1, 7, 1), cell(1, 2, 3, 1));       // above-right: the last plane's last column
  EXPECT_EQ(face(0, 4, 0), cell(0, 0, 0, 0));       // below-left
  EXPECT_EQ(st::ghost_layout::piece_of(+1, -1), 6);
  EXPECT_EQ(st::ghost_layout::outer_side(6), +1);
  EXPECT_EQ(st::ghost_layout::inner_side(6), -1);
}

TEST(Slab, AGhostExchangeRefusesASlabThinnerThanItsDepth)
{
  auto const one = std::make_shared<dist::single_rank>();
  st::grid<float> const g{8, 4, 1};
  EXPECT_THROW(st::ghost_exchange<float>(one, st::block{st::slab::of(4, 1, 0)}, g, 2, 1, 5), logic_error);
  st::ghost_exchange<float> ok(one, st::block{st::slab::of(4, 1, 0)}, g, 2, 1, 4);
  std::vector<float> state(32, 1.0f);
  EXPECT_THROW(static_cast<void>(ok.fill(state.data(), 5)), logic_error) << "deeper than it was made for";
  EXPECT_THROW(static_cast<void>(ok.finish()), logic_error) << "nothing started";
  ok.start(state.data(), 2);
  EXPECT_THROW(ok.start(state.data(), 2), logic_error) << "started twice";
  EXPECT_EQ(ok.finish().depth, 2);
  EXPECT_THROW(st::ghost_exchange<float>(one, st::block{st::slab::of(8, 2, 0)}, g, 2, 1, 1), logic_error)
    << "a slab of 2 ranks on a communicator of 1";
}

/// One rank that calls on_finish() as each of its exchanges finishes: what ran before that
/// overlapped the exchange.
class watched_rank final : public dist::communicator {
 public:
  std::function<void()> on_finish;

  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  void allgather(void const* send, void* receive, std::size_t bytes) override { one_.allgather(send, receive, bytes); }
  dist::exchange_ticket start_exchange(std::vector<dist::outgoing> const& sends,
                                       std::vector<dist::incoming> const& receives) override
  {
    return one_.start_exchange(sends, receives);
  }
  void finish_exchange(dist::exchange_ticket ticket) override
  {
    if (on_finish) { on_finish(); }
    one_.finish_exchange(ticket);
  }
  void announce_failure(std::string const&) noexcept override {}

 private:
  dist::single_rank one_;
};

TEST(Slab, InteriorTilesRunWhileTheGhostPlanesTravel)
{
  using S = tapeflow::testing::stencils::advection_2d<double>;  // reaches 1 cell a step
  S const s{0.3, 0.1};
  st::grid<double> const g{12, 40, 1};
  auto const comm = std::make_shared<watched_rank>();
  st::segment_request request;
  request.k = 2;
  request.tile = {6, 5, 1};
  device_limits const cpu = query_device_limits(backend::cpu);
  st::segment_plan const plan = st::plan_slab_segments<S>(g, 4, cpu, request, *comm);
  st::cpu_runner<S> const slab(s, g, plan, comm);  // one rank's slab: its ghost planes from itself
  st::cpu_runner<S> const whole(s, g, plan);

  // The forward of 2 steps reads 2 rows past a tile: the tile rows at y = 5 .. 34 read no ghost
  // plane (30 rows of 12 cells), the two at each face do.
  std::size_t const interior = 30 * 12;
  auto const written = [](std::vector<double> const& v) {
    return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](double x) { return !std::isnan(x); }));
  };
  std::vector<double> const in = random_state<double>(g.cells(), 5u, -1.0, 1.0);
  std::vector<double> out(g.cells(), std::nan(""));
  std::size_t written_at_finish = 0;
  comm->on_finish = [&] { written_at_finish = written(out); };
  slab.advance(0, 2, in.data(), out.data(), {});
  EXPECT_EQ(written_at_finish, interior) << "the interior tiles ran before the exchange was waited for";
  std::vector<double> want(g.cells());
  whole.advance(0, 2, in.data(), want.data(), {});
  EXPECT_EQ(out, want);

  // The reverse of 2 steps reads 3 rows of the checkpoint past a tile: the tile rows at y = 5 .. 34
  // still.
  std::vector<double> const lambda = random_state<double>(g.cells(), 6u, -1.0, 1.0);
  std::vector<double> lambda_in(g.cells(), std::nan(""));
  std::size_t written_at_first_finish = 0;
  bool first_finish = true;
  comm->on_finish = [&] {
    if (std::exchange(first_finish, false)) { written_at_first_finish = written(lambda_in); }
  };
  slab.reverse(0, 2, in.data(), lambda.data(), lambda_in.data(), nullptr, {});
  EXPECT_EQ(written_at_first_finish, interior);
  std::vector<double> want_lambda(g.cells());
  whole.reverse(0, 2, in.data(), lambda.data(), want_lambda.data(), nullptr, {});
  EXPECT_EQ(lambda_in, want_lambda);
}

TEST(Slab, ThePlannerKeepsSegmentsWithinTheThinnestSlab)
{
  using burgers = tapeflow::testing::stencils::burgers_1d<float>;  // one step reads 2 cells past a face
  st::grid<float> const g{64};
  device_limits const cpu = query_device_limits(backend::cpu);
  st::segment_request request;
  request.max_halo = -1;
  EXPECT_THROW(static_cast<void>(st::plan_segments<burgers>(g, 8, cpu, request)), logic_error) << "a negative limit";
  request.max_halo = 1;
  EXPECT_THROW(static_cast<void>(st::plan_segments<burgers>(g, 8, cpu, request)), logic_error) << "no step fits";
  request.max_halo = 6;
  st::segment_plan const p = st::plan_segments<burgers>(g, 8, cpu, request);
  EXPECT_LE(st::deepest_halo(st::segment_shape{p.k, st::reach::of<burgers>()}), 6);
}

TEST(OneSchedule, TheFingerprintTellsSchedulesApart)
{
  // 8 steps, each a layer of 8 records of 64 bytes, over a state of 512 bytes.
  chain_options o;
  o.policy = tape_policy::store;
  chain_stats const store = plan_chain(64, 8, 8, 512, o);
  o.policy = tape_policy::recompute;
  o.budget_bytes = 3 * 512;
  chain_stats const recompute = plan_chain(64, 8, 8, 512, o);
  chain_stats const again = plan_chain(64, 8, 8, 512, o);
  EXPECT_EQ(detail::schedule_fingerprint(recompute, 8), detail::schedule_fingerprint(again, 8));
  EXPECT_NE(detail::schedule_fingerprint(store, 8), detail::schedule_fingerprint(recompute, 8));
}

}  // namespace
}  // namespace tapeflow::testing
