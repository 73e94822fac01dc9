// SPDX-License-Identifier: Apache-2.0
// A stencil grid cut into slabs over the ranks of a distributed run (docs/distributed.md): each
// rank owns the planes [offset, offset + extent) along the grid's last axis, and before a segment
// of k steps it receives from its two neighbours the planes its tiles will read beyond its faces
// (the ghost planes): k·r of the state for the forward, the reverse's halos of the checkpoint and
// of λ for the reverse. One exchange per segment, not per step; no adjoint is ever sent back and
// added, because the tile program recomputes λ on its halo (even for a scatter-form adjoint), so a
// rank's gradient is the same bits as one rank's.
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/tile_program.hpp>

#include <climits>
#include <cstddef>
#include <memory>
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
};

/// The grid of one rank's slab: `whole` with its last axis cut to the slab's extent.
template <class T>
[[nodiscard]] grid<T> slab_grid(grid<T> whole, int dims, slab const& s) noexcept
{
  (dims == 1 ? whole.nx : dims == 2 ? whole.ny : whole.nz) = s.extent;
  return whole;
}

/// Collective: the segments of this rank's slab of `whole`, cut over the ranks of `comm`, for
/// `steps` time steps (plan_segments on the slab, its halos no deeper than the thinnest slab).
/// Every rank plans the same k, checked; a rank that cannot plan makes every rank throw.
template <class S>
[[nodiscard]] segment_plan plan_slab_segments(grid<typename S::value_type> const& whole, std::size_t steps,
                                              device_limits const& limits, segment_request request,
                                              distributed::communicator& comm)
{
  segment_plan const p = distributed::collectively(comm, [&] {
    slab const s = slab::of(whole.extent(S::dims - 1), comm.size(), comm.rank());
    request.max_halo = static_cast<int>(s.thinnest() < static_cast<std::size_t>(INT_MAX) ? s.thinnest() : INT_MAX);
    return plan_segments<S>(slab_grid(whole, S::dims, s), steps, limits, request);
  });
  distributed::require_same(comm, static_cast<std::uint64_t>(p.k), "the segment length");
  return p;
}

/// Fills ghost planes from the neighbours: host memory on both sides (a device state is staged by
/// its runner). Collective over the ranks of the communicator; messages in a fixed order.
template <class T>
class ghost_exchange {
 public:
  /// `whole`: the whole grid; `dims`, `fields`: the stencil's; `depth`: the most ghost planes any
  /// call will ask for. Throws logic_error when a neighbour's slab is thinner than `depth` (a
  /// shorter segment, or fewer ranks, would do) or the communicator's size is not the slab's.
  ghost_exchange(std::shared_ptr<distributed::communicator> comm, slab s, grid<T> const& whole, int dims, int fields,
                 int depth)
    : comm_(std::move(comm)), slab_(s), periodic_(whole.edge == boundary::periodic), fields_(fields), depth_(depth),
      plane_(dims == 1 ? 1 : dims == 2 ? whole.nx : whole.nx * whole.ny),
      cells_(plane_ * s.extent)
  {
    TAPEFLOW_EXPECTS(comm_ != nullptr, "a ghost exchange needs a communicator");
    TAPEFLOW_EXPECTS(comm_->size() == s.ranks && comm_->rank() == s.rank,
                     "the slab is rank " + std::to_string(s.rank) + " of " + std::to_string(s.ranks) +
                       "; the communicator's rank is " + std::to_string(comm_->rank()) + " of " +
                       std::to_string(comm_->size()));
    TAPEFLOW_EXPECTS(depth >= 0 && static_cast<std::size_t>(depth) <= s.thinnest(),
                     "a segment reads " + std::to_string(depth) + " planes beyond a slab's faces, but the thinnest of " +
                       std::to_string(s.ranks) + " slabs holds " + std::to_string(s.thinnest()) +
                       ": ask for shorter segments or fewer ranks");
    planes_.resize(static_cast<std::size_t>(fields) * 2 * static_cast<std::size_t>(depth) * plane_);
  }

  [[nodiscard]] slab const& where() const noexcept { return slab_; }
  [[nodiscard]] distributed::communicator& comm() const noexcept { return *comm_; }

  /// The slab's place in the whole grid, without ghost planes yet.
  [[nodiscard]] slab_view<T> view() const noexcept
  {
    return {static_cast<std::int64_t>(slab_.offset), static_cast<std::int64_t>(slab_.global), {}, {}};
  }

  /// Collective: the `depth` planes beyond each face of `state` (this rank's fields x extent
  /// planes, host memory) from the neighbours, in storage this exchange owns until its next call.
  /// Planes beyond a fixed grid's edge are not sent (the tile program never reads them). Throws
  /// logic_error for a depth past the one it was made for, distributed_error as the communicator.
  [[nodiscard]] ghost_planes<T> fill(T const* state, int depth)
  {
    TAPEFLOW_EXPECTS(depth >= 0 && depth <= depth_, "asked for " + std::to_string(depth) +
                                                      " ghost planes; the exchange was made for " + std::to_string(depth_));
    ghost_planes<T> const filled{depth, planes_.data()};
    if (depth == 0) { return filled; }
    int const below = neighbour(-1);
    int const above = neighbour(+1);
    std::size_t const bytes = static_cast<std::size_t>(depth) * plane_ * sizeof(T);
    std::vector<distributed::outgoing> sends;
    std::vector<distributed::incoming> receives;
    for (int f = 0; f < fields_; ++f) {
      T const* const field = state + static_cast<std::size_t>(f) * cells_;
      // Tag 2f: planes that become the receiver's ghosts below its lower face; 2f + 1: above.
      if (below >= 0) {
        receives.push_back({below, 2 * f, ghosts(f, 0, depth), bytes});
        sends.push_back({below, 2 * f + 1, field, bytes});  // my first planes: above its upper face
      }
      if (above >= 0) {
        receives.push_back({above, 2 * f + 1, ghosts(f, 1, depth), bytes});
        sends.push_back({above, 2 * f, field + (slab_.extent - static_cast<std::size_t>(depth)) * plane_, bytes});
      }
    }
    comm_->exchange(sends, receives);
    return filled;
  }

 private:
  /// The rank across the face below (-1) or above (+1), or -1 at a fixed grid's edge.
  [[nodiscard]] int neighbour(int side) const noexcept
  {
    int const r = slab_.rank + side;
    if (r >= 0 && r < slab_.ranks) { return r; }
    return periodic_ ? (r + slab_.ranks) % slab_.ranks : -1;
  }
  [[nodiscard]] T* ghosts(int f, int side, int depth) noexcept
  {
    return planes_.data() + ((static_cast<std::size_t>(f) * 2 + static_cast<std::size_t>(side)) *
                             static_cast<std::size_t>(depth)) * plane_;
  }

  std::shared_ptr<distributed::communicator> comm_;
  slab slab_;
  bool periodic_;
  int fields_;
  int depth_;
  std::size_t plane_;
  std::size_t cells_;
  std::vector<T> planes_;
};

}  // namespace tapeflow::stencil
