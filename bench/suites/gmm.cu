// SPDX-License-Identifier: Apache-2.0
// GMM (ADBench's objective, f64) on one GPU: the objective against the objective and its gradient
// at ADBench's sizes. `--set gmm.d=.. gmm.k=.. gmm.n=..` runs one size instead.
#include "../harness.hpp"

#include <gmm/cuda_step.cuh>
#include <gmm/driver.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/tape.hpp>

#include <string>
#include <vector>

namespace {

using namespace tapeflow;
namespace gm = tapeflow::workloads::gmm;

std::string size_name(gm::problem const& p)
{
  return "d" + std::to_string(p.d) + " K" + std::to_string(p.k) + " N" + std::to_string(p.n);
}

std::vector<gm::problem> sizes(bench::context& ctx)
{
  auto const& params = ctx.cfg().params;
  if (params.count("gmm.d") != 0 || params.count("gmm.k") != 0 || params.count("gmm.n") != 0) {
    return {gm::problem{ctx.size("gmm.d", 2, 2), ctx.size("gmm.k", 5, 5), ctx.size("gmm.n", 1000, 1000)}};
  }
  if (ctx.quick()) { return {gm::problem{2, 5, 1000}, gm::problem{10, 25, 1000}}; }
  return {gm::problem{2, 5, 1000}, gm::problem{10, 25, 10000}, gm::problem{20, 50, 10000},
          gm::problem{64, 100, 10000}, gm::problem{128, 200, 10000}};
}

void run_gmm(bench::context& ctx)
{
  for (gm::problem const& p : sizes(ctx)) {
    gm::inputs const in = gm::random_inputs(p, 20261124 + p.d);
    gm::options o;
    o.kind = ctx.kind();
    reset_device_memory_peak(ctx.kind());
    gm::detail::layout const l = gm::detail::make_layout(p, o);
    gm::detail::gpu_engine e(p, in, l, {});
    tape t(ctx.kind());
    double const primal = ctx
                            .measure([&](bench::stopwatch& sw) {
                              sw.start();
                              e.objective({});
                              sw.lap();
                            })
                            .total_ms;
    // grad_ms = augmented forward (the objective, writing the tape) + reverse; laps: forward, reverse.
    bench::timing const g = ctx.measure([&](bench::stopwatch& sw) {
      sw.start();
      gm::detail::gradient_pass(e, t, l, false, {}, [&] { sw.lap(); });
      sw.lap();
    });
    bench::row r{"gmm", "tapeflow", size_name(p)};
    r.primal_ms = primal;
    r.grad_ms = g.total_ms;
    r.forward_ms = g.laps_ms[0];
    r.reverse_ms = g.laps_ms[1];
    r.tape_bytes = t.peak_bytes();
    r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
    r.extra.add("plan", l.plan.describe())
      .add("reverse_splits", l.splits)
      .add("objective", e.read_objective({}));
    ctx.add(std::move(r));
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(gmm, 50, "GMM (ADBench, f64) d2..d128, K5..K200, N1k..10k: objective vs objective + gradient",
                     run_gmm);
