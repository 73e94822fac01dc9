// SPDX-License-Identifier: Apache-2.0
// The CPU backend's machinery: the thread pool, the persistent staging threads, cpu::reverse_tiles
// in place and through the ring, halo windows, the memory pool.
#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/halo.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow {
namespace {

/// Restores the pool's default thread count when a test ends.
struct scoped_threads {
  explicit scoped_threads(std::size_t n) { cpu::set_threads(n); }
  ~scoped_threads() { cpu::set_threads(0); }
  scoped_threads(scoped_threads const&) = delete;
  scoped_threads& operator=(scoped_threads const&) = delete;
};

TEST(ThreadPool, EveryIndexIsVisitedOnceInRangesOfTheGrain)
{
  for (std::size_t threads : {1u, 2u, 3u}) {
    scoped_threads t(threads);
    EXPECT_EQ(cpu::threads(), threads);
    for (std::size_t count : {0u, 1u, 7u, 100u, 1001u}) {
      for (std::size_t grain : {0u, 1u, 3u, 64u, 5000u}) {
        std::vector<std::atomic<int>> seen(count);
        std::atomic<std::size_t> bad_ranges{0};
        cpu::parallel_for(count, grain, [&](std::size_t begin, std::size_t end) {
          std::size_t const g = grain == 0 ? 1 : grain;
          if (begin % g != 0 || end - begin > g || end <= begin || end > count) { ++bad_ranges; }
          for (std::size_t i = begin; i < end; ++i) { ++seen[i]; }
        });
        EXPECT_EQ(bad_ranges.load(), 0u);
        for (std::size_t i = 0; i < count; ++i) { ASSERT_EQ(seen[i].load(), 1) << i << " of " << count; }
      }
    }
  }
}

TEST(ThreadPool, WorkersTakeChunksBesideTheCaller)
{
  scoped_threads t(2);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  cpu::parallel_for(40, 1, [&](std::size_t, std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for a worker to wake
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);  // the caller works too
}

TEST(ThreadPool, OneThreadRunsEverythingOnTheCaller)
{
  scoped_threads t(1);
  std::set<std::thread::id> ids;
  cpu::parallel_for(50, 1, [&](std::size_t, std::size_t) { ids.insert(std::this_thread::get_id()); });
  EXPECT_EQ(ids, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, AnExceptionStopsTheLoopAndThePoolStaysUsable)
{
  {
    scoped_threads t(1);  // in order on the caller: nothing runs after the failing chunk
    std::size_t ran = 0;
    EXPECT_THROW(cpu::parallel_for(1000, 1,
                                   [&](std::size_t begin, std::size_t) {
                                     ++ran;
                                     if (begin == 3) { throw std::runtime_error("chunk 3 failed"); }
                                   }),
                 std::runtime_error);
    EXPECT_EQ(ran, 4u);
  }
  scoped_threads t(2);
  // A worker's exception reaches the caller (chunks sleep so that the worker joins in).
  std::thread::id const caller = std::this_thread::get_id();
  std::atomic<std::size_t> ran{0};
  EXPECT_THROW(cpu::parallel_for(200, 1,
                                 [&](std::size_t, std::size_t) {
                                   ++ran;
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                   if (std::this_thread::get_id() != caller) { throw std::runtime_error("worker"); }
                                 }),
               std::runtime_error);
  EXPECT_LT(ran.load(), 200u);  // the failure stopped the handing out of chunks
  std::atomic<std::size_t> sum{0};
  cpu::parallel_for(100, 7, [&](std::size_t begin, std::size_t end) { sum += end - begin; });
  EXPECT_EQ(sum.load(), 100u);
}

TEST(ThreadPool, NestedAndConcurrentLoopsComplete)
{
  scoped_threads t(2);
  // A loop inside a loop body runs inline on the thread of that body.
  std::atomic<std::size_t> inner{0};
  cpu::parallel_for(8, 1, [&](std::size_t, std::size_t) {
    cpu::parallel_for(10, 1, [&](std::size_t b, std::size_t e) { inner += e - b; });
  });
  EXPECT_EQ(inner.load(), 80u);
  // Two threads' loops at once: one holds the pool, the other runs on its own thread.
  std::atomic<std::size_t> total{0};
  auto loop = [&] {
    for (int r = 0; r < 50; ++r) {
      cpu::parallel_for(64, 4, [&](std::size_t b, std::size_t e) { total += e - b; });
    }
  };
  std::thread other(loop);
  loop();
  other.join();
  EXPECT_EQ(total.load(), 2u * 50 * 64);
  // The thread count cannot change under a running loop.
  EXPECT_THROW(cpu::parallel_for(2, 1, [](std::size_t, std::size_t) { cpu::set_threads(4); }), logic_error);
}

// ---------------------------------------------------------------------------------------------
using rec = value_record<std::uint32_t, 4>;

pipeline_plan cpu_plan(std::size_t records, std::size_t tile, int stages, cpu_staging staging, std::size_t halo = 0)
{
  pipeline_request r{sizeof(rec), records, tile, stages};
  r.staging = staging;
  r.halo_records = halo;
  return plan_pipeline(query_device_limits(backend::cpu), r);
}

std::vector<rec> numbered(std::size_t records)
{
  std::vector<rec> v(records);
  for (std::size_t i = 0; i < records; ++i) {
    auto const x = static_cast<std::uint32_t>(i);
    v[i] = rec{{x, 3u * x, ~x, 7u}};
  }
  return v;
}

TEST(StagingThreads, ARingPerLayerStartsNoThreadPerLayer)
{
  pipeline_plan const p = cpu_plan(64, 8, 2, cpu_staging::ring);
  std::vector<rec> const layer = numbered(64);
  tape_reader<rec> const reader{layer.data(), p.layout()};
  {  // the first ring of the process may start the staging thread
    cpu::tile_ring<rec> warm(p);
    warm.reverse(reader, [](std::size_t, rec const*, std::size_t, std::size_t) {});
  }
  std::size_t const before = cpu::detail::staging_threads_started();
  std::size_t tiles = 0;
  for (int layer_index = 0; layer_index < 2000; ++layer_index) {  // the guide's way: a ring per layer
    cpu::tile_ring<rec> ring(p);
    ring.reverse(reader, [&](std::size_t, rec const*, std::size_t, std::size_t) { ++tiles; });
  }
  EXPECT_EQ(tiles, 2000 * p.tiles);
  EXPECT_EQ(cpu::detail::staging_threads_started(), before);
}

TEST(StagingThreads, ARingInsideAnotherRingsConsumerGetsAThreadOfItsOwn)
{
  pipeline_plan const p = cpu_plan(40, 4, 2, cpu_staging::ring);
  std::vector<rec> const layer = numbered(40);
  tape_reader<rec> const reader{layer.data(), p.layout()};
  std::size_t inner_tiles = 0;
  cpu::tile_ring<rec> outer(p);
  outer.reverse(reader, [&](std::size_t, rec const*, std::size_t, std::size_t) {
    cpu::tile_ring<rec> inner(p);  // would deadlock if both waited for one staging thread
    inner.reverse(reader, [&](std::size_t, rec const*, std::size_t, std::size_t) { ++inner_tiles; });
  });
  EXPECT_EQ(inner_tiles, p.tiles * p.tiles);
  EXPECT_GE(cpu::detail::staging_threads_started(), 2u);
}

class ReverseTiles : public ::testing::TestWithParam<cpu_staging> {};

TEST_P(ReverseTiles, EveryTileOnceWithItsRecords)
{
  for (std::size_t threads : {1u, 2u, 3u}) {
    scoped_threads t(threads);
    for (auto const& shape : {std::pair<std::size_t, std::size_t>{1, 1}, {10, 3}, {1000, 7}, {333, 1000}}) {
      std::size_t const records = shape.first;
      std::size_t const tile = shape.second;
      pipeline_plan const p = cpu_plan(records, tile, 3, GetParam());
      std::vector<rec> const layer = numbered(records);
      std::vector<std::atomic<int>> seen(records);
      std::vector<std::atomic<int>> tiles(p.tiles);
      cpu::ring_stats stats;
      cpu::reverse_tiles(
        tape_reader<rec>{layer.data(), p.layout()}, p,
        [&](std::size_t t_index, rec const* staged, std::size_t first, std::size_t count) {
          ++tiles[t_index];
          EXPECT_EQ(first, t_index * p.tile_records);
          for (std::size_t i = 0; i < count; ++i) {
            EXPECT_EQ(staged[i].values[1], 3u * static_cast<std::uint32_t>(first + i));
            ++seen[first + i];
          }
        },
        &stats);
      for (std::size_t i = 0; i < records; ++i) { ASSERT_EQ(seen[i].load(), 1); }
      for (std::size_t i = 0; i < p.tiles; ++i) { ASSERT_EQ(tiles[i].load(), 1); }
      EXPECT_EQ(stats.tiles, p.tiles);
      EXPECT_EQ(stats.staged_tiles, GetParam() == cpu_staging::ring ? p.tiles : 0u);
      EXPECT_LE(stats.max_in_flight, 3u);
    }
  }
}

TEST_P(ReverseTiles, AConsumerExceptionPropagates)
{
  pipeline_plan const p = cpu_plan(100, 5, 2, GetParam());
  std::vector<rec> const layer = numbered(100);
  EXPECT_THROW(cpu::reverse_tiles(tape_reader<rec>{layer.data(), p.layout()}, p,
                                  [&](std::size_t t_index, rec const*, std::size_t, std::size_t) {
                                    if (t_index == 11) { throw std::runtime_error("tile 11"); }
                                  }),
               std::runtime_error);
}

/// Every record of every tile's window, checked against the layer, and nothing outside it.
TEST_P(ReverseTiles, WindowsHoldTheTileAndItsPeriodicHalo)
{
  for (auto const& shape : {std::tuple<std::size_t, std::size_t, std::size_t>{100, 10, 1}, {100, 10, 3}, {37, 5, 2},
                            {12, 5, 4}, {12, 12, 1}, {5, 2, 5}, {64, 8, 0}}) {
    std::size_t const records = std::get<0>(shape);  // named, not bound: lambdas capture them (C++17)
    std::size_t const tile = std::get<1>(shape);
    std::size_t const halo = std::get<2>(shape);
    pipeline_plan const p = cpu_plan(records, tile, 2, GetParam(), halo);
    std::vector<rec> const layer = numbered(records);
    std::atomic<std::size_t> checked{0};
    cpu::reverse_windows(tape_reader<rec>{layer.data(), p.layout()}, p,
                         [&](std::size_t, tile_window<rec> const& w, std::size_t first, std::size_t count) {
                           bool const whole = count + 2 * halo >= records;
                           for (std::size_t j = 0; j < records; ++j) {
                             // Periodic distance from j to the tile [first, first + count).
                             std::size_t const after = (j + records - first) % records;  // 0.. from first
                             std::size_t const before = (first + records - j) % records;
                             bool const inside = after < count + halo || before <= halo;
                             EXPECT_EQ(w.contains(j), whole || inside)
                               << "record " << j << ", tile at " << first << " of " << count << ", halo " << halo;
                             if (w.contains(j)) {
                               EXPECT_EQ(w[j].values[1], 3u * static_cast<std::uint32_t>(j));
                               ++checked;
                             }
                           }
                         });
    EXPECT_GT(checked.load(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Staging, ReverseTiles, ::testing::Values(cpu_staging::in_place, cpu_staging::ring),
                         [](auto const& p) { return std::string{p.param == cpu_staging::ring ? "ring" : "in_place"}; });

TEST(ReverseTilesErrors, PlansThatDoNotMatchTheLayerAreErrors)
{
  pipeline_plan const p = cpu_plan(100, 5, 2, cpu_staging::in_place);
  std::vector<rec> const layer = numbered(100);
  auto nothing = [](std::size_t, rec const*, std::size_t, std::size_t) {};
  EXPECT_THROW(cpu::reverse_tiles(tape_reader<rec>{layer.data(), tile_layout{100, 10}}, p, nothing), logic_error);
  pipeline_plan gpu = p;
  gpu.kind = backend::cuda;
  EXPECT_THROW(cpu::reverse_tiles(tape_reader<rec>{layer.data(), p.layout()}, gpu, nothing), logic_error);
}

// ---------------------------------------------------------------------------------------------
TEST(CpuMemoryPool, FreedBuffersAreReusedAndReleasedOnRequest)
{
#if defined(TAPEFLOW_SANITIZED_BUILD)  // tapeflow/config.hpp: GCC's and Clang's AddressSanitizer
  GTEST_SKIP() << "the pool keeps nothing under AddressSanitizer, which must see every free";
#else
  cpu::release_cached_memory();
  std::size_t const bytes = std::size_t{3} << 20;
  std::size_t const in_use = device_memory_usage(backend::cpu).current_bytes;
  void* first = nullptr;
  {
    device_buffer a(backend::cpu, bytes, {});
    first = a.data();
  }
  EXPECT_EQ(cpu::cached_memory(), bytes);
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, in_use);  // cached bytes are not held
  {
    device_buffer b(backend::cpu, bytes, {});
    EXPECT_EQ(b.data(), first);  // the same block again, no fresh pages
    EXPECT_EQ(cpu::cached_memory(), 0u);
  }
  {
    device_buffer small(backend::cpu, 1024, {});  // below 64 KiB: not cached
  }
  EXPECT_EQ(cpu::cached_memory(), bytes);
  EXPECT_EQ(cpu::release_cached_memory(), bytes);
  EXPECT_EQ(cpu::cached_memory(), 0u);
#endif
}

TEST(CpuMemory, ABufferFreedOnAStreamGoesBackBehindTheStreamsWork)
{
  // As cudaFreeAsync: a buffer destroyed while its stream still has work on it queued keeps its
  // memory until that work ran. (It went back at once, and the queued fill wrote freed memory:
  // AddressSanitizer's heap-use-after-free, a crash without it.)
  stream busy(backend::cpu);
  stream_view const s = busy.view();
  cpu::release_cached_memory();
  device_buffer ahead(backend::cpu, std::size_t{256} << 20, s);
  ahead.fill(0x11, s);  // keeps the stream's worker busy for a while
  [[maybe_unused]] std::size_t const cached = cpu::cached_memory();  // the pool's count (none under ASan)
  {
    device_buffer small(backend::cpu, 4000, s);  // below the pool's 64 KiB: freed for real
    small.fill(0x22, s);
    device_buffer large(backend::cpu, std::size_t{1} << 20, s);
    large.fill(0x33, s);
  }
#if !defined(TAPEFLOW_SANITIZED_BUILD)  // the pool keeps nothing under AddressSanitizer
  EXPECT_EQ(cpu::cached_memory(), cached) << "the large buffer went back before its fill ran";
#endif
  busy.synchronize();
#if !defined(TAPEFLOW_SANITIZED_BUILD)
  EXPECT_EQ(cpu::cached_memory(), cached + (std::size_t{1} << 20));
#endif
  cpu::release_cached_memory();
}

TEST(CpuMemory, AllocationsNoHostCanHoldAreOutOfMemory)
{
  // GCC's aligned operator new rounded sizes near SIZE_MAX up past it into a tiny block, which a
  // copy into the buffer then overran.
  std::size_t const in_use = device_memory_usage(backend::cpu).current_bytes;
  EXPECT_THROW(device_buffer(backend::cpu, static_cast<std::size_t>(-1) - 8, {}), out_of_memory);
  EXPECT_THROW(pinned_buffer(backend::cpu, static_cast<std::size_t>(-1)), out_of_memory);
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, in_use);
}

}  // namespace
}  // namespace tapeflow
