// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark: one layer of 2^25 regions x 32-byte records (1 GiB of tape), its
// reverse sweep read in each way a GPU AD tool can read a tape — the naive Enzyme-style SoA tape,
// AoS records read directly, tapeflow's cp.async and register pipelines, sm_90 bulk copies — and
// recompute-only, against the same-run device-to-device copy bandwidth.
#include "../harness.hpp"

#include <tapeflow/memory.hpp>
#include <tapeflow/workloads/tape_bound.hpp>

#include <random>
#include <string>
#include <vector>

namespace {

using namespace tapeflow;
namespace tb = tapeflow::workloads::tape_bound;

void run_tape_bound(bench::context& ctx)
{
  std::size_t const n = ctx.size("tape-bound.regions", std::size_t{1} << 25, std::size_t{1} << 20);
  std::vector<float> u(n), g_out(n);
  std::mt19937_64 rng(20261124);
  std::uniform_real_distribution<float> dist(-1.5F, 1.5F);
  for (std::size_t i = 0; i < n; ++i) {
    u[i] = dist(rng);
    g_out[i] = dist(rng);
  }
  std::string const size = std::to_string(n) + " regions x " + std::to_string(sizeof(tb::record)) + " B";
  double const d2d = ctx.d2d_GBps();

  for (tb::variant v : tb::all_variants) {
    if (!tb::supported(v, ctx.kind())) {
      std::printf("%-28s not on this device\n", std::string{tb::to_string(v)}.c_str());
      continue;
    }
    reset_device_memory_peak(ctx.kind());
    tb::sweep_timing const t = tb::benchmark(u, g_out, v, ctx.kind(), ctx.warmup(), ctx.repeats());
    // Bytes the reverse sweep must move: the tape (or u, recomputing), g_out read, g_in written.
    double const moved = static_cast<double>(t.tape_bytes == 0 ? n * sizeof(float) : t.tape_bytes) +
                         2.0 * static_cast<double>(n * sizeof(float));
    bench::row r{"tape-bound", std::string{tb::to_string(v)}, size};
    r.forward_ms = t.forward_ms;
    r.reverse_ms = t.reverse_ms;
    r.grad_ms = t.forward_ms + t.reverse_ms;
    r.tape_bytes = t.tape_bytes;
    r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
    r.achieved_GBps = moved / (t.reverse_ms * 1e6);
    r.extra.add("fraction_of_d2d", r.achieved_GBps / d2d);
    if (v == tb::variant::staged || v == tb::variant::register_db || v == tb::variant::bulk) {
      r.extra.add("plan", t.plan.describe());
    }
    ctx.add(std::move(r));
  }
}

}  // namespace

TAPEFLOW_BENCH_SUITE(tape_bound, 5, "reverse sweep over 1 GiB of 32-byte records, every way to read a tape, vs D2D copy",
                     run_tape_bound);
