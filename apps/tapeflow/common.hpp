// SPDX-License-Identifier: Apache-2.0
// What every workload's commands share: the flags and how they parse, the raw input and output
// files, the progress bar, the plan and statistics in text and JSON, and the workload table.
#pragma once

#include "ranks.hpp"

#include <tapeflow/workloads/common/args.hpp>
#include <tapeflow/workloads/common/json.hpp>

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>

#include <tapeflow/workloads/common/describe.hpp>
#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/segment_trials.hpp>
#include <tapeflow/workloads/common/session.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tapeflow's CLI reads and writes raw little-endian files and needs a little-endian host"
#endif

namespace tapeflow::cli {

enum class command { init, run, plan, bench };

[[nodiscard]] char const* to_string(command c) noexcept;

/// A workload as the CLI knows it: its flags, its files, and its four commands (made from its
/// description by commands<D>, commands.hpp).
struct workload {
  std::string name;     ///< "allen-cahn"
  std::string summary;  ///< one line for 'tapeflow --help'
  std::string model;    ///< what `run` computes, for its help
  std::string files;    ///< the input and output file formats, for the help of init and run
  std::vector<flag_spec> problem;  ///< sizes and parameters; those marked `shape` are init's too
  std::vector<flag_spec> options;  ///< workload-specific options of run, plan and bench
  workloads::tape_kind tape{workloads::tape_kind::chain};  ///< which common flags apply
  bool f64_only{false};
  bool captures_reverse{true};  ///< --capture-reverse applies (a chain whose reverse can be captured)
  int (*init)(parsed_args const&){nullptr};
  int (*run)(parsed_args const&){nullptr};
  int (*plan)(parsed_args const&){nullptr};
  int (*bench)(parsed_args const&){nullptr};
};

/// Every workload of the CLI, in the order 'tapeflow --help' lists them (the registry's).
[[nodiscard]] std::vector<workload const*> const& all_workloads();

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
/// --step-costs F,A,R: one step's untaped forward, taped forward and reverse, in milliseconds.
[[nodiscard]] step_cost step_cost_of(std::string const& text);
/// --backend: auto picks a GPU when one is present; an unavailable backend is unavailable_error.
[[nodiscard]] backend backend_of(parsed_args const& args);
/// --tile-records, --stages, --staging, --bulk-copy.
[[nodiscard]] pipeline_request pipeline_of(parsed_args const& args);
/// A chain workload's chain flags: --policy, --budget, --host-budget, --capture-reverse,
/// --step-costs, --measure-steps.
void read_run_options(parsed_args const& args, workloads::run_options& o);
/// --warmup (default 2) and --repeats (default 10).
void bench_counts(parsed_args const& args, int& warmup, int& repeats);

// ---- files ------------------------------------------------------------------------------------
/// Reads exactly `count` values of T from `path`; io_error naming `layout` when the size differs,
/// and when the file is not a regular file or holds a value that is not finite (NaN, infinity).
template <class T>
std::vector<T> read_values(std::string const& path, std::size_t count, std::string const& layout)
{
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    TAPEFLOW_FAIL(io_error, "input file '" + path + "' is not a regular file" +
                              (std::filesystem::is_directory(path, ec) ? " (a directory)" : ""));
  }
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
  auto const bad = std::find_if(values.begin(), values.end(), [](T v) { return !std::isfinite(v); });
  if (bad != values.end()) {
    TAPEFLOW_FAIL(io_error, "input file '" + path + "' holds " + (std::isnan(*bad) ? "NaN" : "an infinity") +
                              " at value " + std::to_string(bad - values.begin()) + " (" + layout +
                              "): every input must be finite");
  }
  return values;
}

/// Writes the concatenation of `parts` to `path` (raw little-endian); over ranks, rank 0 does.
template <class T>
void write_values(std::string const& path, std::vector<std::vector<T>> const& parts)
{
  if (!writes_files()) { return; }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) { TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'"); }
  for (std::vector<T> const& part : parts) {
    out.write(reinterpret_cast<char const*>(part.data()), static_cast<std::streamsize>(part.size() * sizeof(T)));
  }
  out.close();
  if (!out) { TAPEFLOW_FAIL(io_error, "writing output file '" + path + "' failed"); }
}

/// Writes `text` and a newline to `path`; over ranks, rank 0 does.
void write_text(std::string const& path, std::string const& text);

/// Fails now, with the io_error the write at the end would raise, unless each of `flags` that was
/// given names a file this process can write: a run does not compute for hours to lose its
/// result, and over ranks the failure is met before the ranks start together. Leaves an existing
/// file as it was and creates none. Over ranks, rank 0 checks. "-" (standard output) is a
/// usage_error unless `standard_output` (plan's --json, whose text it replaces), and so are two
/// flags naming one file (one write would overwrite the other).
void require_writable(parsed_args const& args, std::initializer_list<char const*> flags, bool standard_output = false);

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

/// "tapeflow run lbm: nx = 64, ..., f32, backend cpu (host CPU (2 threads, AVX2))".
void print_header(command cmd, workload const& w, std::string const& sizes, std::string const& dtype, backend kind);
/// What a tape will do, or did: the chain's tiling and tiers, one layer's tiling, or the
/// workload's own lines (a per-thread arena).
void print_plan(workloads::tape_report const& planned);
void print_chain_plan(chain_stats const& planned);
/// The tier letters of every layer, ten to a line.
void print_layer_tiers(chain_stats const& planned);
/// The summary lines of a run.
void print_summary(workloads::tape_report const& r, backend kind);
/// The schedule a chain runs, per step: where its tape lives, the checkpoints of the state before
/// it stored and restored on each level, how often it runs untaped; and the predicted time.
json_object schedule_json(chain_stats const& c);
/// `plan --json PLAN.json` (or '-': standard output): the plan, the schedule, the predicted time,
/// and what --segment measure timed (`trials`, when it did).
void write_plan_json(parsed_args const& args, workload const& w, std::string const& dtype, backend kind,
                     chain_stats const& planned, workloads::segment_measurement const& trials = {});
/// Its line before a plan ("trials: ..."), where there were trials.
void print_segment_trials(workloads::segment_measurement const& m);
[[nodiscard]] json_object pipeline_json(pipeline_plan const& p);
[[nodiscard]] json_object chain_plan_json(chain_stats const& c);
/// What a run's tape did, for --json.
void add_report(json_object& stats, workloads::tape_report const& r, backend kind);
/// The row of the results format a bench command writes (--json) and its summary lines.
void write_bench_row(parsed_args const& args, workload const& w, std::string const& variant, std::string const& size,
                     backend kind, workloads::bench_result const& r, std::function<void(json_object&)> const& more);

}  // namespace tapeflow::cli
