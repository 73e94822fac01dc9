// SPDX-License-Identifier: Apache-2.0
// Every registered workload's benchmark suites, made from its description (bench_suites()): each
// case is a session of the workload timed by workloads::benchmark() — the primal against the
// gradient, device-resident, event-timed medians after a warm-up — and one row of the results.
#include "../harness.hpp"

#include <tapeflow/workloads/common/segment_trials.hpp>
#include <tapeflow/workloads/registry.hpp>

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <cstdio>
#include <string>
#include <utility>

namespace tapeflow::bench {
namespace {

/// The seed of every suite's random inputs (the peers draw their own, from the same sizes).
constexpr std::uint64_t inputs_seed = 20261124;

/// The chain's figures a row carries, and for a tier_stats case those of one more run with
/// measure_time on (stall, prefetches, recompute times).
void add_chain(cli::json_object& extra, chain_stats const& s, std::size_t budget_bytes)
{
  extra.add("plan", s.plan.describe())
    .add("graph_captured", s.graph_captured)
    .add("budget_bytes", budget_bytes)
    .add("peak_tape_bytes", s.peak_tape_bytes)
    .add("recompute_steps", s.recompute_steps)
    .add("snapshots", s.tiers.snapshots)
    .add("tiers", s.tiers.describe());
}

template <class D, class T>
void run_case(context& ctx, workloads::bench_case<D> const& c, std::string const& dtype)
{
  using described = workloads::described<D>;
  typename D::options o = c.options;
  o.kind = ctx.kind();
  constexpr bool chain = D::tape == workloads::tape_kind::chain;
  if constexpr (chain) { o.measure_time = false; }  // events time it; no extra synchronisation
  auto const inputs = D::template random_inputs<T>(c.problem, inputs_seed);
  auto const views = workloads::views_of(inputs);
  workloads::bench_result r;
  workloads::segment_measurement trials;  // a case of --segment measure times its candidates first
  try {
    o = workloads::settle_segment<D, T>(c.problem, o, &trials);
    // The row's peaks are its own run's, not its trials' (a one-step trial may hold more tape).
    reset_device_memory_peak(ctx.kind());
    reset_host_memory_peak(ctx.kind());
    auto session = D::template open<T>(c.problem, o);
    r = workloads::benchmark(*session, views, {}, ctx.warmup(), ctx.repeats());
  } catch (budget_error const& e) {
    if (!c.may_not_fit) { throw; }
    std::printf("%-28s does not fit: %s\n", c.variant.c_str(), e.what());
    return;
  }
  row out{D::text.name, c.variant, D::size_key(c.problem, dtype)};
  out.primal_ms = r.primal_ms;
  out.grad_ms = r.grad_ms;
  out.forward_ms = r.forward_ms;
  out.reverse_ms = r.reverse_ms;
  out.tape_bytes = r.report.tape_bytes;
  out.peak_device_bytes = r.report.peak_device_bytes;
  out.achieved_GBps = described::bench_bytes(c.problem, r.report, sizeof(T)) / (r.grad_ms * 1e6);
  out.extra.add("repeat_allocations", r.repeat_allocations)
    .add("peak_host_bytes", r.report.peak_host_bytes);
  if (r.report.layer) { out.extra.add("plan", r.report.layer->describe()); }
  if (r.report.arena) { out.extra.add("plan", r.report.arena->describe()); }
  for (auto const& [name, value] : r.report.facts) { out.extra.add(name, value); }
  if (!trials.trials.empty()) { out.extra.add("segment_trials", trials.json()); }
  if constexpr (chain) {
    add_chain(out.extra, *r.report.chain, o.budget_bytes);
    if (c.tier_stats) {
      o.measure_time = true;
      auto again = D::template open<T>(c.problem, o);
      workloads::outcome<T> const measured = workloads::gradient_of(*again, views, {});
      chain_stats const& s = *measured.report.chain;
      out.extra.add("stall_ms", s.stall_ms)
        .add("prefetches", s.prefetches)
        .add("recompute_ms", s.recompute_ms)
        .add("estimated_overhead_ms", s.tiers.overhead_ms);
    }
  }
  described::bench_facts(c.problem, r.report, out.extra);
  ctx.add(std::move(out));
}

template <class D>
void run_suite(context& ctx, workloads::bench_suite<D> const& suite)
{
  using described = workloads::described<D>;
  std::string const dtype =
    ctx.text(suite.name + ".dtype", D::precisions == workloads::precision::f64_only ? "f64" : "f32");
  workloads::bench_sizes const sizes(ctx.quick(), ctx.cfg().params);
  for (workloads::bench_case<D> const& c : suite.cases(sizes, dtype)) {
    if (c.runs_on != nullptr && !c.runs_on(ctx.device())) {
      std::printf("%-28s not on this device\n", c.variant.c_str());
      continue;
    }
    described::with_precision(dtype, [&](auto t) {
      run_case<D, decltype(t)>(ctx, c, dtype);
      return 0;
    });
  }
}

/// Registers every suite of every registered workload.
struct registrar {
  registrar()
  {
    workloads::registered_workloads::for_each([](auto d) {
      using D = decltype(d);
      using described = workloads::described<D>;
      std::vector<workloads::bench_suite<D>> const suites = described::bench_suites();
      for (std::size_t i = 0; i < suites.size(); ++i) {
        registry().push_back({suites[i].name, suites[i].order, suites[i].help,
                              [i](context& ctx) { run_suite<D>(ctx, described::bench_suites()[i]); }});
      }
    });
  }
};
registrar const workload_suites;

}  // namespace
}  // namespace tapeflow::bench
