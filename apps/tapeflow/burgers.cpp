// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench burgers
#include "common.hpp"
#include "state_chain.hpp"

#include <burgers/burgers.hpp>

#include <cstdio>

namespace tapeflow::cli {
namespace {

namespace bg = workloads::burgers;

constexpr std::size_t max_cells = std::size_t{1} << 34;

bg::problem problem_of(parsed_args const& args, bool with_steps)
{
  bg::problem p;
  p.n = count_of(args, "n", 1, max_cells);
  p.steps = with_steps ? count_of(args, "steps", 1, std::size_t{1} << 32) : 1;
  p.a = real_of(args, "a", p.a);
  p.b = real_of(args, "b", p.b);
  return p;
}

state_problem describe(bg::problem const& p, std::string const& dtype)
{
  state_problem d;
  d.sizes = "n = " + std::to_string(p.n) + ", T = " + std::to_string(p.steps) + ", a = " + std::to_string(p.a) +
            ", b = " + std::to_string(p.b);
  d.size_key = "n" + std::to_string(p.n) + " T" + std::to_string(p.steps) + " " + dtype;
  d.values = p.n;
  d.layout = "n = " + std::to_string(p.n) + " in " + dtype;
  d.gradient = "dL/du0";
  d.json.add("n", p.n).add("steps", p.steps).add("a", p.a).add("b", p.b);
  return d;
}

bg::options options_of(parsed_args const& args, workload const& w)
{
  bg::options o;
  read_run_options(args, w, o);
  return o;
}

int init(parsed_args const& args)
{
  bg::problem const p = problem_of(args, false);
  std::string const dtype = dtype_of(args, burgers_cli());
  std::string const out = args.text("out");
  if (dtype == "f32") {
    write_values(out, bg::random_state<float>(p, seed_of(args)));
  } else {
    write_values(out, bg::random_state<double>(p, seed_of(args)));
  }
  std::printf("wrote %s: %zu %s values (seed %llu)\n", out.c_str(), p.n, dtype.c_str(),
              static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

template <class T>
int run_as(parsed_args const& args, std::string const& dtype)
{
  bg::problem const p = problem_of(args, true);
  return run_state_chain<T>(
    args, burgers_cli(), dtype, describe(p, dtype), options_of(args, burgers_cli()),
    [&](std::vector<T> const& u0, bg::options const& o) { return bg::gradient(p, u0, o); },
    [&](bg::options const& o) { return bg::plan<T>(p, o); });
}

int run(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, burgers_cli());
  return dtype == "f32" ? run_as<float>(args, dtype) : run_as<double>(args, dtype);
}

int plan(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, burgers_cli());
  bg::problem const p = problem_of(args, true);
  return plan_state_chain(args, burgers_cli(), dtype, describe(p, dtype), options_of(args, burgers_cli()),
                          [&](bg::options const& o) { return dtype == "f32" ? bg::plan<float>(p, o) : bg::plan<double>(p, o); });
}

template <class T>
int bench_as(parsed_args const& args, std::string const& dtype)
{
  bg::problem const p = problem_of(args, true);
  return bench_state_chain<T>(
    args, burgers_cli(), dtype, describe(p, dtype), options_of(args, burgers_cli()),
    bg::random_state<T>(p, seed_of(args)), [&](std::vector<T> const& u0, bg::options const& o) { return bg::primal(p, u0, o); },
    [&](std::vector<T> const& u0, bg::options const& o) { return bg::gradient(p, u0, o); });
}

int bench(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, burgers_cli());
  return dtype == "f32" ? bench_as<float>(args, dtype) : bench_as<double>(args, dtype);
}

}  // namespace

workload const& burgers_cli()
{
  static workload const w{
    "burgers",
    "viscous Burgers on a periodic line, a stencil read through halos: dL/du0 (CPU backend)",
    "Computes L = 0.5 * sum(u_T^2) after T steps of\n"
    "  u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1})   (periodic, n cells)\n"
    "and its gradient dL/du0. Each value is taped once; the reverse reads its neighbours' records\n"
    "through a halo of one record on each side of every tile.",
    "  IN.bin   u0: n values of --dtype\n"
    "  G.bin    dL/du0: n values",
    {{"n", "N", "cells", true}},
    {{"n", "N", "cells", true},
     {"steps", "T", "time steps", true},
     {"a", "A", "advection number dt / (2 dx) (default 0.1)", false},
     {"b", "B", "diffusion number nu dt / dx^2, at most 0.5 (default 0.2)", false}},
    {},
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
