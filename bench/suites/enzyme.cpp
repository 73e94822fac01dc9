// SPDX-License-Identifier: Apache-2.0
// The Enzyme example with Enzyme-generated device code (builds with TAPEFLOW_ENZYME and CUDA): the
// same chain timed with the hand-written CUDA pair, with Enzyme's kernels whose loop caches
// tapeflow routed into a cache pool, and with Enzyme's own kernels, which malloc their caches on
// the device heap and free them in the reverse. Event-timed medians after a warm-up, the forward
// and the reverse as laps; the primal is the untaped kernel of the same cubin, T launches.
#include "../harness.hpp"

#include <tapeflow/workloads/enzyme_example/enzyme_device.hpp>

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow::bench {
namespace {

namespace ex = workloads::enzyme_example;

/// The untaped primal: T launches of the cubin's primal kernel, ping-ponging two buffers.
double primal_ms(context& ctx, ex::enzyme_module const& m, ex::problem const& p, std::vector<double> const& x0)
{
  std::size_t const bytes = p.n * sizeof(double);
  device_buffer a(backend::cuda, bytes, {});
  device_buffer b(backend::cuda, bytes, {});
  return ctx
    .measure(1,
             [&](stopwatch& sw) {
               a.upload(x0.data(), bytes, {});
               sw.start();
               for (std::size_t t = 0; t < p.steps; ++t) {
                 auto* const from = static_cast<double const*>(t % 2 == 0 ? a.data() : b.data());
                 auto* const to = static_cast<double*>(t % 2 == 0 ? b.data() : a.data());
                 m.primal(from, to, p.n, {p.inner, p.a}, sw.stream());
               }
               sw.lap();
             })
    .total_ms;
}

void time_sweeps(context& ctx, ex::sweeps& s, row r, double primal)
{
  timing const t = ctx.measure(2, [&](stopwatch& sw) {
    sw.start();
    s.forward();
    sw.lap();
    s.reverse();
    sw.lap();
  });
  ex::result const last = s.collect();  // the pool's check too: a row only for a gradient that held
  r.primal_ms = primal;
  r.grad_ms = t.total_ms;
  r.forward_ms = t.laps_ms[0];
  r.reverse_ms = t.laps_ms[1];
  r.tape_bytes = last.chain.layer_bytes * last.chain.steps;
  r.extra.add("plan", last.chain.plan.describe()).add("loss", last.loss);
  ctx.add(std::move(r));
}

void run(context& ctx)
{
  ex::problem const p{ctx.size("enzyme.n", std::size_t{1} << 20, 4096), ctx.size("enzyme.steps", 8, 2),
                      ctx.size("enzyme.inner", 20, 5), 0.5};
  std::string const size = "n=" + std::to_string(p.n) + ",T=" + std::to_string(p.steps) + ",K=" + std::to_string(p.inner);
  std::vector<double> x0(p.n);
  for (std::size_t i = 0; i < p.n; ++i) { x0[i] = 0.5 + 0.25 * static_cast<double>((i * 2654435761u) % 1000) / 1000; }
  ex::options o;
  o.kind = backend::cuda;
  o.policy = tape_policy::store;

  ex::enzyme_module const pooled(ex::enzyme_cubin_dir(), ex::enzyme_caches::pool);
  ex::enzyme_module const heap(ex::enzyme_cubin_dir(), ex::enzyme_caches::heap);
  double const primal = primal_ms(ctx, pooled, p, x0);

  time_sweeps(ctx, *ex::open(p, x0, o), {"enzyme-example", "hand-written-store", size}, primal);

  std::size_t const region = ex::enzyme_region_bytes(p.inner);
  auto pool = std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, region);
  row pooled_row{"enzyme-example", "enzyme-pool-store", size};
  pooled_row.extra.add("cache_pool_bytes", pool->bytes());
  time_sweeps(ctx, *ex::open_enzyme(pooled, pool, p, x0, o), std::move(pooled_row), primal);

  // Enzyme alone: every layer's caches live on the device heap until the reverse frees them. Only
  // with --set enzyme.heap=1: at the full size (2^20 threads, each mallocing two arrays a layer)
  // it had not finished one suite within 170 s on an H200 (docs/enzyme.md).
  if (ctx.size("enzyme.heap", 0, 0) == 0) {
    std::printf("%-28s left out: --set enzyme.heap=1 times it\n", "enzyme-heap-store");
    return;
  }
  // The heap's size can only be set before the first kernel that mallocs: room for all of them, twice.
  std::size_t const heap_bytes = 2 * p.steps * p.n * region;
  cudaError_t const set = cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap_bytes);
  if (set != cudaSuccess) {
    std::printf("%-28s skipped: cudaDeviceSetLimit(cudaLimitMallocHeapSize, %zu): %s\n", "enzyme-heap-store",
                heap_bytes, cudaGetErrorString(set));
    return;
  }
  row heap_row{"enzyme-example", "enzyme-heap-store", size};
  heap_row.extra.add("malloc_heap_bytes", heap_bytes);
  time_sweeps(ctx, *ex::open_enzyme(heap, nullptr, p, x0, o), std::move(heap_row), primal);
}

}  // namespace

TAPEFLOW_BENCH_SUITE(enzyme, 8,
                     "the Enzyme example: hand-written CUDA pair, Enzyme's kernels with the cache pool, Enzyme's "
                     "own device-heap caches",
                     run);

}  // namespace tapeflow::bench
