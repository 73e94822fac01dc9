// SPDX-License-Identifier: Apache-2.0
// The tile program of a stencil segment, written once for every backend: what the threads working
// on one tile do to advance it k steps, and to run the reverse of those k steps from the segment's
// checkpoint. A Team says how the tile's cells are shared out and how its threads wait for each
// other: one CPU thread walking the cells in order (solo_team, here), or a GPU block striding over
// them with a barrier between levels (block_team, tapeflow/stencil/device.cuh). Every level lives
// in the team's scratch (shared memory on a GPU, a cache-sized buffer on the CPU); only the
// checkpoint, λ at the segment's end, and the results cross global memory.
//
// Each value is computed by the same per-cell function from the same inputs in the same order
// whatever k is and whichever team runs it, so the gradient's bits do not depend on k.
//
// One file of over 400 lines: tile_program is one struct handed by value to kernels, and its
// forward, its reverse and its cell geometry all read the same members (grid, reach, tile, slab);
// split over files, every part would need the whole.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/divide.hpp>
#include <tapeflow/stencil/ghosts.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/sweep.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace tapeflow::stencil {

/// A box of cells: its origin in grid coordinates (it may reach past the grid's edges) and its
/// extents. Values of a box are stored field by field, x fastest.
struct box {
  std::int64_t x0{0};
  std::int64_t y0{0};
  std::int64_t z0{0};
  int ex{1};
  int ey{1};
  int ez{1};

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t cells() const noexcept
  {
    return static_cast<std::size_t>(ex) * static_cast<std::size_t>(ey) * static_cast<std::size_t>(ez);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t at(int x, int y, int z) const noexcept
  {
    return (static_cast<std::size_t>(z) * static_cast<std::size_t>(ey) + static_cast<std::size_t>(y)) *
             static_cast<std::size_t>(ex) +
           static_cast<std::size_t>(x);
  }
};

/// A level stored on box `b` at `level`: field by field, x fastest.
template <class V>
[[nodiscard]] TAPEFLOW_HOST_DEVICE strided<V> level_of(V* level, box const& b) noexcept
{
  return {level, b.cells(), b.ex, static_cast<std::ptrdiff_t>(b.ex) * b.ey};
}

/// The tile at `origin` grown by `halo` along the first `dims` axes.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr box grown(box tile, int dims, int halo) noexcept
{
  box b = tile;
  b.x0 -= halo;
  b.ex += 2 * halo;
  if (dims >= 2) {
    b.y0 -= halo;
    b.ey += 2 * halo;
  }
  if (dims >= 3) {
    b.z0 -= halo;
    b.ez += 2 * halo;
  }
  return b;
}

/// v mod n in [0, n): one add or subtract for a coordinate less than a grid past the edge (the
/// common case, no division), a remainder otherwise.
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline std::int64_t wrapped(std::int64_t v, std::size_t n) noexcept
{
  auto const m = static_cast<std::int64_t>(n);
  if (v < 0) {
    v += m;
    if (v < 0) {
      v %= m;
      v = v < 0 ? v + m : v;
    }
  } else if (v >= m) {
    v -= m;
    if (v >= m) { v %= m; }
  }
  return v;
}

/// One CPU thread working a tile: cells in storage order, nothing to wait for.
struct solo_team {
  /// Levels run cell by cell in storage order, which the CPU's caches and vector units favour (a
  /// team that sweeps columns has for_each_run: block_team).
  static constexpr bool sweeps = false;

  /// f(x, y, z) for each cell of `b`, in storage order. A team's cells are independent (a GPU
  /// block's threads run them at once: block_team), so the compiler is told that a row's cells
  /// touch disjoint memory and may share vector lanes (TAPEFLOW_HOST_INDEPENDENT).
  template <int Dims, class F>
  TAPEFLOW_HOST_DEVICE void for_each(box const& b, F&& f) const
  {
    for (int z = 0; z < b.ez; ++z) {
      for (int y = 0; y < b.ey; ++y) {
        TAPEFLOW_HOST_INDEPENDENT
        for (int x = 0; x < b.ex; ++x) { f(x, y, z); }
      }
    }
  }
  /// Rows of a box the copies below prefetch ahead of the row they copy. A box's rows lie a grid
  /// row apart, a stride the CPU's prefetchers do not follow, so without the hint each row's first
  /// lines wait on memory.
  static constexpr int rows_ahead = 8;

  /// dst[f * b.cells() + i] = src[f * field_stride + z * plane + y * row + x] for each cell
  /// i = (x, y, z) of `b` and field f < Fields: a box lying inside the source array.
  template <int Fields, class T>
  TAPEFLOW_HOST_DEVICE void copy_box(box const& b, T const* src, std::size_t field_stride, std::size_t row,
                                     std::size_t plane, T* dst) const
  {
    copy_box<Fields>(b, src, field_stride, row, plane, level_of(dst, b));
  }
  /// The same into values laid out as `dst` says: *(dst.at(x, y, z) + f * dst.field) for the cell
  /// (x, y, z) of `b` (the part of a level's box inside a fixed grid, copied into that level).
  template <int Fields, class T>
  TAPEFLOW_HOST_DEVICE void copy_box(box const& b, T const* src, std::size_t field_stride, std::size_t row,
                                     std::size_t plane, strided<T> dst) const
  {
    for (int f = 0; f < Fields; ++f) {
      T* const field = dst.base + static_cast<std::size_t>(f) * dst.field;
      for (int z = 0; z < b.ez; ++z) {
        T const* const rows = src + static_cast<std::size_t>(f) * field_stride + static_cast<std::size_t>(z) * plane;
        for (int y = 0; y < rows_ahead && y < b.ey; ++y) { prefetch_run(rows + static_cast<std::size_t>(y) * row, b.ex); }
        for (int y = 0; y < b.ey; ++y) {
          if (y + rows_ahead < b.ey) { prefetch_run(rows + static_cast<std::size_t>(y + rows_ahead) * row, b.ex); }
          T const* const from = rows + static_cast<std::size_t>(y) * row;
          T* const to = field + static_cast<std::ptrdiff_t>(z) * dst.plane + static_cast<std::ptrdiff_t>(y) * dst.row;
          for (int x = 0; x < b.ex; ++x) { to[x] = from[x]; }
        }
      }
    }
  }
  /// Hints the cache lines of the n values from p toward the caches (TAPEFLOW_HOST_PREFETCH).
  template <class T>
  TAPEFLOW_HOST_DEVICE static void prefetch_run(T const* p, int n) noexcept
  {
    constexpr int per_line = static_cast<int>(64 / sizeof(T));
    for (int i = 0; i < n; i += per_line) { TAPEFLOW_HOST_PREFETCH(p + i); }
    if (n > 0) { TAPEFLOW_HOST_PREFETCH(p + n - 1); }
  }
  /// dst[f * b.cells() + i] = src[f * nx * ny * nz + the cell of (x0 + x, y0 + y, z0 + z) wrapped
  /// onto the periodic nx x ny x nz grid] for each cell i = (x, y, z) of `b` and field f < Fields: a
  /// box that may reach past the grid's edges. A row's wrap is decided once, and its cells are
  /// copied in runs that stop only where the row wraps.
  template <int Dims, int Fields, class T>
  TAPEFLOW_HOST_DEVICE void copy_periodic_box(box const& b, T const* src, std::size_t nx, std::size_t ny,
                                              std::size_t nz, T* dst) const
  {
    std::size_t const cells = nx * ny * nz;
    for (int f = 0; f < Fields; ++f) {
      T* to = dst + static_cast<std::size_t>(f) * b.cells();
      for (int z = 0; z < b.ez; ++z) {
        auto const gz = static_cast<std::size_t>(wrapped(b.z0 + z, nz));
        for (int y = 0; y < b.ey; ++y) {
          auto const gy = static_cast<std::size_t>(wrapped(b.y0 + y, ny));
          T const* const row = src + static_cast<std::size_t>(f) * cells + (gz * ny + gy) * nx;
          for (int x = 0; x < b.ex;) {
            auto const gx = static_cast<std::size_t>(wrapped(b.x0 + x, nx));
            std::size_t const left = static_cast<std::size_t>(b.ex - x);
            std::size_t const run = nx - gx < left ? nx - gx : left;
            for (std::size_t i = 0; i < run; ++i) { *to++ = row[gx + i]; }
            x += static_cast<int>(run);
          }
        }
      }
    }
  }
  TAPEFLOW_HOST_DEVICE void sync() const noexcept {}
};

/// Whether a Team runs an inner tile's levels as column sweeps: it declares `static constexpr bool
/// sweeps = true` and has for_each_run<Dims>(box, f(x, y, z, n)) (block_team, sweep.hpp). A Team
/// that declares nothing walks cells.
template <class Team, class = void>
struct sweeping_team : std::false_type {};
template <class Team>
struct sweeping_team<Team, std::enable_if_t<Team::sweeps>> : std::true_type {};

/// Whether a Team's threads each take their own cells, so that a cell a test rejects costs a masked
/// thread, not a branch in a loop: it declares `static constexpr bool masks_cells = true`
/// (block_team). A team that walks cells in a loop (solo_team) declares nothing.
template <class Team, class = void>
struct masking_team : std::false_type {};
template <class Team>
struct masking_team<Team, std::enable_if_t<Team::masks_cells>> : std::true_type {};

/// A tile's place in the grid of tiles, in tile_range's numbering (below): along the outer cut
/// axis (row: the last of the stencil's axes), the inner one (col: the one before it, 2-D and 3-D)
/// and the faster uncut axis (w: x, in 3-D).
struct tile_place {
  std::uint32_t w{0};
  std::uint32_t col{0};
  std::uint32_t row{0};
};
/// The place of tile number `tile` = (row * cols + col) * width + w, in 32-bit arithmetic
/// (plan_segments keeps a grid's tiles below 2^32); the divisors plain or worked out beforehand.
template <class Divisor>
[[nodiscard]] TAPEFLOW_HOST_DEVICE tile_place place_of(std::size_t tile, Divisor const& width,
                                                       Divisor const& cols) noexcept
{
  auto const t = static_cast<std::uint32_t>(tile);
  std::uint32_t const position = divided(t, width);
  std::uint32_t const row = divided(position, cols);
  return {t - position * value_of(width), position - row * value_of(cols), row};
}

/// A rectangle of tile positions in tile_range's numbering (below) — rows [row_first, row_last) along the
/// outer cut axis, columns [col_first, col_last) along the inner, places [w_first, w_last) along the
/// faster uncut axis (3-D) — of a grid of tiles `cols` columns and `width` places wide.
struct tile_rect {
  std::uint32_t cols{1};
  std::uint32_t width{1};
  std::uint32_t row_first{0};
  std::uint32_t row_last{0};
  std::uint32_t col_first{0};
  std::uint32_t col_last{0};
  std::uint32_t w_first{0};
  std::uint32_t w_last{0};

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t size() const noexcept
  {
    return std::size_t{row_last - row_first} * (col_last - col_first) * (w_last - w_first);
  }
  /// Whether the tile at `p` lies in the rectangle.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr bool holds(tile_place const& p) const noexcept
  {
    return p.row >= row_first && p.row < row_last && p.col >= col_first && p.col < col_last && p.w >= w_first &&
           p.w < w_last;
  }
  /// Whether tile number `tile` lies in the rectangle.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool holds(std::size_t tile) const noexcept
  {
    return holds(place_of(tile, width, cols));
  }
};

/// f(std::bool_constant<Inner>{}) for Inner = `inner`: picks the tile program compiled for an inner
/// tile (tile_program::inner_tiles) or the general one, where the choice is made per tile.
template <class F>
decltype(auto) by_kind(bool inner, F&& f)
{
  if (inner) { return std::forward<F>(f)(std::true_type{}); }
  return std::forward<F>(f)(std::false_type{});
}

/// f(std::true_type{}) where `test` holds, f(std::false_type{}) otherwise: a test whose answer is the
/// same for every cell of a loop, made once before it, so that the loop f runs is compiled twice and
/// the one without the test has no branch per cell (a CPU's compiler then vectorises it).
template <class F>
TAPEFLOW_HOST_DEVICE void decided_once(bool test, F&& f)
{
  if (test) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

/// The tiles a launch walks: those of a rectangle of tile positions, or every tile outside it.
/// Tiles are numbered x fastest; a tile's number is (row * cols + col) * width + w, its row being
/// its position along the outer cut axis, its column along the inner (tile_program::interior_tiles),
/// and w its place along the faster uncut axis.
struct tile_range {
  std::size_t rows{0};   ///< tile positions along the outer cut axis
  std::size_t cols{1};   ///< along the inner
  std::size_t width{1};  ///< tiles per position along the faster uncut axis
  std::size_t row_first{0};
  std::size_t row_last{0};
  std::size_t col_first{0};
  std::size_t col_last{0};
  bool outside{false};  ///< the tiles outside the rectangle rows [row_first, row_last) x cols [col_first, col_last)

  /// Every one of `tiles` tiles.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr tile_range all(std::size_t tiles) noexcept
  {
    return {tiles, 1, 1, 0, 0, 0, 0, true};
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t rectangle() const noexcept
  {
    return (row_last - row_first) * (col_last - col_first) * width;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t size() const noexcept
  {
    return outside ? rows * cols * width - rectangle() : rectangle();
  }
  /// Tiles of the range that `r` holds: `r` numbers the same grid of tiles, and where the range is
  /// a rectangle's outside, that rectangle spans every place along the faster uncut axis.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t count_in(tile_rect const& r) const noexcept
  {
    auto const overlap = [](std::size_t a0, std::size_t a1, std::size_t b0, std::size_t b1) -> std::size_t {
      std::size_t const lo = a0 > b0 ? a0 : b0;
      std::size_t const hi = a1 < b1 ? a1 : b1;
      return hi > lo ? hi - lo : 0;
    };
    std::size_t const shared = overlap(row_first, row_last, r.row_first, r.row_last) *
                               overlap(col_first, col_last, r.col_first, r.col_last) * (r.w_last - r.w_first);
    return outside ? r.size() - shared : shared;
  }
  /// A row's tiles in the rectangle, and beside it.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t span() const noexcept { return (col_last - col_first) * width; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t kept() const noexcept { return cols * width - span(); }
  /// span() and kept() as at()'s divisors: 1 where they are 0 (at() then divides by neither).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::uint32_t span_divisor() const noexcept
  {
    return static_cast<std::uint32_t>(span() > 0 ? span() : 1);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::uint32_t kept_divisor() const noexcept
  {
    return static_cast<std::uint32_t>(kept() > 0 ? kept() : 1);
  }
  /// The i-th tile number of the range, in 32-bit arithmetic: plan_segments keeps a grid's tiles
  /// below 2^32, and 64-bit divisions cost the kernels registers (docs/benchmarks.md).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t operator[](std::size_t i) const noexcept
  {
    return at(i, span_divisor(), kept_divisor());
  }
  /// operator[] by the divisors `span` and `kept` (span_divisor() and kept_divisor()), plain or
  /// worked out beforehand (tile_walk).
  template <class Divisor>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t at(std::size_t i, Divisor const& span,
                                                              Divisor const& kept) const noexcept
  {
    using u32 = std::uint32_t;
    auto const j = static_cast<u32>(i);
    auto const stride = static_cast<u32>(cols * width);  // a row's tiles
    auto const left = static_cast<u32>(col_first * width);
    if (!outside) {
      u32 const row = divided(j, span);
      return (static_cast<u32>(row_first) + row) * stride + left + (j - row * value_of(span));
    }
    u32 const head = static_cast<u32>(row_first) * stride;  // the rows before the rectangle
    if (j < head) { return j; }
    if (j - head < static_cast<u32>(row_last - row_first) * static_cast<u32>(this->kept())) {
      u32 const row = divided(j - head, kept);
      u32 const c = j - head - row * value_of(kept);
      return (static_cast<u32>(row_first) + row) * stride + (c < left ? c : c + static_cast<u32>(this->span()));
    }
    return j + static_cast<u32>(rectangle());  // the rows after it
  }
};

/// The tiles of one launch of a segment kernel — `tiles`, and which of them `inner` holds — walked
/// on a GPU without dividing: the divisors of their numbering are worked out on the host
/// (fast_divisor), once a launch. `inner` numbers the same grid of tiles as `tiles`.
struct tile_walk {
  tile_range tiles;
  tile_rect inner;
  fast_divisor span;   ///< tiles.span_divisor()
  fast_divisor kept;   ///< tiles.kept_divisor()
  fast_divisor width;  ///< inner.width
  fast_divisor cols;   ///< inner.cols

  tile_walk(tile_range range, tile_rect rect)
    : tiles(range), inner(rect), span(range.span_divisor()), kept(range.kept_divisor()), width(rect.width),
      cols(rect.cols)
  {
  }

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t size() const noexcept { return tiles.size(); }
  /// The place of the i-th tile of the range.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE tile_place operator[](std::size_t i) const noexcept
  {
    return place_of(tiles.at(i, span, kept), width, cols);
  }
};

/// The tile program of stencil S on grid `g` (or on the slab `slab` of a larger grid, `g` being the
/// slab's own extents): advance() and reverse() of one tile.
template <class S>
struct tile_program {
  using T = typename S::value_type;
  static constexpr int dims = S::dims;
  static constexpr int fields = S::fields;
  using forward_taps = typename S::forward_taps;

  static constexpr int coefficient_count = coefficients_v<S>;

  S stencil;
  grid<T> g;
  reach r;
  tile_extent tile;
  slab_view<T> slab{};
  /// S's per-cell coefficients, laid out as the state's fields (on a slab: its planes only; null
  /// for a stencil without them).
  T const* coefficient_values{nullptr};

  // ---- where a grid coordinate lies ---------------------------------------------------------------

  /// The coordinate along the outer cut axis (the last of the stencil's axes), and along the
  /// inner (the one before it; none in 1-D).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr std::int64_t along_cut(std::int64_t x, std::int64_t y,
                                                                           std::int64_t z) noexcept
  {
    return dims == 1 ? x : dims == 2 ? y : z;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr std::int64_t along_inner(std::int64_t x, std::int64_t y) noexcept
  {
    return dims == 1 ? 0 : dims == 2 ? x : y;
  }
  /// Whether the grid is a rank's part of a larger one, and whether that part is a block (cut
  /// along the inner axis too; ghosts.hpp).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool split() const noexcept { return slab.global != 0; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool block_split() const noexcept { return slab.inner_global != 0; }
  /// Whether `axis` is cut: it then reads ghost cells past this grid's edges instead of wrapping.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool cut_axis(int axis) const noexcept
  {
    return split() && (axis == dims - 1 || (axis == dims - 2 && block_split()));
  }
  /// The layout of ghost cells `depth` deep around this grid (over ranks).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE ghost_layout ghosts_of(int depth) const noexcept
  {
    return ghost_layout::of(g, dims, depth, block_split());
  }

  /// Whether (x, y, z) is a cell of this grid (of this rank's part).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool inside(std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    return x >= 0 && y >= 0 && z >= 0 && x < static_cast<std::int64_t>(g.nx) && y < static_cast<std::int64_t>(g.ny) &&
           z < static_cast<std::int64_t>(g.nz);
  }
  /// Whether (x, y, z) is a cell of the whole grid: what a fixed boundary's ghost and dropped
  /// adjoints are decided by. The same as inside() for a grid that is not cut.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool in_domain(std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    if (!split()) { return inside(x, y, z); }
    std::int64_t const c = along_cut(x, y, z) + slab.offset;
    bool ok = c >= 0 && c < slab.global;
    if (dims >= 2) {
      std::int64_t const i = along_inner(x, y) + (block_split() ? slab.inner_offset : 0);
      std::int64_t const n = block_split() ? slab.inner_global : static_cast<std::int64_t>(g.extent(dims - 2));
      ok = ok && i >= 0 && i < n;
    }
    if (dims == 3) { ok = ok && x >= 0 && x < static_cast<std::int64_t>(g.nx); }
    return ok;
  }
  /// Whether box `b` lies inside this grid (this rank's part): each of its cells is the state's own,
  /// at a fixed offset from its first, with nothing to wrap, no ghost and no fixed-edge value.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool within(box const& b) const noexcept
  {
    return inside(b.x0, b.y0, b.z0) && b.x0 + b.ex <= static_cast<std::int64_t>(g.nx) &&
           b.y0 + b.ey <= static_cast<std::int64_t>(g.ny) && b.z0 + b.ez <= static_cast<std::int64_t>(g.nz);
  }
  /// The cells of tile `t` inside this grid (this rank's part): a tile starts inside it (the
  /// tiles cover the grid from its first cell), so only its far edges move in, where it reaches past
  /// the grid's. Never empty.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box inside_part(box t) const noexcept
  {
    auto cut = [](std::int64_t origin, int& extent, std::size_t n) {
      std::int64_t const room = static_cast<std::int64_t>(n) - origin;
      if (extent > room) { extent = static_cast<int>(room); }
    };
    cut(t.x0, t.ex, g.nx);
    cut(t.y0, t.ey, g.ny);
    cut(t.z0, t.ez, g.nz);
    return t;
  }
  /// The cells of box `b` whose taps, `reach` cells around them, all lie inside this grid (this
  /// rank's part): b cut to the part shrunk by `reach` along each of the stencil's axes. Empty (no
  /// cells) where there are none.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box core_of(box b, int reach) const noexcept
  {
    auto cut = [reach](std::int64_t& origin, int& extent, std::size_t n) {
      std::int64_t const lo = origin > reach ? origin : reach;
      std::int64_t const end = origin + extent;
      std::int64_t const edge = static_cast<std::int64_t>(n) - reach;
      std::int64_t const hi = end < edge ? end : edge;
      origin = lo;
      extent = hi > lo ? static_cast<int>(hi - lo) : 0;
    };
    cut(b.x0, b.ex, g.nx);
    if constexpr (dims >= 2) { cut(b.y0, b.ey, g.ny); }
    if constexpr (dims >= 3) { cut(b.z0, b.ez, g.nz); }
    return b;
  }
  /// The cells of tile `t` a level's loop over the tile's own cells walks (the forward's last step,
  /// the observation): those inside the grid, where the team walks cells in a loop (no test per
  /// cell to keep the loop from being vectorised; inside_part starts where t does); all of t for an
  /// inner tile, and for a team whose threads mask a cell for free, which tests each (walking the
  /// part cut to the grid instead cost nvcc 12 more registers in Allen–Cahn's general advance,
  /// sm_90).
  template <bool Inner, class Team>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box walked_part(box const& t) const noexcept
  {
    return Inner || masking_team<Team>::value ? t : inside_part(t);
  }
  /// std::true_type where `Inner` (an inner tile: known when the program is compiled), else `known`.
  template <bool Inner>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr auto known_if(bool known) noexcept
  {
    if constexpr (Inner) {
      static_cast<void>(known);
      return std::true_type{};
    } else {
      return known;
    }
  }
  /// What `known` (known_if's, or for_each_cored's `interior`) says, as a bool. (Not std::true_type's
  /// own conversion: a host function, which a device pass cannot call.)
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr bool holds(std::true_type) noexcept { return true; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr bool holds(bool known) noexcept { return known; }
  /// f(x, y, z) for each cell (x, y, z) of box `b` outside box `core` (which lies inside b and
  /// holds a cell), in b's coordinates: the boxes around the core, each a loop of its own — the
  /// layers before and after it along z (whole planes of b), within its planes the rows before and
  /// after it along y, within its rows the cells before and after it along x — rather than a test
  /// per cell of b. A boundary tile's rim is a small part of its box; in 3-D a test per cell of the
  /// box made a boundary tile's level cost as much again as its core.
  template <class Team, class F>
  TAPEFLOW_HOST_DEVICE void for_each_rim(Team const& team, box const& b, box const& core, F&& f) const
  {
    shift const at = between(b, core);
    int const x1 = at.x + core.ex;
    int const y1 = at.y + core.ey;
    int const z1 = at.z + core.ez;
    box const around[6] = {
      {0, 0, 0, b.ex, b.ey, at.z},
      {0, 0, z1, b.ex, b.ey, b.ez - z1},
      {0, 0, at.z, b.ex, at.y, core.ez},
      {0, y1, at.z, b.ex, b.ey - y1, core.ez},
      {0, at.y, at.z, at.x, core.ey, core.ez},
      {x1, at.y, at.z, b.ex - x1, core.ey, core.ez},
    };
    for (box const& part : around) {  // one loop, not six inlined copies of f
      if (part.cells() == 0) { continue; }
      auto const ox = static_cast<int>(part.x0);
      auto const oy = static_cast<int>(part.y0);
      auto const oz = static_cast<int>(part.z0);
      team.template for_each<dims>(part, [&](int x, int y, int z) { f(x + ox, y + oy, z + oz); });
    }
  }
  /// f(x, y, z, interior) for each cell (x, y, z) of box `b`, in b's coordinates: `interior` a
  /// std::true_type for the cells of core_of(b, reach), and `known` (whether the caller knows every
  /// cell's taps lie inside the grid: std::true_type, or a bool) for the others. A team that walks
  /// cells in a loop (the CPU), for a stencil whose functions take a site, runs the core as a loop
  /// of its own, with no test per cell, so that a boundary tile's cells away from the grid's edge
  /// run as an inner tile's do (in vector lanes); the rest, and every cell on any other team, as one
  /// loop.
  template <class Team, class Known, class F>
  TAPEFLOW_HOST_DEVICE void for_each_cored(Team const& team, box const& b, int reach, Known known, F&& f) const
  {
    if constexpr (!std::is_same_v<Known, std::true_type> && !masking_team<Team>::value && takes_site_v<S>) {
      box const core = core_of(b, reach);
      if (!known && core.cells() > 0) {
        for_each_rim(team, b, core, [&](int x, int y, int z) { f(x, y, z, false); });
        shift const at = between(b, core);
        team.template for_each<dims>(core, [&](int x, int y, int z) {
          f(x + at.x, y + at.y, z + at.z, std::true_type{});
        });
        return;
      }
    } else {
      static_cast<void>(reach);
    }
    team.template for_each<dims>(b, [&](int x, int y, int z) { f(x, y, z, known); });
  }
  /// Index of the cell (x, y, z) of this grid in a state array: a cell inside() it.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t index_of(std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    return (static_cast<std::size_t>(z) * g.ny + static_cast<std::size_t>(y)) * g.nx + static_cast<std::size_t>(x);
  }
  /// Index of (x, y, z) in a state array, wrapped onto the grid (periodic) or as it is (fixed,
  /// inside only). A rank's part wraps along every axis but the cut ones, where it reads ghosts.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t cell_of(std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    if (g.edge == boundary::periodic) {
      if (!cut_axis(0)) { x = wrapped(x, g.nx); }
      if (!cut_axis(1)) { y = wrapped(y, g.ny); }
      if (!cut_axis(2)) { z = wrapped(z, g.nz); }
    }
    return index_of(x, y, z);
  }
  /// value_at of a cell beyond the part's faces, (co, ci) its coordinates along the cut axes and
  /// (so, si) the side of each it lies past (-1, 0, 1), one of them not 0: from the ghost cells, 0
  /// past them. Out of line on the host (TAPEFLOW_HOST_NOINLINE): few cells take it.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE TAPEFLOW_HOST_NOINLINE T ghost_value(ghost_planes<T> const& ghosts, int f,
                                                                         std::int64_t x, std::int64_t co,
                                                                         std::int64_t ci, int so, int si) const noexcept
  {
    auto const no = static_cast<std::int64_t>(g.extent(dims - 1));
    auto const ni = static_cast<std::int64_t>(dims == 1 ? 1 : g.extent(dims - 2));
    // Past the ghost cells lie only cells of a tile that reaches beyond the part's face: no cell of
    // the part depends on them within the segment, and they are never written.
    std::int64_t const d = ghosts.depth;
    if (co < -d || co >= no + d || (block_split() && (ci < -d || ci >= ni + d))) { return T(0); }
    bool const periodic = g.edge == boundary::periodic;
    std::int64_t const lo = so < 0 ? co + d : so > 0 ? co - no : co;
    std::int64_t const li = block_split() ? (si < 0 ? ci + d : si > 0 ? ci - ni : ci)
                            : dims == 1      ? 0
                            : periodic       ? wrapped(ci, static_cast<std::size_t>(ni))
                                             : ci;
    std::int64_t const lr = dims == 3 ? (periodic ? wrapped(x, g.nx) : x) : 0;
    ghost_layout const layout = ghosts_of(ghosts.depth);
    int const p = ghost_layout::piece_of(so, si);
    return ghosts.values[layout.offset(f, p) + layout.at(p, static_cast<std::size_t>(lo), static_cast<std::size_t>(li),
                                                         static_cast<std::size_t>(lr))];
  }
  /// The value of field `f` at (x, y, z) of `state`, where (x, y, z) lies in the whole grid: from
  /// the state, or from the ghost cells beyond the part's faces (ghosts.hpp's layout).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T value_at(T const* state, ghost_planes<T> const& ghosts, int f, std::int64_t x,
                                                std::int64_t y, std::int64_t z) const noexcept
  {
    if (split()) {
      std::int64_t const co = along_cut(x, y, z);
      std::int64_t const ci = along_inner(x, y);
      auto const no = static_cast<std::int64_t>(g.extent(dims - 1));
      auto const ni = static_cast<std::int64_t>(dims == 1 ? 1 : g.extent(dims - 2));
      int const so = co < 0 ? -1 : co >= no ? 1 : 0;
      int const si = !block_split() ? 0 : ci < 0 ? -1 : ci >= ni ? 1 : 0;
      if (so != 0 || si != 0) { return ghost_value(ghosts, f, x, co, ci, so, si); }
    }
    return state[static_cast<std::size_t>(f) * g.cells() + cell_of(x, y, z)];
  }

  /// The site of step `step` at (x, y, z) of this grid, in the whole grid's coordinates (wrapped
  /// where periodic; a part's offsets along the cut axes), reading the coefficients `c`.
  /// `inside`: the caller knows the cell is inside() this grid (nothing to wrap); `interior`: it
  /// knows every tap of the call lies inside the grid too (site::interior).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE site<T> site_of(std::size_t step, std::int64_t x, std::int64_t y, std::int64_t z,
                                                     T const* c, bool inside = false,
                                                     bool interior = false) const noexcept
  {
    bool const periodic = !inside && g.edge == boundary::periodic;
    if (periodic) {
      if (!cut_axis(0)) { x = wrapped(x, g.nx); }
      if (!cut_axis(1)) { y = wrapped(y, g.ny); }
      if (!cut_axis(2)) { z = wrapped(z, g.nz); }
    }
    // The part's offsets along its cut axes, added without a test (0 along an axis not cut:
    // slab_view), so that a CPU's compiler can run a row's cells in vector lanes.
    std::int64_t* const cut = dims == 1 ? &x : dims == 2 ? &y : &z;
    *cut += slab.offset;
    if (periodic && split()) { *cut = wrapped(*cut, static_cast<std::size_t>(slab.global)); }
    if constexpr (dims >= 2) {
      std::int64_t* const inner = dims == 2 ? &x : &y;
      *inner += slab.inner_offset;
      if (periodic && block_split()) { *inner = wrapped(*inner, static_cast<std::size_t>(slab.inner_global)); }
    }
    return {step, x, y, z, c, interior};
  }
  /// Coefficient `f` at (x, y, z) of this grid: wrapped where periodic, 0 outside a fixed grid;
  /// on a slab, from the coefficients' ghost planes beyond its faces. `inside`: the caller knows
  /// the cell is inside() this grid (read directly, nothing to decide).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T coefficient_at(int f, std::int64_t x, std::int64_t y, std::int64_t z,
                                                      bool inside = false) const noexcept
  {
    if (inside) { return coefficient_values[static_cast<std::size_t>(f) * g.cells() + index_of(x, y, z)]; }
    if (g.edge == boundary::fixed && !in_domain(x, y, z)) { return T(0); }
    return value_at(coefficient_values, slab.coefficients, f, x, y, z);
  }
  /// The coefficients of the cell (x, y, z) of this grid into c (coefficient_count values).
  TAPEFLOW_HOST_DEVICE void own_coefficients(std::int64_t x, std::int64_t y, std::int64_t z, T* c,
                                             bool inside = false) const noexcept
  {
    for (int f = 0; f < coefficient_count; ++f) { c[f] = coefficient_at(f, x, y, z, inside); }
  }
  /// How far from a cell its adjoint reads coefficients (the gather form's λ taps, the scatter
  /// form's forward taps).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE int coefficient_reach() const noexcept
  {
    return r.lambda > r.forward ? r.lambda : r.forward;
  }
  /// Storage for `n` values that may be none.
  template <int N>
  using values = T[N > 0 ? N : 1];

  /// out = S's step at the cell (x, y, z) of this grid from u at its forward taps, applying step
  /// `step` (`inside`: as coefficient_at's; `interior`: as site_of's).
  TAPEFLOW_HOST_DEVICE void forward_cell(T const* u, T* out, std::size_t step, std::int64_t x, std::int64_t y,
                                         std::int64_t z, bool inside = false, bool interior = false) const
  {
    if constexpr (takes_site_v<S>) {
      values<coefficient_count> c;
      own_coefficients(x, y, z, c, inside);
      stencil.forward(u, out, site_of(step, x, y, z, c, inside, interior));
    } else {
      static_cast<void>(step);
      static_cast<void>(x);
      static_cast<void>(y);
      static_cast<void>(z);
      static_cast<void>(inside);
      static_cast<void>(interior);
      stencil.forward(u, out);
    }
  }
  /// S's observe() of the values `u` (one per field) of u_step at the cell (x, y, z) of this grid.
  TAPEFLOW_HOST_DEVICE void observe_cell(T const* u, std::size_t step, std::int64_t x, std::int64_t y, std::int64_t z) const
  {
    if constexpr (observes_v<S>) {
      values<coefficient_count> c;
      own_coefficients(x, y, z, c, true);  // an observed cell is a tile's own, inside the grid
      stencil.observe(u, site_of(step, x, y, z, c, true));
    }
  }
  /// Whether local cell (x, y, z) of box `b` is a cell of tile `t` inside the grid: one a tile
  /// owns, whose results it writes. `Inner`: `t` is an inner tile (inner_tiles), inside the grid.
  template <bool Inner>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool owns(box const& t, box const& b, int x, int y, int z) const noexcept
  {
    std::int64_t const gx = b.x0 + x;
    std::int64_t const gy = b.y0 + y;
    std::int64_t const gz = b.z0 + z;
    return gx >= t.x0 && gy >= t.y0 && gz >= t.z0 && gx < t.x0 + t.ex && gy < t.y0 + t.ey && gz < t.z0 + t.ez &&
           (Inner || inside(gx, gy, gz));
  }

  /// The tile at `p` (tile_range's numbering: x fastest).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box tile_box(tile_place const& p) const noexcept
  {
    std::uint32_t const along[3] = {dims == 3 ? p.w : dims == 2 ? p.col : p.row, dims == 3 ? p.col : dims == 2 ? p.row : 0,
                                    dims == 3 ? p.row : 0};
    box b;
    b.x0 = static_cast<std::int64_t>(along[0]) * tile.x;
    b.y0 = static_cast<std::int64_t>(along[1]) * tile.y;
    b.z0 = static_cast<std::int64_t>(along[2]) * tile.z;
    b.ex = tile.x;
    b.ey = dims >= 2 ? tile.y : 1;
    b.ez = dims >= 3 ? tile.z : 1;
    return b;
  }
  /// The tile number `index` of the grid's tiles.
  [[nodiscard]] box tile_box(std::size_t index) const noexcept
  {
    auto const width = static_cast<std::uint32_t>(dims == 3 ? positions(0) : 1);
    auto const cols = static_cast<std::uint32_t>(dims == 1 ? 1 : positions(dims - 2));
    return tile_box(place_of(index, width, cols));
  }
  /// Tiles covering the grid.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t tiles() const noexcept { return tiles_covering(g.nx, g.ny, g.nz, tile); }
  /// Every tile.
  [[nodiscard]] tile_range all_tiles() const noexcept { return tile_range::all(tiles()); }
  /// The tiles whose boxes, `halo` cells wider than the tile, lie within this rank's part along its
  /// cut axes: they read no ghost cell, so they can run while the ghosts travel. Every tile of a
  /// grid that is not cut.
  [[nodiscard]] tile_range interior_tiles(int halo) const noexcept
  {
    if (!split()) { return all_tiles(); }
    tile_range range{positions(dims - 1), dims == 1 ? 1 : positions(dims - 2), dims == 3 ? positions(0) : 1, 0, 0, 0, 0,
                 false};
    positions_within(dims - 1, halo, range.row_first, range.row_last);
    if (block_split()) {
      positions_within(dims - 2, halo, range.col_first, range.col_last);
    } else {
      range.col_last = range.cols;
    }
    if (range.row_first == range.row_last || range.col_first == range.col_last) { range.row_first = range.row_last = 0; }
    return range;
  }
  /// The tiles interior_tiles(halo) leaves out: those that read ghost cells.
  [[nodiscard]] tile_range boundary_tiles(int halo) const noexcept
  {
    tile_range range = interior_tiles(halo);
    range.outside = !range.outside;
    return range;
  }
  /// The tiles whose boxes, `reach` cells wider than the tile, lie within this grid (this rank's
  /// part) along every axis: their tile program has nothing to wrap, no ghost cell and no
  /// fixed-edge value to decide, and runs compiled for that (advance<true>, reverse<true>), without
  /// the code that decides them and the registers it holds. A subset of interior_tiles(reach).
  [[nodiscard]] tile_rect inner_tiles(int reach) const noexcept
  {
    std::size_t first[3] = {0, 0, 0};
    std::size_t last[3] = {1, 1, 1};
    for (int axis = 0; axis < dims; ++axis) { positions_within(axis, reach, first[axis], last[axis]); }
    int const row = dims - 1;  // the outer cut axis
    int const col = dims - 2;  // the inner one (none in 1-D)
    tile_rect rect;
    rect.cols = static_cast<std::uint32_t>(dims == 1 ? 1 : positions(col));
    rect.width = static_cast<std::uint32_t>(dims == 3 ? positions(0) : 1);
    rect.row_first = static_cast<std::uint32_t>(first[row]);
    rect.row_last = static_cast<std::uint32_t>(last[row]);
    rect.col_first = static_cast<std::uint32_t>(dims == 1 ? 0 : first[col]);
    rect.col_last = static_cast<std::uint32_t>(dims == 1 ? 1 : last[col]);
    rect.w_first = static_cast<std::uint32_t>(dims == 3 ? first[0] : 0);
    rect.w_last = static_cast<std::uint32_t>(dims == 3 ? last[0] : 1);
    return rect;
  }
  /// How far beyond its tile the forward of a `k`-step segment reads: the box of u_0 it loads.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE int advance_reach(int k) const noexcept
  {
    return segment_shape{k, r}.forward_halo(0);
  }
  /// How far beyond its tile the reverse of a `k`-step segment reads: the boxes of u_0 and λ_k it
  /// loads, and around its λ levels' boxes the coefficients of the adjoint's taps (or, in the
  /// scatter form, the cells whose reverse reaches a cell, which a fixed grid may not have).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE int reverse_reach(int k) const noexcept
  {
    segment_shape const s{k, r};
    int const boxes = s.state_halo(0) > s.lambda_halo(k) ? s.state_halo(0) : s.lambda_halo(k);
    int const taps = s.lambda_halo(k - 1) + coefficient_reach();
    return boxes > taps ? boxes : taps;
  }

  /// Tile positions along `axis`.
  [[nodiscard]] std::size_t positions(int axis) const noexcept
  {
    auto const width = static_cast<std::size_t>(axis == 0 ? tile.x : axis == 1 ? tile.y : tile.z);
    return (g.extent(axis) + width - 1) / width;
  }
  /// The tile positions along `axis` whose boxes, `halo` cells wider than the tile, start at or past
  /// its first cell and end at or before its last: [first, last).
  void positions_within(int axis, int halo, std::size_t& first, std::size_t& last) const noexcept
  {
    auto const width = static_cast<std::size_t>(axis == 0 ? tile.x : axis == 1 ? tile.y : tile.z);
    std::size_t const along = g.extent(axis);
    auto const h = static_cast<std::size_t>(halo);
    first = (h + width - 1) / width;
    last = along >= h ? (along - h) / width : 0;
    if (first > last) { first = last; }
  }

  // ---- one level from the one before ---------------------------------------------------------------

  /// Local coordinates of a level's cell, shifted by how far its box starts into the box of the
  /// level below (which is wider on each side: by r.forward, and a loaded box by its copy pad).
  struct shift {
    int x, y, z;
  };
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr shift by(int s) noexcept
  {
    return {s, dims >= 2 ? s : 0, dims >= 3 ? s : 0};
  }
  /// Where box `inner`'s first cell lies in box `outer`, along the active axes.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static shift between(box const& outer, box const& inner) noexcept
  {
    return {static_cast<int>(inner.x0 - outer.x0), dims >= 2 ? static_cast<int>(inner.y0 - outer.y0) : 0,
            dims >= 3 ? static_cast<int>(inner.z0 - outer.z0) : 0};
  }

  /// Box `b`, the tile grown by `halo`, as the tile program loads it: an inner tile's on a grid
  /// whose rows are whole 16-byte copies widened along x to 16-byte boundaries (copy_pad), where
  /// that stays inside the grid, so that the team copies it 16 bytes a copy (block_team::copy_box:
  /// the reverse's checkpoint box at k = 4 is 46 floats wide from 7 before a boundary); as it is
  /// otherwise. The scratch holds the widened box either way (advance_scratch, reverse_scratch).
  template <bool Inner>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box loaded_box(box const& b, int halo) const noexcept
  {
    if constexpr (Inner) {
      int const pad = copy_pad(sizeof(T), tile, halo);
      if (pad > 0 && g.nx % (16 / sizeof(T)) == 0) {
        box w = b;
        w.x0 -= pad / 2;
        w.ex += pad;
        if (within(w)) { return w; }
      }
    } else {
      static_cast<void>(halo);
    }
    return b;
  }

  /// The values at the forward taps around local cell (x, y, z) of `level` (stored on `b`), the
  /// cell's coordinates in `b` being (x, y, z) + sh.
  TAPEFLOW_HOST_DEVICE static void gather_taps(T const* level, box const& b, int x, int y, int z, shift sh, T* u)
  {
    gather<forward_taps>(level, b, b.at(x + sh.x, y + sh.y, z + sh.z), u);
  }

  /// The values at the taps of `List` around the cell at index `at` of `level` (stored on `b`):
  /// one base index, each tap a constant offset in the box's strides.
  template <class List>
  TAPEFLOW_HOST_DEVICE static void gather(T const* level, box const& b, std::size_t at, T* u)
  {
    auto const plane = static_cast<std::ptrdiff_t>(b.cells());
    auto const row = static_cast<std::ptrdiff_t>(b.ex);
    auto const slab = row * static_cast<std::ptrdiff_t>(b.ey);
    T const* const centre = level + at;
    for_each_tap<List>([&](auto t, auto i) {
      using tp = decltype(t);
      u[decltype(i)::value] = centre[tp::field * plane + tp::dz * slab + tp::dy * row + tp::dx];
    });
  }

  // ---- column sweeps (sweep.hpp): the levels of an inner tile on a team that sweeps ----------------

  /// The most values a sweep keeps in registers: past it (LBM's 81 forward taps lie on 27 lines of
  /// 3), a level runs cell by cell.
  static constexpr int max_window = 32;
  template <class List>
  [[nodiscard]] static constexpr int window_values() noexcept
  {
    if constexpr (dims >= 2) {
      return tap_lines<List, dims>::lines.values;
    } else {
      return max_window + 1;  // 1-D: a run would be the row a thread already walks
    }
  }
  [[nodiscard]] static constexpr bool adjoint_window_fits() noexcept
  {
    if constexpr (is_gather_v<S>) {
      return window_values<forward_taps>() + window_values<typename S::adjoint_taps>() <= max_window;
    } else {
      return false;  // a scatter-form adjoint reads around every tap's cell: it runs cell by cell
    }
  }
  /// Whether an inner tile's forward levels, and its adjoint levels, run as column sweeps.
  static constexpr bool forward_sweeps = window_values<forward_taps>() <= max_window;
  static constexpr bool adjoint_sweeps = adjoint_window_fits();

  /// The cells of `state` from the cell (x, y, z) of this grid on (inside it).
  template <class V>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE strided<V> state_from(V* state, std::int64_t x, std::int64_t y,
                                                           std::int64_t z) const noexcept
  {
    return {state + index_of(x, y, z), g.cells(), static_cast<std::ptrdiff_t>(g.nx),
            static_cast<std::ptrdiff_t>(g.nx * g.ny)};
  }

  /// The cells of `b`, run by run (the team's for_each_run), into `out` (its cell (0, 0, 0) being
  /// b's first): start(x, y, z) makes a run's state at its first cell, and that state's
  /// (y, z, values) the `fields` values of each cell of the run in turn, (y, z) its coordinates.
  template <class Team, class Start>
  TAPEFLOW_HOST_DEVICE void sweep(Team const& team, box const& b, strided<T> out, Start&& start) const
  {
    std::ptrdiff_t const out_step = out.along(dims);
    team.template for_each_run<dims>(b, [&](int x, int y, int z, int n) {
      auto run = start(x, y, z);
      T* o = out.at(x, y, z);
      for (int s = 0; s < n; ++s, o += out_step) {
        T v[fields];
        run(dims == 2 ? y + s : y, dims == 3 ? z + s : z, v);
        for (int f = 0; f < fields; ++f) { o[static_cast<std::size_t>(f) * out.field] = v[f]; }
      }
    });
  }

  /// step_level of an inner tile in column sweeps: u_{i+1} at the cells of `nb` into `out` (its
  /// cell (0, 0, 0) being nb's first), from u_i on `prev` (rf cells wider than nb, and `wider` more
  /// before it along x).
  template <class Team>
  TAPEFLOW_HOST_DEVICE void sweep_forward(Team const& team, T const* prev, box const& pb, box const& nb, strided<T> out,
                                          std::size_t step, int wider = 0) const
  {
    shift sh = by(r.forward);
    sh.x += wider;
    strided<T const> const in = level_of(prev, pb);
    sweep(team, nb, out, [&](int x, int y, int z) {
      column_window<T, forward_taps, dims> window(in, in.at(x + sh.x, y + sh.y, z + sh.z));
      return [&, x, window](int cy, int cz, T* v) mutable {
        T u[forward_taps::size];
        window.next();
        window.gather(u);
        forward_cell(u, v, step, nb.x0 + x, nb.y0 + cy, nb.z0 + cz, true, true);
      };
    });
  }

  /// An adjoint level of an inner tile in column sweeps: λ_i at the cells of `b` into `out` (its
  /// cell (0, 0, 0) being b's first) from u_i on `ub` and λ_{i+1} on `lb`, as adjoint_cell; with
  /// coefficients, adds step `step`'s dL/dc of the cells of `b` that tile `owner` owns (null: of
  /// every cell of `b`) to `dc`.
  template <class Team>
  TAPEFLOW_HOST_DEVICE void sweep_adjoint(Team const& team, T const* u_level, box const& ub, T const* next,
                                          box const& lb, box const& b, strided<T> out, std::size_t step,
                                          box const* owner, T* dc) const
  {
    using adjoint_taps = typename S::adjoint_taps;
    shift const su = between(ub, b);
    shift const sl = between(lb, b);
    strided<T const> const u_in = level_of(u_level, ub);
    strided<T const> const l_in = level_of(next, lb);
    sweep(team, b, out, [&](int x, int y, int z) {
      column_window<T, forward_taps, dims> u_window(u_in, u_in.at(x + su.x, y + su.y, z + su.z));
      column_window<T, adjoint_taps, dims> l_window(l_in, l_in.at(x + sl.x, y + sl.y, z + sl.z));
      return [&, x, u_window, l_window](int cy, int cz, T* lambda) mutable {
        T u[forward_taps::size];
        T gv[adjoint_taps::size];
        u_window.next();
        l_window.next();
        u_window.gather(u);
        l_window.gather(gv);
        gather_adjoint(u, gv, lambda, step, b.x0 + x, b.y0 + cy, b.z0 + cz, true);
        if constexpr (coefficient_count > 0) {
          if (owner == nullptr || owns<true>(*owner, b, x, cy, cz)) {
            add_parameter_adjoint(u, next, lb, b, x, cy, cz, step, dc, true);  // u: the window's, gathered
          }
        }
      };
    });
  }

  /// u_{i+1} on `next` from u_i on `prev` (rf cells wider, and `wider` more cells before nb along
  /// x: a loaded box's pad, loaded_box), applying step `step`: cells outside a fixed grid hold the
  /// ghost. `Inner`: the level belongs to an inner tile (inner_tiles), so `nb` lies inside the grid
  /// (and so do its cells' taps). (The shift is r.forward, a kernel parameter, plus `wider`, 0 where
  /// the compiler sees it: worked out from the boxes instead, nvcc gave Allen–Cahn's inner advance
  /// 55 registers, not 32.)
  template <bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void step_level(Team const& team, T const* prev, box const& pb, T* next, box const& nb,
                                       std::size_t step, int wider = 0) const
  {
    if constexpr (Inner && sweeping_team<Team>::value && forward_sweeps) {
      sweep_forward(team, prev, pb, nb, level_of(next, nb), step, wider);
    } else {
      // Whether a cell may lie outside a fixed grid is decided once a level: an inner tile, a
      // boundary tile of a periodic grid, or a level inside a fixed one runs the loop without the test.
      decided_once(!Inner && !within(nb) && g.edge == boundary::fixed, [&](auto edges) {
        step_cells<decltype(edges)::value, Inner>(team, prev, pb, next, nb, step, wider);
      });
    }
  }
  /// step_level cell by cell; `Edges`: some cells of `nb` may lie outside a fixed grid, each is
  /// tested (none is, where Edges is false).
  template <bool Edges, bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void step_cells(Team const& team, T const* prev, box const& pb, T* next, box const& nb,
                                       std::size_t step, int wider = 0) const
  {
    shift sh = by(r.forward);
    sh.x += wider;
    std::size_t const plane = nb.cells();
    bool const inside_all = Inner || within(nb);  // nothing to wrap for a cell's coefficients
    for_each_cored(team, nb, r.forward, known_if<Inner>(false), [&](int x, int y, int z, auto interior) {
      constexpr bool core = std::is_same_v<decltype(interior), std::true_type>;  // inside, taps too
      std::size_t const c = nb.at(x, y, z);
      if constexpr (Edges && !core) {
        if (!in_domain(nb.x0 + x, nb.y0 + y, nb.z0 + z)) {
          for (int f = 0; f < fields; ++f) { next[f * plane + c] = g.ghost; }
          return;
        }
      }
      T u[forward_taps::size];
      T out[fields];
      gather_taps(prev, pb, x, y, z, sh, u);
      forward_cell(u, out, step, nb.x0 + x, nb.y0 + y, nb.z0 + z, core || inside_all, holds(interior));
      for (int f = 0; f < fields; ++f) { next[f * plane + c] = out[f]; }
    });
  }

  /// Loads a state (`adjoint`: an adjoint, which is 0 outside a fixed grid) onto box `b`.
  /// `Inner`: `b` is an inner tile's (inner_tiles), inside the grid.
  template <bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void load(Team const& team, T const* state, box const& b, T* level, bool adjoint) const
  {
    std::size_t const plane = b.cells();
    std::size_t const cells = g.cells();
    if (Inner || within(b)) {  // rows of the state, copied with loads in flight
      team.template copy_box<fields>(b, state + index_of(b.x0, b.y0, b.z0), cells, g.nx, g.nx * g.ny, level);
      return;
    }
    if (!split() && g.edge == boundary::periodic) {  // every cell wraps onto the grid: no test, no ghost
      team.template copy_periodic_box<dims, fields>(b, state, g.nx, g.ny, g.nz, level);
      return;
    }
    if constexpr (!masking_team<Team>::value) {
      // A team that walks cells in a loop (the CPU), on a fixed grid not cut over ranks: the cells
      // outside the grid take the ghost (an adjoint 0) with no test per cell (for_each_rim), and
      // the rest are copied in rows, as an inner tile's box is (copy_box), into their place in b.
      box const in = core_of(b, 0);  // b's cells inside the grid (not cut: core_of is the part's)
      if (g.edge == boundary::fixed && !split() && in.cells() > 0) {
        T const outside = adjoint ? T(0) : g.ghost;
        for_each_rim(team, b, in, [&](int x, int y, int z) {
          for (int f = 0; f < fields; ++f) { level[f * plane + b.at(x, y, z)] = outside; }
        });
        shift const at = between(b, in);
        strided<T> into = level_of(level, b);
        into.base = into.at(at.x, at.y, at.z);
        team.template copy_box<fields>(in, state + index_of(in.x0, in.y0, in.z0), cells, g.nx, g.nx * g.ny, into);
        return;
      }
    }
    team.template for_each<dims>(b, [&](int x, int y, int z) {
      std::int64_t const gx = b.x0 + x;
      std::int64_t const gy = b.y0 + y;
      std::int64_t const gz = b.z0 + z;
      std::size_t const c = b.at(x, y, z);
      if (g.edge == boundary::fixed && !in_domain(gx, gy, gz)) {
        for (int f = 0; f < fields; ++f) { level[f * plane + c] = adjoint ? T(0) : g.ghost; }
        return;
      }
      if (split()) {
        ghost_planes<T> const& ghosts = adjoint ? slab.adjoint : slab.state;
        for (int f = 0; f < fields; ++f) { level[f * plane + c] = value_at(state, ghosts, f, gx, gy, gz); }
        return;
      }
      std::size_t const at = cell_of(gx, gy, gz);
      for (int f = 0; f < fields; ++f) { level[f * plane + c] = state[f * cells + at]; }
    });
  }

  // ---- the forward of a segment --------------------------------------------------------------------

  /// S's observe() of u_step at the cells of tile `t` inside the grid, from `level` stored on box
  /// `b` (t grown by `halo`); nothing for a stencil without observe(). Read after a barrier, so a
  /// thread may observe cells another wrote.
  template <bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void observe_level(Team const& team, box const& t, T const* level, box const& b, int halo,
                                          std::size_t step) const
  {
    if constexpr (observes_v<S>) {
      std::size_t const plane = b.cells();
      shift const sh = by(halo);
      constexpr bool masked = !Inner && masking_team<Team>::value;  // tests each cell of t
      box const own = walked_part<Inner, Team>(t);
      team.template for_each<dims>(own, [&](int x, int y, int z) {
        if (masked && !inside(t.x0 + x, t.y0 + y, t.z0 + z)) { return; }
        T u[fields];
        for (int f = 0; f < fields; ++f) { u[f] = level[f * plane + b.at(x + sh.x, y + sh.y, z + sh.z)]; }
        observe_cell(u, step, t.x0 + x, t.y0 + y, t.z0 + z);
      });
    } else {
      static_cast<void>(team);
      static_cast<void>(t);
      static_cast<void>(level);
      static_cast<void>(b);
      static_cast<void>(halo);
      static_cast<void>(step);
    }
  }

  /// Scratch values advance() needs for segments of up to `k` steps.
  [[nodiscard]] std::size_t advance_scratch(int k) const noexcept
  {
    return forward_scratch_values(segment_shape{k, r}, tile, dims, fields);
  }

  /// Advances tile `t` by `k` steps, the first of them step `first`: `out` on the tile is `in`
  /// after k steps. S observes (observe()) the tile's cells of each state but the last. `Inner`:
  /// `t` is one of inner_tiles(advance_reach(k)).
  template <bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void advance(Team const& team, box const& t, std::size_t first, int k, T const* in, T* out,
                                    T* scratch) const
  {
    segment_shape const s{k, r};
    box b = grown(t, dims, s.forward_halo(0));
    // The two levels, swapped after each step (named, not an array indexed at run time, which a GPU
    // compiler keeps in local memory). (u_0's box is loaded as it is: widened as the reverse's are,
    // with shifts worked out from the boxes, nvcc gave Allen–Cahn's inner advance 48 registers, not
    // 32.)
    T* prev = scratch;
    T* next = scratch + b.cells() * fields;
    load<Inner>(team, in, b, prev, false);
    team.sync();
    observe_level<Inner>(team, t, prev, b, s.forward_halo(0), first);
    for (int i = 1; i < k; ++i) {
      box const nb = grown(t, dims, s.forward_halo(i));
      step_level<Inner>(team, prev, b, next, nb, first + static_cast<std::size_t>(i - 1));
      team.sync();
      // After the level, not inside its loop, so that the loop holds no store under a test (which
      // would keep a CPU's compiler from running its cells in vector lanes).
      observe_level<Inner>(team, t, next, nb, s.forward_halo(i), first + static_cast<std::size_t>(i));
      b = nb;
      T* const done = prev;
      prev = next;
      next = done;
    }
    // The last step straight to the state, for the tile's cells inside the grid.
    if constexpr (Inner && sweeping_team<Team>::value && forward_sweeps) {
      sweep_forward(team, prev, b, t, state_from(out, t.x0, t.y0, t.z0), first + static_cast<std::size_t>(k - 1));
    } else {
      constexpr bool masked = !Inner && masking_team<Team>::value;  // tests each cell of t
      box const own = walked_part<Inner, Team>(t);
      shift const sh = by(r.forward);  // own starts where t does
      std::size_t const cells = g.cells();
      for_each_cored(team, own, r.forward, known_if<Inner>(false), [&](int x, int y, int z, auto interior) {
        std::int64_t const gx = own.x0 + x;
        std::int64_t const gy = own.y0 + y;
        std::int64_t const gz = own.z0 + z;
        if constexpr (masked) {
          if (!inside(gx, gy, gz)) { return; }
        }
        T u[forward_taps::size];
        T o[fields];
        gather_taps(prev, b, x, y, z, sh, u);
        forward_cell(u, o, first + static_cast<std::size_t>(k - 1), gx, gy, gz, true, holds(interior));
        std::size_t const at = index_of(gx, gy, gz);
        for (int f = 0; f < fields; ++f) { out[f * cells + at] = o[f]; }
      });
    }
  }

  // ---- the reverse of a segment --------------------------------------------------------------------

  /// Scratch values reverse() needs for segments of up to `k` steps.
  [[nodiscard]] std::size_t reverse_scratch(int k) const noexcept
  {
    segment_shape const s{k, r};
    return reverse_scratch_values(s, tile, dims, fields, copy_pads<T>(s, tile));
  }

  /// λ_i of the cell at (x, y, z) of box `b`, from u_i stored on box `ub` and λ_{i+1} on box `lb`
  /// (both centred on `b`, wider by what the adjoint reaches), step `step` being u_i -> u_{i+1}.
  /// `taps_inside`: the caller knows every cell within coefficient_reach() of it is inside() the
  /// grid.
  TAPEFLOW_HOST_DEVICE void adjoint_cell(T const* u_level, box const& ub, T const* next, box const& lb, box const& b,
                                         int x, int y, int z, std::size_t step, T* lambda,
                                         bool taps_inside = false) const
  {
    shift const su = between(ub, b);  // u_i's box is this much wider
    shift const sl = between(lb, b);  // and λ_{i+1}'s this much
    if constexpr (is_gather_v<S>) {
      using adjoint_taps = typename S::adjoint_taps;
      T u[forward_taps::size];
      T gv[adjoint_taps::size];
      gather_taps(u_level, ub, x, y, z, su, u);
      gather<adjoint_taps>(next, lb, lb.at(x + sl.x, y + sl.y, z + sl.z), gv);
      gather_adjoint(u, gv, lambda, step, b.x0 + x, b.y0 + y, b.z0 + z, taps_inside);
    } else {
      // λ(x) gathers, tap by tap in order, what reverse() at the cell x - offset gives that tap.
      for (int f = 0; f < fields; ++f) { lambda[f] = T(0); }
      std::size_t const plane = lb.cells();
      for_each_tap<forward_taps>([&](auto t, auto i) {
        using tp = decltype(t);
        int const yx = x - tp::dx;
        int const yy = y - tp::dy;
        int const yz = z - tp::dz;
        if (!taps_inside && g.edge == boundary::fixed && !in_domain(b.x0 + yx, b.y0 + yy, b.z0 + yz)) { return; }
        T u[forward_taps::size];
        T gv[fields];
        T contributions[forward_taps::size];
        gather_taps(u_level, ub, yx, yy, yz, su, u);
        for (int f = 0; f < fields; ++f) { gv[f] = next[f * plane + lb.at(yx + sl.x, yy + sl.y, yz + sl.z)]; }
        if constexpr (takes_site_v<S>) {
          values<coefficient_count> c;
          own_coefficients(b.x0 + yx, b.y0 + yy, b.z0 + yz, c, taps_inside);
          // (not interior: the cell's own taps reach past what taps_inside says of b)
          stencil.reverse(u, gv, contributions, site_of(step, b.x0 + yx, b.y0 + yy, b.z0 + yz, c, taps_inside));
        } else {
          stencil.reverse(u, gv, contributions);
        }
        lambda[tp::field] += contributions[decltype(i)::value];
      });
    }
  }

  /// λ_i of the cell (gx, gy, gz) of this grid by S's gather-form adjoint, from u_i at its forward
  /// taps `u` and λ_{i+1} at its adjoint taps `gv` (`taps_inside`: as adjoint_cell's).
  TAPEFLOW_HOST_DEVICE void gather_adjoint(T const* u, T const* gv, T* lambda, std::size_t step, std::int64_t gx,
                                           std::int64_t gy, std::int64_t gz, bool taps_inside) const
  {
    using adjoint_taps = typename S::adjoint_taps;
    if constexpr (takes_site_v<S>) {
      values<adjoint_taps::size * coefficient_count> c;  // each adjoint tap's cell's coefficients
      for_each_tap<adjoint_taps>([&](auto t, auto i) {
        using tp = decltype(t);
        for (int f = 0; f < coefficient_count; ++f) {
          c[decltype(i)::value * coefficient_count + f] =
            coefficient_at(f, gx + tp::dx, gy + tp::dy, gz + tp::dz, taps_inside);
        }
      });
      stencil.adjoint(u, gv, lambda, site_of(step, gx, gy, gz, c, taps_inside, taps_inside));
    } else {
      static_cast<void>(step);
      static_cast<void>(gx);
      static_cast<void>(gy);
      static_cast<void>(gz);
      static_cast<void>(taps_inside);
      stencil.adjoint(u, gv, lambda);
    }
  }

  /// Adds step `step`'s dL/dc of the coefficients of the cell at (x, y, z) of box `b` to `dc`
  /// (laid out as the coefficients), from u_i on `ub` and λ_{i+1} on `lb` as adjoint_cell reads them
  /// (`interior`: as site_of's).
  TAPEFLOW_HOST_DEVICE void add_parameter_adjoint(T const* u_level, box const& ub, T const* next, box const& lb,
                                                  box const& b, int x, int y, int z, std::size_t step, T* dc,
                                                  bool interior) const
  {
    if constexpr (coefficient_count > 0) {
      T u[forward_taps::size];
      gather_taps(u_level, ub, x, y, z, between(ub, b), u);
      add_parameter_adjoint(u, next, lb, b, x, y, z, step, dc, interior);
    } else {
      static_cast<void>(u_level);
      static_cast<void>(ub);
      add_parameter_adjoint(nullptr, next, lb, b, x, y, z, step, dc, interior);
    }
  }
  /// add_parameter_adjoint from u_i at the cell's forward taps `u`, gathered already (a sweep's).
  TAPEFLOW_HOST_DEVICE void add_parameter_adjoint(T const* u, T const* next, box const& lb, box const& b, int x, int y,
                                                  int z, std::size_t step, T* dc, bool interior) const
  {
    if constexpr (coefficient_count > 0) {
      shift const sl = between(lb, b);
      std::int64_t const gx = b.x0 + x;
      std::int64_t const gy = b.y0 + y;
      std::int64_t const gz = b.z0 + z;
      T gv[fields];
      T c[coefficient_count];
      T d[coefficient_count];
      std::size_t const plane = lb.cells();
      for (int f = 0; f < fields; ++f) { gv[f] = next[f * plane + lb.at(x + sl.x, y + sl.y, z + sl.z)]; }
      own_coefficients(gx, gy, gz, c, true);  // an owned cell: inside the grid
      stencil.parameter_adjoint(u, gv, d, site_of(step, gx, gy, gz, c, true, interior));
      std::size_t const at = index_of(gx, gy, gz);  // an owned cell: inside the grid
      for (int f = 0; f < coefficient_count; ++f) { dc[static_cast<std::size_t>(f) * g.cells() + at] += d[f]; }
    } else {
      static_cast<void>(u);
      static_cast<void>(next);
      static_cast<void>(lb);
      static_cast<void>(b);
      static_cast<void>(x);
      static_cast<void>(y);
      static_cast<void>(z);
      static_cast<void>(step);
      static_cast<void>(dc);
      static_cast<void>(interior);
    }
  }

  /// The reverse of the `k`-step segment that starts at `checkpoint` (u_0, the whole state), on
  /// tile `t`, its first step `first`: `lambda_in` on the tile is dL/du_0 given `lambda_out` =
  /// dL/du_k (the whole adjoint). With coefficients, each step's dL/dc of the tile's cells is added
  /// to `dc`, last step first. Scratch holds u_0 .. u_{k-1}, each on its box, then two levels of λ
  /// on the widest λ box. `Inner`: `t` is one of inner_tiles(reverse_reach(k)).
  template <bool Inner, class Team>
  TAPEFLOW_HOST_DEVICE void reverse(Team const& team, box const& t, std::size_t first, int k, T const* checkpoint,
                                    T const* lambda_out, T* lambda_in, T* dc, T* scratch) const
  {
    segment_shape const s{k, r};
    box_pads const pad = copy_pads<T>(s, tile);
    box const checkpoint_box = grown(t, dims, s.state_halo(0));
    box const u0 = loaded_box<Inner>(checkpoint_box, s.state_halo(0));  // as loaded
    auto const u0_wider = static_cast<int>(checkpoint_box.x0 - u0.x0);  // its pad before the box
    auto u_box = [&](int i) { return i == 0 ? u0 : grown(t, dims, s.state_halo(i)); };
    // u_0 .. u_{k-1} lie one after another from the scratch's start (u_0 as large as its loaded
    // box); the loops below step from one level to the next (a level's start is not summed anew
    // each level).
    auto level_values = [&](int i) { return box_cells(tile, dims, s.state_halo(i), i == 0 ? pad.state : 0) * fields; };
    T* u_top = scratch;  // u_{k-1}
    for (int i = 0; i + 1 < k; ++i) { u_top += level_values(i); }
    // The two λ levels: λ_i in level i mod 2 (chosen by a select, not an array indexed at run
    // time, which a GPU compiler keeps in local memory), each as large as λ_k's loaded box.
    T* const lambda_even = u_top + level_values(k - 1);
    T* const lambda_odd = lambda_even + box_cells(tile, dims, s.lambda_halo(k), pad.lambda) * fields;
    auto lambda_level = [&](int i) { return i % 2 == 0 ? lambda_even : lambda_odd; };

    box lb = loaded_box<Inner>(grown(t, dims, s.lambda_halo(k)), s.lambda_halo(k));
    load<Inner>(team, checkpoint, u0, scratch, false);
    load<Inner>(team, lambda_out, lb, lambda_level(k), true);
    team.sync();
    T* u_prev = scratch;  // u_{i-1}
    for (int i = 1; i < k; ++i) {
      T* const u_next = u_prev + level_values(i - 1);
      step_level<Inner>(team, u_prev, u_box(i - 1), u_next, u_box(i), first + static_cast<std::size_t>(i - 1),
                        i == 1 ? u0_wider : 0);
      team.sync();
      u_prev = u_next;
    }
    T const* u_i = u_top;  // u_i, from u_{k-1} down
    for (int i = k - 1; i >= 1; --i) {
      box const b = grown(t, dims, s.lambda_halo(i));
      box const ub = u_box(i);
      T const* const u = u_i;
      T* const out = lambda_level(i);
      T const* const next = lambda_level(i + 1);
      std::size_t const step = first + static_cast<std::size_t>(i);
      if constexpr (Inner && sweeping_team<Team>::value && adjoint_sweeps) {
        sweep_adjoint(team, u, ub, next, lb, b, level_of(out, b), step, &t, dc);
      } else {
        std::size_t const plane = b.cells();
        bool const taps_inside = Inner || within(grown(b, dims, coefficient_reach()));  // and so every cell of b
        // Whether a cell may lie outside a fixed grid: decided once a level, as step_level does.
        decided_once(!taps_inside && g.edge == boundary::fixed, [&](auto edges) {
          constexpr bool may_leave = decltype(edges)::value;
          for_each_cored(team, b, coefficient_reach(), known_if<Inner>(taps_inside), [&](int x, int y, int z,
                                                                                          auto interior) {
            constexpr bool core = std::is_same_v<decltype(interior), std::true_type>;  // inside, taps too
            std::size_t const c = b.at(x, y, z);
            T lambda[fields];
            if constexpr (may_leave && !core) {
              if (!in_domain(b.x0 + x, b.y0 + y, b.z0 + z)) {
                for (int f = 0; f < fields; ++f) { out[f * plane + c] = T(0); }
                return;
              }
            }
            adjoint_cell(u, ub, next, lb, b, x, y, z, step, lambda, holds(interior));
            for (int f = 0; f < fields; ++f) { out[f * plane + c] = lambda[f]; }
          });
        });
        // The step's dL/dc of the tile's own cells, over those alone rather than under a test in
        // the level's loop (which would keep a CPU's compiler from running its cells in vector
        // lanes). It reads u_i and λ_{i+1}, not λ_i: no barrier before it.
        if constexpr (coefficient_count > 0) {
          box const own = Inner ? t : inside_part(t);
          for_each_cored(team, own, coefficient_reach(), known_if<Inner>(taps_inside),
                         [&](int x, int y, int z, auto interior) {
            add_parameter_adjoint(u, ub, next, lb, own, x, y, z, step, dc, holds(interior));
          });
        }
      }
      team.sync();
      lb = b;
      u_i -= level_values(i - 1);
    }
    // λ_0 straight to the adjoint, for the tile's cells inside the grid.
    box const& ub = u0;
    T const* const u = scratch;  // u_0
    T const* const next = lambda_odd;
    if constexpr (Inner && sweeping_team<Team>::value && adjoint_sweeps) {
      sweep_adjoint(team, u, ub, next, lb, t, state_from(lambda_in, t.x0, t.y0, t.z0), first, nullptr, dc);
    } else {
      // Over the tile's cells inside the grid (an inner tile's are all of them): no test per cell.
      box const own = Inner ? t : inside_part(t);
      std::size_t const cells = g.cells();
      bool const taps_inside = Inner || within(grown(own, dims, coefficient_reach()));
      for_each_cored(team, own, coefficient_reach(), known_if<Inner>(taps_inside),
                     [&](int x, int y, int z, auto interior) {
        T lambda[fields];
        adjoint_cell(u, ub, next, lb, own, x, y, z, first, lambda, holds(interior));
        std::size_t const c = index_of(own.x0 + x, own.y0 + y, own.z0 + z);
        for (int f = 0; f < fields; ++f) { lambda_in[f * cells + c] = lambda[f]; }
        if constexpr (coefficient_count > 0) {
          add_parameter_adjoint(u, ub, next, lb, own, x, y, z, first, dc, holds(interior));
        }
      });
    }
  }
};

}  // namespace tapeflow::stencil
