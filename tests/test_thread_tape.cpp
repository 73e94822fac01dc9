// SPDX-License-Identifier: Apache-2.0
// The per-thread tape arena on the CPU backend, with a toy loop whose records name their thread and
// step: the warp-interleaved layout, segments, LIFO reversal, the host tier's ring, the cap, the
// budgets and injected faults.
#include "reference.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/fault.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/thread_tape.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

using toy_record = value_record<std::uint32_t, 4>;  // {thread, step, trips, check}

constexpr std::uint32_t check_word(std::size_t t, std::uint32_t s) { return static_cast<std::uint32_t>(t) * 7919u + s * 31u + 5u; }

std::vector<std::uint32_t> random_trips(std::size_t threads, std::uint32_t lo, std::uint32_t hi, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> dist(lo, hi);
  std::vector<std::uint32_t> trips(threads);
  for (auto& n : trips) { n = dist(rng); }
  return trips;
}

/// Runs the toy forward and reverse; returns the reverse's visit log problems (empty when right).
std::string run_toy(thread_tape<toy_record>& tape, std::vector<std::uint32_t> const& trips)
{
  std::size_t const threads = trips.size();
  std::size_t const chunks = tape.forward([&](thread_tape_writer<toy_record> w, stream_view) {
    for (std::size_t t = 0; t < threads; ++t) {
      std::uint32_t n = w.steps(t);
      if (n < w.first_step()) { continue; }
      while (n < w.end_step() && n < trips[t]) {
        w.write(t, n, toy_record{{static_cast<std::uint32_t>(t), n, trips[t], check_word(t, n)}});
        ++n;
      }
      w.finish(t, n, n < trips[t]);
    }
  });
  std::uint32_t const longest = *std::max_element(trips.begin(), trips.end());
  std::size_t const c = tape.layout().chunk_steps;
  if (chunks != std::max<std::size_t>(1, (longest + c - 1) / c)) {
    return "chunks " + std::to_string(chunks) + " for a longest loop of " + std::to_string(longest);
  }
  std::vector<std::int64_t> next(threads);  // the step each thread must reverse next
  for (std::size_t t = 0; t < threads; ++t) { next[t] = static_cast<std::int64_t>(trips[t]) - 1; }
  std::string problems;
  tape.reverse([&](thread_tape_reader<toy_record> r, stream_view) {
    for (std::size_t t = 0; t < threads; ++t) {
      if (r.steps(t) != trips[t]) { problems += "steps of " + std::to_string(t) + "; "; }
      for (std::uint32_t s = r.first_step() + r.count(t); s-- > r.first_step();) {
        toy_record const& rec = r.read(t, s);
        if (rec.values[0] != t || rec.values[1] != s || rec.values[3] != check_word(t, s) ||
            static_cast<std::int64_t>(s) != next[t]) {
          problems += "thread " + std::to_string(t) + " step " + std::to_string(s) + "; ";
        }
        --next[t];
      }
    }
  });
  for (std::size_t t = 0; t < threads; ++t) {
    if (next[t] != -1) { problems += "thread " + std::to_string(t) + " missed steps; "; }
  }
  return problems;
}

void expect_no_bytes_held()
{
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
  EXPECT_EQ(host_memory_usage(backend::cpu).current_bytes, 0u);
}

TEST(ThreadTapeLayout, AWarpWritesThirtyTwoConsecutiveRecordsPerStep)
{
  thread_tape_layout const l{70, 3};  // 3 warps, the last partial
  EXPECT_EQ(l.warps(), 3u);
  EXPECT_EQ(l.chunk_records(), 3u * 3u * 32u);
  // The formula of docs/thread-tape.md.
  EXPECT_EQ(l.index(0, 0), 0u);
  EXPECT_EQ(l.index(31, 0), 31u);
  EXPECT_EQ(l.index(0, 1), 32u);
  EXPECT_EQ(l.index(32, 0), 96u);
  EXPECT_EQ(l.index(69, 2), ((2u * 3u + 2u) * 32u + 5u));
  std::set<std::size_t> seen;
  for (std::size_t t = 0; t < 96; ++t) {
    for (std::size_t s = 0; s < 3; ++s) {
      std::size_t const i = l.index(t, s);
      EXPECT_LT(i, l.chunk_records());
      EXPECT_TRUE(seen.insert(i).second) << "thread " << t << " step " << s;
      if (t % 32 != 0) { EXPECT_EQ(i, l.index(t - 1, s) + 1) << "lanes of a warp are consecutive"; }
    }
  }
  EXPECT_EQ(seen.size(), l.chunk_records());
  // Steps of a thread in each chunk.
  EXPECT_EQ(l.steps_in_chunk(7, 0), 3u);
  EXPECT_EQ(l.steps_in_chunk(7, 1), 3u);
  EXPECT_EQ(l.steps_in_chunk(7, 2), 1u);
  EXPECT_EQ(l.steps_in_chunk(7, 3), 0u);
  EXPECT_EQ(l.steps_in_chunk(6, 2), 0u);
}

TEST(ThreadTape, EveryStepIsReversedLastFirstOnTheDeviceAndThroughTheHostTier)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct config {
    std::size_t threads, chunk_steps, slots, distance;
  };
  for (config c : {config{1, 1, 0, 0}, config{37, 4, 0, 0}, config{100, 5, 1, 0}, config{100, 5, 2, 1},
                   config{70, 3, 3, 2}, config{70, 3, 3, 5}, config{129, 7, 4, 3}}) {
    SCOPED_TRACE("threads " + std::to_string(c.threads) + ", chunk " + std::to_string(c.chunk_steps) + ", slots " +
                 std::to_string(c.slots));
    std::vector<std::uint32_t> const trips = random_trips(c.threads, 1, 40, seed + c.threads);
    thread_tape_options o;
    o.chunk_steps = c.chunk_steps;
    o.prefetch_distance = c.distance;
    o.poison = true;  // a record read but never written fails the check
    std::size_t const chunk_bytes = thread_tape_layout{c.threads, c.chunk_steps}.chunk_records() * sizeof(toy_record);
    o.device_budget_bytes = c.slots * chunk_bytes + (c.slots != 0 ? chunk_bytes / 2 : 0);
    {
      thread_tape<toy_record> tape(c.threads, o);
      for (int run = 0; run < 2; ++run) {  // the arena is reused
        EXPECT_EQ(run_toy(tape, trips), "");
        thread_tape_stats const s = tape.stats();
        EXPECT_EQ(tape.steps(), trips);
        EXPECT_EQ(tape.max_steps(), *std::max_element(trips.begin(), trips.end()));
        EXPECT_EQ(s.max_steps, tape.max_steps());
        if (c.slots != 0 && s.chunks > c.slots) {
          EXPECT_EQ(s.device_slots, c.slots);
          EXPECT_GT(s.chunks_to_host, 0u);
          EXPECT_EQ(s.prefetches, s.chunks - c.slots);
          EXPECT_EQ(s.h2d_bytes, s.prefetches * chunk_bytes);
        } else {
          EXPECT_EQ(s.device_slots, s.chunks);
          EXPECT_EQ(s.prefetches, 0u);
        }
      }
    }
    expect_no_bytes_held();
  }
}

TEST(ThreadTape, TheRingHasNoRaceBetweenItsCopyStreamsAndTheSegments)
{
  // The CPU backend's copy streams are threads racing the caller; many short runs (and a slow copy
  // engine) exercise the orderings of push-out, slot reuse, prefetch and read.
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  thread_tape_options o;
  o.chunk_steps = 2;
  o.poison = true;
  o.device_budget_bytes = 2 * thread_tape_layout{33, 2}.chunk_records() * sizeof(toy_record);
  o.prefetch_distance = 1;
  thread_tape<toy_record> tape(33, o);
  for (int run = 0; run < 200; ++run) {
    ASSERT_EQ(run_toy(tape, random_trips(33, 1, 15, seed + static_cast<std::uint64_t>(run))), "") << "run " << run;
  }
  fault::scoped_cpu_copy_delay const slow(std::chrono::microseconds{300});
  for (int run = 0; run < 10; ++run) {
    ASSERT_EQ(run_toy(tape, random_trips(33, 1, 15, seed - static_cast<std::uint64_t>(run))), "") << "run " << run;
  }
}

TEST(ThreadTape, AThreadPastMaxStepsIsALogicErrorAndTheArenaStaysUsable)
{
  thread_tape_options o;
  o.chunk_steps = 4;
  o.max_steps = 10;
  o.device_budget_bytes = 2 * thread_tape_layout{40, 4}.chunk_records() * sizeof(toy_record);
  {
    thread_tape<toy_record> tape(40, o);
    std::vector<std::uint32_t> trips = random_trips(40, 1, 10, testing::fresh_seed());
    trips[17] = 11;
    try {
      static_cast<void>(run_toy(tape, trips));
      ADD_FAILURE() << "no error";
    } catch (logic_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("max_steps = 10"), std::string::npos) << e.what();
    }
    trips[17] = 10;  // exactly the cap is fine
    EXPECT_EQ(run_toy(tape, trips), "");
  }
  expect_no_bytes_held();
}

TEST(ThreadTape, BudgetsAreTypedErrorsWithTheNumbers)
{
  std::size_t const chunk = thread_tape_layout{64, 8}.chunk_records() * sizeof(toy_record);
  thread_tape_options o;
  o.chunk_steps = 8;
  o.device_budget_bytes = chunk - 1;
  try {
    thread_tape<toy_record> tape(64, o);
    ADD_FAILURE() << "no error";
  } catch (budget_error const& e) {
    EXPECT_NE(std::string{e.what()}.find(std::to_string(chunk)), std::string::npos) << e.what();
  }
  o.device_budget_bytes = 2 * chunk;
  o.host_budget_bytes = 2 * chunk;  // 5 chunks: 3 go to the host with a ring of 2 (lag 0)
  {
    thread_tape<toy_record> tape(64, o);
    std::vector<std::uint32_t> trips(64, 40);
    try {
      static_cast<void>(run_toy(tape, trips));
      ADD_FAILURE() << "no error";
    } catch (budget_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("host budget of " + std::to_string(2 * chunk)), std::string::npos)
        << e.what();
    }
    std::fill(trips.begin(), trips.end(), 16u);  // 2 chunks, both pushed out (lag 0): within the budget
    EXPECT_EQ(run_toy(tape, trips), "");
  }
  expect_no_bytes_held();
  EXPECT_THROW(thread_tape<toy_record>(0, thread_tape_options{}), logic_error);
  thread_tape_options zero_chunk;
  zero_chunk.chunk_steps = 0;
  EXPECT_THROW(thread_tape<toy_record>(4, zero_chunk), logic_error);
  expect_no_bytes_held();
}

TEST(ThreadTape, APlannedChunkNeedsNoArenaAndIsCheckedAsTheArenaChecksIt)
{
  // A plan asks for the chunk size without making an arena (rk4's plan made one: its buffers,
  // streams and, for a budget of 2^25 slots, three events each).
  thread_tape_options o;
  o.chunk_steps = 8;
  std::size_t const chunk = thread_tape_layout{70, 8}.chunk_records() * sizeof(toy_record);
  EXPECT_EQ(thread_arena::planned_chunk_bytes(sizeof(toy_record), 70, o), chunk);
  {
    thread_arena const arena(sizeof(toy_record), 70, o);
    EXPECT_EQ(arena.chunk_bytes(), chunk);
  }
  o.device_budget_bytes = chunk - 1;
  EXPECT_THROW(static_cast<void>(thread_arena::planned_chunk_bytes(sizeof(toy_record), 70, o)), budget_error);
  o.device_budget_bytes = chunk;
  EXPECT_EQ(thread_arena::planned_chunk_bytes(sizeof(toy_record), 70, o), chunk);
  EXPECT_THROW(static_cast<void>(thread_arena::planned_chunk_bytes(8, 70, o)), logic_error);
  EXPECT_THROW(static_cast<void>(thread_arena::planned_chunk_bytes(sizeof(toy_record), 0, o)), logic_error);
  o.chunk_steps = 0;
  EXPECT_THROW(static_cast<void>(thread_arena::planned_chunk_bytes(sizeof(toy_record), 70, o)), logic_error);
  expect_no_bytes_held();
}

TEST(ThreadTape, ReverseWithoutForwardIsALogicError)
{
  thread_tape<toy_record> tape(8, thread_tape_options{});
  EXPECT_THROW(tape.reverse([](thread_tape_reader<toy_record>, stream_view) {}), logic_error);
  EXPECT_EQ(run_toy(tape, std::vector<std::uint32_t>(8, 3)), "");
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

class ThreadTapeFaults : public ::testing::TestWithParam<fault::site> {};

TEST_P(ThreadTapeFaults, EveryFailurePointIsATypedErrorAndReleasesEverything)
{
  fault::site const site = GetParam();
  std::vector<std::uint32_t> const trips = random_trips(50, 1, 30, testing::fresh_seed());
  thread_tape_options o;
  o.chunk_steps = 4;
  o.device_budget_bytes = 2 * thread_tape_layout{50, 4}.chunk_records() * sizeof(toy_record);
  std::size_t failures = 0;
  for (std::size_t n = 1;; ++n) {
    std::size_t const before = fault::injected(site);
    try {
      fault::scoped_failure const armed(site, n);
      thread_tape<toy_record> tape(trips.size(), o);
      EXPECT_EQ(run_toy(tape, trips), "") << "n " << n;
      if (fault::injected(site) == before) { break; }  // the n-th operation never came
    } catch (out_of_memory const&) {
      EXPECT_NE(site, fault::site::copy);
      ++failures;
    } catch (platform_error const& e) {
      EXPECT_EQ(site, fault::site::copy);
      EXPECT_EQ(e.name(), "tapeflow_injected_copy_fault");
      ++failures;
    }
    expect_no_bytes_held();
    ASSERT_LT(n, 1000u);
  }
  EXPECT_GT(failures, 0u) << "no operation at this site ran";
}

INSTANTIATE_TEST_SUITE_P(Sites, ThreadTapeFaults,
                         ::testing::Values(fault::site::device_allocation, fault::site::host_allocation,
                                           fault::site::copy),
                         [](auto const& param_info) { return site_name(param_info.param); });

TEST(ThreadTape, ABudgetHoldingEveryChunkTheCapAllowsNeedsNoRing)
{
  // max_steps 8 in chunks of 4: at most two chunks, and the budget holds two. Every chunk stays
  // on the device: no ring, nothing copied to the host.
  std::size_t const chunk = thread_tape_layout{40, 4}.chunk_records() * sizeof(toy_record);
  thread_tape_options o;
  o.chunk_steps = 4;
  o.max_steps = 8;
  o.device_budget_bytes = 2 * chunk;
  {
    thread_tape<toy_record> tape(40, o);
    EXPECT_EQ(run_toy(tape, std::vector<std::uint32_t>(40, 8)), "");
    thread_tape_stats const s = tape.stats();
    EXPECT_EQ(s.chunks, 2u);
    EXPECT_EQ(s.slot_limit, 0u) << s.describe();
    EXPECT_EQ(s.chunks_to_host, 0u) << s.describe();
    EXPECT_EQ(s.host_bytes, thread_tape_status_words * sizeof(std::uint32_t)) << s.describe();
  }
  expect_no_bytes_held();
}

}  // namespace
}  // namespace tapeflow
