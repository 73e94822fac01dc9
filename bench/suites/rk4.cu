// SPDX-License-Identifier: Apache-2.0
// RK4 particles with per-thread loops of data-dependent length (16 to 512 steps per particle,
// 2^20 particles): tapeflow's per-thread tape arena, device-resident and through the host tier
// (device budget ~25 % of the tape), against the Enzyme-style per-thread global stack.
#include "../harness.hpp"

#include <rk4/cuda_step.cuh>
#include <rk4/driver.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/thread_tape.hpp>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tapeflow;
namespace rk = tapeflow::workloads::rk4;

template <class T>
struct inputs {
  rk::problem p;
  std::vector<T> y0;
  std::vector<T> budgets;
  std::vector<std::uint32_t> targets;
  std::string size;

  [[nodiscard]] double total_steps() const
  {
    return std::accumulate(targets.begin(), targets.end(), 0.0,
                           [](double a, std::uint32_t n) { return a + static_cast<double>(n); });
  }
};

/// Particles in [-1, 1]^3 with velocities in [-0.9, 0.9]^3; trip counts uniform in [lo, hi],
/// turned into arc-length budgets on the device (budgets_for_steps).
template <class T>
inputs<T> make_inputs(bench::context& ctx, std::size_t particles, std::uint32_t lo, std::uint32_t hi,
                      char const* dtype)
{
  inputs<T> in;
  in.p.particles = particles;
  in.p.max_steps = hi;
  std::mt19937_64 rng(20261124);
  std::uniform_real_distribution<double> pos(-1.0, 1.0);
  std::uniform_real_distribution<double> vel(-0.9, 0.9);
  std::uniform_int_distribution<std::uint32_t> trips(lo, hi);
  in.y0.resize(6 * particles);
  in.targets.resize(particles);
  for (std::size_t q = 0; q < particles; ++q) {
    for (int i = 0; i < 3; ++i) {
      in.y0[6 * q + i] = static_cast<T>(pos(rng));
      in.y0[6 * q + 3 + i] = static_cast<T>(vel(rng));
    }
    in.targets[q] = trips(rng);
  }
  rk::options o;
  o.kind = ctx.kind();
  in.budgets = rk::budgets_for_steps(in.p, in.y0, in.targets, o);
  in.size = "P" + std::to_string(particles) + " steps" + std::to_string(lo) + "-" + std::to_string(hi) + " " + dtype;
  return in;
}

template <class T>
double primal_ms(bench::context& ctx, inputs<T> const& in)
{
  std::size_t const n = in.p.particles;
  device_buffer y0(ctx.kind(), n * sizeof(rk::state<T>), {});
  device_buffer y(ctx.kind(), n * sizeof(rk::state<T>), {});
  device_buffer budget(ctx.kind(), n * sizeof(T), {});
  device_buffer steps(ctx.kind(), n * sizeof(std::uint32_t), {});
  y0.upload(in.y0.data(), y0.size(), {});
  budget.upload(in.budgets.data(), budget.size(), {});
  rk::detail::gpu_kernels<T> const k{n};
  rk::params<T> const prm = rk::params_of<T>(in.p);
  return ctx
    .measure([&](bench::stopwatch& sw) {
      y.copy_from(y0, {});
      sw.start();
      k.primal(y.data_as<rk::state<T>>(), budget.data_as<T>(), steps.data_as<std::uint32_t>(), prm, {});
      sw.lap();
    })
    .total_ms;
}

/// grad_ms = taped forward + seed + reverse; laps: forward, reverse.
template <class T>
bench::row gradient_row(bench::context& ctx, inputs<T> const& in, std::string variant, double primal,
                        rk::options o)
{
  o.kind = ctx.kind();
  reset_device_memory_peak(ctx.kind());
  reset_host_memory_peak(ctx.kind());
  rk::detail::engine<T, rk::detail::gpu_kernels<T>> e(rk::detail::gpu_kernels<T>{in.p.particles}, in.p, o);
  e.upload(in.y0, in.budgets);
  bench::timing const t = ctx.measure([&](bench::stopwatch& sw) {
    e.reset();
    sw.start();
    e.forward();
    sw.lap();
    e.reverse();
    sw.lap();
  });
  bench::row r{"rk4", std::move(variant), in.size};
  r.primal_ms = primal;
  r.grad_ms = t.total_ms;
  r.forward_ms = t.laps_ms[0];
  r.reverse_ms = t.laps_ms[1];
  r.tape_bytes = e.tape_bytes();
  r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
  // Useful tape traffic: every record written once and read once.
  double const records = in.total_steps() * static_cast<double>(sizeof(rk::step_record<T>));
  r.achieved_GBps = 2.0 * records / (r.grad_ms * 1e6);
  std::vector<std::uint32_t> const steps = e.steps();
  bool const exact = steps == in.targets;
  r.extra.add("trip_counts_as_targeted", exact)
    .add("mean_steps", in.total_steps() / static_cast<double>(in.p.particles))
    .add("record_bytes", sizeof(rk::step_record<T>))
    .add("useful_tape_bytes", static_cast<std::size_t>(records))
    .add("peak_host_bytes", host_memory_usage(ctx.kind()).peak_bytes);
  if (o.tape == rk::method::arena) {
    thread_tape_stats const s = e.arena_stats();
    r.extra.add("chunk_steps", s.chunk_steps)
      .add("chunks", s.chunks)
      .add("max_steps", s.max_steps)
      .add("device_slots", s.device_slots)
      .add("chunks_to_host", s.chunks_to_host)
      .add("prefetches", s.prefetches)
      .add("d2h_bytes", s.d2h_bytes)
      .add("h2d_bytes", s.h2d_bytes)
      .add("device_budget_bytes", o.device_budget_bytes)
      .add("plan", s.describe());
  } else {
    r.extra.add("stack_capacity_steps", in.p.max_steps);
  }
  return r;
}

template <class T>
void run(bench::context& ctx, char const* dtype)
{
  std::size_t const particles = ctx.size("rk4.particles", 1048576, 16384);
  auto const lo = static_cast<std::uint32_t>(ctx.size("rk4.min_steps", 16, 16));
  auto const hi = static_cast<std::uint32_t>(ctx.size("rk4.max_steps", 512, 64));
  std::size_t const chunk_steps = ctx.size("rk4.chunk_steps", 32, 16);
  inputs<T> const in = make_inputs<T>(ctx, particles, lo, hi, dtype);
  double const primal = primal_ms(ctx, in);

  rk::options arena;
  arena.tape = rk::method::arena;
  arena.chunk_steps = chunk_steps;
  bench::row device = gradient_row(ctx, in, "arena", primal, arena);

  rk::options stack;
  stack.tape = rk::method::global_stack;
  bench::row global = gradient_row(ctx, in, "global-stack", primal, stack);

  // The target: the arena's reverse at least 1.3x faster than the per-thread global stack's.
  double const speedup = global.reverse_ms / device.reverse_ms;
  device.extra.add("reverse_speedup_vs_global_stack", speedup).add("target_reverse_speedup", 1.3);
  std::printf("rk4: arena reverse %.3f ms, global-stack reverse %.3f ms: %.2fx (target >= 1.3x)\n",
              device.reverse_ms, global.reverse_ms, speedup);

  rk::options host = arena;
  host.device_budget_bytes = device.tape_bytes / 4;  // ~25 % of the tape: chunks go through the host tier
  bench::row tiered;
  try {
    tiered = gradient_row(ctx, in, "arena-host", primal, host);
  } catch (budget_error const& e) {
    std::printf("rk4 arena-host does not fit: %s\n", e.what());
  }
  ctx.add(std::move(device));
  if (!tiered.workload.empty()) { ctx.add(std::move(tiered)); }
  ctx.add(std::move(global));
}

void run_rk4(bench::context& ctx)
{
  if (ctx.text("rk4.dtype", "f32") == "f64") {
    run<double>(ctx, "f64");
  } else {
    run<float>(ctx, "f32");
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(rk4, 70,
                     "RK4 particles P=2^20, 16-512 steps each: per-thread tape arena (device, host tier) vs global stack",
                     run_rk4);
