// SPDX-License-Identifier: Apache-2.0
// The benchmark harness behind tapeflow_bench: suites register themselves, time stream-ordered
// work with backend events (medians of warmed-up runs) and add rows in the design brief's
// results format. One driver, one results file per run (bench/main.cu).
//
//   TAPEFLOW_BENCH_SUITE(lbm, 40, "LBM D2Q9: primal vs gradient, store tier", run_lbm);
//
//   void run_lbm(tapeflow::bench::context& ctx) {
//     std::size_t const n = ctx.size("lbm.n", 1024, 128);     // full size, --quick size
//     auto t = ctx.measure(2, [&](tapeflow::bench::stopwatch& sw) {
//       upload(...);                // untimed set-up
//       sw.start();  forward(...);  sw.lap();  reverse(...);  sw.lap();
//     });
//     tapeflow::bench::row r{"lbm", "tapeflow-store", "1024x1024 T100 f32"};
//     r.grad_ms = t.total_ms;  r.forward_ms = t.laps_ms[0];  r.reverse_ms = t.laps_ms[1]; ...
//     ctx.add(std::move(r));
//   }
#pragma once

#include <tapeflow/workloads/common/describe.hpp>
#include <tapeflow/workloads/common/json.hpp>

#include <tapeflow/backend.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/timing.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow::bench {

/// What the command line asked for.
struct settings {
  int warmup{2};
  int repeats{10};
  /// Small sizes: every suite in seconds (a smoke run of the whole pipeline), not the brief's sizes.
  bool quick{false};
  /// `--set key=value`: per-suite overrides of sizes and knobs (`lbm.n=2048`).
  std::map<std::string, std::string> params;
};

/// One row of the results file. Fields the brief names are members; anything else (`plan`,
/// `stall_ms`, ...) goes into `extra`. Zero-valued optional numbers are left out of the file.
struct row {
  std::string workload;   ///< allen-cahn | tape-bound | lbm | gmm | lstm | rk4
  std::string variant;    ///< tapeflow-store, naive-soa, ... (docs/benchmarks.md lists them)
  std::string size;       ///< the same string the peers write for the same problem
  double primal_ms{0};
  double grad_ms{0};      ///< augmented forward + seed + reverse
  double forward_ms{0};
  double reverse_ms{0};
  std::size_t tape_bytes{0};
  std::size_t peak_device_bytes{0};
  double achieved_GBps{0};
  cli::json_object extra{};

  [[nodiscard]] std::string json() const;
};

/// Events on one stream (a lap_timer): start() marks a run's time zero, each lap() the end of its
/// next phase; warm-up runs are not sampled.
class stopwatch {
 public:
  stopwatch(backend kind, stream_view stream, std::size_t laps) : stream_(stream), timer_(kind, stream, laps) {}
  void start() { timer_.start(); }
  void lap() { timer_.lap(timed_); }
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }

 private:
  friend class context;
  stream_view stream_;
  lap_timer timer_;
  bool timed_{false};
};

/// Medians over the repeats: of start() → last lap(), and of each lap.
struct timing {
  double total_ms{0};
  std::vector<double> laps_ms;
};

/// What a suite sees: the device, the settings, the same-run copy bandwidth and the rows so far.
class context {
 public:
  context(backend kind, settings cfg);

  [[nodiscard]] backend kind() const noexcept { return kind_; }
  [[nodiscard]] device_limits const& device() const noexcept { return device_; }
  [[nodiscard]] settings const& cfg() const noexcept { return cfg_; }
  [[nodiscard]] bool quick() const noexcept { return cfg_.quick; }
  /// Device-to-device copy bandwidth (bytes read + bytes written per second / 1e9), measured once.
  [[nodiscard]] double d2d_GBps();

  /// `--set key=value` if given, else `full` (or `quick_value` under --quick).
  [[nodiscard]] std::size_t size(std::string const& key, std::size_t full, std::size_t quick_value) const;
  [[nodiscard]] std::string text(std::string const& key, std::string const& fallback) const;
  /// The run's warm-up and repeat counts, or the suite's own (`--set tiers.repeats=5`).
  [[nodiscard]] int warmup() const;
  [[nodiscard]] int repeats() const;

  /// Runs `body` warmup() + repeats() times on the default stream; `body` does its untimed set-up,
  /// then start(), the timed work with `laps` lap()s, one after each phase. Medians of the repeats.
  timing measure(std::size_t laps, std::function<void(stopwatch&)> const& body);

  /// The suite now running (its name prefixes the per-suite `--set` keys).
  void begin_suite(std::string name) { suite_ = std::move(name); }

  /// Prints the row and keeps it for the results file.
  void add(row r);
  [[nodiscard]] std::vector<row> const& rows() const noexcept { return rows_; }

 private:
  backend kind_;
  device_limits device_;
  settings cfg_;
  workloads::bench_sizes sizes_;
  double d2d_GBps_{0};
  std::string suite_;
  std::vector<row> rows_;
};

/// A suite: `order` sorts the run (smaller first); `help` is one line for --list.
using suite_fn = std::function<void(context&)>;
struct suite {
  std::string name;
  int order;
  std::string help;
  suite_fn run;
};
std::vector<suite>& registry();
struct suite_registrar {
  suite_registrar(char const* name, int order, char const* help, suite_fn run);
};

}  // namespace tapeflow::bench

#define TAPEFLOW_BENCH_SUITE(name, order, help, fn) \
  static ::tapeflow::bench::suite_registrar const tapeflow_bench_suite_##name{#name, order, help, fn}
