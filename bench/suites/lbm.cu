// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 on one GPU: primal vs gradient at 1024² T100 f32 with every layer on the device
// (tapeflow-store), and under a device budget of a quarter of the tape (tapeflow-recompute,
// Revolve). Target: gradient / primal <= 3.0; the byte bound is 160 / 72 = 2.2 (docs/workloads/lbm.md).
#include "../harness.hpp"

#include <lbm/cuda_step.cuh>
#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/tiers.hpp>

#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tapeflow;
namespace lbm = tapeflow::workloads::lbm;

template <class T>
struct problem {
  lbm::problem p;
  std::vector<T> f0;
  int sms;

  problem(lbm::problem shape, int multiprocessors, std::uint64_t seed)
    : p(shape), f0(lbm::random_state<T>(shape, seed)), sms(multiprocessors)
  {
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return f0.size() * sizeof(T); }
  [[nodiscard]] std::string size() const
  {
    return std::to_string(p.nx) + "x" + std::to_string(p.ny) + " T" + std::to_string(p.steps) +
           (sizeof(T) == 4 ? " f32" : " f64");
  }
  [[nodiscard]] lbm::detail::cuda_step<T> step() const
  {
    return {p.nx, p.ny, static_cast<T>(1.0 / p.tau), sms};
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
      a.upload(p.f0.data(), p.bytes(), {});
      sw.start();
      for (std::size_t s = 0; s < p.p.steps; ++s) {
        step.forward(s, a.data_as<T>(), b.data_as<T>(), {});
        std::swap(a, b);
      }
      sw.lap();
    })
    .total_ms;
}

/// grad_ms = augmented forward + seed + reverse; laps: forward (with the seed), reverse.
template <class T>
bench::row gradient_row(bench::context& ctx, problem<T> const& p, std::string variant, double primal,
                        chain_options options)
{
  options.kind = ctx.kind();
  reset_device_memory_peak(ctx.kind());
  chain<lbm::detail::cuda_step<T>> c(p.step(), p.p.steps, options);
  device_buffer state(ctx.kind(), p.bytes(), {});
  device_buffer adjoint(ctx.kind(), p.bytes(), {});
  bench::timing const t = ctx.measure([&](bench::stopwatch& sw) {
    state.upload(p.f0.data(), p.bytes(), {});
    sw.start();
    c.forward(state);
    adjoint.copy_from(state, {});  // dL/df_T = f_T
    sw.lap();
    c.reverse(adjoint);
    sw.lap();
  });
  chain_stats const& s = c.stats();
  bench::row r{"lbm", std::move(variant), p.size()};
  r.primal_ms = primal;
  r.grad_ms = t.total_ms;
  r.forward_ms = t.laps_ms[0];
  r.reverse_ms = t.laps_ms[1];
  r.tape_bytes = s.tape_bytes;
  r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
  // Least traffic of a taped gradient, per step: the forward reads f and writes f_next and the
  // layer; the reverse reads the layer and g_next and writes g_f. The layer is the cells'
  // velocities (8 B per cell in f32, 16 in f64), so per cell and step f32 moves
  // 36 + 36 + 8 + 8 + 36 + 36 = 160 B against the primal's 72. The seed copy is not counted.
  double const moved =
    static_cast<double>(p.p.steps) * (4.0 * static_cast<double>(p.bytes()) + 2.0 * static_cast<double>(s.layer_bytes));
  r.achieved_GBps = moved / (r.grad_ms * 1e6);
  r.extra.add("plan", s.plan.describe())
    .add("budget_bytes", options.budget_bytes)
    .add("peak_tape_bytes", s.peak_tape_bytes)
    .add("recompute_steps", s.recompute_steps)
    .add("snapshots", s.tiers.snapshots)
    .add("tiers", s.tiers.describe());
  return r;
}

template <class T>
void run(bench::context& ctx)
{
  lbm::problem const shape{ctx.size("lbm.nx", 1024, 128), ctx.size("lbm.ny", 1024, 128),
                           ctx.size("lbm.steps", 100, 10), 0.8};
  problem<T> const p(shape, ctx.device().multiprocessors, 20261140);
  double const primal = primal_ms(ctx, p);

  chain_options store;
  store.policy = tape_policy::store;
  ctx.add(gradient_row(ctx, p, "tapeflow-store", primal, store));

  // A quarter of the tape: Revolve keeps as many state snapshots as fit beside one layer.
  chain_options recompute;
  recompute.policy = tape_policy::recompute;
  recompute.budget_bytes = shape.steps * lbm::records_per_layer<T>(shape.cells()) * sizeof(lbm::record<T>) / 4;
  try {
    ctx.add(gradient_row(ctx, p, "tapeflow-recompute", primal, recompute));
  } catch (budget_error const& e) {
    std::printf("%-28s does not fit: %s\n", "tapeflow-recompute", e.what());
  }
}

void run_lbm(bench::context& ctx)
{
  if (ctx.text("lbm.dtype", "f32") == "f64") {
    run<double>(ctx);
  } else {
    run<float>(ctx);
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(lbm, 40, "LBM D2Q9 1024² T100: primal vs gradient, store and recompute (25 % budget)", run_lbm);
