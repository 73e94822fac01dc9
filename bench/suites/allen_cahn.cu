// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on one GPU: primal vs gradient (store tier) for each tile-pipeline variant at the
// brief's size (8192², T = 100), the launch-bound case (many small layers, with and without a
// captured graph), and the tiers under shrinking device budgets.
#include "../harness.hpp"

#include <allen_cahn/cuda_step.cuh>
#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/tiers.hpp>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tapeflow;
namespace ac = tapeflow::workloads::allen_cahn;

template <class T>
struct problem {
  std::size_t n;
  std::size_t steps;
  std::vector<T> u0;
  int sms;

  problem(std::size_t side, std::size_t t, int multiprocessors, std::uint64_t seed)
    : n(side), steps(t), u0(side * side), sms(multiprocessors)
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-0.9, 0.9);
    for (T& v : u0) { v = static_cast<T>(dist(rng)); }
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return u0.size() * sizeof(T); }
  [[nodiscard]] std::string size() const
  {
    return std::to_string(n) + "x" + std::to_string(n) + " T" + std::to_string(steps) +
           (sizeof(T) == 4 ? " f32" : " f64");
  }
  [[nodiscard]] ac::detail::cuda_step<T> step(ac::tape_content content = ac::tape_content::values) const
  {
    return {n, {T(0.05), T(1)}, sms, content};
  }
};

template <class T>
double primal_ms(bench::context& ctx, problem<T> const& p)
{
  device_buffer a(ctx.kind(), p.bytes(), {});
  device_buffer b(ctx.kind(), p.bytes(), {});
  auto const step = p.step();
  return ctx
    .measure([&](bench::stopwatch& sw) {
      a.upload(p.u0.data(), p.bytes(), {});
      sw.start();
      for (std::size_t s = 0; s < p.steps; ++s) {
        step.forward(s, a.data_as<T>(), b.data_as<T>(), {});
        std::swap(a, b);
      }
      sw.lap();
    })
    .total_ms;
}

/// grad_ms = augmented forward + seed + reverse; laps: forward, reverse.
template <class T>
bench::row gradient_row(bench::context& ctx, problem<T> const& p, std::string variant, double primal,
                        chain_options options, ac::tape_content content = ac::tape_content::values)
{
  options.kind = ctx.kind();
  reset_device_memory_peak(ctx.kind());
  chain<ac::detail::cuda_step<T>> c(p.step(content), p.steps, options);
  device_buffer state(ctx.kind(), p.bytes(), {});
  device_buffer adjoint(ctx.kind(), p.bytes(), {});
  bench::timing const t = ctx.measure([&](bench::stopwatch& sw) {
    state.upload(p.u0.data(), p.bytes(), {});
    sw.start();
    c.forward(state);
    adjoint.copy_from(state, {});  // dL/du_T = u_T
    sw.lap();
    c.reverse(adjoint);
    sw.lap();
  });
  bench::row r{"allen-cahn", std::move(variant), p.size()};
  r.primal_ms = primal;
  r.grad_ms = t.total_ms;
  r.forward_ms = t.laps_ms[0];
  r.reverse_ms = t.laps_ms[1];
  r.tape_bytes = c.stats().tape_bytes;
  r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
  // Least traffic of a taped gradient: the tape written and read once, and each step's state read
  // and written once in the forward and once in the reverse.
  double const moved = 2.0 * static_cast<double>(r.tape_bytes) +
                       4.0 * static_cast<double>(p.bytes()) * static_cast<double>(p.steps);
  r.achieved_GBps = moved / (r.grad_ms * 1e6);
  r.extra.add("plan", c.stats().plan.describe()).add("graph_captured", c.stats().graph_captured);
  return r;
}

template <class T>
void foundation(bench::context& ctx)
{
  problem<T> const p(ctx.size("allen-cahn.n", 8192, 512), ctx.size("allen-cahn.steps", 100, 20),
                     ctx.device().multiprocessors, 20261121);
  double const primal = primal_ms(ctx, p);
  chain_options store;
  store.policy = tape_policy::store;
  ctx.add(gradient_row(ctx, p, "tapeflow-store", primal, store));
  chain_options plain = store;
  plain.pipeline.force_plain = true;
  ctx.add(gradient_row(ctx, p, "tapeflow-store-register-db", primal, plain));
  if (ctx.device().bulk_copy) {  // sm_90: tiles staged by the bulk-copy engine
    chain_options bulk = store;
    bulk.pipeline.bulk_copy = true;
    ctx.add(gradient_row(ctx, p, "tapeflow-store-bulk", primal, bulk));
  }
  // Forward mode on the tape: the reaction's partial 1 + dt(1 - 3u^2), computed by duals, instead of u.
  ctx.add(gradient_row(ctx, p, "tapeflow-store-partials", primal, store, ac::tape_content::partials));
}

void run_allen_cahn(bench::context& ctx)
{
  if (ctx.text("allen-cahn.dtype", "f32") == "f64") {
    foundation<double>(ctx);
  } else {
    foundation<float>(ctx);
  }
}

/// Many small layers (256², T = 500): launch overhead dominates; the captured reverse (a CUDA
/// Graph over a resident tape) against the plain store tier.
void run_launch_bound(bench::context& ctx)
{
  problem<float> const p(ctx.size("launch-bound.n", 256, 128), ctx.size("launch-bound.steps", 500, 50),
                         ctx.device().multiprocessors, 20261123);
  double const primal = primal_ms(ctx, p);
  for (bool graph : {false, true}) {
    chain_options o;
    o.policy = tape_policy::store;
    o.capture_reverse = graph;
    ctx.add(gradient_row(ctx, p, graph ? "small-layers-store-graph" : "small-layers-store", primal, o));
  }
}

/// The tiers at 8192², T = 100 under budgets of 100, 50, 25 and 10 % of the full tape: grad time,
/// stall, recompute, peak device tape bytes.
void run_tiers(bench::context& ctx)
{
  problem<float> const p(ctx.size("tiers.n", 8192, 512), ctx.size("tiers.steps", 100, 20),
                         ctx.device().multiprocessors, 20261122);
  double const primal = primal_ms(ctx, p);
  bandwidths const bw = measure_bandwidths(ctx.kind(), std::size_t{256} << 20);
  std::size_t const tape = p.steps * ac::records_for<float>(p.n * p.n) * sizeof(ac::record<float>);
  for (int percent : {100, 50, 25, 10}) {
    for (tape_policy policy :
         {tape_policy::store, tape_policy::automatic, tape_policy::offload, tape_policy::recompute}) {
      if (policy == tape_policy::store && percent != 100) { continue; }
      chain_options o;
      o.policy = policy;
      o.budget_bytes = tape / 100 * static_cast<std::size_t>(percent);
      o.bw = bw;
      std::string const name = "tiers-" + std::string{to_string(policy)} + "-" + std::to_string(percent) + "pct";
      bench::row r;
      try {
        r = gradient_row(ctx, p, name, primal, o);
      } catch (budget_error const& e) {
        std::printf("%-28s does not fit: %s\n", name.c_str(), e.what());
        continue;
      }
      // One more run with measure_time for the stall and recompute split (not timed above).
      o.measure_time = true;
      o.kind = ctx.kind();
      chain<ac::detail::cuda_step<float>> c(p.step(), p.steps, o);
      device_buffer state(ctx.kind(), p.bytes(), {});
      state.upload(p.u0.data(), p.bytes(), {});
      c.forward(state);
      c.reverse(state);
      chain_stats const& s = c.stats();
      r.extra.add("budget_bytes", o.budget_bytes)
        .add("peak_tape_bytes", s.peak_tape_bytes)
        .add("stall_ms", s.stall_ms)
        .add("prefetches", s.prefetches)
        .add("recompute_steps", s.recompute_steps)
        .add("recompute_ms", s.recompute_ms)
        .add("h2d_copy_GBps", bw.h2d_GBps)
        .add("d2h_copy_GBps", bw.d2h_GBps)
        .add("tiers", s.tiers.describe());
      ctx.add(std::move(r));
    }
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(allen_cahn, 10, "Allen–Cahn 8192² T100: primal vs gradient per pipeline variant and tape content",
                     run_allen_cahn);
TAPEFLOW_BENCH_SUITE(launch_bound, 20, "Allen–Cahn 256² T500: small layers, store vs captured graph", run_launch_bound);
TAPEFLOW_BENCH_SUITE(tiers, 30, "Allen–Cahn 8192² T100 under 100/50/25/10 % device budgets, every policy",
                     run_tiers);
