// SPDX-License-Identifier: Apache-2.0
// What lies beyond the faces of one rank's part of a grid cut over ranks (docs/distributed.md):
// its place in the whole grid, and the ghost cells its neighbours sent, in one layout that the
// exchange (slab.hpp, device.cuh) writes and the tile program (tile_program.hpp) reads.
//
// A grid is cut along its last axis (the outer cut: y in 2-D, z in 3-D, x in 1-D) and, over a
// 2-D process grid, along the axis before it too (the inner cut: x in 2-D, y in 3-D). A rank's
// part is a slab (outer cut only) or a block (both). Its state holds, field after field, its own
// cells: `outer` planes along the outer axis, `inner` cells along the inner axis, `rest` values
// along the faster uncut axis (x in 3-D; 1 otherwise), in the grid's storage order.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::stencil {

/// The ranks of a run as a process grid: `outer` rows along the grid's outer cut axis times
/// `inner` columns along its inner axis; rank r is row r / inner, column r % inner. 0 x 0: the
/// default (slab.hpp's ranks_grid_for).
struct ranks_grid {
  int outer{0};
  int inner{0};
};

/// The ghost cells a call reads beyond the faces of a rank's part: `depth` cells deep, laid out as
/// ghost_layout says (null with depth 0).
template <class T>
struct ghost_planes {
  int depth{0};
  T const* values{nullptr};
};

/// Where the grid a tile program runs on is one rank's part of a larger grid: its place along each
/// cut axis, and the ghost cells of the state, of the adjoint and of the coefficients the call
/// reads (set for each call). A slab is the part of a grid cut along its outer axis only.
template <class T>
struct slab_view {
  std::int64_t offset{0};        ///< the whole grid's index of the part's first plane along the outer cut (0 where not cut)
  std::int64_t global{0};        ///< planes of the whole grid along the outer cut; 0: the grid is not cut
  std::int64_t inner_offset{0};  ///< the same along the inner cut (0 where not cut)
  std::int64_t inner_global{0};  ///< cells of the whole grid along the inner cut; 0: not cut there
  ghost_planes<T> state{};         ///< beyond the faces of the state (or checkpoint) the call reads
  ghost_planes<T> adjoint{};       ///< beyond the faces of the adjoint the call reads
  ghost_planes<T> coefficients{};  ///< beyond the faces of the coefficients (they never change)
};

/// The layout of a part's ghost cells `depth` deep, and of the faces it sends (the same shapes):
/// per field, its pieces one after the other, each stored outer, inner, rest (rest fastest):
///   0 below, 1 above        depth x inner x rest   (beyond the outer faces)
///   2 left, 3 right         outer x depth x rest   (beyond the inner faces; a block only)
///   4 below-left, 5 below-right, 6 above-left, 7 above-right
///                           depth x depth x rest   (the corners; a block only)
/// A slab's ghost cells are then whole planes, below then above, field by field.
struct ghost_layout {
  int depth{0};
  std::size_t outer{1};  ///< the part's planes along the outer cut
  std::size_t inner{1};  ///< its cells along the inner axis (cut or not; 1 in 1-D)
  std::size_t rest{1};   ///< its cells along the faster uncut axis (x in 3-D; 1 otherwise)
  bool block{false};     ///< cut along the inner axis too: 8 pieces, else 2

  /// The layout `depth` deep around `part`, a rank's part of a `dims`-D grid (a block if `block`).
  template <class T>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr ghost_layout of(grid<T> const& part, int dims, int depth,
                                                                      bool block) noexcept
  {
    return {depth, part.extent(dims - 1), dims == 1 ? 1 : part.extent(dims - 2), dims == 3 ? part.nx : 1, block};
  }

  /// The piece beyond the side (so, si): -1 below / left, +1 above / right, 0 along (not both 0;
  /// si is 0 for a slab).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr int piece_of(int so, int si) noexcept
  {
    return si == 0 ? (so < 0 ? 0 : 1) : so == 0 ? (si < 0 ? 2 : 3) : 4 + (so < 0 ? 0 : 2) + (si < 0 ? 0 : 1);
  }
  /// The sides of piece `p`: along the outer cut, and along the inner.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr int outer_side(int p) noexcept
  {
    return p < 2 ? (p == 0 ? -1 : 1) : p < 4 ? 0 : (p < 6 ? -1 : 1);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static constexpr int inner_side(int p) noexcept
  {
    return p < 2 ? 0 : p < 4 ? (p == 2 ? -1 : 1) : ((p % 2 == 0) ? -1 : 1);
  }

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int pieces() const noexcept { return block ? 8 : 2; }
  /// Extents of piece `p` along the outer and the inner axis.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t outer_extent(int p) const noexcept
  {
    return outer_side(p) != 0 ? static_cast<std::size_t>(depth) : outer;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t inner_extent(int p) const noexcept
  {
    return inner_side(p) != 0 ? static_cast<std::size_t>(depth) : inner;
  }
  /// Values of piece `p` of one field.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t size(int p) const noexcept
  {
    return outer_extent(p) * inner_extent(p) * rest;
  }
  /// Values of one field's pieces, and of `fields` fields'.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t per_field() const noexcept
  {
    auto const d = static_cast<std::size_t>(depth);
    std::size_t const faces = 2 * d * inner * rest;
    return block ? faces + 2 * outer * d * rest + 4 * d * d * rest : faces;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t values(int fields) const noexcept
  {
    return static_cast<std::size_t>(fields) * per_field();
  }
  /// Where field `f`'s piece `p` starts.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t offset(int f, int p) const noexcept
  {
    std::size_t at = static_cast<std::size_t>(f) * per_field();
    for (int q = 0; q < p; ++q) { at += size(q); }
    return at;
  }
  /// Index, within piece `p`, of its cell (o, i, r).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t at(int p, std::size_t o, std::size_t i,
                                                              std::size_t r) const noexcept
  {
    return (o * inner_extent(p) + i) * rest + r;
  }
  /// The index, in one field of the part's state, of value `v` of its face piece `p`: the `depth`
  /// cells next to side p that the neighbour across it receives as its ghost cells.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t face_cell(int p, std::size_t v) const noexcept
  {
    auto const d = static_cast<std::size_t>(depth);
    std::size_t const r = v % rest;
    std::size_t const t = v / rest;
    std::size_t const i = t % inner_extent(p);
    std::size_t const o = t / inner_extent(p);
    std::size_t const so = outer_side(p) > 0 ? outer - d + o : o;
    std::size_t const si = inner_side(p) > 0 ? inner - d + i : i;
    return (so * inner + si) * rest + r;
  }
};

/// Value `index` (below layout.values(fields)) of the faces of a part's `state`, whose fields hold
/// `field_cells` values each: what the faces sent to the neighbours hold there, in the layout of
/// their ghost cells. The one mapping of the host's and the device's packing.
template <class T>
[[nodiscard]] TAPEFLOW_HOST_DEVICE T face_value(ghost_layout const& layout, T const* state, std::size_t field_cells,
                                                std::size_t index) noexcept
{
  std::size_t const per_field = layout.per_field();
  std::size_t const f = index / per_field;
  std::size_t v = index % per_field;
  int p = 0;
  while (v >= layout.size(p)) {
    v -= layout.size(p);
    ++p;
  }
  return state[f * field_cells + layout.face_cell(p, v)];
}

}  // namespace tapeflow::stencil
