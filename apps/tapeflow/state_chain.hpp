// SPDX-License-Identifier: Apache-2.0
// The commands of the chain workloads whose input is an initial state and whose output is the
// gradient with respect to it, L = 0.5 * sum(x_T^2) (Allen–Cahn, LBM, Burgers): one file in, one
// file out, a chain plan, a state_gradient.
#pragma once

#include "common.hpp"

#include <workload_common/state_gradient.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace tapeflow::cli {

/// What a state-chain workload's command needs to know about its problem.
struct state_problem {
  std::string sizes;     ///< "n = 512, T = 100" (the header line)
  std::string size_key;  ///< "512x512 T100 f32" (the results format's size)
  std::size_t values{0}; ///< values in the state file
  std::string layout;    ///< "n = 512 (n*n values)" (file size errors)
  json_object json;      ///< the problem's parameters
  std::string gradient{"the gradient"};  ///< what the output file holds: "dL/du0"
};

/// `tapeflow run`: reads the state, prints the plan, runs `gradient(x0, options)`, writes dL/dx0.
template <class T, class Options, class Gradient, class Plan>
int run_state_chain(parsed_args const& args, workload const& w, std::string const& dtype, state_problem const& p,
                    Options o, Gradient&& gradient, Plan&& plan, json_object extra = {})
{
  progress_bar const bar(args);
  o.progress = bar.callback();
  std::vector<T> const x0 = read_values<T>(args.text("input"), p.values, p.layout);
  print_header(command::run, w, p.sizes, dtype, o.kind);
  print_chain_plan(plan(o));
  auto const start = std::chrono::steady_clock::now();
  workloads::state_gradient<T> const r = gradient(x0, o);
  double const wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("loss:   %.9e\n", static_cast<double>(r.loss));
  print_chain_summary(r.chain, r.peak_device_bytes, r.staging, o.kind);
  write_values(args.text("grad-out"), r.gradient);
  std::printf("wrote %s: %s, %zu %s values\n", args.text("grad-out").c_str(), p.gradient.c_str(), r.gradient.size(),
              dtype.c_str());
  if (args.has("json")) {
    json_object stats;
    stats.add("workload", w.name)
      .add("problem", p.json)
      .add("dtype", dtype)
      .add("backend", std::string{to_string(o.kind)})
      .add("device", query_device_limits(o.kind).name)
      .add("loss", static_cast<double>(r.loss))
      .add("gradient_ms", wall_ms)
      .add("host_budget_bytes", o.host_budget_bytes)
      .add("peak_device_bytes", r.peak_device_bytes);
    add_chain_stats(stats, r.chain);
    if (o.kind == backend::cpu) { add_staging(stats, r.staging); }
    stats.add("options", extra);
    write_text(args.text("json"), stats.str());
  }
  return 0;
}

/// `tapeflow plan`: the plan and every layer's tier.
template <class Options, class Plan>
int plan_state_chain(parsed_args const& args, workload const& w, std::string const& dtype, state_problem const& p,
                     Options const& o, Plan&& plan)
{
  bool const quiet = args.has("json") && args.text("json") == "-";  // standard output is the JSON
  if (!quiet) { print_header(command::plan, w, p.sizes, dtype, o.kind); }
  chain_stats const planned = plan(o);
  if (!quiet) {
    print_chain_plan(planned);
    print_layer_tiers(planned);
  }
  write_plan_json(args, w, dtype, o.kind, planned);
  return 0;
}

/// One row of the results format for a bench command.
inline void write_bench_row(parsed_args const& args, workload const& w, std::string const& variant,
                            std::string const& size, backend kind, double primal_ms, double grad_ms,
                            std::string const& timing, std::size_t tape_bytes, std::size_t peak_device_bytes,
                            json_object plan, std::function<void(json_object&)> const& more = {})
{
  std::printf("primal: %.3f ms   gradient: %.3f ms   gradient/primal: %.2f\n", primal_ms, grad_ms, grad_ms / primal_ms);
  std::printf("tape %s, peak device %s (%s)\n", human_bytes(tape_bytes).c_str(), human_bytes(peak_device_bytes).c_str(),
              timing.c_str());
  if (!args.has("json")) { return; }
  json_object row;
  row.add("workload", w.name)
    .add("variant", variant)
    .add("size", size)
    .add("device", query_device_limits(kind).name)
    .add("primal_ms", primal_ms)
    .add("grad_ms", grad_ms)
    .add("grad_over_primal", grad_ms / primal_ms)
    .add("timing", timing)
    .add("tape_bytes", tape_bytes)
    .add("peak_device_bytes", peak_device_bytes);
  if (more) { more(row); }
  row.add("plan", plan);
  write_text(args.text("json"), row.str());
}

/// Wall-clock timing of the public API: what the CLI can time for a workload without a benchmark
/// entry point of its own.
inline constexpr char const* api_timing = "wall clock of primal() and gradient(), host data in and out; medians";

/// `tapeflow bench` through the public API: medians of primal(x0) and gradient(x0).
template <class T, class Options, class Primal, class Gradient>
int bench_state_chain(parsed_args const& args, workload const& w, std::string const& dtype, state_problem const& p,
                      Options o, std::vector<T> const& x0, Primal&& primal, Gradient&& gradient)
{
  int warmup = 0;
  int repeats = 0;
  bench_counts(args, warmup, repeats);
  o.progress = nullptr;
  print_header(command::bench, w, p.sizes, dtype, o.kind);
  std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
  double const primal_ms = median_ms(warmup, repeats, [&] { static_cast<void>(primal(x0, o)); });
  workloads::state_gradient<T> last;
  double const grad_ms = median_ms(warmup, repeats, [&] { last = gradient(x0, o); });
  print_chain_plan(last.chain);
  write_bench_row(args, w, "tapeflow-" + std::string{to_string(last.chain.policy)}, p.size_key, o.kind, primal_ms,
                  grad_ms, api_timing, last.chain.tape_bytes, last.peak_device_bytes, chain_plan_json(last.chain));
  return 0;
}

}  // namespace tapeflow::cli
