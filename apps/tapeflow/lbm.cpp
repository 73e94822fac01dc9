// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench lbm
#include "common.hpp"
#include "state_chain.hpp"

#include <lbm/lbm.hpp>

#include <cstdio>

namespace tapeflow::cli {
namespace {

namespace lb = workloads::lbm;

constexpr std::size_t max_side = std::size_t{1} << 20;

lb::problem problem_of(parsed_args const& args, bool with_steps)
{
  lb::problem p;
  p.nx = count_of(args, "nx", 1, max_side);
  p.ny = count_of(args, "ny", 1, max_side);
  p.steps = with_steps ? count_of(args, "steps", 1, std::size_t{1} << 32) : 1;
  p.tau = real_of(args, "tau", p.tau);
  return p;
}

state_problem describe(lb::problem const& p, std::string const& dtype)
{
  state_problem d;
  d.sizes = "nx = " + std::to_string(p.nx) + ", ny = " + std::to_string(p.ny) + ", T = " + std::to_string(p.steps) +
            ", tau = " + std::to_string(p.tau);
  d.size_key = std::to_string(p.nx) + "x" + std::to_string(p.ny) + " T" + std::to_string(p.steps) + " " + dtype;
  d.values = p.values();
  d.layout = "a " + std::to_string(p.nx) + " x " + std::to_string(p.ny) + " lattice (9 planes) in " + dtype;
  d.gradient = "dL/df0";
  d.json.add("nx", p.nx).add("ny", p.ny).add("steps", p.steps).add("tau", p.tau);
  return d;
}

lb::options options_of(parsed_args const& args, workload const& w)
{
  lb::options o;
  read_run_options(args, w, o);
  return o;
}

int init(parsed_args const& args)
{
  lb::problem const p = problem_of(args, false);
  std::string const dtype = dtype_of(args, lbm_cli());
  std::string const out = args.text("out");
  if (dtype == "f32") {
    write_values(out, lb::random_state<float>(p, seed_of(args)));
  } else {
    write_values(out, lb::random_state<double>(p, seed_of(args)));
  }
  std::printf("wrote %s: 9 x %zu x %zu %s values (seed %llu)\n", out.c_str(), p.ny, p.nx, dtype.c_str(),
              static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

template <class T>
int run_as(parsed_args const& args, std::string const& dtype)
{
  lb::problem const p = problem_of(args, true);
  return run_state_chain<T>(
    args, lbm_cli(), dtype, describe(p, dtype), options_of(args, lbm_cli()),
    [&](std::vector<T> const& f0, lb::options const& o) { return lb::gradient(p, f0, o); },
    [&](lb::options const& o) { return lb::plan<T>(p, o); });
}

int run(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, lbm_cli());
  return dtype == "f32" ? run_as<float>(args, dtype) : run_as<double>(args, dtype);
}

int plan(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, lbm_cli());
  lb::problem const p = problem_of(args, true);
  return plan_state_chain(args, lbm_cli(), dtype, describe(p, dtype), options_of(args, lbm_cli()),
                          [&](lb::options const& o) { return dtype == "f32" ? lb::plan<float>(p, o) : lb::plan<double>(p, o); });
}

template <class T>
int bench_as(parsed_args const& args, std::string const& dtype)
{
  lb::problem const p = problem_of(args, true);
  return bench_state_chain<T>(
    args, lbm_cli(), dtype, describe(p, dtype), options_of(args, lbm_cli()), lb::random_state<T>(p, seed_of(args)),
    [&](std::vector<T> const& f0, lb::options const& o) { return lb::primal(p, f0, o); },
    [&](std::vector<T> const& f0, lb::options const& o) { return lb::gradient(p, f0, o); });
}

int bench(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, lbm_cli());
  return dtype == "f32" ? bench_as<float>(args, dtype) : bench_as<double>(args, dtype);
}

}  // namespace

workload const& lbm_cli()
{
  static workload const w{
    "lbm",
    "LBM D2Q9 (BGK collision and streaming) on a periodic lattice: dL/df0 for L = 0.5 * sum(f_T^2)",
    "Computes L = 0.5 * sum(f_T^2) after T steps of D2Q9 BGK collision (omega = 1/tau) and\n"
    "streaming on a periodic nx x ny lattice, and its gradient dL/df0 through the tape.",
    "  IN.bin   f0: 9 planes of nx*ny values of --dtype; plane i holds f_i, cell (x, y) at y*nx + x;\n"
    "           directions 0 (rest), 1..4 (+x, +y, -x, -y), 5..8 (+x+y, -x+y, -x-y, +x-y)\n"
    "  G.bin    dL/df0: the same layout",
    {{"nx", "NX", "lattice width", true}, {"ny", "NY", "lattice height", true}},
    {{"nx", "NX", "lattice width", true},
     {"ny", "NY", "lattice height", true},
     {"steps", "T", "time steps", true},
     {"tau", "TAU", "BGK relaxation time, above 0.5 (default 0.8)", false}},
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
