// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the GMM gradient: the tape layer's layout and plan, one
// layer pushed, written by the engine's augmented forward, committed, staged back into the
// engine's reverse, popped. GMM is one layer, not a chain of steps, so this drives tapeflow::tape
// directly. Each backend supplies an Engine (cpu.cpp, cuda_step.cuh):
//
//   Engine(problem, inputs, layout, stream)                 uploads the inputs, sizes its buffers
//   void objective(stream)                                  the primal (no tape)
//   void augmented_forward(tape_writer<record>, stream)     the objective, writing every record
//   void reverse(tape_reader<record>, pipeline_plan, stream) the gradient, reading staged tiles
//   double read_objective(stream)                           waits
//   void read_gradient(gradient_result&, stream)            waits
#pragma once

#include "gmm.hpp"
#include "math.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tape.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tapeflow::workloads::gmm::detail {

/// Records per tile must be a multiple of this (64 points): the GPU forward writes whole runs of
/// 32 records per block.
inline constexpr std::size_t tile_record_multiple = 32;
/// Rows and columns of one block of S_k in the GPU reverse (lower-triangular blocks).
inline constexpr std::size_t s_block = 64;
/// Threads of every GPU reverse block (16 x 16 threads, 4 x 4 entries each).
inline constexpr int reverse_threads = 256;

/// The tape layer. Records are ordered (point tile, component, point): tile t holds the
/// points_per_tile points [tl * P, (tl + 1) * P) of component t % K, with tl = t / K; each
/// component's points are padded to whole tiles. A reverse block whose tiles are t ≡ c (mod K)
/// therefore works on one component only.
struct layout {
  pipeline_plan plan{};
  std::size_t points_per_tile{0};
  std::size_t tiles_per_component{0};
  std::size_t s_blocks{0};   ///< lower-triangular s_block x s_block blocks of S_k (GPU)
  std::size_t splits{1};     ///< reverse blocks per component: plan.grid_blocks = K * splits (GPU)

  [[nodiscard]] std::size_t padded_points() const noexcept { return points_per_tile * tiles_per_component; }
  /// Record holding point i of component k, and the slot in it.
  [[nodiscard]] std::size_t record_of(std::size_t i, std::size_t k, std::size_t components) const noexcept
  {
    std::size_t const tl = i / points_per_tile;
    return (tl * components + k) * plan.tile_records + (i % points_per_tile) / points_per_record;
  }
};

inline layout make_layout(problem const& p, options const& o)
{
  device_limits const limits = query_device_limits(o.kind);
  pipeline_request request = o.pipeline;
  std::size_t const point_records = (p.n + points_per_record - 1) / points_per_record;
  if (request.tile_records == 0) {
    // Tiles of 256 records (512 points, 4 KiB), never much more than one component's points.
    std::size_t const whole = (point_records + tile_record_multiple - 1) / tile_record_multiple * tile_record_multiple;
    request.tile_records = std::min<std::size_t>(256, whole);
  }
  TAPEFLOW_EXPECTS(request.tile_records % tile_record_multiple == 0,
                   "GMM tape tiles hold a multiple of " + std::to_string(tile_record_multiple) + " records, not " +
                     std::to_string(request.tile_records));
  bool const gpu = o.kind != backend::cpu;
  TAPEFLOW_EXPECTS(!gpu || request.block_threads == 0 || request.block_threads == reverse_threads,
                   "the GMM reverse kernel runs blocks of " + std::to_string(reverse_threads) + " threads");
  if (gpu) { request.block_threads = reverse_threads; }

  layout l;
  l.points_per_tile = request.tile_records * points_per_record;
  l.tiles_per_component = (p.n + l.points_per_tile - 1) / l.points_per_tile;
  TAPEFLOW_EXPECTS(p.k <= static_cast<std::size_t>(1) << 31 && l.tiles_per_component <= (std::size_t{1} << 40) / p.k,
                   "the GMM tape of K = " + std::to_string(p.k) + ", N = " + std::to_string(p.n) + " is too large");
  request.record_bytes = sizeof(record);
  request.records = p.k * l.tiles_per_component * request.tile_records;
  l.plan = plan_pipeline(limits, request);

  std::size_t const row_blocks = (p.d + s_block - 1) / s_block;
  l.s_blocks = row_blocks * (row_blocks + 1) / 2;
  if (gpu) {
    // Enough blocks to fill the device, in whole multiples of K, no more per component than it has tiles.
    std::size_t const target = static_cast<std::size_t>(limits.multiprocessors) * 4;
    std::size_t const per = (target + p.k * l.s_blocks - 1) / (p.k * l.s_blocks);
    l.splits = std::clamp<std::size_t>(per, 1, l.tiles_per_component);
    TAPEFLOW_EXPECTS(p.k * l.splits <= static_cast<std::size_t>(1) << 31 && l.s_blocks <= 65535,
                     "the GMM reverse grid of K = " + std::to_string(p.k) + ", d = " + std::to_string(p.d) +
                       " does not fit a launch");
    l.plan.grid_blocks = static_cast<int>(p.k * l.splits);
  }
  return l;
}

template <class Engine, class AfterForward>
void gradient_pass(Engine& e, tape& t, layout const& l, bool poison, stream_view s, AfterForward&& after_forward)
{
  layer& top = t.push<record>(l.plan.records, l.plan.tile_records, s);
  if (poison) { top.fill(0xFF, s); }
  e.augmented_forward(top.writer<record>(), s);
  top.commit();
  after_forward();
  e.reverse(top.reader<record>(), l.plan, s);
  t.pop();
}

template <class Engine>
double run_objective(problem const& p, inputs const& in, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::gmm::objective");
  validate(p, in);
  Engine e(p, in, make_layout(p, o), o.stream);
  e.objective(o.stream);
  return e.read_objective(o.stream);
}

template <class Engine>
gradient_result run_gradient(problem const& p, inputs const& in, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::gmm::gradient");
  validate(p, in);
  reset_device_memory_peak(o.kind);
  layout const l = make_layout(p, o);
  Engine e(p, in, l, o.stream);
  tape t(o.kind);
  auto report = [&](chain_phase phase) {
    if (o.progress) { o.progress(phase, 1, 1); }
  };
  gradient_pass(e, t, l, o.poison, o.stream, [&] { report(chain_phase::forward); });
  report(chain_phase::reverse);
  gradient_result r;
  e.read_gradient(r, o.stream);
  r.plan = l.plan;
  r.tape_bytes = t.peak_bytes();
  r.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  return r;
}

inline double median_of(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  std::size_t const m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// Event-timed medians of the objective and of the gradient (forward and reverse laps).
template <class Engine>
bench_result run_benchmark(problem const& p, inputs const& in, options const& o, int warmup, int repeats)
{
  TAPEFLOW_EXPECTS(repeats >= 1 && warmup >= 0, "a benchmark needs repeats >= 1 and warmup >= 0");
  validate(p, in);
  stream_view const s = o.stream;
  reset_device_memory_peak(o.kind);
  layout const l = make_layout(p, o);
  Engine e(p, in, l, s);
  tape t(o.kind);
  event start(o.kind);
  event middle(o.kind);
  event stop(o.kind);
  std::vector<double> primal, forward, reverse, grad;
  for (int run = 0; run < warmup + repeats; ++run) {
    start.record(s);
    e.objective(s);
    stop.record(s);
    double const primal_ms = elapsed_ms(start, stop);
    start.record(s);
    gradient_pass(e, t, l, false, s, [&] { middle.record(s); });
    stop.record(s);
    if (run < warmup) {
      synchronize(o.kind, s);
      continue;
    }
    primal.push_back(primal_ms);
    forward.push_back(elapsed_ms(start, middle));
    reverse.push_back(elapsed_ms(middle, stop));
    grad.push_back(elapsed_ms(start, stop));
  }
  bench_result r;
  r.primal_ms = median_of(primal);
  r.grad_ms = median_of(grad);
  r.forward_ms = median_of(forward);
  r.reverse_ms = median_of(reverse);
  r.plan = l.plan;
  r.tape_bytes = t.peak_bytes();
  r.peak_device_bytes = device_memory_usage(o.kind).peak_bytes;
  return r;
}

}  // namespace tapeflow::workloads::gmm::detail
