// SPDX-License-Identifier: Apache-2.0
#include "common.hpp"

#include <tapeflow/policy.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/tiers.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <unistd.h>

namespace tapeflow::cli {

char const* to_string(command c) noexcept
{
  switch (c) {
    case command::init: return "init";
    case command::run: return "run";
    case command::plan: return "plan";
    case command::bench: return "bench";
  }
  return "?";
}

namespace {

flag_spec const help_flag{"help", "", "show this help", false};
flag_spec const dtype_flag{"dtype", "f32|f64", "value type of every file and of the computation (default f32)", false};
flag_spec const dtype_f64_flag{"dtype", "f64", "value type (f64 only: the workload is defined in double)", false};
flag_spec const backend_flag{"backend", "auto|cpu|cuda|hip",
                             "where to run (default auto: a GPU when one is present, else cpu)", false};

std::vector<flag_spec> const chain_flags{
  {"policy", "auto|store|offload|recompute", "where the tape lives (default auto)", false},
  {"budget", "BYTES", "device bytes the tape may occupy (K, M, G suffixes; default: no limit)", false},
  {"host-budget", "BYTES", "pinned host bytes the host tier may occupy (default: no limit)", false},
  {"capture-reverse", "", "keep the tape resident and replay the reverse as one graph (store policy)", false},
  {"step-costs", "F,A,R",
   "one step's measured milliseconds for the planner: untaped forward, taped forward, reverse "
   "(default: estimated from the step's memory traffic)",
   false},
};

flag_spec const measure_steps_flag{"measure-steps", "",
                                   "time one step (untaped, taped, reverse) before planning a tape that does not fit, "
                                   "and plan with that (layers of different sizes: the largest and the smallest, the "
                                   "others in between)",
                                   false};

std::vector<flag_spec> const pipeline_flags{
  {"tile-records", "K", "records per tile (default: planned)", false},
  {"stages", "S", "pipeline stages, 2..8 (default: planned)", false},
  {"staging", "in-place|ring", "CPU backend: read tiles in place (default) or through the staging ring", false},
  {"bulk-copy", "", "stage tiles with sm_90 bulk copies (cp.async.bulk) where the device has them", false},
};

/// Every flag some workload's command shares with the others.
std::set<std::string> const& common_names()
{
  static std::set<std::string> const names{
    "out",    "input",   "grad-out",   "backend",     "dtype",        "seed",   "json",    "no-progress", "policy",
    "budget", "host-budget", "capture-reverse", "step-costs", "measure-steps", "tile-records", "stages", "staging",
    "bulk-copy", "warmup", "repeats"};
  return names;
}

void append(std::vector<flag_spec>& to, std::vector<flag_spec> const& from) { to.insert(to.end(), from.begin(), from.end()); }

}  // namespace

std::vector<flag_spec> flags_for(workload const& w, command cmd)
{
  std::vector<flag_spec> all;
  for (flag_spec const& f : w.problem) {
    if (cmd != command::init || f.shape) { all.push_back(f); }
  }
  bool const chain = w.tape == workloads::tape_kind::chain;
  bool const pipeline = w.tape != workloads::tape_kind::arena;
  flag_spec const& dtype = w.f64_only ? dtype_f64_flag : dtype_flag;
  switch (cmd) {
    case command::init:
      all.push_back({"out", "IN.bin", "file to write (its format: files, above)", true});
      all.push_back(dtype);
      all.push_back({"seed", "S", "random seed (default 1)", false});
      break;
    case command::run:
      all.push_back({"input", "IN.bin", "the inputs (format: files, above)", true});
      all.push_back({"grad-out", "G.bin", "where to write the gradient (format: files, above)", true});
      [[fallthrough]];
    case command::plan:
      if (cmd == command::plan && chain) {
        all.push_back({"json", "PLAN.json", "write the plan as JSON: per step where its tape lives, its checkpoints "
                                            "and recomputations, and the predicted time ('-': standard output)",
                       false});
      }
      [[fallthrough]];
    case command::bench:
      all.push_back(dtype);
      all.push_back(backend_flag);
      if (chain) {
        for (flag_spec const& f : chain_flags) {
          if (f.name != "capture-reverse" || w.captures_reverse) { all.push_back(f); }
        }
      }
      if (chain && cmd != command::plan) { all.push_back(measure_steps_flag); }
      if (pipeline) { append(all, pipeline_flags); }
      append(all, w.options);
      if (cmd == command::run) {
        all.push_back({"json", "STATS.json", "write the run's statistics as JSON", false});
        all.push_back({"no-progress", "", "never draw the progress bar (it is drawn only on a terminal)", false});
      }
      if (cmd == command::bench) {
        all.push_back({"warmup", "W", "untimed runs first (default 2)", false});
        all.push_back({"repeats", "R", "timed runs; medians are reported (default 10)", false});
        all.push_back({"seed", "S", "random inputs' seed (default 1)", false});
        all.push_back({"json", "ROW.json", "write the result as one row of the results format", false});
      }
      break;
  }
  all.push_back(help_flag);
  return all;
}

std::string help_for(workload const& w, command cmd)
{
  std::vector<flag_spec> const flags = flags_for(w, cmd);
  std::string usage = "usage: tapeflow " + std::string{to_string(cmd)} + " " + w.name;
  for (flag_spec const& f : flags) {
    if (f.required) { usage += " --" + f.name + " " + f.value; }
  }
  usage += " [options]\n\n";
  switch (cmd) {
    case command::init: usage += "Writes random inputs of the " + w.name + " workload, in the format `run` reads.\n\n"; break;
    case command::run: usage += w.model + "\n\n"; break;
    case command::plan:
      usage += "Prints how the " + w.name + " tape would be laid out and where it would live, without running it.\n\n";
      break;
    case command::bench:
      usage += "Times the primal and the gradient of the " + w.name +
               " workload on random inputs: medians of timed runs after a warm-up.\n\n";
      break;
  }
  if (cmd == command::init || cmd == command::run) { usage += "files (raw little-endian, no header):\n" + w.files + "\n\n"; }
  return usage + "options:\n" + describe_flags(flags);
}

parsed_args parse_for(workload const& w, command cmd, std::vector<std::string> const& args)
{
  std::vector<flag_spec> const specs = flags_for(w, cmd);
  for (std::string const& arg : args) {
    if (arg.rfind("--", 0) != 0) { continue; }
    std::string const name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    bool const known = std::any_of(specs.begin(), specs.end(), [&](flag_spec const& s) { return s.name == name; });
    if (!known && common_names().count(name) != 0) {
      throw usage_error("option '--" + name + "' does not apply to '" + std::string{to_string(cmd)} + " " + w.name +
                        "' (see 'tapeflow " + to_string(cmd) + " " + w.name + " --help')");
    }
  }
  return parsed_args(specs, args);
}

// ---------------------------------------------------------------------------------------------
std::string dtype_of(parsed_args const& args, workload const& w)
{
  std::string const dtype = args.text("dtype", w.f64_only ? "f64" : "f32");
  if (w.f64_only && dtype != "f64") {
    throw usage_error("--dtype must be f64 for " + w.name + " (the workload is defined in double), got '" + dtype + "'");
  }
  if (dtype != "f32" && dtype != "f64") { throw usage_error("--dtype must be f32 or f64, got '" + dtype + "'"); }
  return dtype;
}

step_cost step_cost_of(std::string const& text)
{
  std::vector<std::string> const items = comma_items(text);
  double ms[3] = {0, 0, 0};
  for (std::size_t k = 0; k < 3; ++k) {
    ms[k] = items.size() == 3 ? finite_number(items[k]).value_or(0) : 0;
    if (ms[k] <= 0 || ms[k] > 1e9) {  // 1e9 ms: eleven days a step; a schedule's sums stay finite
      throw usage_error("--step-costs must be three positive numbers of milliseconds up to 1e9, F,A,R (untaped "
                        "forward, taped forward, reverse), got '" + text + "'");
    }
  }
  step_cost c;
  c.forward_ms = ms[0];
  c.aug_forward_ms = ms[1];
  c.reverse_ms = ms[2];
  return c;
}

backend backend_of(parsed_args const& args)
{
  std::string const name = args.text("backend", "auto");
  backend kind = backend::cpu;
  if (name == "auto") {
    kind = best_available_backend();
  } else {
    try {
      kind = parse_backend(name);
    } catch (logic_error const&) {
      throw usage_error("--backend must be auto, cpu, cuda or hip, got '" + name + "'");
    }
  }
  if (!backend_available(kind)) { TAPEFLOW_FAIL(unavailable_error, backend_unavailable_reason(kind)); }
  return kind;
}

pipeline_request pipeline_of(parsed_args const& args)
{
  pipeline_request r;
  if (args.has("tile-records")) { r.tile_records = count_of(args, "tile-records", 1, std::size_t{1} << 40); }
  if (args.has("stages")) { r.stages = static_cast<int>(count_of(args, "stages", 2, max_pipeline_stages)); }
  std::string const staging = args.text("staging", "in-place");
  if (staging != "in-place" && staging != "ring") {
    throw usage_error("--staging must be in-place or ring, got '" + staging + "'");
  }
  r.staging = staging == "ring" ? cpu_staging::ring : cpu_staging::in_place;
  r.bulk_copy = args.has("bulk-copy");
  return r;
}

void read_run_options(parsed_args const& args, workloads::run_options& o)
{
  try {
    o.policy = parse_policy(args.text("policy", "auto"));
  } catch (logic_error const&) {
    throw usage_error("--policy must be auto, store, offload or recompute, got '" + args.text("policy") + "'");
  }
  o.budget_bytes = budget_of(args, "budget");
  o.host_budget_bytes = budget_of(args, "host-budget");
  o.capture_reverse = args.has("capture-reverse");
  if (args.has("step-costs")) { o.step_costs = {step_cost_of(args.text("step-costs"))}; }
  o.measure_steps = args.has("measure-steps");
  o.ranks = launched_ranks();
}

void bench_counts(parsed_args const& args, int& warmup, int& repeats)
{
  std::size_t const w = args.size("warmup", 2);
  std::size_t const r = args.size("repeats", 10);
  if (r == 0 || r > 10000 || w > 10000) {
    throw usage_error("--repeats must be between 1 and 10000 and --warmup at most 10000");
  }
  warmup = static_cast<int>(w);
  repeats = static_cast<int>(r);
}

// ---------------------------------------------------------------------------------------------
void write_text(std::string const& path, std::string const& text)
{
  if (!writes_files()) { return; }
  std::ofstream out(path, std::ios::trunc);
  if (!out) { TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'"); }
  out << text << '\n';
  out.close();
  if (!out) { TAPEFLOW_FAIL(io_error, "writing output file '" + path + "' failed"); }
}

void require_writable(parsed_args const& args, std::initializer_list<char const*> flags, bool standard_output)
{
  std::vector<std::pair<char const*, std::filesystem::path>> named;
  for (char const* flag : flags) {
    if (!args.has(flag)) { continue; }
    std::string const path = args.text(flag);
    if (path == "-") {
      if (standard_output) { continue; }
      throw usage_error("--" + std::string{flag} + " -: only plan writes to standard output (its --json); give a file");
    }
    std::error_code ignored;
    std::filesystem::path const file = std::filesystem::weakly_canonical(path, ignored);
    for (auto const& [other, other_file] : named) {
      if (!file.empty() && file == other_file) {
        throw usage_error("--" + std::string{other} + " and --" + flag + " name the same file, '" + path + "'");
      }
    }
    named.emplace_back(flag, file);
  }
  if (!writes_files()) { return; }
  for (char const* flag : flags) {
    if (!args.has(flag) || args.text(flag) == "-") { continue; }
    std::string const path = args.text(flag);
    std::error_code ignored;
    bool const existed = std::filesystem::exists(path, ignored);
    if (!std::ofstream(path, std::ios::binary | std::ios::app)) {  // appending changes nothing yet
      TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'");
    }
    if (!existed) { std::filesystem::remove(path, ignored); }
  }
}

std::string human_bytes(std::size_t bytes) { return detail::shown_bytes(bytes); }

progress_bar::progress_bar(parsed_args const& args)
  : enabled_(!args.has("no-progress") && isatty(STDERR_FILENO) != 0)
{
}

void progress_bar::operator()(chain_phase phase, std::size_t done, std::size_t total) const
{
  if (!enabled_) { return; }
  constexpr int width = 40;
  int const filled = static_cast<int>(width * done / (total == 0 ? 1 : total));
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r  %-8s [%s] %zu/%zu", phase == chain_phase::forward ? "forward" : "reverse", bar.c_str(),
               done, total);
  if (phase == chain_phase::reverse && done == total) { std::fprintf(stderr, "\r%*s\r", width + 30, ""); }
  std::fflush(stderr);
}

std::function<void(chain_phase, std::size_t, std::size_t)> progress_bar::callback() const
{
  progress_bar const copy = *this;
  return [copy](chain_phase phase, std::size_t done, std::size_t total) { copy(phase, done, total); };
}

void print_header(command cmd, workload const& w, std::string const& sizes, std::string const& dtype, backend kind)
{
  std::printf("tapeflow %s %s: %s, %s, backend %s (%s)\n", to_string(cmd), w.name.c_str(), sizes.c_str(), dtype.c_str(),
              std::string{tapeflow::to_string(kind)}.c_str(), query_device_limits(kind).name.c_str());
  std::fflush(stdout);
}

void print_plan(workloads::tape_report const& planned)
{
  if (planned.chain) {
    print_chain_plan(*planned.chain);
  } else if (planned.layer) {
    std::printf("plan:   one layer of %zu records x %zu B = %s of tape\n        %s\n", planned.layer->records,
                planned.layer->record_bytes, human_bytes(planned.tape_bytes).c_str(),
                planned.layer->describe().c_str());
  }
  for (std::size_t i = 0; i < planned.notes.size(); ++i) {
    std::printf("%s%s\n", i == 0 && !planned.chain && !planned.layer ? "plan:   " : "        ", planned.notes[i].c_str());
  }
  std::fflush(stdout);
}

void print_chain_plan(chain_stats const& planned)
{
  bool const unequal = !planned.step_plans.empty();  // layers of different sizes, each tiled on its own
  std::printf("plan:   tape %zu layers %s %s = %s; device budget %s\n", planned.steps, unequal ? "of up to" : "x",
              human_bytes(planned.layer_bytes).c_str(), human_bytes(planned.tape_bytes).c_str(),
              planned.budget_bytes == 0 ? "none" : human_bytes(planned.budget_bytes).c_str());
  std::printf("        tiers: %s\n", planned.tiers.describe().c_str());
  std::printf("        %s: %s\n", unequal ? "largest layer" : "each layer", planned.plan.describe().c_str());
}

void print_layer_tiers(chain_stats const& planned)
{
  // Ten layers a line; two or more lines in a row equal to the one before are one line saying so,
  // so that a million layers print in a few lines, not a hundred thousand.
  std::vector<tier> const& tiers = planned.tiers.tiers;
  std::string previous;
  std::size_t repeats = 0;  // lines equal to `previous` not printed yet, the first at layer `from`
  std::size_t from = 0;
  auto flush = [&] {
    if (repeats == 1) {
      std::printf("        layers %zu..: %s\n", from, previous.c_str());
    } else if (repeats > 1) {
      std::printf("        layers %zu..%zu: the same\n", from, from + 10 * repeats - 1);
    }
    repeats = 0;
  };
  for (std::size_t t = 0; t < tiers.size(); t += 10) {
    std::string line;
    for (std::size_t k = t; k < std::min(t + 10, tiers.size()); ++k) {
      line += (k == t ? "" : " ") + std::string{tapeflow::to_string(tiers[k]).substr(0, 1)};
    }
    if (t > 0 && t + 10 <= tiers.size() && line == previous) {
      if (repeats++ == 0) { from = t; }
      continue;
    }
    flush();
    std::printf("        layers %zu..: %s\n", t, line.c_str());
    previous = line;
  }
  flush();
  std::printf("        (d: device, h: host, r: recompute)\n");
}

void print_summary(workloads::tape_report const& r, backend kind)
{
  if (r.chain) {
    chain_stats const& c = *r.chain;
    std::printf("summary: policy %s; forward %.3f ms, reverse %.3f ms; peak tape %s (device), %s (host); "
                "peak device %s\n",
                std::string{tapeflow::to_string(c.policy)}.c_str(), c.forward_ms, c.reverse_ms,
                human_bytes(c.peak_tape_bytes).c_str(), human_bytes(c.host_tape_bytes).c_str(),
                human_bytes(r.peak_device_bytes).c_str());
    std::printf("         %zu prefetches, stalled %.3f ms; %zu steps recomputed in %.3f ms", c.prefetches, c.stall_ms,
                c.recompute_steps, c.recompute_ms);
  } else {
    std::printf("summary: tape %s, peak device %s", human_bytes(r.tape_bytes).c_str(),
                human_bytes(r.peak_device_bytes).c_str());
  }
  if (kind == backend::cpu) {
    if (r.staging.staged_tiles > 0) {
      std::printf("; %zu tiles staged, consumer waited %zu times", r.staging.staged_tiles, r.staging.consumer_waits);
    } else if (r.staging.tiles > 0) {
      std::printf("; %zu tiles read in place", r.staging.tiles);
    }
  }
  std::printf("\n");
  if (r.arena) { std::printf("         %s\n", r.arena->describe().c_str()); }
  for (auto const& [name, value] : r.facts) { std::printf("         %s %g\n", name.c_str(), value); }
}

json_object pipeline_json(pipeline_plan const& p)
{
  json_object o;
  o.add("record_bytes", p.record_bytes)
    .add("records_per_layer", p.records)
    .add("tile_records", p.tile_records)
    .add("tiles_per_layer", p.tiles)
    .add("halo_records", p.halo_records)
    .add("stages", p.stages)
    .add("block_threads", p.block_threads)
    .add("grid_blocks", p.grid_blocks)
    .add("staging_bytes", p.smem_bytes)
    .add("async_copy", p.async_copy);
  if (p.kind == backend::cpu) { o.add("cpu_staging", tapeflow::to_string(p.staging)); }
  return o;
}

json_object chain_plan_json(chain_stats const& c)
{
  json_object plan = pipeline_json(c.plan);
  plan.add("device_layers", c.tiers.count(tier::device))
    .add("host_layers", c.tiers.count(tier::host))
    .add("recompute_layers", c.tiers.count(tier::recompute))
    .add("ring_slots", c.tiers.ring_slots)
    .add("prefetch_distance", c.tiers.prefetch_distance)
    .add("snapshots", c.tiers.snapshots)
    .add("planned_device_bytes", c.tiers.device_bytes)
    .add("estimated_overhead_ms", c.tiers.overhead_ms)
    .add("predicted_ms", c.tiers.predicted_ms);
  if (!c.step_plans.empty()) {  // layers of different sizes: the records of each (the fields above: the largest)
    std::vector<std::size_t> records;
    for (pipeline_plan const& p : c.step_plans) { records.push_back(p.records); }
    plan.add("records_per_step", records);
  }
  // The costs the plan rests on when they were given or measured (absent: estimated): step 0's,
  // and every step's when they differ (measured layers of different sizes).
  auto costs_of = [](step_cost const& s) {
    json_object costs;
    costs.add("forward_ms", s.forward_ms).add("aug_forward_ms", s.aug_forward_ms).add("reverse_ms", s.reverse_ms);
    return costs;
  };
  if (!c.step_costs.empty()) { plan.add("step_costs", costs_of(c.step_costs.front())); }
  if (c.step_costs.size() > 1) {
    std::vector<json_object> every;
    for (step_cost const& s : c.step_costs) { every.push_back(costs_of(s)); }
    plan.add("step_costs_per_step", every);
  }
  return plan;
}

json_object schedule_json(chain_stats const& c)
{
  std::size_t const n = c.tiers.tiers.size();
  // Per step and level: checkpoints of the state before the step stored and restored.
  std::vector<std::size_t> stores[2] = {std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  std::vector<std::size_t> restores[2] = {std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  std::vector<std::string> actions;
  // The schedule the chain runs, whatever the policy. An advance over [step, to) adds one untaped
  // run to each of its steps: +1 at step and -1 at to, summed below (not a loop over its steps,
  // which with few checkpoints made the whole n^2 / 2).
  std::vector<std::ptrdiff_t> runs(n + 1, 0);
  for (schedule_action const& a : chain_actions(c.tiers, n)) {
    int const k = static_cast<int>(a.where);
    if (a.kind == action_kind::store) { ++stores[k][a.step]; }
    if (a.kind == action_kind::restore) { ++restores[k][a.step]; }
    if (a.kind == action_kind::advance) {
      ++runs[a.step];
      --runs[a.to];
    }
    actions.push_back(tapeflow::to_string(a));
  }
  std::vector<std::size_t> recomputed(n, 0);
  std::ptrdiff_t running = 0;
  for (std::size_t t = 0; t < n; ++t) {
    running += runs[t];
    recomputed[t] = static_cast<std::size_t>(running);
  }
  std::vector<json_object> steps;
  for (std::size_t t = 0; t < n; ++t) {
    json_object s;
    s.add("step", t).add("tape", std::string{tapeflow::to_string(c.tiers.tiers[t])}).add("recomputed", recomputed[t]);
    json_object checkpoints;
    checkpoints.add("device_stores", stores[0][t])
      .add("device_restores", restores[0][t])
      .add("host_stores", stores[1][t])
      .add("host_restores", restores[1][t]);
    s.add("checkpoints", checkpoints);
    steps.push_back(s);
  }
  json_object out;
  out.add("policy", std::string{tapeflow::to_string(c.policy)})
    .add("predicted_ms", c.tiers.predicted_ms)
    .add("recompute_steps", c.tiers.recompute_steps)
    .add("steps", steps)
    .add("actions", actions);
  return out;
}

namespace {

/// What a chain planned: its policy, budget, layers and tape, the predicted time, the plan and the
/// schedule (`tapeflow plan --json`, and the start of a run's chain statistics).
void add_chain_plan(json_object& o, chain_stats const& c)
{
  o.add("policy", std::string{tapeflow::to_string(c.policy)})
    .add("budget_bytes", c.budget_bytes)
    .add("layers", c.steps)
    .add("layer_bytes", c.layer_bytes)
    .add("tape_bytes", c.tape_bytes)
    .add("predicted_ms", c.tiers.predicted_ms)
    .add("plan", chain_plan_json(c))
    .add("schedule", schedule_json(c));
}

}  // namespace

void write_plan_json(parsed_args const& args, workload const& w, std::string const& dtype, backend kind,
                     chain_stats const& planned, workloads::segment_measurement const& trials)
{
  if (!args.has("json")) { return; }
  json_object plan;
  plan.add("workload", w.name).add("dtype", dtype).add("backend", std::string{tapeflow::to_string(kind)});
  add_chain_plan(plan, planned);
  if (!trials.trials.empty()) { plan.add("segment_trials", trials.json()); }
  if (args.text("json") == "-") {
    std::printf("%s\n", plan.str().c_str());
  } else {
    write_text(args.text("json"), plan.str());
  }
}

void print_segment_trials(workloads::segment_measurement const& m)
{
  if (m.trials.empty()) { return; }
  std::printf("trials: --segment %s\n", m.describe().c_str());
  std::fflush(stdout);
}

namespace {

/// What a chain planned (add_chain_plan) and what it measured.
void add_chain_stats(json_object& stats, chain_stats const& c)
{
  add_chain_plan(stats, c);
  stats.add("device_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::device)])
    .add("host_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::host)])
    .add("recompute_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::recompute)])
    .add("peak_tape_bytes", c.peak_tape_bytes)
    .add("host_tape_bytes", c.host_tape_bytes)
    .add("forward_ms", c.forward_ms)
    .add("reverse_ms", c.reverse_ms)
    .add("stall_ms", c.stall_ms)
    .add("prefetches", c.prefetches)
    .add("recompute_steps", c.recompute_steps)
    .add("recompute_ms", c.recompute_ms)
    .add("measured_ms", c.forward_ms + c.reverse_ms);
}

json_object arena_json(thread_tape_stats const& a)
{
  json_object j;
  j.add("chunk_steps", a.chunk_steps)
    .add("chunk_bytes", a.chunk_bytes)
    .add("chunks", a.chunks)
    .add("device_slots", a.device_slots)
    .add("chunks_to_host", a.chunks_to_host)
    .add("prefetches", a.prefetches)
    .add("max_steps", a.max_steps);
  return j;
}

}  // namespace

void add_report(json_object& stats, workloads::tape_report const& r, backend kind)
{
  stats.add("peak_device_bytes", r.peak_device_bytes);
  if (r.chain) {
    add_chain_stats(stats, *r.chain);  // with the chain's tape bytes
  } else {
    stats.add("tape_bytes", r.tape_bytes);
  }
  if (r.layer) { stats.add("plan", pipeline_json(*r.layer)); }
  if (r.arena) { stats.add("arena", arena_json(*r.arena)); }
  for (auto const& [name, value] : r.facts) { stats.add(name, value); }
  if (kind == backend::cpu) {
    json_object s;
    s.add("tiles", r.staging.tiles)
      .add("staged_tiles", r.staging.staged_tiles)
      .add("consumer_waits", r.staging.consumer_waits)
      .add("producer_waits", r.staging.producer_waits)
      .add("max_in_flight", r.staging.max_in_flight);
    stats.add("staging", s);
  }
}

void write_bench_row(parsed_args const& args, workload const& w, std::string const& variant, std::string const& size,
                     backend kind, workloads::bench_result const& r, std::function<void(json_object&)> const& more)
{
  std::printf("primal: %.3f ms   gradient: %.3f ms   gradient/primal: %.2f\n", r.primal_ms, r.grad_ms,
              r.grad_ms / r.primal_ms);
  std::printf("tape %s, peak device %s (device-resident, event-timed medians, no transfers)\n",
              human_bytes(r.report.tape_bytes).c_str(), human_bytes(r.report.peak_device_bytes).c_str());
  if (!args.has("json")) { return; }
  json_object row;
  row.add("workload", w.name)
    .add("variant", variant)
    .add("size", size)
    .add("device", query_device_limits(kind).name)
    .add("primal_ms", r.primal_ms)
    .add("grad_ms", r.grad_ms)
    .add("grad_over_primal", r.grad_ms / r.primal_ms)
    .add("forward_ms", r.forward_ms)
    .add("reverse_ms", r.reverse_ms)
    .add("timing", "device-resident, event-timed medians (no transfers)")
    .add("tape_bytes", r.report.tape_bytes)
    .add("peak_device_bytes", r.report.peak_device_bytes);
  if (more) { more(row); }
  if (r.report.chain) { row.add("plan", chain_plan_json(*r.report.chain)); }
  if (r.report.layer) { row.add("plan", pipeline_json(*r.report.layer)); }
  if (r.report.arena) { row.add("arena", arena_json(*r.report.arena)); }
  write_text(args.text("json"), row.str());
}

}  // namespace tapeflow::cli
