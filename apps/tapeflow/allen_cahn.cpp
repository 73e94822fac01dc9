// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench allen-cahn
#include "common.hpp"
#include "state_chain.hpp"

#include <allen_cahn/allen_cahn.hpp>

#include <cstdio>
#include <random>

namespace tapeflow::cli {
namespace {

namespace ac = workloads::allen_cahn;

constexpr std::size_t max_side = std::size_t{1} << 20;

ac::problem problem_of(parsed_args const& args)
{
  ac::problem p;
  p.n = count_of(args, "n", 1, max_side);
  p.steps = count_of(args, "steps", 1, std::size_t{1} << 32);
  return p;
}

state_problem describe(ac::problem const& p, std::string const& dtype)
{
  state_problem d;
  d.sizes = "n = " + std::to_string(p.n) + ", T = " + std::to_string(p.steps);
  d.size_key = std::to_string(p.n) + "x" + std::to_string(p.n) + " T" + std::to_string(p.steps) + " " + dtype;
  d.values = p.n * p.n;
  d.layout = "n = " + std::to_string(p.n) + " in " + dtype;
  d.gradient = "dL/du0";
  d.json.add("n", p.n).add("steps", p.steps).add("dt", p.dt).add("eps2", p.eps2);
  return d;
}

ac::options options_of(parsed_args const& args, workload const& w)
{
  ac::options o;
  read_run_options(args, w, o);
  std::string const tape = args.text("tape", "values");
  if (tape != "values" && tape != "partials") { throw usage_error("--tape must be values or partials, got '" + tape + "'"); }
  o.content = tape == "values" ? ac::tape_content::values : ac::tape_content::partials;
  return o;
}

/// Small noise around zero, the classic spinodal-decomposition start of Allen–Cahn.
template <class T>
std::vector<T> random_u0(std::size_t n, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  std::vector<T> values(n * n);
  for (T& v : values) { v = static_cast<T>(dist(rng)); }
  return values;
}

int init(parsed_args const& args)
{
  std::size_t const n = count_of(args, "n", 1, max_side);
  std::string const dtype = dtype_of(args, allen_cahn_cli());
  std::string const out = args.text("out");
  if (dtype == "f32") {
    write_values(out, random_u0<float>(n, seed_of(args)));
  } else {
    write_values(out, random_u0<double>(n, seed_of(args)));
  }
  std::printf("wrote %s: %zu x %zu %s values (seed %llu)\n", out.c_str(), n, n, dtype.c_str(),
              static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

template <class T>
int run_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = allen_cahn_cli();
  ac::problem const p = problem_of(args);
  ac::options const o = options_of(args, w);
  json_object extra;
  extra.add("tape", ac::to_string(o.content));
  return run_state_chain<T>(
    args, w, dtype, describe(p, dtype), o, [&](std::vector<T> const& u0, ac::options const& oo) { return ac::gradient(p, u0, oo); },
    [&](ac::options const& oo) { return ac::plan<T>(p, oo); }, extra);
}

int run(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, allen_cahn_cli());
  return dtype == "f32" ? run_as<float>(args, dtype) : run_as<double>(args, dtype);
}

int plan(parsed_args const& args)
{
  workload const& w = allen_cahn_cli();
  std::string const dtype = dtype_of(args, w);
  ac::problem const p = problem_of(args);
  ac::options const o = options_of(args, w);
  return plan_state_chain(args, w, dtype, describe(p, dtype), o, [&](ac::options const& oo) {
    return dtype == "f32" ? ac::plan<float>(p, oo) : ac::plan<double>(p, oo);
  });
}

/// Allen–Cahn has its own benchmark entry point: device-resident, event-timed.
template <class T>
int bench_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = allen_cahn_cli();
  ac::problem const p = problem_of(args);
  ac::options const o = options_of(args, w);
  int warmup = 0;
  int repeats = 0;
  bench_counts(args, warmup, repeats);
  state_problem const d = describe(p, dtype);
  print_header(command::bench, w, d.sizes, dtype, o.kind);
  std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
  print_chain_plan(ac::plan<T>(p, o));
  ac::bench_result const r = ac::benchmark<T>(p, random_u0<T>(p.n, seed_of(args)), o, warmup, repeats);
  std::printf("forward %.3f ms (augmented forward / primal: %.2f), reverse %.3f ms; after the first gradient "
              "%zu allocations (%zu bytes)\n",
              r.forward_ms, r.forward_ms / r.primal_ms, r.reverse_ms, r.repeat_allocations, r.repeat_allocated_bytes);
  write_bench_row(args, w,
                  "tapeflow-" + std::string{to_string(r.chain.policy)} +
                    (o.content == ac::tape_content::partials ? "-partials" : ""),
                  d.size_key, o.kind, r.primal_ms, r.grad_ms, "device-resident, event-timed medians (no transfers)",
                  r.chain.tape_bytes, r.peak_device_bytes, chain_plan_json(r.chain), [&](json_object& row) {
                    row.add("forward_ms", r.forward_ms)
                      .add("reverse_ms", r.reverse_ms)
                      .add("forward_over_primal", r.forward_ms / r.primal_ms)
                      .add("repeat_allocations", r.repeat_allocations)
                      .add("repeat_allocated_bytes", r.repeat_allocated_bytes);
                  });
  return 0;
}

int bench(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, allen_cahn_cli());
  return dtype == "f32" ? bench_as<float>(args, dtype) : bench_as<double>(args, dtype);
}

}  // namespace

workload const& allen_cahn_cli()
{
  static workload const w{
    "allen-cahn",
    "Allen-Cahn on a periodic n x n grid: dL/du0 for L = 0.5 * sum(u_T^2)",
    "Computes L = 0.5 * sum(u_T^2) after T steps of u' = u + dt (eps2 lap(u) + u - u^3)\n"
    "(dt = 0.05, eps2 = 1, periodic n x n grid) and its gradient dL/du0 through the tape.",
    "  IN.bin   u0: n*n values of --dtype, row-major (cell (i, j) at i*n + j)\n"
    "  G.bin    dL/du0: the same layout",
    {{"n", "N", "grid side (the state holds N*N values)", true}},
    {{"n", "N", "grid side", true}, {"steps", "T", "time steps", true}},
    {{"tape", "values|partials", "what the tape holds per cell: u, or r'(u) by forward-mode duals (default values)",
      false}},
    true,
    true,
    false,
    init,
    run,
    plan,
    bench,
  };
  return w;
}

}  // namespace tapeflow::cli
