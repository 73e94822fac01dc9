// SPDX-License-Identifier: Apache-2.0
// A stencil grid cut over the ranks of a distributed run (docs/distributed.md): into slabs along its
// last axis, or, over a 2-D process grid, into blocks along its last two axes. Before a segment of
// k steps each rank receives from its neighbours the cells its tiles will read beyond its faces
// (the ghost cells; ghosts.hpp): k·r of the state for the forward, the reverse's halos of the
// checkpoint and of λ for the reverse (and, once, those of a stencil's coefficients, which never
// change). A block's neighbours are 8: 4 across its faces and 4 across its corners, all in one
// phase. One exchange per segment, not per step; no adjoint is ever sent back and added, because
// the tile program recomputes λ on its halo (even for a scatter-form adjoint), so a rank's
// gradient is the same bits as one rank's.
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/ghosts.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/tile_program.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::stencil {

/// One rank's share of a grid cut along its last axis: the first `global % ranks` ranks own one
/// plane more than the rest.
struct slab {
  int rank{0};
  int ranks{1};
  std::size_t global{0};  ///< planes of the whole grid along the cut axis
  std::size_t offset{0};  ///< the first plane this rank owns
  std::size_t extent{0};  ///< planes this rank owns

  /// Rank `rank`'s slab of `global` planes over `ranks` ranks. Throws logic_error unless
  /// 0 <= rank < ranks and every rank owns at least one plane.
  [[nodiscard]] static slab of(std::size_t global, int ranks, int rank)
  {
    TAPEFLOW_EXPECTS(ranks >= 1 && rank >= 0 && rank < ranks,
                     "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " does not exist");
    TAPEFLOW_EXPECTS(global >= static_cast<std::size_t>(ranks),
                     "a grid of " + std::to_string(global) + " planes along its last axis cannot be cut over " +
                       std::to_string(ranks) + " ranks");
    auto const p = static_cast<std::size_t>(ranks);
    auto const r = static_cast<std::size_t>(rank);
    std::size_t const base = global / p;
    std::size_t const more = global % p;
    return {rank, ranks, global, r * base + (r < more ? r : more), base + (r < more ? 1 : 0)};
  }
  /// The thinnest slab of the run (a ghost exchange reaches only the next rank: no deeper).
  [[nodiscard]] std::size_t thinnest() const noexcept { return global / static_cast<std::size_t>(ranks); }
  /// The widest slab of the run: every rank's state is padded to its size, so that every rank
  /// plans the same layers (chain_options::collective).
  [[nodiscard]] std::size_t widest() const noexcept
  {
    return (global + static_cast<std::size_t>(ranks) - 1) / static_cast<std::size_t>(ranks);
  }
};

/// The default process grid of `ranks` ranks for a `dims`-D grid: the most square factorisation,
/// its larger factor along the outer cut axis (4 ranks: 2 x 2; 6: 3 x 2; a prime: slabs); a 1-D
/// grid is cut into slabs only.
[[nodiscard]] inline ranks_grid ranks_grid_for(int ranks, int dims) noexcept
{
  int inner = 1;
  if (dims >= 2) {
    for (int f = 1; f * f <= ranks; ++f) {
      if (ranks % f == 0) { inner = f; }
    }
  }
  return {ranks / inner, inner};
}

/// `requested` (0 x 0: ranks_grid_for's) for `ranks` ranks of a `dims`-D grid. Throws logic_error
/// unless it has exactly that many ranks, and no inner columns in 1-D.
[[nodiscard]] inline ranks_grid ranks_grid_of(int ranks, int dims, ranks_grid requested)
{
  if (requested.outer == 0 && requested.inner == 0) { return ranks_grid_for(ranks, dims); }
  TAPEFLOW_EXPECTS(requested.outer >= 1 && requested.inner >= 1 && requested.outer * requested.inner == ranks,
                   "a process grid of " + std::to_string(requested.outer) + " x " + std::to_string(requested.inner) +
                     " is not the run's " + std::to_string(ranks) + " ranks");
  TAPEFLOW_EXPECTS(dims >= 2 || requested.inner == 1, "a 1-D grid is cut along its one axis only: its process grid is " +
                                                        std::to_string(ranks) + " x 1");
  return requested;
}

/// One rank's part of a grid: its slab along the outer cut axis and, over a process grid with more
/// than one column, its share of the inner axis (a block).
struct block {
  slab outer;
  slab inner{};  ///< along the inner axis; one rank (the default): not cut there

  /// Rank `rank`'s block of a grid with `outer_cells` planes along its outer cut axis and
  /// `inner_cells` cells along its inner, over the process grid `grid`. Throws what slab::of throws.
  [[nodiscard]] static block of(std::size_t outer_cells, std::size_t inner_cells, ranks_grid grid, int rank)
  {
    TAPEFLOW_EXPECTS(grid.outer >= 1 && grid.inner >= 1 && rank >= 0 && rank < grid.outer * grid.inner,
                     "rank " + std::to_string(rank) + " of a " + std::to_string(grid.outer) + " x " +
                       std::to_string(grid.inner) + " process grid does not exist");
    if (grid.inner == 1) { return {slab::of(outer_cells, grid.outer, rank), {}}; }
    return {slab::of(outer_cells, grid.outer, rank / grid.inner), slab::of(inner_cells, grid.inner, rank % grid.inner)};
  }
  [[nodiscard]] bool cut_inner() const noexcept { return inner.ranks > 1; }
  [[nodiscard]] int rank() const noexcept { return outer.rank * inner.ranks + inner.rank; }
  [[nodiscard]] int ranks() const noexcept { return outer.ranks * inner.ranks; }
  /// The deepest ghost cells a neighbour can send: the thinnest part along either cut axis.
  [[nodiscard]] std::size_t thinnest() const noexcept
  {
    return cut_inner() ? std::min(outer.thinnest(), inner.thinnest()) : outer.thinnest();
  }
  /// The rank across side (so, si) (-1, 0 or +1 along the outer and the inner cut), wrapping on a
  /// periodic grid; -1 past a fixed grid's edge.
  [[nodiscard]] int neighbour(int so, int si, bool periodic) const noexcept
  {
    int o = outer.rank + so;
    int i = inner.rank + si;
    if (o < 0 || o >= outer.ranks) {
      if (!periodic) { return -1; }
      o = (o + outer.ranks) % outer.ranks;
    }
    if (i < 0 || i >= inner.ranks) {
      if (!periodic) { return -1; }
      i = (i + inner.ranks) % inner.ranks;
    }
    return o * inner.ranks + i;
  }
  /// The part's place in the whole grid, for the tile program (without ghost cells yet).
  template <class T>
  [[nodiscard]] slab_view<T> view() const noexcept
  {
    slab_view<T> v;
    v.offset = static_cast<std::int64_t>(outer.offset);
    v.global = static_cast<std::int64_t>(outer.global);
    if (cut_inner()) {
      v.inner_offset = static_cast<std::int64_t>(inner.offset);
      v.inner_global = static_cast<std::int64_t>(inner.global);
    }
    return v;
  }
};

/// Rank `rank`'s part of `whole`, a `dims`-D grid, over the process grid `ranks`.
template <class T>
[[nodiscard]] block block_of(grid<T> const& whole, int dims, ranks_grid ranks, int rank)
{
  return block::of(whole.extent(dims - 1), dims == 1 ? 1 : whole.extent(dims - 2), ranks, rank);
}

/// The grid of one rank's part: `whole` with its cut axes cut to the part's extents.
template <class T>
[[nodiscard]] grid<T> block_grid(grid<T> whole, int dims, block const& b) noexcept
{
  (dims == 1 ? whole.nx : dims == 2 ? whole.ny : whole.nz) = b.outer.extent;
  if (b.cut_inner()) { (dims == 2 ? whole.nx : whole.ny) = b.inner.extent; }
  return whole;
}

/// What a runner of this rank's part is made of: its place, its grid, the deepest ghost cells a
/// segment of the plan reads, and the values of every rank's state (the widest part's).
template <class T>
struct slab_cut {
  block where;
  grid<T> local;
  int depth{0};
  std::size_t padded{0};
};

/// This rank's cut of `whole` for stencil S's segments of `plan` (its process grid), over the
/// ranks of `comm`. Throws logic_error for a process grid that is not the communicator's ranks.
template <class S>
[[nodiscard]] slab_cut<typename S::value_type> cut_for(grid<typename S::value_type> const& whole,
                                                       segment_plan const& plan, distributed::communicator const& comm)
{
  constexpr int dims = S::dims;
  block const b = block_of(whole, dims, ranks_grid_of(comm.size(), dims, plan.ranks), comm.rank());
  grid<typename S::value_type> const local = block_grid(whole, dims, b);
  std::size_t const widest_inner = b.cut_inner() ? b.inner.widest() : (dims == 1 ? 1 : local.extent(dims - 2));
  std::size_t const rest = dims == 3 ? local.nx : 1;
  return {b, local, deepest_halo(segment_shape{plan.k, reach::of<S>()}),
          b.outer.widest() * widest_inner * rest * static_cast<std::size_t>(S::fields)};
}

/// Collective: the segments of this rank's part of `whole`, cut over the ranks of `comm` by the
/// process grid `request.ranks` (0 x 0: ranks_grid_for's), for `steps` time steps (plan_segments
/// on the part, its halos no deeper than the thinnest part along either cut axis). Every rank
/// cuts by the same process grid and plans the same k, both checked (parts of equal size cut by
/// different grids would exchange with the wrong neighbours); a rank that cannot plan makes every
/// rank throw.
template <class S>
[[nodiscard]] segment_plan plan_slab_segments(grid<typename S::value_type> const& whole, std::size_t steps,
                                              device_limits const& limits, segment_request request,
                                              distributed::communicator& comm)
{
  constexpr int dims = S::dims;
  segment_plan const p = distributed::collectively(comm, [&] {
    ranks_grid const ranks = ranks_grid_of(comm.size(), dims, request.ranks);
    block const b = block_of(whole, dims, ranks, comm.rank());
    request.max_halo = static_cast<int>(std::min(b.thinnest(), static_cast<std::size_t>(INT_MAX)));
    segment_plan planned = plan_segments<S>(block_grid(whole, dims, b), steps, limits, request);
    planned.ranks = ranks;
    return planned;
  });
  distributed::require_same(comm,
                            static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.ranks.outer)) << 32 |
                              static_cast<std::uint32_t>(p.ranks.inner),
                            "the process grid (segment_request::ranks, --ranks-grid)");
  distributed::require_same(comm, static_cast<std::uint64_t>(p.k), "the segment length");
  return p;
}

/// Fills ghost cells from the neighbours: host memory on both sides, or device memory where the
/// communicator exchanges it (a device state's runner packs and stages it otherwise). Collective
/// over the ranks of the communicator; messages in a fixed order, one per field and piece.
template <class T>
class ghost_exchange {
 public:
  /// `whole`: the whole grid; `dims`, `fields`: the stencil's; `depth`: the most ghost cells any
  /// call will ask for. Throws logic_error when a neighbour's part is thinner than `depth` (a
  /// shorter segment, or fewer ranks, would do) or the communicator's ranks are not the block's.
  ghost_exchange(std::shared_ptr<distributed::communicator> comm, block b, grid<T> const& whole, int dims, int fields,
                 int depth)
    : comm_(std::move(comm)), block_(b), periodic_(whole.edge == boundary::periodic), fields_(fields), depth_(depth),
      local_(block_grid(whole, dims, b)), dims_(dims)
  {
    TAPEFLOW_EXPECTS(comm_ != nullptr, "a ghost exchange needs a communicator");
    TAPEFLOW_EXPECTS(comm_->size() == b.ranks() && comm_->rank() == b.rank(),
                     "the part is rank " + std::to_string(b.rank()) + " of " + std::to_string(b.ranks()) +
                       "; the communicator's rank is " + std::to_string(comm_->rank()) + " of " +
                       std::to_string(comm_->size()));
    TAPEFLOW_EXPECTS(depth >= 0 && static_cast<std::size_t>(depth) <= b.thinnest(),
                     "a segment reads " + std::to_string(depth) + " cells beyond a rank's faces, but the thinnest of " +
                       std::to_string(b.ranks()) + " ranks' parts holds " + std::to_string(b.thinnest()) +
                       ": ask for shorter segments or fewer ranks");
  }

  [[nodiscard]] block const& where() const noexcept { return block_; }
  [[nodiscard]] distributed::communicator& comm() const noexcept { return *comm_; }

  /// The part's place in the whole grid, without ghost cells yet.
  [[nodiscard]] slab_view<T> view() const noexcept { return block_.template view<T>(); }

  /// The layout of ghost cells (and faces) `depth` deep.
  [[nodiscard]] ghost_layout layout(int depth) const noexcept
  {
    return ghost_layout::of(local_, dims_, depth, block_.cut_inner());
  }
  /// Values of ghost cells (or faces) `depth` deep, every field's.
  [[nodiscard]] std::size_t values(int depth) const noexcept { return layout(depth).values(fields_); }
  /// Values of one field of the part's state.
  [[nodiscard]] std::size_t field_values() const noexcept { return local_.cells(); }
  [[nodiscard]] int fields() const noexcept { return fields_; }

  /// Collective: starts receiving the `depth` ghost cells beyond the faces of `state` (this rank's
  /// fields of its part, host memory) from the neighbours into host memory this exchange owns,
  /// and sending them this rank's faces (packed into host memory it owns); finish() waits for
  /// them. Cells beyond a fixed grid's edge are not sent (the tile program never reads them).
  /// Throws logic_error for a depth past the one it was made for or an exchange already started,
  /// distributed_error as the communicator.
  void start(T const* state, int depth, stream_view = {})
  {
    check_start(depth);
    ghost_layout const l = layout(depth);
    if (faces_.size() < values(depth_)) { faces_.resize(values(depth_)); }
    for (std::size_t i = 0; i < values(depth); ++i) { faces_[i] = face_value(l, state, field_values(), i); }
    start_from_faces(faces_.data(), depth);
  }

  /// The same from faces already packed (face_value's layout; a device state's, on the device or
  /// staged in host memory), which must stay until finish(), receiving `into` (values(depth)
  /// values; null: this exchange's host memory): host memory both, or device memory both where the
  /// communicator exchanges it.
  void start_from_faces(T const* faces, int depth, T* into = nullptr)
  {
    check_start(depth);
    if (into == nullptr) {
      if (owned_.empty()) { owned_.resize(values(depth_)); }
      into = owned_.data();
    }
    started_ = true;
    depth_started_ = depth;
    into_ = into;
    if (depth == 0) { return; }
    ghost_layout const l = layout(depth);
    std::vector<distributed::outgoing> sends;
    std::vector<distributed::incoming> receives;
    for (int f = 0; f < fields_; ++f) {
      for (int p = 0; p < l.pieces(); ++p) {
        int const so = ghost_layout::outer_side(p);
        int const si = ghost_layout::inner_side(p);
        int const peer = block_.neighbour(so, si, periodic_);
        if (peer < 0) { continue; }
        std::size_t const bytes = l.size(p) * sizeof(T);
        // A message's tag names the piece of the receiver's ghost cells it fills: across side p
        // this rank's face p fills the neighbour's piece on the opposite side.
        receives.push_back({peer, tag(f, p), into_ + l.offset(f, p), bytes});
        sends.push_back({peer, tag(f, ghost_layout::piece_of(-so, -si)), faces + l.offset(f, p), bytes});
      }
    }
    ticket_ = comm_->start_exchange(sends, receives);
  }

  /// Throws logic_error unless an exchange `depth` cells deep can start now: no deeper than the
  /// exchange was made for, and none started and not yet finished. What every start checks first.
  void check_start(int depth) const
  {
    TAPEFLOW_EXPECTS(depth >= 0 && depth <= depth_, "asked for " + std::to_string(depth) +
                                                      " ghost cells; the exchange was made for " + std::to_string(depth_));
    TAPEFLOW_EXPECTS(!started_, "a ghost exchange was started twice: finish() the first");
  }

  /// Collective: waits for the started exchange; its ghost cells, where it received them (valid
  /// until the next start). Throws logic_error when none was started, distributed_error as the
  /// communicator.
  [[nodiscard]] ghost_planes<T> finish(stream_view = {})
  {
    TAPEFLOW_EXPECTS(started_, "a ghost exchange finishes only what it started");
    started_ = false;
    if (ticket_) { comm_->finish_exchange(*std::exchange(ticket_, std::nullopt)); }
    return {depth_started_, into_};
  }

  /// start(), then finish(): the ghost cells in host memory this exchange owns.
  [[nodiscard]] ghost_planes<T> fill(T const* state, int depth, stream_view s = {})
  {
    start(state, depth, s);
    return finish(s);
  }

 private:
  [[nodiscard]] static int tag(int f, int piece) noexcept { return 8 * f + piece; }

  std::shared_ptr<distributed::communicator> comm_;
  block block_;
  bool periodic_;
  int fields_;
  int depth_;
  grid<T> local_;
  int dims_;
  std::vector<T> faces_;  // this rank's faces, packed, where start() was given its state
  std::vector<T> owned_;  // ghost cells received in host memory, where no `into` was given
  T* into_{nullptr};      // where the started exchange receives
  bool started_{false};
  int depth_started_{0};
  std::optional<distributed::exchange_ticket> ticket_;  // none for an exchange of no cells
};

}  // namespace tapeflow::stencil
