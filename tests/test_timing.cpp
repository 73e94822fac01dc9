// SPDX-License-Identifier: Apache-2.0
// The timing helpers every median in tapeflow goes through (tapeflow/timing.hpp).
#include <tapeflow/error.hpp>
#include <tapeflow/timing.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace tapeflow {
namespace {

TEST(Timing, TheMedianIsTheMiddleValueOrTheMeanOfTheTwoMiddleOnes)
{
  EXPECT_EQ(median({3.0}), 3.0);
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({-1.0, 7.0}), 3.0);
  EXPECT_THROW(static_cast<void>(median({})), logic_error);
}

TEST(Timing, MedianMsWarmsUpUntimedThenTakesTheMedianOfTheTimedRuns)
{
  int calls = 0;
  int timed = 0;
  std::vector<double> const times{9.0, 1.0, 4.0};
  auto const fake_timer = [&](auto&& run) {
    run();
    return times[static_cast<std::size_t>(timed++)];
  };
  EXPECT_EQ(median_ms(2, 3, fake_timer, [&] { ++calls; }), 4.0);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(timed, 3);
  EXPECT_THROW(static_cast<void>(median_ms(-1, 3, fake_timer, [] {})), logic_error);
  EXPECT_THROW(static_cast<void>(median_ms(0, 0, fake_timer, [] {})), logic_error);
}

TEST(Timing, EveryTimerTimesTheWorkItRuns)
{
  auto const sleep = [] { std::this_thread::sleep_for(std::chrono::milliseconds{2}); };
  EXPECT_GE(median_ms(0, 1, wall_timer{}, sleep), 2.0);
  EXPECT_GE(median_ms(1, 3, synchronized_timer{backend::cpu, {}}, sleep), 2.0);
  // The CPU backend's default stream runs inline: its events bracket the call itself.
  event_timer events(backend::cpu, {});
  EXPECT_GE(median_ms(1, 3, events, sleep), 2.0);
}

TEST(Timing, ALapTimerKeepsTheMedianOfEachPhaseOfItsTimedRuns)
{
  EXPECT_THROW(lap_timer(backend::cpu, {}, 0), logic_error);
  lap_timer laps(backend::cpu, {}, 2);
  EXPECT_THROW(static_cast<void>(laps.median_total_ms()), logic_error);
  for (int run = 0; run < 4; ++run) {
    laps.start();
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
    laps.lap(run > 0);  // the first run warms up
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
    laps.lap(run > 0);
  }
  EXPECT_EQ(laps.runs(), 3u);
  EXPECT_GE(laps.median_lap_ms(0), 1.0);
  EXPECT_GE(laps.median_lap_ms(1), 2.0);
  EXPECT_GE(laps.median_total_ms(), 3.0);
  EXPECT_THROW(laps.lap(true), logic_error);  // the run has no phase left
}

}  // namespace
}  // namespace tapeflow
