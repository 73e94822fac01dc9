// SPDX-License-Identifier: Apache-2.0
// RK4's description (kernels/common/describe.hpp): its CLI, benchmark suite and typed tests.
#pragma once

#include "rk4.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <tapeflow/thread_tape.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::rk4 {

struct description {
  static constexpr workload_text text{
    "rk4", "RK4 particles, each running until its own arc-length budget: dL/d(x0, v0) on the per-thread tape",
    "Integrates P particles by classical RK4 in a smooth potential, each until its arc length\n"
    "reaches its own budget (at most --max-steps steps: a data-dependent trip count per thread), and\n"
    "computes L = sum_p 0.5 (|x_p|^2 + |v_p|^2) at the end and dL/d(x0, v0) through the per-thread\n"
    "tape arena (or the Enzyme-style global stack).",
    "  IN.bin   --dtype values: per particle x, y, z, vx, vy, vz (6P values), then the P arc-length\n"
    "           budgets (finite, >= 0)\n"
    "  G.bin    dL/d(x0, v0): 6P values, laid out as the particles"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::arena;
  using problem = rk4::problem;
  using options = rk4::options;
  static constexpr auto fields = std::make_tuple(
    count("particles", &problem::particles, "P", "particles", "P", flag_use::shape_required, 1, std::size_t{1} << 32),
    count("max-steps", &problem::max_steps, "S", "cap on any particle's RK4 steps (default 512)", "max steps",
          flag_use::shape, 1, (std::size_t{1} << 31) - 1),
    real("dt", &problem::dt, "DT", "RK4 step (default 0.01)", "dt", flag_use::shape),
    real("k", &problem::k, "K", "strength of the harmonic part of the potential (default 0.5)", "k", flag_use::shape));

  static std::vector<cli::flag_spec> option_flags()
  {
    return {{"tape", "arena|global-stack", "tapeflow's per-thread arena (default) or the per-thread global stack"},
            {"chunk-steps", "C", "arena: steps per chunk (default 32)"},
            {"budget", "BYTES", "arena: device bytes of chunk slots (default: no limit)"},
            {"host-budget", "BYTES", "arena: pinned host bytes of pushed-out chunks (default: no limit)"},
            {"prefetch", "D", "arena: chunks prefetched ahead of the reverse (default 2)"}};
  }
  static void read_options(cli::parsed_args const& args, options& o)
  {
    std::string const taped = args.text("tape", "arena");
    if (taped != "arena" && taped != "global-stack") {
      throw cli::usage_error("--tape must be arena or global-stack, got '" + taped + "'");
    }
    o.tape = taped == "arena" ? method::arena : method::global_stack;
    if (o.tape == method::global_stack) {
      for (char const* arena_only : {"chunk-steps", "budget", "host-budget", "prefetch"}) {
        if (args.has(arena_only)) {
          throw cli::usage_error("--" + std::string{arena_only} + " applies to the arena only, not --tape global-stack");
        }
      }
    }
    o.chunk_steps = cli::count_of(args, "chunk-steps", 1, std::size_t{1} << 20, o.chunk_steps);
    o.device_budget_bytes = cli::budget_of(args, "budget");
    o.host_budget_bytes = cli::budget_of(args, "host-budget");
    o.prefetch_distance = cli::count_of(args, "prefetch", 1, 1024, o.prefetch_distance);
  }
  static std::string variant_of(options const& o) { return o.tape == method::arena ? "arena" : "global-stack"; }
  static void validate(problem const& p) { rk4::validate(p); }
  static std::string size_key(problem const& p, std::string const& dtype)
  {
    return "P" + std::to_string(p.particles) + " steps1-" + std::to_string(p.max_steps) + " " + dtype;
  }
  static std::vector<array_spec> inputs(problem const& p)
  {
    return {{"x0, v0", 6 * p.particles}, {"budgets", p.particles}};
  }
  static std::vector<array_spec> gradients(problem const& p) { return {{"dL/d(x0, v0)", 6 * p.particles}}; }
  /// Positions in [-1, 1]^3, velocities of speed 0.5 to 1.5 in a random direction, and budgets
  /// under which each particle runs a random number of steps in [1, max steps] (budgets_for_steps
  /// on the CPU backend: the middle of its last step's arc increment).
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> pos(-1.0, 1.0);
    std::normal_distribution<double> dir(0.0, 1.0);
    std::uniform_real_distribution<double> speed(0.5, 1.5);
    std::vector<T> y(6 * p.particles);
    for (std::size_t q = 0; q < p.particles; ++q) {
      double d[3] = {dir(rng), dir(rng), dir(rng)};
      double const norm = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + 1e-12;
      double const s = speed(rng);
      for (int i = 0; i < 3; ++i) {
        y[6 * q + i] = static_cast<T>(pos(rng));
        y[6 * q + 3 + i] = static_cast<T>(s * d[i] / norm);
      }
    }
    std::uniform_int_distribution<std::uint32_t> steps(1, static_cast<std::uint32_t>(p.max_steps));
    std::vector<std::uint32_t> targets(p.particles);
    for (auto& n : targets) { n = steps(rng); }
    std::vector<T> budgets = budgets_for_steps<T>(p, y, targets, options{});
    return {std::move(y), std::move(budgets)};
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return rk4::open<T>(p, o); }
  /// The tape before running: the arena's chunks and device slots (its largest, every particle
  /// running max steps), or the global stack.
  template <class T>
  static tape_report plan(problem const& p, options const& o)
  {
    rk4::validate(p, 6 * p.particles, p.particles);
    std::size_t const record = sizeof(step_record<T>);
    tape_report r;
    if (o.tape == method::global_stack) {
      r.tape_bytes = p.particles * p.max_steps * record;
      r.notes = {"global stack: " + std::to_string(p.particles) + " particles x " + std::to_string(p.max_steps) +
                 " steps x " + std::to_string(record) + " B, allocated whole"};
      return r;
    }
    // The chunk size as an arena would have it, without making one (its buffers, streams, events).
    std::size_t const chunk_bytes = thread_arena::planned_chunk_bytes(record, p.particles, arena_options(p, o));
    std::size_t const chunks = (p.max_steps + o.chunk_steps - 1) / o.chunk_steps;
    std::size_t const slots = o.device_budget_bytes == 0 ? chunks : std::min(chunks, o.device_budget_bytes / chunk_bytes);
    thread_tape_stats a;
    a.threads = p.particles;
    a.chunk_steps = o.chunk_steps;
    a.record_bytes = record;
    a.chunk_bytes = chunk_bytes;
    a.chunks = chunks;
    a.device_slots = slots;
    a.max_steps = p.max_steps;
    r.arena = a;
    r.tape_bytes = chunks * chunk_bytes;
    r.notes = {"arena: chunks of " + std::to_string(o.chunk_steps) + " steps of " + std::to_string(p.particles) +
                 " particles (in whole warps of 32) x " + std::to_string(record) + " B; at most " +
                 std::to_string(chunks) + " chunks",
               std::to_string(slots) + " device slot" + (slots == 1 ? "" : "s") +
                 (slots < chunks ? ", older chunks pushed to pinned host memory and prefetched back" : "")};
    return r;
  }
  /// Useful tape traffic: every record written once and read once.
  static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    double mean_steps = 0;
    for (auto const& [name, value] : r.facts) {
      if (name == "mean_steps") { mean_steps = value; }
    }
    std::size_t const record = value_bytes == 4 ? sizeof(step_record<float>) : sizeof(step_record<double>);
    return 2.0 * mean_steps * static_cast<double>(p.particles * record);
  }
  static std::vector<bench_suite<description>> bench_suites()
  {
    return {{"rk4", 70, "RK4 particles P=2^20, 1-512 steps each: per-thread tape arena (device, host tier) vs global stack",
             [](bench_sizes const& s, std::string const& dtype) {
               problem p;
               p.particles = s.size("rk4.particles", 1048576, 16384);
               p.max_steps = s.size("rk4.max_steps", 512, 64);
               std::vector<bench_case<description>> cases(3, {"arena", p});
               for (auto& c : cases) { c.options.chunk_steps = s.size("rk4.chunk_steps", 32, 16); }
               // A quarter of the arena's chunks on the device (some particle runs about max steps, so
               // the forward fills them all): the rest goes through the host tier.
               cases[1].variant = "arena-host";
               cases[1].options.device_budget_bytes = with_precision(dtype, [&](auto t) {
                 return plan<decltype(t)>(p, cases[0].options).tape_bytes;
               }) / 4;
               cases[1].may_not_fit = true;
               cases[2].variant = "global-stack";
               cases[2].options.tape = method::global_stack;
               return cases;
             }}};
  }
  static problem test_problem()
  {
    problem p;
    p.particles = 37;
    p.max_steps = 40;
    return p;
  }
};

}  // namespace tapeflow::workloads::rk4
