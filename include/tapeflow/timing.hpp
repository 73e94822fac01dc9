// SPDX-License-Identifier: Apache-2.0
// Timing: the median of a sample, and a warm-up followed by the median of N timed runs. A run is
// timed by one of three timers, each a callable that runs the work it is handed and returns its
// milliseconds:
//   wall_timer          the host's steady clock around the call: work done when the call returns;
//   synchronized_timer  the same with a stream synchronised before and after: stream-ordered
//                       work, timed from the host (what tapeflow::chain's measure_steps does);
//   event_timer         two backend events recorded around the call on a stream: stream-ordered
//                       work, timed by the device (what measure_bandwidths does).
// Loops that time several phases of each run (events between laps) collect a sample per phase and
// take each one's median().
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

namespace tapeflow {

/// The median of `samples`: the middle value, or the mean of the two middle ones for an even
/// count. Throws logic_error when `samples` is empty.
[[nodiscard]] double median(std::vector<double> samples);

/// Times a call on the host's steady clock.
struct wall_timer {
  /// Milliseconds `run()` took.
  template <class Run>
  double operator()(Run&& run) const
  {
    auto const start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
};

/// Times the work a call queues on a stream by the host's steady clock, the stream synchronised
/// before and after.
class synchronized_timer {
 public:
  synchronized_timer(backend kind, stream_view stream) noexcept : kind_(kind), stream_(stream) {}

  /// Milliseconds from an idle stream to the end of the work `run()` queued on it. Throws what
  /// synchronising the stream throws.
  template <class Run>
  double operator()(Run&& run) const
  {
    synchronize(kind_, stream_);
    auto const start = std::chrono::steady_clock::now();
    run();
    synchronize(kind_, stream_);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  backend kind_;
  stream_view stream_;
};

/// Times the work a call queues on a stream between two events of the stream's backend.
class event_timer {
 public:
  /// Throws what creating a backend event throws.
  event_timer(backend kind, stream_view stream) : stream_(stream), start_(kind), stop_(kind) {}

  /// Milliseconds between events recorded before and after the work `run()` queues on the
  /// stream; waits for the second.
  template <class Run>
  double operator()(Run&& run)
  {
    start_.record(stream_);
    run();
    stop_.record(stream_);
    return static_cast<double>(elapsed_ms(start_, stop_));
  }

 private:
  stream_view stream_;
  event start_;
  event stop_;
};

/// Calls `run()` `warmup` times untimed, then `repeats` times timed by `timer` (one of the timers
/// above, or any callable that runs what it is handed and returns its milliseconds), and returns
/// the median of those times. Throws logic_error when `warmup` < 0 or `repeats` < 1.
template <class Timer, class Run>
[[nodiscard]] double median_ms(int warmup, int repeats, Timer&& timer, Run&& run)
{
  TAPEFLOW_EXPECTS(warmup >= 0 && repeats >= 1, "a timing needs warmup >= 0 and repeats >= 1");
  for (int i = 0; i < warmup; ++i) { run(); }
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(repeats));
  for (int i = 0; i < repeats; ++i) { ms.push_back(timer(run)); }
  return median(std::move(ms));
}

}  // namespace tapeflow
