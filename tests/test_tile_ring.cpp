// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/backend.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/tape.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace tapeflow {
namespace {

using rec = value_record<std::uint32_t, 4>;

pipeline_plan cpu_plan(std::size_t records, std::size_t tile, int stages)
{
  pipeline_request r{sizeof(rec), records, tile, stages};
  return plan_pipeline(query_device_limits(backend::cpu), r);
}

layer& filled_layer(tape& t, pipeline_plan const& p)
{
  layer& l = t.push<rec>(p.records, p.tile_records);
  tape_writer<rec> w = l.writer<rec>();
  for (std::size_t i = 0; i < p.records; ++i) {
    auto const v = static_cast<std::uint32_t>(i);
    w.write(i, rec{{v, v * 3u, ~v, 42u}});
  }
  l.commit();
  return l;
}

class TileRing : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, int>> {};

TEST_P(TileRing, StagesEveryTileLastFirstWithinTheRing)
{
  auto const [records, tile, stages] = GetParam();
  pipeline_plan const p = cpu_plan(records, tile, stages);
  tape t(backend::cpu);
  layer& l = filled_layer(t, p);
  cpu::tile_ring<rec> ring(p);
  std::vector<int> seen(records, 0);
  std::size_t expected_tile = p.tiles;
  ring.reverse(l.reader<rec>(), [&](std::size_t tile_index, rec const* staged, std::size_t first, std::size_t count) {
    EXPECT_EQ(tile_index, --expected_tile);
    EXPECT_EQ(first, tile_index * p.tile_records);
    // The staged copy is in the ring, not the tape.
    EXPECT_NE(staged, l.reader<rec>().tile(tile_index));
    for (std::size_t i = 0; i < count; ++i) {
      auto const v = static_cast<std::uint32_t>(first + i);
      EXPECT_EQ(staged[i].values[0], v);
      EXPECT_EQ(staged[i].values[1], v * 3u);
      EXPECT_EQ(staged[i].values[2], ~v);
      ++seen[first + i];
    }
  });
  EXPECT_EQ(expected_tile, 0u);
  for (std::size_t i = 0; i < records; ++i) { ASSERT_EQ(seen[i], 1) << "record " << i; }
  EXPECT_EQ(ring.stats().tiles, p.tiles);
  EXPECT_LE(ring.stats().max_in_flight, static_cast<std::size_t>(stages));
  EXPECT_GE(ring.stats().max_in_flight, 1u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TileRing,
                         ::testing::Values(std::make_tuple(1, 1, 2), std::make_tuple(10, 3, 2),
                                           std::make_tuple(1000, 7, 3), std::make_tuple(4096, 64, 8),
                                           std::make_tuple(333, 1000, 4)));

TEST(TileRingFlow, ASlowConsumerFillsTheRingAndStopsTheWorker)
{
  pipeline_plan const p = cpu_plan(64, 4, 3);
  tape t(backend::cpu);
  layer& l = filled_layer(t, p);
  cpu::tile_ring<rec> ring(p);
  ring.reverse(l.reader<rec>(), [&](std::size_t, rec const*, std::size_t, std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  EXPECT_EQ(ring.stats().max_in_flight, 3u);  // the worker ran ahead as far as the ring allows
  EXPECT_GT(ring.stats().producer_waits, 0u);
}

TEST(TileRingFlow, AConsumerExceptionStopsTheWorkerAndTheRingStaysUsable)
{
  pipeline_plan const p = cpu_plan(100, 5, 2);
  tape t(backend::cpu);
  layer& l = filled_layer(t, p);
  cpu::tile_ring<rec> ring(p);
  std::size_t calls = 0;
  EXPECT_THROW(ring.reverse(l.reader<rec>(),
                            [&](std::size_t, rec const*, std::size_t, std::size_t) {
                              if (++calls == 3) { throw std::runtime_error("consumer failed"); }
                            }),
               std::runtime_error);
  std::size_t tiles = 0;
  ring.reverse(l.reader<rec>(), [&](std::size_t, rec const*, std::size_t, std::size_t) { ++tiles; });
  EXPECT_EQ(tiles, p.tiles);
}

TEST(TileRingFlow, MismatchedPlansAreErrors)
{
  pipeline_plan const p = cpu_plan(100, 5, 2);
  tape t(backend::cpu);
  layer& l = t.push<rec>(100, 10);
  l.commit();
  cpu::tile_ring<rec> ring(p);
  EXPECT_THROW(ring.reverse(l.reader<rec>(), [](std::size_t, rec const*, std::size_t, std::size_t) {}), logic_error);
  pipeline_plan wrong = p;
  wrong.record_bytes = 32;
  EXPECT_THROW(cpu::tile_ring<rec>{wrong}, logic_error);
}

}  // namespace
}  // namespace tapeflow
