// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench rk4
#include "common.hpp"
#include "state_chain.hpp"

#include <rk4/rk4.hpp>
#include <tapeflow/thread_tape.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

namespace tapeflow::cli {
namespace {

namespace rk = workloads::rk4;

rk::problem problem_of(parsed_args const& args)
{
  rk::problem p;
  p.particles = count_of(args, "particles", 1, std::size_t{1} << 32);
  p.max_steps = count_of(args, "max-steps", 1, (std::size_t{1} << 31) - 1, p.max_steps);
  p.dt = real_of(args, "dt", p.dt);
  p.k = real_of(args, "k", p.k);
  return p;
}

std::string sizes_of(rk::problem const& p)
{
  return "P = " + std::to_string(p.particles) + ", max steps " + std::to_string(p.max_steps) +
         ", dt = " + std::to_string(p.dt) + ", k = " + std::to_string(p.k);
}

json_object problem_json(rk::problem const& p)
{
  json_object j;
  j.add("particles", p.particles).add("max_steps", p.max_steps).add("dt", p.dt).add("k", p.k);
  return j;
}

rk::options options_of(parsed_args const& args)
{
  rk::options o;
  o.kind = backend_of(args);
  std::string const tape = args.text("tape", "arena");
  if (tape != "arena" && tape != "global-stack") {
    throw usage_error("--tape must be arena or global-stack, got '" + tape + "'");
  }
  o.tape = tape == "arena" ? rk::method::arena : rk::method::global_stack;
  o.chunk_steps = count_of(args, "chunk-steps", 1, std::size_t{1} << 20, o.chunk_steps);
  o.device_budget_bytes = args.size("budget", 0, true);
  o.host_budget_bytes = args.size("host-budget", 0, true);
  o.prefetch_distance = count_of(args, "prefetch", 1, 1024, o.prefetch_distance);
  return o;
}

/// Positions in [-1, 1]^3, velocities of speed 0.5 to 1.5 in a random direction.
template <class T>
std::vector<T> random_particles(std::size_t count, std::mt19937_64& rng)
{
  std::uniform_real_distribution<double> pos(-1.0, 1.0);
  std::normal_distribution<double> dir(0.0, 1.0);
  std::uniform_real_distribution<double> speed(0.5, 1.5);
  std::vector<T> y(6 * count);
  for (std::size_t q = 0; q < count; ++q) {
    double d[3] = {dir(rng), dir(rng), dir(rng)};
    double const norm = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + 1e-12;
    double const s = speed(rng);
    for (int i = 0; i < 3; ++i) {
      y[6 * q + i] = static_cast<T>(pos(rng));
      y[6 * q + 3 + i] = static_cast<T>(s * d[i] / norm);
    }
  }
  return y;
}

/// Random particles and budgets under which each runs a random number of steps in [1, max steps]
/// (budgets_for_steps, on the CPU backend).
template <class T>
void random_inputs(rk::problem const& p, std::uint64_t seed, std::vector<T>& state0, std::vector<T>& budgets)
{
  std::mt19937_64 rng(seed);
  state0 = random_particles<T>(p.particles, rng);
  std::uniform_int_distribution<std::uint32_t> steps(1, static_cast<std::uint32_t>(p.max_steps));
  std::vector<std::uint32_t> targets(p.particles);
  for (auto& n : targets) { n = steps(rng); }
  rk::options cpu;
  cpu.kind = backend::cpu;
  budgets = rk::budgets_for_steps<T>(p, state0, targets, cpu);
}

template <class T>
void read_inputs(std::string const& path, rk::problem const& p, std::vector<T>& state0, std::vector<T>& budgets)
{
  std::vector<std::vector<T>> v = split(read_values<T>(path, 7 * p.particles, std::to_string(p.particles) +
                                                                                 " particles (6 state values, 1 budget each)"),
                                        {6 * p.particles, p.particles});
  state0 = std::move(v[0]);
  budgets = std::move(v[1]);
}

template <class T>
int init_as(parsed_args const& args, rk::problem const& p, std::string const& dtype)
{
  std::vector<T> state0;
  std::vector<T> budgets;
  random_inputs(p, seed_of(args), state0, budgets);
  write_values<T>(args.text("out"), {&state0, &budgets});
  std::printf("wrote %s: %zu particles (x, v) and their arc-length budgets, %s (seed %llu)\n", args.text("out").c_str(),
              p.particles, dtype.c_str(), static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

int init(parsed_args const& args)
{
  rk::problem const p = problem_of(args);
  std::string const dtype = dtype_of(args, rk4_cli());
  return dtype == "f32" ? init_as<float>(args, p, dtype) : init_as<double>(args, p, dtype);
}

/// What the tape will look like: the arena's chunks (or the global stack), without running.
template <class T>
void print_plan(rk::problem const& p, rk::options const& o)
{
  std::size_t const record = sizeof(rk::step_record<T>);
  if (o.tape == rk::method::global_stack) {
    std::printf("plan:   global stack: %zu particles x %zu steps x %zu B = %s, allocated whole\n", p.particles,
                p.max_steps, record, human_bytes(p.particles * p.max_steps * record).c_str());
    std::fflush(stdout);
    return;
  }
  thread_arena const arena(record, p.particles, rk::arena_options(p, o));
  std::size_t const max_chunks = (p.max_steps + o.chunk_steps - 1) / o.chunk_steps;
  std::size_t const slots = o.device_budget_bytes == 0 ? max_chunks
                                                       : std::min(max_chunks, o.device_budget_bytes / arena.chunk_bytes());
  std::printf("plan:   arena: chunks of %zu steps of %zu particles (in whole warps of 32) x %zu B = %s; at most %zu chunks "
              "(%s)\n",
              o.chunk_steps, p.particles, record, human_bytes(arena.chunk_bytes()).c_str(), max_chunks,
              human_bytes(max_chunks * arena.chunk_bytes()).c_str());
  std::printf("        %zu device slot%s%s\n", slots, slots == 1 ? "" : "s",
              slots < max_chunks ? ", older chunks pushed to pinned host memory and prefetched back" : "");
  std::fflush(stdout);
}

template <class T>
int run_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = rk4_cli();
  rk::problem const p = problem_of(args);
  rk::options o = options_of(args);
  progress_bar const bar(args);
  o.progress = bar.callback();
  std::vector<T> state0;
  std::vector<T> budgets;
  read_inputs(args.text("input"), p, state0, budgets);
  print_header(command::run, w, sizes_of(p), dtype, o.kind);
  print_plan<T>(p, o);
  auto const start = std::chrono::steady_clock::now();
  rk::gradient_result<T> const r = rk::gradient(p, state0, budgets, o);
  double const wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::uint32_t const most = r.steps.empty() ? 0 : *std::max_element(r.steps.begin(), r.steps.end());
  double mean = 0;
  for (std::uint32_t s : r.steps) { mean += s; }
  mean /= static_cast<double>(std::max<std::size_t>(1, r.steps.size()));
  std::printf("loss:   %.9e\n", static_cast<double>(r.loss));
  std::printf("summary: gradient %.3f ms; steps per particle: mean %.1f, most %u; tape %s, peak device %s\n", wall_ms,
              mean, most, human_bytes(r.tape_bytes).c_str(), human_bytes(r.peak_device_bytes).c_str());
  if (o.tape == rk::method::arena) { std::printf("         %s\n", r.arena.describe().c_str()); }
  write_values(args.text("grad-out"), r.gradient);
  std::printf("wrote %s: dL/d(x0, v0), %zu %s values\n", args.text("grad-out").c_str(), r.gradient.size(), dtype.c_str());
  if (args.has("json")) {
    json_object stats;
    stats.add("workload", w.name)
      .add("problem", problem_json(p))
      .add("dtype", dtype)
      .add("backend", std::string{to_string(o.kind)})
      .add("device", query_device_limits(o.kind).name)
      .add("tape", o.tape == rk::method::arena ? "arena" : "global-stack")
      .add("loss", static_cast<double>(r.loss))
      .add("gradient_ms", wall_ms)
      .add("mean_steps", mean)
      .add("most_steps", static_cast<std::size_t>(most))
      .add("tape_bytes", r.tape_bytes)
      .add("peak_device_bytes", r.peak_device_bytes);
    if (o.tape == rk::method::arena) {
      json_object a;
      a.add("chunk_steps", r.arena.chunk_steps)
        .add("chunk_bytes", r.arena.chunk_bytes)
        .add("chunks", r.arena.chunks)
        .add("device_slots", r.arena.device_slots)
        .add("chunks_to_host", r.arena.chunks_to_host)
        .add("prefetches", r.arena.prefetches);
      stats.add("arena", a);
    }
    write_text(args.text("json"), stats.str());
  }
  return 0;
}

int run(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, rk4_cli());
  return dtype == "f32" ? run_as<float>(args, dtype) : run_as<double>(args, dtype);
}

int plan(parsed_args const& args)
{
  workload const& w = rk4_cli();
  std::string const dtype = dtype_of(args, w);
  rk::problem const p = problem_of(args);
  rk::validate(p, 6 * p.particles, p.particles);
  rk::options const o = options_of(args);
  print_header(command::plan, w, sizes_of(p), dtype, o.kind);
  if (dtype == "f32") {
    print_plan<float>(p, o);
  } else {
    print_plan<double>(p, o);
  }
  return 0;
}

template <class T>
int bench_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = rk4_cli();
  rk::problem const p = problem_of(args);
  rk::options const o = options_of(args);
  int warmup = 0;
  int repeats = 0;
  bench_counts(args, warmup, repeats);
  std::vector<T> state0;
  std::vector<T> budgets;
  random_inputs(p, seed_of(args), state0, budgets);
  print_header(command::bench, w, sizes_of(p), dtype, o.kind);
  std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
  print_plan<T>(p, o);
  double const primal_ms = median_ms(warmup, repeats, [&] { static_cast<void>(rk::primal(p, state0, budgets, o)); });
  rk::gradient_result<T> last;
  double const grad_ms = median_ms(warmup, repeats, [&] { last = rk::gradient(p, state0, budgets, o); });
  json_object plan;
  plan.add("tape", o.tape == rk::method::arena ? "arena" : "global-stack").add("chunk_steps", o.chunk_steps);
  write_bench_row(args, w, o.tape == rk::method::arena ? "arena" : "global-stack",
                  "P" + std::to_string(p.particles) + " steps1-" + std::to_string(p.max_steps) + " " + dtype, o.kind,
                  primal_ms, grad_ms, api_timing, last.tape_bytes, last.peak_device_bytes, plan);
  return 0;
}

int bench(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, rk4_cli());
  return dtype == "f32" ? bench_as<float>(args, dtype) : bench_as<double>(args, dtype);
}

}  // namespace

workload const& rk4_cli()
{
  static std::vector<flag_spec> const shape{
    {"particles", "P", "particles", true},
    {"max-steps", "S", "cap on any particle's RK4 steps (default 512)", false},
    {"dt", "DT", "RK4 step (default 0.01)", false},
    {"k", "K", "strength of the harmonic part of the potential (default 0.5)", false}};
  static workload const w{
    "rk4",
    "RK4 particles, each running until its own arc-length budget: dL/d(x0, v0) on the per-thread tape",
    "Integrates P particles by classical RK4 in a smooth potential, each until its arc length\n"
    "reaches its own budget (at most --max-steps steps: a data-dependent trip count per thread), and\n"
    "computes L = sum_p 0.5 (|x_p|^2 + |v_p|^2) at the end and dL/d(x0, v0) through the per-thread\n"
    "tape arena (or the Enzyme-style global stack).",
    "  IN.bin   --dtype values: per particle x, y, z, vx, vy, vz (6P values), then the P arc-length\n"
    "           budgets (finite, >= 0)\n"
    "  G.bin    dL/d(x0, v0): 6P values, laid out as the particles",
    shape,
    shape,
    {{"tape", "arena|global-stack", "tapeflow's per-thread arena (default) or the per-thread global stack", false},
     {"chunk-steps", "C", "arena: steps per chunk (default 32)", false},
     {"budget", "BYTES", "arena: device bytes of chunk slots (default: no limit)", false},
     {"host-budget", "BYTES", "arena: pinned host bytes of pushed-out chunks (default: no limit)", false},
     {"prefetch", "D", "arena: chunks prefetched ahead of the reverse (default 2)", false}},
    false,
    false,
    false,
    init,
    run,
    plan,
    bench,
  };
  return w;
}

}  // namespace tapeflow::cli
