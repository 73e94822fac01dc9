// SPDX-License-Identifier: Apache-2.0
// What every workload's commands share: the flags and how they parse, the raw input and output
// files, the progress bar, the plan and statistics in text and JSON, and the workload table.
#pragma once

#include "args.hpp"
#include "json.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>

#include <workload_common/run_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tapeflow's CLI reads and writes raw little-endian files and needs a little-endian host"
#endif

namespace tapeflow::cli {

enum class command { init, run, plan, bench };

[[nodiscard]] char const* to_string(command c) noexcept;

/// A workload as the CLI knows it: its flags, its files, and its four commands.
struct workload {
  std::string name;     ///< "allen-cahn"
  std::string summary;  ///< one line for 'tapeflow --help'
  std::string model;    ///< what `run` computes, for its help
  std::string files;    ///< the input and output file formats, for the help of init and run
  std::vector<flag_spec> shape;    ///< what the input files' sizes depend on (init)
  std::vector<flag_spec> problem;  ///< sizes and parameters (run, plan, bench)
  std::vector<flag_spec> options;  ///< workload-specific options of run, plan and bench
  bool chain{true};     ///< takes the tape flags: --policy, --budget, --host-budget, --capture-reverse
  bool pipeline{true};  ///< takes the tiling flags: --tile-records, --stages, --staging, --bulk-copy
  bool f64_only{false};
  int (*init)(parsed_args const&){nullptr};
  int (*run)(parsed_args const&){nullptr};
  int (*plan)(parsed_args const&){nullptr};
  int (*bench)(parsed_args const&){nullptr};
};

/// Every workload of the CLI, in the order 'tapeflow --help' lists them.
[[nodiscard]] std::vector<workload const*> const& workloads();
[[nodiscard]] workload const& allen_cahn_cli();
[[nodiscard]] workload const& burgers_cli();
[[nodiscard]] workload const& lbm_cli();
[[nodiscard]] workload const& gmm_cli();
[[nodiscard]] workload const& lstm_cli();
[[nodiscard]] workload const& rk4_cli();

/// The flags `cmd` takes for `w`, in the order its help lists them.
[[nodiscard]] std::vector<flag_spec> flags_for(workload const& w, command cmd);
/// The usage and help text of `tapeflow <cmd> <w>`.
[[nodiscard]] std::string help_for(workload const& w, command cmd);
/// Parses `args` for `tapeflow <cmd> <w>`; a common flag the workload does not take is a
/// usage_error that says so.
[[nodiscard]] parsed_args parse_for(workload const& w, command cmd, std::vector<std::string> const& args);

// ---- values of flags (usage_error when malformed) ------------------------------------------
/// --dtype: "f32" (default) or "f64".
[[nodiscard]] std::string dtype_of(parsed_args const& args, workload const& w);
/// A required or defaulted integer flag within [lo, hi].
[[nodiscard]] std::size_t count_of(parsed_args const& args, std::string const& name, std::size_t lo, std::size_t hi,
                                   std::size_t fallback = 0);
/// A real-valued flag (finite).
[[nodiscard]] double real_of(parsed_args const& args, std::string const& name, double fallback);
/// The items of a comma-separated flag value, empty ones included ("1,,2" has three).
[[nodiscard]] std::vector<std::string> comma_items(std::string const& text);
/// --step-costs F,A,R: one step's untaped forward, taped forward and reverse, in milliseconds.
[[nodiscard]] step_cost step_cost_of(std::string const& text);
/// --seed (default 1).
[[nodiscard]] std::uint64_t seed_of(parsed_args const& args);
/// --backend: auto picks a GPU when one is present; an unavailable backend is unavailable_error.
[[nodiscard]] backend backend_of(parsed_args const& args);
/// --tile-records, --stages, --staging, --bulk-copy.
[[nodiscard]] pipeline_request pipeline_of(parsed_args const& args);
/// The chain options of a run_options workload: backend, tiling and, when `w.chain`, --policy,
/// --budget, --host-budget, --capture-reverse, --step-costs, --measure-steps.
void read_run_options(parsed_args const& args, workload const& w, workloads::run_options& o);
/// --warmup (default 2) and --repeats (default 10).
void bench_counts(parsed_args const& args, int& warmup, int& repeats);

// ---- files ------------------------------------------------------------------------------------
/// Reads exactly `count` values of T from `path`; io_error naming `layout` when the size differs.
template <class T>
std::vector<T> read_values(std::string const& path, std::size_t count, std::string const& layout)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) { TAPEFLOW_FAIL(io_error, "cannot open input file '" + path + "'"); }
  auto const size = static_cast<std::size_t>(in.tellg());
  if (size != count * sizeof(T)) {
    TAPEFLOW_FAIL(io_error, "input file '" + path + "' holds " + std::to_string(size) + " bytes; " + layout +
                              " needs " + std::to_string(count * sizeof(T)) + " (" + std::to_string(count) + " " +
                              (sizeof(T) == 4 ? "f32" : "f64") + " values)");
  }
  std::vector<T> values(count);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(size));
  if (!in) { TAPEFLOW_FAIL(io_error, "reading input file '" + path + "' failed"); }
  return values;
}

/// Writes the concatenation of `parts` to `path` (raw little-endian).
template <class T>
void write_values(std::string const& path, std::vector<std::vector<T> const*> const& parts)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) { TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'"); }
  for (std::vector<T> const* part : parts) {
    out.write(reinterpret_cast<char const*>(part->data()), static_cast<std::streamsize>(part->size() * sizeof(T)));
  }
  out.close();
  if (!out) { TAPEFLOW_FAIL(io_error, "writing output file '" + path + "' failed"); }
}

template <class T>
void write_values(std::string const& path, std::vector<T> const& values)
{
  write_values<T>(path, std::vector<std::vector<T> const*>{&values});
}

/// Splits `all` into consecutive parts of the given sizes (which sum to all.size()).
template <class T>
std::vector<std::vector<T>> split(std::vector<T> const& all, std::vector<std::size_t> const& sizes)
{
  std::vector<std::vector<T>> parts;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    parts.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return parts;
}

void write_text(std::string const& path, std::string const& text);

// ---- output -----------------------------------------------------------------------------------
[[nodiscard]] std::string human_bytes(std::size_t bytes);

/// The progress bar on stderr: drawn only when stderr is a terminal and --no-progress is absent.
class progress_bar {
 public:
  explicit progress_bar(parsed_args const& args);
  void operator()(chain_phase phase, std::size_t done, std::size_t total) const;
  /// As the progress callback of an options struct.
  [[nodiscard]] std::function<void(chain_phase, std::size_t, std::size_t)> callback() const;

 private:
  bool enabled_;
};

/// "tapeflow run lbm: nx = 64, ..., f32, backend cpu (host CPU (2 threads))".
void print_header(command cmd, workload const& w, std::string const& sizes, std::string const& dtype, backend kind);
void print_chain_plan(chain_stats const& planned);
/// The tier letters of every layer, ten to a line.
void print_layer_tiers(chain_stats const& planned);
/// The schedule a chain runs, per step: where its tape lives, the checkpoints of the state before
/// it stored and restored on each level, how often it runs untaped; and the predicted time.
json_object schedule_json(chain_stats const& c);
/// `plan --json PLAN.json` (or '-': standard output): the plan, the schedule, the predicted time.
void write_plan_json(parsed_args const& args, workload const& w, std::string const& dtype, backend kind,
                     chain_stats const& planned);
[[nodiscard]] json_object pipeline_json(pipeline_plan const& p);
[[nodiscard]] json_object chain_plan_json(chain_stats const& c);
/// What a chain run did, for --json.
void add_chain_stats(json_object& stats, chain_stats const& c);
/// The summary lines of a chain run.
void print_chain_summary(chain_stats const& c, std::size_t peak_device_bytes, cpu::ring_stats const& staging,
                         backend kind);
void add_staging(json_object& stats, cpu::ring_stats const& staging);

/// Medians of `repeats` wall-clock timings of f() after `warmup` untimed calls, in ms.
template <class F>
double median_ms(int warmup, int repeats, F&& f);

}  // namespace tapeflow::cli

#include <chrono>

namespace tapeflow::cli {
template <class F>
double median_ms(int warmup, int repeats, F&& f)
{
  for (int i = 0; i < warmup; ++i) { f(); }
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto const start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::size_t const m = ms.size() / 2;
  return ms.size() % 2 == 1 ? ms[m] : 0.5 * (ms[m - 1] + ms[m]);
}
}  // namespace tapeflow::cli
