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
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>
#include <cstdint>

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

/// One CPU thread working a tile: cells in storage order, nothing to wait for.
struct solo_team {
  template <class F>
  TAPEFLOW_HOST_DEVICE void for_each(box const& b, F&& f) const
  {
    for (int z = 0; z < b.ez; ++z) {
      for (int y = 0; y < b.ey; ++y) {
        for (int x = 0; x < b.ex; ++x) { f(x, y, z); }
      }
    }
  }
  TAPEFLOW_HOST_DEVICE void sync() const noexcept {}
};

/// The tiles a launch walks: tile numbers [first, last) but those in [skip_first, skip_last).
struct tile_range {
  std::size_t first{0};
  std::size_t last{0};
  std::size_t skip_first{0};
  std::size_t skip_last{0};

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t size() const noexcept
  {
    return last - first - (skip_last - skip_first);
  }
  /// The i-th tile number of the range.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t operator[](std::size_t i) const noexcept
  {
    std::size_t const t = first + i;
    return t < skip_first ? t : t + (skip_last - skip_first);
  }
};

/// Planes beyond a slab's two faces, which the neighbours sent: fields x {below, above} x depth
/// planes, x fastest.
template <class T>
struct ghost_planes {
  int depth{0};
  T const* values{nullptr};
};

/// Where the grid a tile program runs on is one rank's slab of a larger grid, cut along its last
/// axis (y in 2-D, z in 3-D, x in 1-D; docs/distributed.md): the slab's place in the whole grid,
/// and the ghost planes of the state and of the adjoint the call reads (set for each call).
template <class T>
struct slab_view {
  std::int64_t offset{0};  ///< the whole grid's index of the slab's first plane
  std::int64_t global{0};  ///< planes of the whole grid along the cut axis; 0: the grid is not cut
  ghost_planes<T> state{};         ///< beyond the faces of the state (or checkpoint) the call reads
  ghost_planes<T> adjoint{};       ///< beyond the faces of the adjoint the call reads
  ghost_planes<T> coefficients{};  ///< beyond the faces of the coefficients (they never change)
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

  /// v mod n in [0, n): one add or subtract for a halo that reaches less than a grid past the
  /// edge (the common case, no division), a remainder otherwise.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static std::int64_t wrap(std::int64_t v, std::size_t n) noexcept
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
  /// The coordinate along the axis a slab is cut on (the last of the stencil's axes).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr std::int64_t along_cut(std::int64_t x, std::int64_t y,
                                                                           std::int64_t z) noexcept
  {
    return dims == 1 ? x : dims == 2 ? y : z;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool split() const noexcept { return slab.global != 0; }

  /// Whether (x, y, z) is a cell of this grid (of this rank's slab).
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
    bool const cut_ok = c >= 0 && c < slab.global;
    bool const x_ok = dims == 1 || (x >= 0 && x < static_cast<std::int64_t>(g.nx));
    bool const y_ok = dims != 3 || (y >= 0 && y < static_cast<std::int64_t>(g.ny));
    return cut_ok && x_ok && y_ok;
  }
  /// Index of (x, y, z) in a state array, wrapped onto the grid (periodic) or as it is (fixed,
  /// inside only). A slab wraps along every axis but the cut one, where it reads ghost planes.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t cell_of(std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    if (g.edge == boundary::periodic) {
      if (!split() || dims != 1) { x = wrap(x, g.nx); }
      if (!split() || dims != 2) { y = wrap(y, g.ny); }
      if (!split() || dims != 3) { z = wrap(z, g.nz); }
    }
    return (static_cast<std::size_t>(z) * g.ny + static_cast<std::size_t>(y)) * g.nx + static_cast<std::size_t>(x);
  }
  /// The value of field `f` at (x, y, z) of `state`, where (x, y, z) lies in the whole grid: from
  /// the state, or from the ghost planes beyond the slab's faces.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T value_at(T const* state, ghost_planes<T> const& ghosts, int f, std::int64_t x,
                                                std::int64_t y, std::int64_t z) const noexcept
  {
    if (split()) {
      std::int64_t const c = along_cut(x, y, z);
      auto const n = static_cast<std::int64_t>(g.extent(dims - 1));
      if (c < 0 || c >= n) {
        // Past the ghost planes lie only cells of a tile that reaches beyond the slab's face: no
        // cell of the slab depends on them within the segment, and they are never written.
        if (c < -static_cast<std::int64_t>(ghosts.depth) || c >= n + ghosts.depth) { return T(0); }
        // Within a plane, the cell's index along the uncut axes (wrapped where periodic).
        std::int64_t const px = dims == 1 ? 0 : (g.edge == boundary::periodic ? wrap(x, g.nx) : x);
        std::int64_t const py = dims == 3 ? (g.edge == boundary::periodic ? wrap(y, g.ny) : y) : 0;
        std::size_t const plane = dims == 1 ? 1 : dims == 2 ? g.nx : g.nx * g.ny;
        std::size_t const in_plane = static_cast<std::size_t>(py) * g.nx + static_cast<std::size_t>(px);
        int const side = c < 0 ? 0 : 1;
        auto const d = static_cast<std::size_t>(c < 0 ? c + ghosts.depth : c - n);
        std::size_t const row = (static_cast<std::size_t>(f) * 2 + static_cast<std::size_t>(side)) *
                                  static_cast<std::size_t>(ghosts.depth) + d;
        return ghosts.values[row * plane + in_plane];
      }
    }
    return state[static_cast<std::size_t>(f) * g.cells() + cell_of(x, y, z)];
  }

  /// The site of step `step` at (x, y, z) of this grid, in the whole grid's coordinates (wrapped
  /// where periodic; a slab's offset along the cut axis), reading the coefficients `c`.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE site<T> site_of(std::size_t step, std::int64_t x, std::int64_t y, std::int64_t z,
                                                     T const* c) const noexcept
  {
    bool const periodic = g.edge == boundary::periodic;
    std::int64_t* const cut = dims == 1 ? &x : dims == 2 ? &y : &z;
    if (periodic) {
      if (!split() || dims != 1) { x = wrap(x, g.nx); }
      if (!split() || dims != 2) { y = wrap(y, g.ny); }
      if (!split() || dims != 3) { z = wrap(z, g.nz); }
    }
    if (split()) {
      *cut += slab.offset;
      if (periodic) { *cut = wrap(*cut, static_cast<std::size_t>(slab.global)); }
    }
    return {step, x, y, z, c};
  }
  /// Coefficient `f` at (x, y, z) of this grid: wrapped where periodic, 0 outside a fixed grid;
  /// on a slab, from the coefficients' ghost planes beyond its faces.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T coefficient_at(int f, std::int64_t x, std::int64_t y, std::int64_t z) const noexcept
  {
    if (g.edge == boundary::fixed && !in_domain(x, y, z)) { return T(0); }
    return value_at(coefficient_values, slab.coefficients, f, x, y, z);
  }
  /// The coefficients of the cell (x, y, z) of this grid into c (coefficient_count values).
  TAPEFLOW_HOST_DEVICE void own_coefficients(std::int64_t x, std::int64_t y, std::int64_t z, T* c) const noexcept
  {
    for (int f = 0; f < coefficient_count; ++f) { c[f] = coefficient_at(f, x, y, z); }
  }
  /// Storage for `n` values that may be none.
  template <int N>
  using values = T[N > 0 ? N : 1];

  /// out = S's step at the cell (x, y, z) of this grid from u at its forward taps, applying step `step`.
  TAPEFLOW_HOST_DEVICE void forward_cell(T const* u, T* out, std::size_t step, std::int64_t x, std::int64_t y,
                                         std::int64_t z) const
  {
    if constexpr (takes_site_v<S>) {
      values<coefficient_count> c;
      own_coefficients(x, y, z, c);
      stencil.forward(u, out, site_of(step, x, y, z, c));
    } else {
      static_cast<void>(step);
      static_cast<void>(x);
      static_cast<void>(y);
      static_cast<void>(z);
      stencil.forward(u, out);
    }
  }
  /// S's observe() of the values `u` (one per field) of u_step at the cell (x, y, z) of this grid.
  TAPEFLOW_HOST_DEVICE void observe_cell(T const* u, std::size_t step, std::int64_t x, std::int64_t y, std::int64_t z) const
  {
    if constexpr (observes_v<S>) {
      values<coefficient_count> c;
      own_coefficients(x, y, z, c);
      stencil.observe(u, site_of(step, x, y, z, c));
    }
  }
  /// Whether local cell (x, y, z) of box `b` is a cell of tile `t` inside the grid: one a tile
  /// owns, whose results it writes.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool owns(box const& t, box const& b, int x, int y, int z) const noexcept
  {
    std::int64_t const gx = b.x0 + x;
    std::int64_t const gy = b.y0 + y;
    std::int64_t const gz = b.z0 + z;
    return gx >= t.x0 && gy >= t.y0 && gz >= t.z0 && gx < t.x0 + t.ex && gy < t.y0 + t.ey && gz < t.z0 + t.ez &&
           inside(gx, gy, gz);
  }

  /// The tile whose first cell is tile number `index` of the grid's tiles (x fastest).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE box tile_box(std::size_t index) const noexcept
  {
    std::size_t const tx = (g.nx + tile.x - 1) / tile.x;
    std::size_t const ty = (g.ny + tile.y - 1) / tile.y;
    box b;
    b.x0 = static_cast<std::int64_t>(index % tx) * tile.x;
    b.y0 = static_cast<std::int64_t>((index / tx) % ty) * tile.y;
    b.z0 = static_cast<std::int64_t>(index / (tx * ty)) * tile.z;
    b.ex = tile.x;
    b.ey = dims >= 2 ? tile.y : 1;
    b.ez = dims >= 3 ? tile.z : 1;
    return b;
  }
  /// Tiles covering the grid.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t tiles() const noexcept { return tiles_covering(g.nx, g.ny, g.nz, tile); }
  /// Every tile.
  [[nodiscard]] tile_range all_tiles() const noexcept { return {0, tiles(), 0, 0}; }
  /// The tiles whose boxes, `halo` cells wider than the tile, lie within the slab along its cut
  /// axis: they read no ghost plane, so they can run while the ghost planes travel. Tiles are
  /// numbered with the cut axis outermost, so these are one run of them. Every tile of a grid that
  /// is not cut.
  [[nodiscard]] tile_range interior_tiles(int halo) const noexcept
  {
    if (!split()) { return all_tiles(); }
    std::size_t const along = g.extent(dims - 1);
    auto const width = static_cast<std::size_t>(dims == 1 ? tile.x : dims == 2 ? tile.y : tile.z);
    std::size_t const rows = (along + width - 1) / width;  // tile positions along the cut axis
    std::size_t const per_row = tiles() / rows;
    auto const h = static_cast<std::size_t>(halo);
    std::size_t const first_row = (h + width - 1) / width;       // its box starts at or past plane 0
    std::size_t const last_row = along >= h ? (along - h) / width : 0;  // and ends at or before `along`
    if (first_row >= last_row) { return {}; }
    return {first_row * per_row, last_row * per_row, 0, 0};
  }
  /// The tiles interior_tiles(halo) leaves out: those that read ghost planes.
  [[nodiscard]] tile_range boundary_tiles(int halo) const noexcept
  {
    tile_range const inner = interior_tiles(halo);
    return {0, tiles(), inner.first, inner.last};
  }

  // ---- one level from the one before ---------------------------------------------------------------

  /// Local coordinates of a level's cell, shifted by `s` along the active axes (the level below
  /// is s cells wider on each side).
  struct shift {
    int x, y, z;
  };
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr shift by(int s) noexcept
  {
    return {s, dims >= 2 ? s : 0, dims >= 3 ? s : 0};
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

  /// u_{i+1} on `next` from u_i on `prev` (rf cells wider), applying step `step`: cells outside a
  /// fixed grid hold the ghost. With `observed`, the cells of that tile are observed (observe_cell;
  /// nothing is checked for a stencil without observe()).
  template <class Team>
  TAPEFLOW_HOST_DEVICE void step_level(Team const& team, T const* prev, box const& pb, T* next, box const& nb,
                                       std::size_t step, box const* observed = nullptr) const
  {
    shift const sh = by(r.forward);
    std::size_t const plane = nb.cells();
    team.for_each(nb, [&](int x, int y, int z) {
      std::size_t const c = nb.at(x, y, z);
      if (g.edge == boundary::fixed && !in_domain(nb.x0 + x, nb.y0 + y, nb.z0 + z)) {
        for (int f = 0; f < fields; ++f) { next[f * plane + c] = g.ghost; }
        return;
      }
      T u[forward_taps::size];
      T out[fields];
      gather_taps(prev, pb, x, y, z, sh, u);
      forward_cell(u, out, step, nb.x0 + x, nb.y0 + y, nb.z0 + z);
      for (int f = 0; f < fields; ++f) { next[f * plane + c] = out[f]; }
      if constexpr (observes_v<S>) {
        if (observed != nullptr && owns(*observed, nb, x, y, z)) {
          observe_cell(out, step + 1, nb.x0 + x, nb.y0 + y, nb.z0 + z);
        }
      }
    });
  }

  /// Loads a state (`adjoint`: an adjoint, which is 0 outside a fixed grid) onto box `b`.
  template <class Team>
  TAPEFLOW_HOST_DEVICE void load(Team const& team, T const* state, box const& b, T* level, bool adjoint) const
  {
    std::size_t const plane = b.cells();
    std::size_t const cells = g.cells();
    team.for_each(b, [&](int x, int y, int z) {
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

  /// Scratch values advance() needs for segments of up to `k` steps.
  [[nodiscard]] std::size_t advance_scratch(int k) const noexcept
  {
    return forward_scratch_values(segment_shape{k, r}, tile, dims, fields);
  }

  /// Advances tile `t` by `k` steps, the first of them step `first`: `out` on the tile is `in`
  /// after k steps. S observes (observe()) the tile's cells of each state but the last.
  template <class Team>
  TAPEFLOW_HOST_DEVICE void advance(Team const& team, box const& t, std::size_t first, int k, T const* in, T* out,
                                    T* scratch) const
  {
    segment_shape const s{k, r};
    box b = grown(t, dims, s.forward_halo(0));
    T* level[2] = {scratch, scratch + b.cells() * fields};
    load(team, in, b, level[0], false);
    team.sync();
    if constexpr (observes_v<S>) {
      std::size_t const plane = b.cells();
      shift const sh = by(s.forward_halo(0));
      team.for_each(t, [&](int x, int y, int z) {
        if (!inside(t.x0 + x, t.y0 + y, t.z0 + z)) { return; }
        T u[fields];
        for (int f = 0; f < fields; ++f) { u[f] = level[0][f * plane + b.at(x + sh.x, y + sh.y, z + sh.z)]; }
        observe_cell(u, first, t.x0 + x, t.y0 + y, t.z0 + z);
      });
    }
    for (int i = 1; i < k; ++i) {
      box const nb = grown(t, dims, s.forward_halo(i));
      step_level(team, level[(i - 1) % 2], b, level[i % 2], nb, first + static_cast<std::size_t>(i - 1), &t);
      team.sync();
      b = nb;
    }
    // The last step straight to the state, for the tile's cells inside the grid.
    shift const sh = by(r.forward);
    std::size_t const cells = g.cells();
    T const* const prev = level[(k - 1) % 2];
    team.for_each(t, [&](int x, int y, int z) {
      std::int64_t const gx = t.x0 + x;
      std::int64_t const gy = t.y0 + y;
      std::int64_t const gz = t.z0 + z;
      if (!inside(gx, gy, gz)) { return; }
      T u[forward_taps::size];
      T o[fields];
      gather_taps(prev, b, x, y, z, sh, u);
      forward_cell(u, o, first + static_cast<std::size_t>(k - 1), gx, gy, gz);
      std::size_t const at = cell_of(gx, gy, gz);
      for (int f = 0; f < fields; ++f) { out[f * cells + at] = o[f]; }
    });
  }

  // ---- the reverse of a segment --------------------------------------------------------------------

  /// Scratch values reverse() needs for segments of up to `k` steps.
  [[nodiscard]] std::size_t reverse_scratch(int k) const noexcept
  {
    return reverse_scratch_values(segment_shape{k, r}, tile, dims, fields);
  }

  /// λ_i of the cell at (x, y, z) of box `b`, from u_i stored on box `ub` and λ_{i+1} on box `lb`
  /// (both centred on `b`, wider by what the adjoint reaches), step `step` being u_i -> u_{i+1}.
  TAPEFLOW_HOST_DEVICE void adjoint_cell(T const* u_level, box const& ub, T const* next, box const& lb, box const& b,
                                         int x, int y, int z, std::size_t step, T* lambda) const
  {
    shift const su = by(static_cast<int>(b.x0 - ub.x0));  // u_i's box is this much wider
    shift const sl = by(static_cast<int>(b.x0 - lb.x0));  // and λ_{i+1}'s this much
    if constexpr (is_gather_v<S>) {
      using adjoint_taps = typename S::adjoint_taps;
      T u[forward_taps::size];
      T gv[adjoint_taps::size];
      gather_taps(u_level, ub, x, y, z, su, u);
      gather<adjoint_taps>(next, lb, lb.at(x + sl.x, y + sl.y, z + sl.z), gv);
      if constexpr (takes_site_v<S>) {
        std::int64_t const gx = b.x0 + x;
        std::int64_t const gy = b.y0 + y;
        std::int64_t const gz = b.z0 + z;
        values<adjoint_taps::size * coefficient_count> c;  // each adjoint tap's cell's coefficients
        for_each_tap<adjoint_taps>([&](auto t, auto i) {
          using tp = decltype(t);
          for (int f = 0; f < coefficient_count; ++f) {
            c[decltype(i)::value * coefficient_count + f] = coefficient_at(f, gx + tp::dx, gy + tp::dy, gz + tp::dz);
          }
        });
        stencil.adjoint(u, gv, lambda, site_of(step, gx, gy, gz, c));
      } else {
        static_cast<void>(step);
        stencil.adjoint(u, gv, lambda);
      }
    } else {
      // λ(x) gathers, tap by tap in order, what reverse() at the cell x - offset gives that tap.
      for (int f = 0; f < fields; ++f) { lambda[f] = T(0); }
      std::size_t const plane = lb.cells();
      for_each_tap<forward_taps>([&](auto t, auto i) {
        using tp = decltype(t);
        int const yx = x - tp::dx;
        int const yy = y - tp::dy;
        int const yz = z - tp::dz;
        if (g.edge == boundary::fixed && !in_domain(b.x0 + yx, b.y0 + yy, b.z0 + yz)) { return; }
        T u[forward_taps::size];
        T gv[fields];
        T contributions[forward_taps::size];
        gather_taps(u_level, ub, yx, yy, yz, su, u);
        for (int f = 0; f < fields; ++f) { gv[f] = next[f * plane + lb.at(yx + sl.x, yy + sl.y, yz + sl.z)]; }
        if constexpr (takes_site_v<S>) {
          values<coefficient_count> c;
          own_coefficients(b.x0 + yx, b.y0 + yy, b.z0 + yz, c);
          stencil.reverse(u, gv, contributions, site_of(step, b.x0 + yx, b.y0 + yy, b.z0 + yz, c));
        } else {
          stencil.reverse(u, gv, contributions);
        }
        lambda[tp::field] += contributions[decltype(i)::value];
      });
    }
  }

  /// Adds step `step`'s dL/dc of the coefficients of the cell at (x, y, z) of box `b` to `dc`
  /// (laid out as the coefficients), from u_i on `ub` and λ_{i+1} on `lb` as adjoint_cell reads them.
  TAPEFLOW_HOST_DEVICE void add_parameter_adjoint(T const* u_level, box const& ub, T const* next, box const& lb,
                                                  box const& b, int x, int y, int z, std::size_t step, T* dc) const
  {
    if constexpr (coefficient_count > 0) {
      shift const su = by(static_cast<int>(b.x0 - ub.x0));
      shift const sl = by(static_cast<int>(b.x0 - lb.x0));
      std::int64_t const gx = b.x0 + x;
      std::int64_t const gy = b.y0 + y;
      std::int64_t const gz = b.z0 + z;
      T u[forward_taps::size];
      T gv[fields];
      T c[coefficient_count];
      T d[coefficient_count];
      gather_taps(u_level, ub, x, y, z, su, u);
      std::size_t const plane = lb.cells();
      for (int f = 0; f < fields; ++f) { gv[f] = next[f * plane + lb.at(x + sl.x, y + sl.y, z + sl.z)]; }
      own_coefficients(gx, gy, gz, c);
      stencil.parameter_adjoint(u, gv, d, site_of(step, gx, gy, gz, c));
      std::size_t const at = cell_of(gx, gy, gz);
      for (int f = 0; f < coefficient_count; ++f) { dc[static_cast<std::size_t>(f) * g.cells() + at] += d[f]; }
    } else {
      static_cast<void>(u_level);
      static_cast<void>(ub);
      static_cast<void>(next);
      static_cast<void>(lb);
      static_cast<void>(b);
      static_cast<void>(x);
      static_cast<void>(y);
      static_cast<void>(z);
      static_cast<void>(step);
      static_cast<void>(dc);
    }
  }

  /// The reverse of the `k`-step segment that starts at `checkpoint` (u_0, the whole state), on
  /// tile `t`, its first step `first`: `lambda_in` on the tile is dL/du_0 given `lambda_out` =
  /// dL/du_k (the whole adjoint). With coefficients, each step's dL/dc of the tile's cells is added
  /// to `dc`, last step first. Scratch holds u_0 .. u_{k-1}, each on its box, then two levels of λ
  /// on the widest λ box.
  template <class Team>
  TAPEFLOW_HOST_DEVICE void reverse(Team const& team, box const& t, std::size_t first, int k, T const* checkpoint,
                                    T const* lambda_out, T* lambda_in, T* dc, T* scratch) const
  {
    segment_shape const s{k, r};
    auto u_box = [&](int i) { return grown(t, dims, s.state_halo(i)); };
    auto u_level = [&](int i) {
      T* at = scratch;
      for (int j = 0; j < i; ++j) { at += u_box(j).cells() * fields; }
      return at;
    };
    T* const lambda_level[2] = {u_level(k), u_level(k) + box_cells(tile, dims, s.lambda_halo(k)) * fields};

    box lb = grown(t, dims, s.lambda_halo(k));
    load(team, checkpoint, u_box(0), u_level(0), false);
    load(team, lambda_out, lb, lambda_level[k % 2], true);
    team.sync();
    for (int i = 1; i < k; ++i) {
      step_level(team, u_level(i - 1), u_box(i - 1), u_level(i), u_box(i), first + static_cast<std::size_t>(i - 1));
      team.sync();
    }
    for (int i = k - 1; i >= 1; --i) {
      box const b = grown(t, dims, s.lambda_halo(i));
      box const ub = u_box(i);
      T const* const u = u_level(i);
      T* const out = lambda_level[i % 2];
      T const* const next = lambda_level[(i + 1) % 2];
      std::size_t const plane = b.cells();
      std::size_t const step = first + static_cast<std::size_t>(i);
      team.for_each(b, [&](int x, int y, int z) {
        std::size_t const c = b.at(x, y, z);
        T lambda[fields];
        if (g.edge == boundary::fixed && !in_domain(b.x0 + x, b.y0 + y, b.z0 + z)) {
          for (int f = 0; f < fields; ++f) { out[f * plane + c] = T(0); }
          return;
        }
        adjoint_cell(u, ub, next, lb, b, x, y, z, step, lambda);
        for (int f = 0; f < fields; ++f) { out[f * plane + c] = lambda[f]; }
        if (coefficient_count > 0 && owns(t, b, x, y, z)) { add_parameter_adjoint(u, ub, next, lb, b, x, y, z, step, dc); }
      });
      team.sync();
      lb = b;
    }
    // λ_0 straight to the adjoint, for the tile's cells inside the grid.
    std::size_t const cells = g.cells();
    box const ub = u_box(0);
    T const* const u = u_level(0);
    T const* const next = lambda_level[1];
    team.for_each(t, [&](int x, int y, int z) {
      std::int64_t const gx = t.x0 + x;
      std::int64_t const gy = t.y0 + y;
      std::int64_t const gz = t.z0 + z;
      if (!inside(gx, gy, gz)) { return; }
      T lambda[fields];
      adjoint_cell(u, ub, next, lb, t, x, y, z, first, lambda);
      std::size_t const c = cell_of(gx, gy, gz);
      for (int f = 0; f < fields; ++f) { lambda_in[f * cells + c] = lambda[f]; }
      if constexpr (coefficient_count > 0) { add_parameter_adjoint(u, ub, next, lb, t, x, y, z, first, dc); }
    });
  }
};

}  // namespace tapeflow::stencil
