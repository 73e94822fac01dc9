// SPDX-License-Identifier: Apache-2.0
// Timing: the median of a sample, and a warm-up followed by the median of N timed runs. A run is
// timed by one of three timers, each a callable that runs the work it is handed and returns its
// milliseconds:
//   wall_timer          the host's steady clock around the call: work done when the call returns;
//   synchronized_timer  the same with a stream synchronised before and after: stream-ordered
//                       work, timed from the host (what tapeflow::chain's measure_steps does);
//   event_timer         two backend events recorded around the call on a stream: stream-ordered
//                       work, timed by the device (what measure_bandwidths does).
// Runs of several phases, timed by events between them and nothing waiting in between, are what
// lap_timer keeps (the medians of each phase and of whole runs).
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

/// Times runs of `laps` phases on one stream with the backend's events: start() marks a run's time
/// zero, each lap(timed) the end of its next phase; a run whose laps are not `timed` (a warm-up) is
/// not sampled. Nothing waits between the phases of a run.
class lap_timer {
 public:
  /// Throws logic_error when `laps` is 0, and what creating a backend event throws.
  lap_timer(backend kind, stream_view stream, std::size_t laps) : stream_(stream), start_(kind), samples_(laps)
  {
    TAPEFLOW_EXPECTS(laps >= 1, "a lap timer needs at least one lap");
    ends_.reserve(laps);
    for (std::size_t i = 0; i < laps; ++i) { ends_.emplace_back(kind); }
  }

  /// Marks the start of a run.
  void start()
  {
    start_.record(stream_);
    next_ = 0;
  }

  /// Marks the end of the run's next phase; at the last, reads the run's laps (waits for it) when
  /// `timed`. Throws logic_error when the run has no phase left.
  void lap(bool timed)
  {
    TAPEFLOW_EXPECTS(next_ < ends_.size(), "a lap past the timer's last phase");
    ends_[next_].record(stream_);
    if (++next_ < ends_.size()) { return; }
    if (!timed) {
      ends_.back().synchronize();  // a warm-up run ends before the next begins
      return;
    }
    double before = 0;
    for (std::size_t i = 0; i < ends_.size(); ++i) {
      double const since_start = static_cast<double>(elapsed_ms(start_, ends_[i]));
      samples_[i].push_back(since_start - before);
      before = since_start;
    }
    totals_.push_back(before);
  }

  /// The median of phase `i` over the timed runs. Throws logic_error before the first timed run.
  [[nodiscard]] double median_lap_ms(std::size_t i) const { return median(samples_.at(i)); }
  /// The median of whole runs (start to the last lap) over the timed runs. Throws logic_error
  /// before the first timed run.
  [[nodiscard]] double median_total_ms() const { return median(totals_); }
  /// Timed runs so far.
  [[nodiscard]] std::size_t runs() const noexcept { return totals_.size(); }

 private:
  stream_view stream_;
  event start_;
  std::vector<event> ends_;
  std::vector<std::vector<double>> samples_;
  std::vector<double> totals_;
  std::size_t next_{0};
};

}  // namespace tapeflow
