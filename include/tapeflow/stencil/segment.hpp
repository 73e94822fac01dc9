// SPDX-License-Identifier: Apache-2.0
// Segments of k time steps of a stencil, planned (plan_segments) and run as one chain Step each
// (segment_step): the chain's layer of segment j is its checkpoint u_{jk} — the state itself, kept
// without a copy (tapes_state) — its forward advances k steps per launch, and its reverse
// recomputes the k states of the segment on chip and runs their k adjoint steps there
// (tile_program.hpp). Every tier and policy of the chain then works at segment granularity.
// docs/stencils.md explains the halos, the bytes and the choice of k.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/tile_program.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace tapeflow::stencil {

/// The longest segment the planner considers, and the longest one may ask for.
inline constexpr int max_segment_steps = 16;

/// What a caller asks of the segment planner. Zero means "choose for me".
struct segment_request {
  int k{0};               ///< steps per segment (--segment K); 0: the planner picks
  tile_extent tile{0, 0, 0};  ///< cells of a tile along each axis (1 to 65536; 0: the default)
  int block_threads{0};   ///< GPU threads per tile (1 to the device's limit)
  /// Most cells a segment may read beyond the grid's faces (the thinnest neighbouring part,
  /// tapeflow/stencil/slab.hpp); 0: no limit.
  int max_halo{0};
  /// GPU: let a tile hold the shared memory a block gets on opt-in (227 KiB on an H100), not only
  /// the 48 KiB every block gets (device::opt_in_shared). Longer segments, fewer blocks resident.
  bool shared_opt_in{false};
  /// Over ranks: how they are arranged (slab.hpp); 0 x 0: the most square grid of them.
  ranks_grid ranks{};
};

namespace detail {

/// The planner's weight of a cell update against a state moved (segment_plan::work_weight). The
/// CPU's is measured: on an AMD EPYC with AVX2 (docs/stencils.md, "Choosing k"), the wave's 2-D and
/// 3-D segment gradients at every k took states moved + cells updated, in equal parts, to within
/// 6 %, where bytes alone had the 3-D wave take segments that lost to shorter ones. A GPU's waits for
/// its measurement: 0, its segments planned by their bytes.
[[nodiscard]] inline double work_weight(backend kind) noexcept { return kind == backend::cpu ? 1.0 : 0.0; }

}  // namespace detail

/// What the segment planner decided.
struct segment_plan {
  backend kind{backend::cpu};
  int k{1};                      ///< steps per segment
  std::size_t steps{0};          ///< time steps in all
  std::size_t segments{0};       ///< chain steps: ceil(steps / k)
  tile_extent tile{};            ///< cells of a tile of the reverse
  std::size_t tiles{0};          ///< tiles covering the grid
  int block_threads{1};          ///< threads per tile (GPU); 1 on the CPU
  int grid_blocks{1};            ///< tiles of the reverse in flight (GPU blocks, or CPU threads)
  std::size_t scratch_bytes{0};  ///< on-chip bytes of one tile's reverse
  std::size_t scratch_limit{0};  ///< what one tile may hold: shared memory per block, or the CPU's cache share
  /// The forward's tiles. It holds two levels on chip where the reverse holds k + 2, so on a GPU
  /// its tile is the reverse's lengthened along the last axis (the axis a column sweep runs) for as
  /// long as a multiprocessor keeps as many of its blocks and the grid still fills every one of them
  /// (plan_segments): longer runs of cells a thread, fewer halo cells recomputed. On the CPU, the
  /// reverse's. 0 x 0 x 0 until planned: a runner refuses a plan without it.
  tile_extent forward_tile{0, 0, 0};
  std::size_t forward_tiles{0};          ///< forward tiles covering the grid
  int forward_grid_blocks{1};            ///< forward tiles in flight
  std::size_t forward_scratch_bytes{0};  ///< on-chip bytes of one forward tile
  /// Global-memory bytes per time step of a gradient (forward + reverse, every layer on the device),
  /// in states: halo reads included, and the coefficients and their adjoint where the stencil has
  /// them. A store-every-step gradient of a one-step kernel moves 5.
  double states_per_step{0};
  /// Cell updates per time step of a gradient, in grid cells: the forward's levels on their boxes,
  /// the reverse's recomputed states and its adjoint levels on theirs (halos included). A one-step
  /// gradient updates each cell twice a step (forward and adjoint).
  double cells_per_step{0};
  /// Over ranks: the process grid the plan's parts are cut by (plan_slab_segments); 0 x 0 for one
  /// process.
  ranks_grid ranks{};

  /// What one cell update costs on this plan's backend, in states moved (detail::work_weight).
  [[nodiscard]] double work_weight() const noexcept { return detail::work_weight(kind); }
  /// The planner's cost of a time step, in states moved: states_per_step + work_weight() ·
  /// cells_per_step.
  [[nodiscard]] double cost_per_step() const noexcept { return states_per_step + work_weight() * cells_per_step; }
  /// Whether these segments cost less than a one-step gradient moving `one_step_states` states a
  /// step (and updating each cell twice): what --segment auto runs them by where a workload has a
  /// one-step chain of its own.
  [[nodiscard]] bool beats_one_step(double one_step_states) const noexcept
  {
    return cost_per_step() < one_step_states + work_weight() * 2.0;
  }
  /// Time steps in segment `j` (the last one may be shorter).
  [[nodiscard]] int steps_in(std::size_t j) const noexcept
  {
    std::size_t const first = j * static_cast<std::size_t>(k);
    std::size_t const left = steps - first;
    return left < static_cast<std::size_t>(k) ? static_cast<int>(left) : k;
  }
  /// One line a person can read.
  [[nodiscard]] std::string describe() const
  {
    char line[256];
    std::snprintf(line, sizeof line,
                  "segments of %d steps (%zu segments), tiles %dx%dx%d (%zu), %zu B on chip per tile, "
                  "%.2f states moved per step, %.2f cell updates per step",
                  k, segments, tile.x, tile.y, tile.z, tiles, scratch_bytes, states_per_step, cells_per_step);
    std::string text = line;
    if (forward_tile.x != tile.x || forward_tile.y != tile.y || forward_tile.z != tile.z) {
      std::snprintf(line, sizeof line, "; the forward's tiles %dx%dx%d (%zu), %zu B", forward_tile.x, forward_tile.y,
                    forward_tile.z, forward_tiles, forward_scratch_bytes);
      text += line;
    }
    return text;
  }
};

namespace detail {

/// The tile plan_segments starts from. A CPU's tile is long along x, the axis its vector lanes
/// and its prefetchers run along, so that what a row costs once is spread over many cells: in 2-D
/// 256 x 32 ran Allen–Cahn's, the wave's and LBM's segments 0.70, 0.81 and 0.92 times as long as
/// 64 x 64 on an Intel Xeon, 0.92, 0.95 and 0.95 on an AMD EPYC; in 3-D 64 x 16 x 8 ran the wave's
/// 0.75 (128³) and 0.64 (256³) times as long as 16³ on the EPYC (docs/benchmarks.md, "A CPU tile's
/// rows").
[[nodiscard]] inline tile_extent default_tile(backend kind, int dims) noexcept
{
  bool const gpu = kind != backend::cpu;
  switch (dims) {
    case 1: return gpu ? tile_extent{1024, 1, 1} : tile_extent{4096, 1, 1};
    case 2: return gpu ? tile_extent{32, 32, 1} : tile_extent{256, 32, 1};
    default: return gpu ? tile_extent{8, 8, 8} : tile_extent{64, 16, 8};
  }
}

/// Global-memory traffic of one segment of k steps, in states, per step: the forward reads u_0 on
/// its halo box and writes u_k; the reverse reads u_0 and λ_k on their boxes and writes λ_0. With
/// `coefficients` per cell (`fields` values in a state), the forward and the reverse read them on
/// their boxes and the reverse reads and writes their adjoint. `t` is the reverse's tile, `f` the
/// forward's.
[[nodiscard]] inline double states_per_step(segment_shape s, tile_extent t, tile_extent f, int dims, int fields = 1,
                                            int coefficients = 0) noexcept
{
  double const tile = static_cast<double>(box_cells(t, dims, 0));
  double const forward_box =
    static_cast<double>(box_cells(f, dims, s.forward_halo(0))) / static_cast<double>(box_cells(f, dims, 0));
  double const state_box = static_cast<double>(box_cells(t, dims, s.state_halo(0))) / tile;
  double const forward = forward_box + 1.0;
  double const reverse = state_box + static_cast<double>(box_cells(t, dims, s.lambda_halo(s.k))) / tile + 1.0;
  double const c = static_cast<double>(coefficients) / static_cast<double>(fields);
  return (forward + reverse + c * (forward_box + state_box + 2.0)) / s.k;
}

/// Cell updates of one segment of k steps, per step, in grid cells: the forward computes u_1..u_k
/// on their boxes of tile `f`; the reverse recomputes u_1..u_{k-1} and computes λ_{k-1}..λ_0 on
/// theirs of tile `t`. One step (k = 1) updates each cell twice.
[[nodiscard]] inline double cells_per_step(segment_shape s, tile_extent t, tile_extent f, int dims) noexcept
{
  double forward = 0;
  for (int i = 1; i <= s.k; ++i) { forward += static_cast<double>(box_cells(f, dims, s.forward_halo(i))); }
  double reverse = 0;
  for (int i = 1; i < s.k; ++i) { reverse += static_cast<double>(box_cells(t, dims, s.state_halo(i))); }
  for (int i = 0; i < s.k; ++i) { reverse += static_cast<double>(box_cells(t, dims, s.lambda_halo(i))); }
  return (forward / static_cast<double>(box_cells(f, dims, 0)) + reverse / static_cast<double>(box_cells(t, dims, 0))) /
         s.k;
}

}  // namespace detail

/// Plans segments of stencil S over `g` for `steps` time steps on `limits`' device: the tile, and
/// k — as asked, or the one of least cost per step (segment_plan::cost_per_step: the bytes moved,
/// and on the CPU the cells updated) whose reverse fits on chip (each longer segment must save at
/// least 5 % of the cost to be taken), over the default tile and its halvings. The default tile
/// shrinks until the asked k fits. Throws logic_error for an empty grid, no steps, a tile or k the device
/// cannot hold (naming the bytes), or axes the stencil does not have.
template <class S>
[[nodiscard]] segment_plan plan_segments(grid<typename S::value_type> const& g, std::size_t steps,
                                         device_limits const& limits, segment_request const& request = {})
{
  static_assert(check_stencil<S>::ok);
  using T = typename S::value_type;
  constexpr int dims = S::dims;
  TAPEFLOW_EXPECTS(g.nx > 0 && g.ny > 0 && g.nz > 0, "a stencil's grid needs at least one cell");
  TAPEFLOW_EXPECTS(g.ny <= (std::size_t{1} << 62) / g.nx && g.nz <= (std::size_t{1} << 62) / (g.nx * g.ny),
                   "a stencil's grid of " + std::to_string(g.nx) + " x " + std::to_string(g.ny) + " x " +
                     std::to_string(g.nz) + " cells is past 2^62");
  TAPEFLOW_EXPECTS(g.edge == boundary::periodic || g.edge == boundary::fixed,
                   "a stencil grid's edge is periodic or fixed, not boundary(" +
                     std::to_string(static_cast<int>(g.edge)) + ")");
  TAPEFLOW_EXPECTS(steps > 0, "a stencil gradient needs at least one time step");
  TAPEFLOW_EXPECTS(steps <= (std::size_t{1} << 62), "a stencil gradient of " + std::to_string(steps) +
                                                      " time steps is past 2^62");  // segment counts stay exact
  TAPEFLOW_EXPECTS((dims >= 2 || g.ny == 1) && (dims >= 3 || g.nz == 1),
                   "the grid extends along an axis past the stencil's " + std::to_string(dims) + " dimension(s)");
  TAPEFLOW_EXPECTS(request.k >= 0 && request.k <= max_segment_steps,
                   "a segment holds 1 to " + std::to_string(max_segment_steps) + " steps, not " + std::to_string(request.k));

  segment_plan p;
  p.kind = limits.kind;
  p.steps = steps;
  tile_extent t = detail::default_tile(limits.kind, dims);
  if (request.tile.x != 0) { t.x = request.tile.x; }
  if (request.tile.y != 0) { t.y = request.tile.y; }
  if (request.tile.z != 0) { t.z = request.tile.z; }
  if (dims < 2) { t.y = 1; }
  if (dims < 3) { t.z = 1; }
  TAPEFLOW_EXPECTS(t.x > 0 && t.y > 0 && t.z > 0 && t.x <= 65536 && t.y <= 65536 && t.z <= 65536,
                   "a stencil tile needs 1 to 65536 cells along each axis");
  TAPEFLOW_EXPECTS(request.max_halo >= 0, "a segment's halo limit cannot be negative");

  bool const gpu = limits.kind != backend::cpu;
  std::size_t const per_block = request.shared_opt_in && limits.shared_mem_per_block_optin > limits.shared_mem_per_block
                                  ? limits.shared_mem_per_block_optin
                                  : limits.shared_mem_per_block;
  p.scratch_limit = gpu ? per_block : std::size_t{1} << 20;
  reach const r = reach::of<S>();
  auto scratch_on = [&](tile_extent on, int k) {
    segment_shape const s{k, r};
    box_pads const pad = copy_pads<T>(s, on);
    std::size_t const values = reverse_scratch_values(s, on, dims, S::fields, pad);
    std::size_t const forward = forward_scratch_values(s, on, dims, S::fields);
    return (values > forward ? values : forward) * sizeof(T);
  };
  auto scratch = [&](int k) { return scratch_on(t, k); };

  // The default tile may be too large (for a long segment, or a stencil of many fields), or a
  // smaller one may hold a longer segment that moves fewer bytes: the candidates are the default
  // tile and its halvings (the longest axis halved each time). A tile the caller chose stays as
  // chosen.
  bool const chosen = request.tile.x != 0 || request.tile.y != 0 || request.tile.z != 0;
  auto halved = [](tile_extent e) {
    int& axis = e.x >= e.y && e.x >= e.z ? e.x : (e.y >= e.z ? e.y : e.z);
    axis = (axis + 1) / 2;
    return e;
  };
  auto smallest = [](tile_extent e) { return e.x == 1 && e.y == 1 && e.z == 1; };

  int const longest = static_cast<int>(steps < static_cast<std::size_t>(max_segment_steps) ? steps : max_segment_steps);
  auto halo_fits = [&](int k) { return request.max_halo == 0 || deepest_halo(segment_shape{k, r}) <= request.max_halo; };
  if (request.k > 0) {
    TAPEFLOW_EXPECTS(halo_fits(request.k),
                     "a segment of " + std::to_string(request.k) + " steps reads " +
                       std::to_string(deepest_halo(segment_shape{request.k, r})) +
                       " cells beyond a rank's faces; the thinnest rank's part holds " +
                       std::to_string(request.max_halo) + ": ask for shorter segments or fewer ranks");
    TAPEFLOW_EXPECTS(static_cast<std::size_t>(request.k) <= steps,
                     "segments of " + std::to_string(request.k) + " steps are longer than the " +
                       std::to_string(steps) + " steps of the gradient");
    // The largest candidate tile the segment fits on.
    while (!chosen && scratch(request.k) > p.scratch_limit && !smallest(t)) { t = halved(t); }
    TAPEFLOW_EXPECTS(scratch(request.k) <= p.scratch_limit,
                     "a segment of " + std::to_string(request.k) + " steps on tiles of " + std::to_string(t.x) + "x" +
                       std::to_string(t.y) + "x" + std::to_string(t.z) + " needs " + std::to_string(scratch(request.k)) +
                       " bytes on chip per tile; the device gives a tile " + std::to_string(p.scratch_limit) +
                       ": ask for a shorter segment or a smaller tile");
    p.k = request.k;
  } else {
    TAPEFLOW_EXPECTS(halo_fits(1), "one step reads " + std::to_string(deepest_halo(segment_shape{1, r})) +
                                     " cells beyond a rank's faces; the thinnest rank's part holds " +
                                     std::to_string(request.max_halo) + ": use fewer ranks");
    // Every candidate tile, largest first, and every k that fits on it: the least cost per step, a
    // later candidate taken only when it saves at least 5 %.
    double const weight = detail::work_weight(limits.kind);
    double best = 0;
    bool found = false;
    tile_extent const first = t;
    for (tile_extent on = first;; on = halved(on)) {
      for (int k = 1; k <= longest && scratch_on(on, k) <= p.scratch_limit && halo_fits(k); ++k) {
        segment_shape const shape{k, r};
        double const cost = detail::states_per_step(shape, on, on, dims, S::fields, coefficients_v<S>) +
                            weight * detail::cells_per_step(shape, on, on, dims);
        if (!found || cost < 0.95 * best) {
          best = cost;
          p.k = k;
          t = on;
          found = true;
        }
      }
      if (chosen || smallest(on)) { break; }
    }
    TAPEFLOW_EXPECTS(found, "a stencil tile of " + std::to_string(first.x) + "x" + std::to_string(first.y) + "x" +
                              std::to_string(first.z) + " needs " + std::to_string(scratch_on(first, 1)) +
                              " bytes on chip for one step; the device gives a tile " +
                              std::to_string(p.scratch_limit) + ": ask for a smaller tile");
  }
  p.tile = t;
  p.tiles = tiles_covering(g.nx, g.ny, g.nz, t);
  TAPEFLOW_EXPECTS(p.tiles <= UINT32_MAX, "tiles of " + std::to_string(t.x) + "x" + std::to_string(t.y) + "x" +
                                            std::to_string(t.z) + " cut the grid into " + std::to_string(p.tiles) +
                                            " tiles; a segment walks fewer than 2^32: ask for larger tiles");
  p.segments = (steps + static_cast<std::size_t>(p.k) - 1) / static_cast<std::size_t>(p.k);
  p.scratch_bytes = scratch(p.k);
  auto forward_scratch = [&](tile_extent on) {
    return forward_scratch_values(segment_shape{p.k, r}, on, dims, S::fields) * sizeof(T);
  };
  // GPU blocks of p.block_threads a multiprocessor holds by their threads and shared memory (not
  // their registers, which the launch asks the device about: device::persistent_grid), and the
  // persistent grid of a launch over `tiles` tiles.
  auto const per_sm = [&](std::size_t scratch_bytes) {
    constexpr std::size_t reserved_per_block = 1024;  // shared memory the CUDA driver keeps per resident block
    int const by_threads = limits.max_threads_per_multiprocessor / p.block_threads;
    int const by_smem = static_cast<int>(limits.shared_mem_per_multiprocessor / (scratch_bytes + reserved_per_block));
    int const blocks = by_threads < by_smem ? by_threads : by_smem;
    return blocks > 0 ? blocks : 1;
  };
  auto const grid_of = [&](std::size_t tiles, std::size_t scratch_bytes) {
    std::size_t const resident = static_cast<std::size_t>(limits.multiprocessors) * per_sm(scratch_bytes);
    return static_cast<int>(tiles < resident ? tiles : resident);
  };
  if (gpu) {
    p.block_threads = request.block_threads != 0 ? request.block_threads : 256;
    TAPEFLOW_EXPECTS(p.block_threads >= 1 && p.block_threads <= limits.max_threads_per_block,
                     "a stencil tile's block runs 1 to " + std::to_string(limits.max_threads_per_block) +
                       " threads on this device, not " + std::to_string(p.block_threads));
    p.grid_blocks = grid_of(p.tiles, p.scratch_bytes);
    // The forward's tile: the reverse's, doubled along the last axis while the longer tile keeps
    // as many blocks on a multiprocessor, fits a block, reaches no further than the grid along that
    // axis, and leaves the grid at least as many tiles as the device holds blocks at once.
    int const keep = per_sm(forward_scratch(t));
    std::size_t const resident = static_cast<std::size_t>(limits.multiprocessors) * static_cast<std::size_t>(keep);
    std::int64_t const extent = dims == 1 ? g.nx : (dims == 2 ? g.ny : g.nz);
    p.forward_tile = t;
    for (;;) {
      tile_extent longer = p.forward_tile;
      int& along = dims == 1 ? longer.x : (dims == 2 ? longer.y : longer.z);
      if (along > 32768 || along >= extent) { break; }
      along *= 2;
      std::size_t const bytes = forward_scratch(longer);
      if (bytes > p.scratch_limit || per_sm(bytes) < keep || tiles_covering(g.nx, g.ny, g.nz, longer) < resident) {
        break;
      }
      p.forward_tile = longer;
    }
  } else {
    p.block_threads = 1;
    p.grid_blocks = limits.multiprocessors;
    p.forward_tile = t;
  }
  p.forward_tiles = tiles_covering(g.nx, g.ny, g.nz, p.forward_tile);
  p.forward_scratch_bytes = forward_scratch(p.forward_tile);
  p.forward_grid_blocks = gpu ? grid_of(p.forward_tiles, p.forward_scratch_bytes) : p.grid_blocks;
  p.states_per_step =
    detail::states_per_step(segment_shape{p.k, r}, t, p.forward_tile, dims, S::fields, coefficients_v<S>);
  p.cells_per_step = detail::cells_per_step(segment_shape{p.k, r}, t, p.forward_tile, dims);
  return p;
}

/// The per-cell coefficients of a stencil that declares them (S::coefficients values per cell,
/// laid out as the state's fields) in the runner's memory: host memory for the CPU backend, device
/// memory for a GPU's. Over ranks, a rank passes its slab's planes of them (slab.hpp), and the
/// runner exchanges the planes beyond its faces at its first call. The runner reads them at every
/// call; they stay the caller's and must not change.
template <class T>
struct coefficient_view {
  T const* values{nullptr};
};

namespace detail {

/// What a segment Step is whether or not its stencil has coefficients.
template <class S, class Runner>
class segment_step_base {
 public:
  using value_type = typename S::value_type;
  using record_type = value_record<value_type, values_per_chunk<value_type>>;

  segment_step_base(Runner runner, segment_plan plan) : runner_(std::move(runner)), plan_(std::move(plan)) {}

  [[nodiscard]] segment_plan const& plan() const noexcept { return plan_; }
  /// Chain steps: one per segment.
  [[nodiscard]] std::size_t segments() const noexcept { return plan_.segments; }

  [[nodiscard]] std::size_t state_size() const noexcept { return runner_.state_size(); }
  [[nodiscard]] std::size_t records_per_step() const noexcept
  {
    return (state_size() + values_per_chunk<value_type> - 1) / values_per_chunk<value_type>;
  }
  [[nodiscard]] bool tapes_state() const noexcept { return true; }

  void forward(std::size_t j, value_type const* in, value_type* out, stream_view s) const
  {
    runner_.advance(first_step(j), plan_.steps_in(j), in, out, s);
  }

  void augmented_forward(std::size_t j, value_type const* in, value_type* out, tape_writer<record_type> tape,
                         stream_view s) const
  {
    runner_.record(in, reinterpret_cast<value_type*>(tape.data()), tape.size() * values_per_chunk<value_type>, s);
    runner_.advance(first_step(j), plan_.steps_in(j), in, out, s);
  }

 protected:
  /// The time step segment `j` starts at.
  [[nodiscard]] std::size_t first_step(std::size_t j) const noexcept { return j * static_cast<std::size_t>(plan_.k); }
  void reverse_segment(std::size_t j, tape_reader<record_type> tape, value_type const* lambda_out,
                       value_type* lambda_in, value_type* dc, stream_view s) const
  {
    runner_.reverse(first_step(j), plan_.steps_in(j), reinterpret_cast<value_type const*>(tape.data()), lambda_out,
                    lambda_in, dc, s);
  }
  [[nodiscard]] Runner const& runner() const noexcept { return runner_; }

 private:
  Runner runner_;
  segment_plan plan_;
};

}  // namespace detail

/// A chain Step of segments of stencil S, run by `Runner` (cpu_runner<S>, device_runner<S>):
///   runner.advance(first, k, in, out, stream)           u_k from u_0 over the whole grid, steps first..
///   runner.reverse(first, k, checkpoint, lambda_out, lambda_in, dc, s)
///                                                        λ_0 from λ_k and the checkpoint u_0, adding
///                                                        the steps' dL/dc to dc (null without coefficients)
///   runner.record(in, taped, padded_values, s)           the state into the tape, padding zeroed
///   runner.parameter_size()                              values of the coefficients (with coefficients)
/// Its layer is the segment's checkpoint, the input state itself (tapes_state), so under every
/// policy the chain keeps that buffer rather than writing a copy. A stencil with coefficients makes
/// it a Step with parameters: the chain's parameter_adjoint() is dL/dc.
template <class S, class Runner, bool Coefficients = (coefficients_v<S> > 0)>
class segment_step : public detail::segment_step_base<S, Runner> {
  using common = detail::segment_step_base<S, Runner>;

 public:
  using typename common::record_type;
  using typename common::value_type;
  using common::common;

  void reverse(std::size_t j, tape_reader<record_type> tape, pipeline_plan const&, value_type const* lambda_out,
               value_type* lambda_in, stream_view s) const
  {
    this->reverse_segment(j, tape, lambda_out, lambda_in, nullptr, s);
  }
};

template <class S, class Runner>
class segment_step<S, Runner, true> : public detail::segment_step_base<S, Runner> {
  using common = detail::segment_step_base<S, Runner>;

 public:
  using typename common::record_type;
  using typename common::value_type;
  using common::common;

  /// Values of the coefficients: S::coefficients per cell.
  [[nodiscard]] std::size_t parameter_size() const noexcept { return this->runner().parameter_size(); }

  void reverse(std::size_t j, tape_reader<record_type> tape, pipeline_plan const&, value_type const* lambda_out,
               value_type* lambda_in, value_type* parameter_adjoint, stream_view s) const
  {
    this->reverse_segment(j, tape, lambda_out, lambda_in, parameter_adjoint, s);
  }
};

}  // namespace tapeflow::stencil
