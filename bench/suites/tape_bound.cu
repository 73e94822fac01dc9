// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark: one layer of 2^25 regions x 32-byte records (1 GiB of tape), its
// reverse sweep read in each way a GPU AD tool can read a tape — the naive Enzyme-style SoA tape,
// AoS records read directly, tapeflow's cp.async and register pipelines, sm_90 bulk copies — and
// recompute-only, against the same-run device-to-device copy bandwidth.
#include "../harness.hpp"

#include <tape_bound/cuda_step.cuh>
#include <tapeflow/memory.hpp>

#include <random>
#include <string>
#include <vector>

namespace {

using namespace tapeflow;
namespace tb = tapeflow::workloads::tape_bound;

void run_tape_bound(bench::context& ctx)
{
  std::size_t const n = ctx.size("tape-bound.regions", std::size_t{1} << 25, std::size_t{1} << 20);
  std::size_t const bytes = n * sizeof(float);
  std::size_t const tape_bytes = n * sizeof(tb::record);
  std::vector<float> u(n), g_out(n);
  std::mt19937_64 rng(20261124);
  std::uniform_real_distribution<float> dist(-1.5F, 1.5F);
  for (std::size_t i = 0; i < n; ++i) {
    u[i] = dist(rng);
    g_out[i] = dist(rng);
  }
  device_buffer du(ctx.kind(), bytes, {});
  device_buffer dg_out(ctx.kind(), bytes, {});
  device_buffer dg_in(ctx.kind(), bytes, {});
  device_buffer tape(ctx.kind(), tape_bytes, {});
  du.upload(u.data(), bytes, {});
  dg_out.upload(g_out.data(), bytes, {});
  tb::detail::buffers const b{du.data_as<float>(), tape.data_as<tb::record>(), tape.data_as<float>(),
                              dg_out.data_as<float>(), dg_in.data_as<float>(), n};
  int const sms = ctx.device().multiprocessors;
  std::string const size = std::to_string(n) + " regions x " + std::to_string(sizeof(tb::record)) + " B";
  double const d2d = ctx.d2d_GBps();

  for (tb::variant v : tb::all_variants) {
    if (!tb::supported(v, ctx.kind())) {
      std::printf("%-28s not on this device\n", std::string{tb::to_string(v)}.c_str());
      continue;
    }
    pipeline_plan const plan = tb::detail::plan_for(v, n, ctx.device(), {});
    bench::timing const forward = ctx.measure([&](bench::stopwatch& sw) {
      sw.start();
      tb::detail::launch_forward(v, b, sms, {});
      sw.lap();
    });
    bench::timing const reverse = ctx.measure([&](bench::stopwatch& sw) {
      sw.start();
      tb::detail::launch_reverse(v, b, plan, sms, {});
      sw.lap();
    });
    bool const taped = v != tb::variant::recompute;
    // Bytes the reverse sweep must move: the tape (or u, recomputing), g_out read, g_in written.
    double const moved = static_cast<double>(taped ? tape_bytes : bytes) + 2.0 * static_cast<double>(bytes);
    bench::row r{"tape-bound", std::string{tb::to_string(v)}, size};
    r.forward_ms = forward.total_ms;
    r.reverse_ms = reverse.total_ms;
    r.grad_ms = forward.total_ms + reverse.total_ms;
    r.tape_bytes = taped ? tape_bytes : 0;
    r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
    r.achieved_GBps = moved / (reverse.total_ms * 1e6);
    r.extra.add("fraction_of_d2d", r.achieved_GBps / d2d);
    if (v == tb::variant::staged || v == tb::variant::register_db || v == tb::variant::bulk) {
      r.extra.add("plan", plan.describe());
    }
    ctx.add(std::move(r));
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(tape_bound, 5, "reverse sweep over 1 GiB of 32-byte records, every way to read a tape, vs D2D copy",
                     run_tape_bound);
