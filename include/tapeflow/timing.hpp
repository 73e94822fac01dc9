// SPDX-License-Identifier: Apache-2.0
// Timing: the median of a sample, and event-timed laps on a stream (medians over many runs).
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tapeflow {

/// The median of `samples` (the mean of the middle two for an even count). Throws logic_error when
/// `samples` is empty.
[[nodiscard]] inline double median(std::vector<double> samples)
{
  TAPEFLOW_EXPECTS(!samples.empty(), "the median of no samples");
  std::sort(samples.begin(), samples.end());
  std::size_t const m = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[m] : 0.5 * (samples[m - 1] + samples[m]);
}

/// Times runs of `laps` phases on one stream with the backend's events: start() marks a run's time
/// zero, each lap(timed) the end of its next phase; a run whose laps are not `timed` (a warm-up) is
/// not sampled. Nothing waits between the phases of a run.
class lap_timer {
 public:
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

  /// The median of phase `i` over the timed runs.
  [[nodiscard]] double median_lap_ms(std::size_t i) const { return median(samples_.at(i)); }
  /// The median of whole runs (start to the last lap) over the timed runs.
  [[nodiscard]] double median_total_ms() const { return median(totals_); }
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
