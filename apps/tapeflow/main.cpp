// SPDX-License-Identifier: Apache-2.0
// The tapeflow command-line tool.
//
//   tapeflow info
//   tapeflow init allen-cahn --n N --out U0.bin [--dtype f32|f64] [--seed S]
//   tapeflow run allen-cahn --n N --steps T --input U0.bin --grad-out G.bin
//       [--dtype f32|f64] [--backend auto|cpu|cuda|hip] [--policy auto|store|offload|recompute]
//       [--budget BYTES] [--host-budget BYTES] [--json STATS.json] [--tile-records K] [--stages S]
//       [--tape values|partials] [--bulk-copy] [--no-progress]
//   tapeflow plan allen-cahn --n N --steps T [--dtype] [--backend] [--policy] [--budget] [--host-budget]
//   tapeflow bench allen-cahn --n N --steps T [the plan options] [--warmup W] [--repeats R] [--json ROW.json]
//
// Exit status: 0 on success, 2 on bad usage or input (a message says what), 1 on a runtime failure.
#include "args.hpp"
#include "json.hpp"

#include <allen_cahn/allen_cahn.hpp>
#include <tapeflow/backend.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/tiers.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tapeflow's CLI reads and writes raw little-endian files and needs a little-endian host"
#endif

namespace tapeflow::cli {
namespace {

namespace ac = workloads::allen_cahn;

constexpr char const* usage_text = R"(usage: tapeflow <command> [options]

commands:
  info                 backends compiled into this build and the devices present
  init allen-cahn      write a random initial state U0.bin
  run allen-cahn       gradient dL/du0 of the Allen-Cahn workload through the tape
  plan allen-cahn      where each layer of that tape would live, without running it
  bench allen-cahn     primal and gradient times on the device (medians of timed runs)

'tapeflow <command> --help' describes a command's options.
)";

std::vector<flag_spec> const init_flags{
  {"n", "N", "grid side (the file holds N*N values)", true},
  {"out", "U0.bin", "file to write (raw little-endian, row-major)", true},
  {"dtype", "f32|f64", "value type (default f32)", false},
  {"seed", "S", "random seed (default 1)", false},
  {"help", "", "show this help", false},
};

/// The problem and tape options `run`, `plan` and `bench` share, so they read the same way.
std::vector<flag_spec> const problem_flags{
  {"n", "N", "grid side", true},
  {"steps", "T", "time steps", true},
  {"dtype", "f32|f64", "value type (default f32)", false},
  {"backend", "auto|cpu|cuda|hip", "where to run (default auto: a GPU when present, else cpu)", false},
  {"policy", "auto|store|offload|recompute", "where the tape lives (default auto)", false},
  {"budget", "BYTES", "device bytes the tape may occupy (K, M, G suffixes; default: no limit)", false},
  {"host-budget", "BYTES", "pinned host bytes the host tier may occupy (default: no limit)", false},
  {"tile-records", "K", "records per tile (default: planned)", false},
  {"stages", "S", "pipeline stages, 2..8 (default: planned)", false},
  {"bulk-copy", "", "stage tiles with sm_90 bulk copies (cp.async.bulk) where the device has them", false},
  {"tape", "values|partials", "what the tape holds per cell: u, or r'(u) by forward-mode duals (default values)", false},
};

flag_spec const capture_flag{"capture-reverse", "",
                             "keep the tape resident and replay the reverse as one graph (store policy)", false};
flag_spec const help_flag{"help", "", "show this help", false};

std::vector<flag_spec> with_problem_flags(std::vector<flag_spec> extra)
{
  std::vector<flag_spec> all = problem_flags;
  all.insert(all.end(), extra.begin(), extra.end());
  all.push_back(help_flag);
  return all;
}

std::vector<flag_spec> const run_flags = with_problem_flags({
  {"input", "U0.bin", "initial state: N*N raw little-endian values, row-major", true},
  {"grad-out", "G.bin", "where to write dL/du0 (same format)", true},
  {"json", "STATS.json", "write the run's statistics as JSON", false},
  capture_flag,
  {"no-progress", "", "never draw the progress bar", false},
});

std::vector<flag_spec> const plan_flags = with_problem_flags({});

std::vector<flag_spec> const bench_flags = with_problem_flags({
  capture_flag,
  {"warmup", "W", "untimed runs first (default 2)", false},
  {"repeats", "R", "timed runs; medians are reported (default 10)", false},
  {"seed", "S", "random initial state's seed (default 1)", false},
  {"json", "ROW.json", "write the result as one row of the results format", false},
});

std::string human_bytes(std::size_t bytes)
{
  char buf[32];
  double const b = static_cast<double>(bytes);
  if (bytes >= (std::size_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  } else if (bytes >= (std::size_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  }
  return buf;
}

std::string parse_dtype(parsed_args const& args)
{
  std::string const dtype = args.text("dtype", "f32");
  if (dtype != "f32" && dtype != "f64") { throw usage_error("--dtype must be f32 or f64, got '" + dtype + "'"); }
  return dtype;
}

template <class T>
std::vector<T> read_values(std::string const& path, std::size_t count, std::string const& dtype, std::size_t n)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) { TAPEFLOW_FAIL(io_error, "cannot open input file '" + path + "'"); }
  auto const size = static_cast<std::size_t>(in.tellg());
  if (size != count * sizeof(T)) {
    TAPEFLOW_FAIL(io_error, "input file '" + path + "' holds " + std::to_string(size) + " bytes; n = " +
                              std::to_string(n) + " in " + dtype + " needs " + std::to_string(count * sizeof(T)) +
                              " (" + std::to_string(count) + " values)");
  }
  std::vector<T> values(count);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(size));
  if (!in) { TAPEFLOW_FAIL(io_error, "reading input file '" + path + "' failed"); }
  return values;
}

template <class T>
void write_values(std::string const& path, std::vector<T> const& values)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) { TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'"); }
  out.write(reinterpret_cast<char const*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  out.close();
  if (!out) { TAPEFLOW_FAIL(io_error, "writing output file '" + path + "' failed"); }
}

void write_text(std::string const& path, std::string const& text)
{
  std::ofstream out(path, std::ios::trunc);
  if (!out) { TAPEFLOW_FAIL(io_error, "cannot open output file '" + path + "'"); }
  out << text << '\n';
  out.close();
  if (!out) { TAPEFLOW_FAIL(io_error, "writing output file '" + path + "' failed"); }
}

void expect_workload(std::vector<std::string> const& args, char const* command)
{
  if (args.empty() || args[0].rfind("--", 0) == 0) {
    throw usage_error(std::string{"'"} + command + "' needs a workload: allen-cahn");
  }
  if (args[0] != "allen-cahn") { throw usage_error("unknown workload '" + args[0] + "' (known: allen-cahn)"); }
}

bool wants_help(std::vector<std::string> const& args)
{
  for (auto const& a : args) {
    if (a == "--help" || a == "-h") { return true; }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
int command_info()
{
  std::printf("tapeflow %d.%d.%d\n", TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH);
  std::printf("backends:\n");
  for (backend kind : {backend::cpu, backend::cuda, backend::hip}) {
    std::string state = backend_available(kind)    ? "available"
                        : backend_compiled(kind) ? "compiled; " + backend_unavailable_reason(kind)
                                                 : "not compiled into this build";
    std::printf("  %-5s %s\n", std::string{to_string(kind)}.c_str(), state.c_str());
  }
  std::printf("devices:\n");
  for (device_limits const& d : list_devices()) {
    std::printf("  %s:%d  %s\n", std::string{to_string(d.kind)}.c_str(), d.ordinal, d.name.c_str());
    std::printf("         %d multiprocessors, %s staging per block, %s memory", d.multiprocessors,
                human_bytes(d.shared_mem_per_block).c_str(), human_bytes(d.global_mem_bytes).c_str());
    if (d.kind != backend::cpu) {
      std::printf(", sm_%d, %s", d.compute_capability, d.async_copy ? "async copy" : "no async copy");
    }
    std::printf("\n");
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
template <class T>
void init_values(std::size_t n, std::uint64_t seed, std::string const& path)
{
  // Small noise around zero, the classic spinodal-decomposition start of Allen–Cahn.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  std::vector<T> values(n * n);
  for (T& v : values) { v = static_cast<T>(dist(rng)); }
  write_values(path, values);
}

int command_init(std::vector<std::string> const& raw)
{
  if (wants_help(raw)) {
    std::printf("usage: tapeflow init allen-cahn --n N --out U0.bin [options]\n\n%s",
                describe_flags(init_flags).c_str());
    return 0;
  }
  expect_workload(raw, "init");
  parsed_args const args(init_flags, {raw.begin() + 1, raw.end()});
  std::size_t const n = args.size("n", 0);
  if (n == 0 || n > (std::size_t{1} << 20)) { throw usage_error("--n must be between 1 and 1048576"); }
  std::string const dtype = parse_dtype(args);
  std::uint64_t const seed = args.size("seed", 1);
  std::string const out = args.text("out");
  if (dtype == "f32") {
    init_values<float>(n, seed, out);
  } else {
    init_values<double>(n, seed, out);
  }
  std::printf("wrote %s: %zu x %zu %s values (seed %llu)\n", out.c_str(), n, n, dtype.c_str(),
              static_cast<unsigned long long>(seed));
  return 0;
}

// ---------------------------------------------------------------------------------------------
class progress_bar {
 public:
  explicit progress_bar(bool enabled) : enabled_(enabled) {}
  void operator()(chain_phase phase, std::size_t done, std::size_t total)
  {
    if (!enabled_) { return; }
    constexpr int width = 40;
    int const filled = static_cast<int>(width * done / (total == 0 ? 1 : total));
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r  %-8s [%s] %zu/%zu", phase == chain_phase::forward ? "forward" : "reverse",
                 bar.c_str(), done, total);
    if (phase == chain_phase::reverse && done == total) { std::fprintf(stderr, "\r%*s\r", width + 30, ""); }
    std::fflush(stderr);
  }

 private:
  bool enabled_;
};

/// The problem and options shared by `run` and `plan`.
ac::problem parse_problem(parsed_args const& args)
{
  ac::problem p;
  p.n = args.size("n", 0);
  p.steps = args.size("steps", 0);
  if (p.n == 0 || p.n > (std::size_t{1} << 20)) { throw usage_error("--n must be between 1 and 1048576"); }
  if (p.steps == 0) { throw usage_error("--steps must be at least 1"); }
  return p;
}

ac::options parse_options(parsed_args const& args)
{
  ac::options o;
  std::string const backend_name = args.text("backend", "auto");
  if (backend_name == "auto") {
    o.kind = best_available_backend();
  } else {
    try {
      o.kind = parse_backend(backend_name);
    } catch (logic_error const&) {
      throw usage_error("--backend must be auto, cpu, cuda or hip, got '" + backend_name + "'");
    }
  }
  try {
    o.policy = parse_policy(args.text("policy", "auto"));
  } catch (logic_error const&) {
    throw usage_error("--policy must be auto, store, offload or recompute, got '" + args.text("policy") + "'");
  }
  o.budget_bytes = args.size("budget", 0, true);
  o.host_budget_bytes = args.size("host-budget", 0, true);
  o.pipeline.tile_records = args.size("tile-records", 0);
  std::size_t const stages = args.size("stages", 0);
  if (args.has("stages") && (stages < 2 || stages > 8)) { throw usage_error("--stages must be between 2 and 8"); }
  o.pipeline.stages = static_cast<int>(stages);
  if (args.has("tile-records") && o.pipeline.tile_records == 0) { throw usage_error("--tile-records must be at least 1"); }
  o.capture_reverse = args.has("capture-reverse");
  o.pipeline.bulk_copy = args.has("bulk-copy");
  std::string const tape = args.text("tape", "values");
  if (tape != "values" && tape != "partials") {
    throw usage_error("--tape must be values or partials, got '" + tape + "'");
  }
  o.content = tape == "values" ? ac::tape_content::values : ac::tape_content::partials;
  if (!backend_available(o.kind)) { TAPEFLOW_FAIL(unavailable_error, backend_unavailable_reason(o.kind)); }
  return o;
}

void print_plan(chain_stats const& planned)
{
  std::printf("plan:   tape %zu layers x %s = %s; device budget %s\n", planned.steps,
              human_bytes(planned.layer_bytes).c_str(), human_bytes(planned.tape_bytes).c_str(),
              planned.budget_bytes == 0 ? "none" : human_bytes(planned.budget_bytes).c_str());
  std::printf("        tiers: %s\n", planned.tiers.describe().c_str());
  std::printf("        each layer: %s\n", planned.plan.describe().c_str());
  std::fflush(stdout);
}

json_object plan_json(chain_stats const& c)
{
  json_object plan;
  plan.add("record_bytes", c.plan.record_bytes)
    .add("records_per_layer", c.plan.records)
    .add("tile_records", c.plan.tile_records)
    .add("tiles_per_layer", c.plan.tiles)
    .add("stages", c.plan.stages)
    .add("block_threads", c.plan.block_threads)
    .add("grid_blocks", c.plan.grid_blocks)
    .add("staging_bytes", c.plan.smem_bytes)
    .add("async_copy", c.plan.async_copy)
    .add("device_layers", c.tiers.count(tier::device))
    .add("host_layers", c.tiers.count(tier::host))
    .add("recompute_layers", c.tiers.count(tier::recompute))
    .add("ring_slots", c.tiers.ring_slots)
    .add("prefetch_distance", c.tiers.prefetch_distance)
    .add("snapshots", c.tiers.snapshots)
    .add("planned_device_bytes", c.tiers.device_bytes)
    .add("estimated_overhead_ms", c.tiers.overhead_ms);
  return plan;
}

template <class T>
int run_allen_cahn(parsed_args const& args, std::string const& dtype)
{
  ac::problem const p = parse_problem(args);
  ac::options o = parse_options(args);
  progress_bar bar(!args.has("no-progress") && isatty(STDERR_FILENO) != 0);
  o.progress = [&bar](chain_phase phase, std::size_t done, std::size_t total) { bar(phase, done, total); };

  std::vector<T> const u0 = read_values<T>(args.text("input"), p.n * p.n, dtype, p.n);
  device_limits const device = query_device_limits(o.kind);
  std::printf("tapeflow run allen-cahn: n = %zu, T = %zu, %s, backend %s (%s)\n", p.n, p.steps, dtype.c_str(),
              std::string{to_string(o.kind)}.c_str(), device.name.c_str());
  print_plan(ac::plan<T>(p, o));

  ac::gradient_result<T> const r = ac::gradient(p, u0, o);
  chain_stats const& c = r.chain;
  std::printf("loss:   %.9e\n", static_cast<double>(r.loss));
  std::printf("summary: policy %s; forward %.3f ms, reverse %.3f ms; peak tape %s (device), %s (host); "
              "peak device %s\n",
              std::string{to_string(c.policy)}.c_str(), c.forward_ms, c.reverse_ms,
              human_bytes(c.peak_tape_bytes).c_str(), human_bytes(c.host_tape_bytes).c_str(),
              human_bytes(r.peak_device_bytes).c_str());
  std::printf("         %zu prefetches, stalled %.3f ms; %zu steps recomputed in %.3f ms", c.prefetches, c.stall_ms,
              c.recompute_steps, c.recompute_ms);
  if (o.kind == backend::cpu) {
    std::printf("; %zu tiles staged, consumer waited %zu times", r.staging.tiles, r.staging.consumer_waits);
  }
  std::printf("\n");

  write_values(args.text("grad-out"), r.gradient);
  std::printf("wrote %s: dL/du0, %zu %s values\n", args.text("grad-out").c_str(), r.gradient.size(), dtype.c_str());

  if (args.has("json")) {
    json_object stats;
    stats.add("workload", "allen-cahn")
      .add("n", p.n)
      .add("steps", p.steps)
      .add("dtype", dtype)
      .add("backend", std::string{to_string(o.kind)})
      .add("device", device.name)
      .add("policy", std::string{to_string(c.policy)})
      .add("tape", ac::to_string(o.content))
      .add("budget_bytes", c.budget_bytes)
      .add("host_budget_bytes", o.host_budget_bytes)
      .add("loss", static_cast<double>(r.loss))
      .add("layers", c.steps)
      .add("layer_bytes", c.layer_bytes)
      .add("tape_bytes", c.tape_bytes)
      .add("device_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::device)])
      .add("host_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::host)])
      .add("recompute_tier_bytes", c.tiers.bytes_per_tier[static_cast<std::size_t>(tier::recompute)])
      .add("peak_tape_bytes", c.peak_tape_bytes)
      .add("host_tape_bytes", c.host_tape_bytes)
      .add("peak_device_bytes", r.peak_device_bytes)
      .add("forward_ms", c.forward_ms)
      .add("reverse_ms", c.reverse_ms)
      .add("stall_ms", c.stall_ms)
      .add("prefetches", c.prefetches)
      .add("recompute_steps", c.recompute_steps)
      .add("recompute_ms", c.recompute_ms)
      .add("plan", plan_json(c));
    if (o.kind == backend::cpu) {
      json_object staging;
      staging.add("tiles", r.staging.tiles)
        .add("consumer_waits", r.staging.consumer_waits)
        .add("producer_waits", r.staging.producer_waits)
        .add("max_in_flight", r.staging.max_in_flight);
      stats.add("staging", staging);
    }
    write_text(args.text("json"), stats.str());
  }
  return 0;
}

template <class T>
int bench_allen_cahn(parsed_args const& args, std::string const& dtype)
{
  ac::problem const p = parse_problem(args);
  ac::options const o = parse_options(args);
  std::size_t const warmup = args.size("warmup", 2);
  std::size_t const repeats = args.size("repeats", 10);
  if (repeats == 0 || repeats > 10000 || warmup > 10000) {
    throw usage_error("--repeats must be between 1 and 10000 and --warmup at most 10000");
  }
  std::mt19937_64 rng(args.size("seed", 1));
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  std::vector<T> u0(p.n * p.n);
  for (T& v : u0) { v = static_cast<T>(dist(rng)); }
  device_limits const device = query_device_limits(o.kind);
  std::printf("tapeflow bench allen-cahn: n = %zu, T = %zu, %s, backend %s (%s), %zu warm-up + %zu timed runs\n",
              p.n, p.steps, dtype.c_str(), std::string{to_string(o.kind)}.c_str(), device.name.c_str(), warmup,
              repeats);
  print_plan(ac::plan<T>(p, o));
  ac::bench_result const r =
    ac::benchmark<T>(p, u0, o, static_cast<int>(warmup), static_cast<int>(repeats));
  std::printf("primal: %.3f ms   gradient: %.3f ms (forward %.3f, reverse %.3f)   gradient/primal: %.2f\n",
              r.primal_ms, r.grad_ms, r.forward_ms, r.reverse_ms, r.grad_ms / r.primal_ms);
  std::printf("tape %s, peak device tape %s, peak device %s (medians of event-timed runs, no transfers)\n",
              human_bytes(r.chain.tape_bytes).c_str(), human_bytes(r.chain.peak_tape_bytes).c_str(),
              human_bytes(r.peak_device_bytes).c_str());
  if (args.has("json")) {
    json_object row;
    row.add("workload", "allen-cahn")
      .add("variant", "tapeflow-" + std::string{to_string(r.chain.policy)} + (o.content == ac::tape_content::partials ? "-partials" : ""))
      .add("size", std::to_string(p.n) + "x" + std::to_string(p.n) + " T" + std::to_string(p.steps) + " " + dtype)
      .add("device", device.name)
      .add("primal_ms", r.primal_ms)
      .add("grad_ms", r.grad_ms)
      .add("grad_over_primal", r.grad_ms / r.primal_ms)
      .add("forward_ms", r.forward_ms)
      .add("reverse_ms", r.reverse_ms)
      .add("tape_bytes", r.chain.tape_bytes)
      .add("peak_tape_bytes", r.chain.peak_tape_bytes)
      .add("peak_device_bytes", r.peak_device_bytes)
      .add("plan", plan_json(r.chain));
    write_text(args.text("json"), row.str());
  }
  return 0;
}

int command_bench(std::vector<std::string> const& raw)
{
  if (wants_help(raw)) {
    std::printf("usage: tapeflow bench allen-cahn --n N --steps T [options]\n\n"
                "Times the primal (T untaped steps) and the gradient (augmented forward, seed, reverse) on\n"
                "the device, without transfers: medians of event-timed runs after a warm-up. For the\n"
                "side-by-side GPU results file, see bench/ (tapeflow_bench).\n\n%s",
                describe_flags(bench_flags).c_str());
    return 0;
  }
  expect_workload(raw, "bench");
  parsed_args const args(bench_flags, {raw.begin() + 1, raw.end()});
  std::string const dtype = parse_dtype(args);
  return dtype == "f32" ? bench_allen_cahn<float>(args, dtype) : bench_allen_cahn<double>(args, dtype);
}

int command_plan(std::vector<std::string> const& raw)
{
  if (wants_help(raw)) {
    std::printf("usage: tapeflow plan allen-cahn --n N --steps T [options]\n\n"
                "Prints where each layer of the Allen-Cahn tape would live, how it is tiled and what the\n"
                "planner expects it to cost, without running it.\n\n%s",
                describe_flags(plan_flags).c_str());
    return 0;
  }
  expect_workload(raw, "plan");
  parsed_args const args(plan_flags, {raw.begin() + 1, raw.end()});
  std::string const dtype = parse_dtype(args);
  ac::problem const p = parse_problem(args);
  ac::options const o = parse_options(args);
  std::printf("tapeflow plan allen-cahn: n = %zu, T = %zu, %s, backend %s (%s)\n", p.n, p.steps, dtype.c_str(),
              std::string{to_string(o.kind)}.c_str(), query_device_limits(o.kind).name.c_str());
  chain_stats const planned = dtype == "f32" ? ac::plan<float>(p, o) : ac::plan<double>(p, o);
  print_plan(planned);
  std::string line;
  for (std::size_t t = 0; t < planned.tiers.tiers.size(); ++t) {
    line += t % 10 == 0 ? (t == 0 ? "" : "\n") + std::string{"        layers "} + std::to_string(t) + "..: " : " ";
    line += to_string(planned.tiers.tiers[t]).substr(0, 1);
  }
  std::printf("%s\n        (d: device, h: host, r: recompute)\n", line.c_str());
  return 0;
}

int command_run(std::vector<std::string> const& raw)
{
  if (wants_help(raw)) {
    std::printf("usage: tapeflow run allen-cahn --n N --steps T --input U0.bin --grad-out G.bin [options]\n\n"
                "Computes L = 0.5 * sum(u_T^2) after T steps of u' = u + dt (eps2 lap(u) + u - u^3)\n"
                "(dt = 0.05, eps2 = 1, periodic n x n grid) and its gradient dL/du0 through the tape.\n\n%s",
                describe_flags(run_flags).c_str());
    return 0;
  }
  expect_workload(raw, "run");
  parsed_args const args(run_flags, {raw.begin() + 1, raw.end()});
  std::string const dtype = parse_dtype(args);
  return dtype == "f32" ? run_allen_cahn<float>(args, dtype) : run_allen_cahn<double>(args, dtype);
}

int dispatch(std::vector<std::string> const& args)
{
  if (args.empty()) {
    std::fputs(usage_text, stderr);
    return 2;
  }
  std::string const& command = args[0];
  std::vector<std::string> const rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage_text, stdout);
    return 0;
  }
  if (command == "--version") {
    std::printf("tapeflow %d.%d.%d\n", TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH);
    return 0;
  }
  if (command == "info") {
    if (wants_help(rest)) {
      std::printf("usage: tapeflow info\n\nLists the backends compiled into this build, whether each has a device, and\n"
                  "every device's limits as the planner sees them.\n");
      return 0;
    }
    if (!rest.empty()) { throw usage_error("'info' takes no options"); }
    return command_info();
  }
  if (command == "init") { return command_init(rest); }
  if (command == "run") { return command_run(rest); }
  if (command == "plan") { return command_plan(rest); }
  if (command == "bench") { return command_bench(rest); }
  throw usage_error("unknown command '" + command + "' (commands: info, init, run, plan, bench)");
}

}  // namespace
}  // namespace tapeflow::cli

int main(int argc, char** argv)
{
  using namespace tapeflow;
  std::vector<std::string> const args(argv + 1, argv + argc);
  try {
    int const status = cli::dispatch(args);
    std::fflush(stdout);
    return status;
  } catch (cli::usage_error const& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: %s\n(see 'tapeflow --help')\n", e.what());
    return 2;
  } catch (logic_error const& e) {  // bad input reached the library
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: %s\n", e.what());
    return 2;
  } catch (io_error const& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: %s\n", e.what());
    return 2;
  } catch (unavailable_error const& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: not available: %s\n", e.what());
    return 2;
  } catch (budget_error const& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: %s\n", e.what());
    return 2;
  } catch (std::exception const& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tapeflow: failed: %s\n", e.what());
    return 1;
  }
}
