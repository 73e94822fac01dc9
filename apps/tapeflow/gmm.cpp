// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench gmm
#include "common.hpp"
#include "state_chain.hpp"

#include <gmm/gmm.hpp>

#include <chrono>
#include <cstdio>

namespace tapeflow::cli {
namespace {

namespace gm = workloads::gmm;

gm::problem problem_of(parsed_args const& args)
{
  gm::problem p;
  p.d = count_of(args, "d", 1, 4096);
  p.k = count_of(args, "k", 1, std::size_t{1} << 20);
  p.n = count_of(args, "points", 1, std::size_t{1} << 32);
  p.gamma = real_of(args, "gamma", p.gamma);
  p.m = static_cast<int>(count_of(args, "m", 0, 1 << 20, 0));
  return p;
}

std::size_t icf_values(gm::problem const& p) { return p.k * p.d * (p.d + 1) / 2; }

/// The input file's parts: alphas, means, icf, x.
std::vector<std::size_t> input_parts(gm::problem const& p) { return {p.k, p.k * p.d, icf_values(p), p.n * p.d}; }

std::string sizes_of(gm::problem const& p)
{
  return "d = " + std::to_string(p.d) + ", K = " + std::to_string(p.k) + ", N = " + std::to_string(p.n) +
         ", gamma = " + std::to_string(p.gamma) + ", m = " + std::to_string(p.m);
}

json_object problem_json(gm::problem const& p)
{
  json_object j;
  j.add("d", p.d).add("k", p.k).add("points", p.n).add("gamma", p.gamma).add("m", p.m);
  return j;
}

gm::options options_of(parsed_args const& args)
{
  gm::options o;
  o.kind = backend_of(args);
  o.pipeline = pipeline_of(args);
  return o;
}

gm::inputs read_inputs(std::string const& path, gm::problem const& p)
{
  std::vector<std::size_t> const parts = input_parts(p);
  std::size_t total = 0;
  for (std::size_t n : parts) { total += n; }
  std::vector<std::vector<double>> v =
    split(read_values<double>(path, total, "d = " + std::to_string(p.d) + ", K = " + std::to_string(p.k) + ", N = " +
                                             std::to_string(p.n) + " (alphas, means, icf, x)"),
          parts);
  return {std::move(v[0]), std::move(v[1]), std::move(v[2]), std::move(v[3])};
}

int init(parsed_args const& args)
{
  gm::problem const p = problem_of(args);
  static_cast<void>(dtype_of(args, gmm_cli()));
  gm::inputs const in = gm::random_inputs(p, seed_of(args));
  write_values<double>(args.text("out"), {&in.alphas, &in.means, &in.icf, &in.x});
  std::printf("wrote %s: alphas (%zu), means (%zu), icf (%zu), x (%zu) f64 values (seed %llu)\n",
              args.text("out").c_str(), in.alphas.size(), in.means.size(), in.icf.size(), in.x.size(),
              static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

void print_plan(gm::problem const& p, pipeline_plan const& plan)
{
  std::printf("plan:   one layer of %zu points x %zu components = %s of tape\n", p.n, p.k,
              human_bytes(plan.records * plan.record_bytes).c_str());
  std::printf("        %s\n", plan.describe().c_str());
  std::fflush(stdout);
}

int run(parsed_args const& args)
{
  workload const& w = gmm_cli();
  std::string const dtype = dtype_of(args, w);
  gm::problem const p = problem_of(args);
  gm::options o = options_of(args);
  progress_bar const bar(args);
  o.progress = bar.callback();
  gm::inputs const in = read_inputs(args.text("input"), p);
  print_header(command::run, w, sizes_of(p), dtype, o.kind);
  print_plan(p, gm::plan(p, o));
  auto const start = std::chrono::steady_clock::now();
  gm::gradient_result const r = gm::gradient(p, in, o);
  double const wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("objective: %.12e\n", r.objective);
  std::printf("summary: gradient %.3f ms; tape %s, peak device %s", wall_ms, human_bytes(r.tape_bytes).c_str(),
              human_bytes(r.peak_device_bytes).c_str());
  if (o.kind == backend::cpu) { std::printf("; %zu tiles", r.staging.tiles); }
  std::printf("\n");
  write_values<double>(args.text("grad-out"), {&r.d_alphas, &r.d_means, &r.d_icf});
  std::printf("wrote %s: d alphas (%zu), d means (%zu), d icf (%zu) f64 values\n", args.text("grad-out").c_str(),
              r.d_alphas.size(), r.d_means.size(), r.d_icf.size());
  if (args.has("json")) {
    json_object stats;
    stats.add("workload", w.name)
      .add("problem", problem_json(p))
      .add("dtype", dtype)
      .add("backend", std::string{to_string(o.kind)})
      .add("device", query_device_limits(o.kind).name)
      .add("objective", r.objective)
      .add("gradient_ms", wall_ms)
      .add("tape_bytes", r.tape_bytes)
      .add("peak_device_bytes", r.peak_device_bytes)
      .add("plan", pipeline_json(r.plan));
    if (o.kind == backend::cpu) { add_staging(stats, r.staging); }
    write_text(args.text("json"), stats.str());
  }
  return 0;
}

int plan(parsed_args const& args)
{
  workload const& w = gmm_cli();
  std::string const dtype = dtype_of(args, w);
  gm::problem const p = problem_of(args);
  gm::options const o = options_of(args);
  print_header(command::plan, w, sizes_of(p), dtype, o.kind);
  print_plan(p, gm::plan(p, o));
  return 0;
}

/// GMM has its own benchmark entry point: inputs uploaded once, event-timed.
int bench(parsed_args const& args)
{
  workload const& w = gmm_cli();
  std::string const dtype = dtype_of(args, w);
  gm::problem const p = problem_of(args);
  gm::options const o = options_of(args);
  int warmup = 0;
  int repeats = 0;
  bench_counts(args, warmup, repeats);
  print_header(command::bench, w, sizes_of(p), dtype, o.kind);
  std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
  gm::bench_result const r = gm::benchmark(p, gm::random_inputs(p, seed_of(args)), o, warmup, repeats);
  print_plan(p, r.plan);
  write_bench_row(args, w, "tapeflow",
                  "d" + std::to_string(p.d) + " K" + std::to_string(p.k) + " N" + std::to_string(p.n) + " f64", o.kind,
                  r.primal_ms, r.grad_ms, "inputs on the device, event-timed medians (no transfers)", r.tape_bytes,
                  r.peak_device_bytes, pipeline_json(r.plan));
  return 0;
}

}  // namespace

workload const& gmm_cli()
{
  static workload const w{
    "gmm",
    "ADBench's Gaussian mixture objective (f64) and its gradient w.r.t. alphas, means, icf",
    "Computes ADBench's GMM objective of N points in d dimensions under K components (Wishart\n"
    "prior gamma, m) and its gradient with respect to the alphas, the means and the\n"
    "inverse-covariance factors, through one tape layer of per-(point, component) records.",
    "  IN.bin   f64: alphas (K), means (K*d, row-major), icf (K*d(d+1)/2: per component the d\n"
    "           log-diagonal entries, then the strict lower triangle column by column), x (N*d)\n"
    "  G.bin    f64: d alphas (K), d means (K*d), d icf (K*d(d+1)/2), laid out as the parameters",
    {{"d", "D", "dimensions", true}, {"k", "K", "components", true}, {"points", "N", "points", true}},
    {{"d", "D", "dimensions", true},
     {"k", "K", "components", true},
     {"points", "N", "points", true},
     {"gamma", "G", "Wishart prior gamma, above 0 (default 1)", false},
     {"m", "M", "Wishart prior m (default 0)", false}},
    {},
    false,
    true,
    true,
    init,
    run,
    plan,
    bench,
  };
  return w;
}

}  // namespace tapeflow::cli
