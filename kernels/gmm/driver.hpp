// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the GMM gradient, its session: the tape layer's layout and
// plan, one layer pushed, written by the engine's augmented forward, committed, staged back into
// the engine's reverse, popped. GMM is one layer, not a chain of steps, so this drives
// tapeflow::tape directly. Each backend supplies an Engine (cpu.cpp, cuda_step.cuh):
//
//   Engine(problem, layout, stream)                         sizes its buffers
//   void load(inputs as host arrays, stream)                alphas, means, icf, x
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
#include <string>
#include <type_traits>
#include <vector>

namespace tapeflow::workloads::gmm::detail {

/// Records per tile must be a multiple of this (64 points): the GPU forward writes whole runs of
/// 32 records per block.
inline constexpr std::size_t tile_record_multiple = 32;
/// Rows and columns of one block of S_k in the GPU reverse (lower-triangular blocks).
inline constexpr std::size_t s_block = 64;
/// Threads of every GPU reverse block (16 x 16 threads, 4 x 4 entries each).
inline constexpr int reverse_threads = 256;
/// The largest tile a caller may ask for (pipeline_request::tile_records).
inline constexpr std::size_t max_tile_records = std::size_t{1} << 20;

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
  // Every component is padded to whole tiles: a tile past any component's points only pads.
  TAPEFLOW_EXPECTS(request.tile_records <= max_tile_records,
                   "a GMM tape tile holds at most " + std::to_string(max_tile_records) + " records (16 MiB), not " +
                     std::to_string(request.tile_records));
  bool const gpu = o.kind != backend::cpu;
  TAPEFLOW_EXPECTS(!gpu || request.block_threads == 0 || request.block_threads == reverse_threads,
                   "the GMM reverse kernel runs blocks of " + std::to_string(reverse_threads) + " threads");
  if (gpu) { request.block_threads = reverse_threads; }

  layout l;
  l.points_per_tile = request.tile_records * points_per_record;
  l.tiles_per_component = (p.n + l.points_per_tile - 1) / l.points_per_tile;
  TAPEFLOW_EXPECTS(p.k <= static_cast<std::size_t>(1) << 31 &&
                     l.tiles_per_component <= (std::size_t{1} << 40) / p.k / request.tile_records,
                   "the GMM tape of K = " + std::to_string(p.k) + ", N = " + std::to_string(p.n) + " in tiles of " +
                     std::to_string(request.tile_records) + " records is too large (more than 2^40 records)");
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

/// The problem's parts, in the order of the input file and of load(): alphas, means, icf, x.
[[nodiscard]] inline std::vector<std::size_t> input_sizes(problem const& p)
{
  return {p.k, p.k * p.d, p.k * icf_size(p.d), p.n * p.d};
}

/// Whether an engine counts the CPU staging ring's tiles (the CPU engine does).
template <class Engine, class = void>
struct has_staging : std::false_type {};
template <class Engine>
struct has_staging<Engine, std::void_t<decltype(std::declval<Engine const&>().staging())>> : std::true_type {};

/// One GMM problem on a backend: the engine's buffers, the layer's pool, its tape.
template <class Engine>
class gmm_session final : public session<double> {
 public:
  gmm_session(problem const& p, options const& o)
    : session<double>(o.kind), p_(p), o_(o), layout_(make_layout(p, o)), engine_(p, layout_, o.stream),
      pool_(o.kind), tape_(o.kind, tape_options{0, &pool_})
  {
  }

  void load(std::vector<host_array<double>> const& inputs, stream_view s) override
  {
    std::vector<std::size_t> const sizes = input_sizes(p_);
    char const* const names[] = {"alphas", "means", "icf", "x"};
    TAPEFLOW_EXPECTS(inputs.size() == sizes.size(), "GMM takes 4 inputs (alphas, means, icf, x), not " +
                                                      std::to_string(inputs.size()));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      TAPEFLOW_EXPECTS(inputs[i].size == sizes[i], std::string{names[i]} + " holds " + std::to_string(inputs[i].size) +
                                                     " values; the problem needs " + std::to_string(sizes[i]));
    }
    engine_.load(inputs, s);
  }

  void primal(stream_view s) override
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::gmm::objective");
    engine_.objective(s);
  }

  void forward(stream_view s) override
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::gmm::forward");
    TAPEFLOW_EXPECTS(tape_.empty(), "forward() called again before reverse() consumed the tape");
    layer& top = tape_.push<record>(layout_.plan.records, layout_.plan.tile_records, s);
    if (o_.poison) { top.fill(0xFF, s); }
    engine_.augmented_forward(top.writer<record>(), s);
    top.commit();
    if (o_.progress) { o_.progress(chain_phase::forward, 1, 1); }
  }

  double loss(stream_view s) override { return engine_.read_objective(s); }

  void reverse(stream_view s) override
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::gmm::reverse");
    TAPEFLOW_EXPECTS(!tape_.empty(), "reverse() needs a completed forward() whose tape was not reversed yet");
    engine_.reverse(tape_.top().reader<record>(), layout_.plan, s);
    tape_.pop();
    if (o_.progress) { o_.progress(chain_phase::reverse, 1, 1); }
  }

  std::vector<std::vector<double>> gradients(stream_view s) override
  {
    gradient_result r;
    engine_.read_gradient(r, s);
    return {std::move(r.d_alphas), std::move(r.d_means), std::move(r.d_icf)};
  }

  std::vector<std::vector<double>> outputs(stream_view s) override { return {{engine_.read_objective(s)}}; }

  tape_report report() const override
  {
    tape_report r;
    r.layer = layout_.plan;
    r.tape_bytes = layout_.plan.records * layout_.plan.record_bytes;
    r.peak_device_bytes = device_memory_usage(kind()).peak_bytes;
    r.peak_host_bytes = host_memory_usage(kind()).peak_bytes;
    if constexpr (has_staging<Engine>::value) { r.staging = engine_.staging(); }
    r.facts.emplace_back("reverse_splits", static_cast<double>(layout_.splits));
    return r;
  }

 private:
  problem p_;
  options o_;
  layout layout_;
  Engine engine_;
  buffer_pool pool_;  // the layer's memory, kept between gradients; before the tape, which gives back to it
  tape tape_;
};

}  // namespace tapeflow::workloads::gmm::detail
