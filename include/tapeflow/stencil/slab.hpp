// SPDX-License-Identifier: Apache-2.0
// A stencil grid cut into slabs over the ranks of a distributed run (docs/distributed.md): each
// rank owns the planes [offset, offset + extent) along the grid's last axis, and before a segment
// of k steps it receives from its two neighbours the planes its tiles will read beyond its faces
// (the ghost planes): k·r of the state for the forward, the reverse's halos of the checkpoint and
// of λ for the reverse (and, once, the planes of a stencil's coefficients, which never change).
// One exchange per segment, not per step; no adjoint is ever sent back and added, because the tile
// program recomputes λ on its halo (even for a scatter-form adjoint), so a rank's gradient is the
// same bits as one rank's.
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/tile_program.hpp>
#include <tapeflow/stream.hpp>

#include <climits>
#include <cstddef>
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

/// The grid of one rank's slab: `whole` with its last axis cut to the slab's extent.
template <class T>
[[nodiscard]] grid<T> slab_grid(grid<T> whole, int dims, slab const& s) noexcept
{
  (dims == 1 ? whole.nx : dims == 2 ? whole.ny : whole.nz) = s.extent;
  return whole;
}

/// What a runner of this rank's slab is made of: its place, its grid, the deepest ghost planes a
/// segment of the plan reads, and the values of every rank's state (the widest slab's).
template <class T>
struct slab_cut {
  slab where;
  grid<T> local;
  int depth{0};
  std::size_t padded{0};
};

/// This rank's cut of `whole` for stencil S's segments of `plan`, over the ranks of `comm`.
template <class S>
[[nodiscard]] slab_cut<typename S::value_type> cut_for(grid<typename S::value_type> const& whole,
                                                       segment_plan const& plan, distributed::communicator const& comm)
{
  slab const s = slab::of(whole.extent(S::dims - 1), comm.size(), comm.rank());
  grid<typename S::value_type> const local = slab_grid(whole, S::dims, s);
  return {s, local, deepest_halo(segment_shape{plan.k, reach::of<S>()}),
          s.widest() * (local.cells() / s.extent) * static_cast<std::size_t>(S::fields)};
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

/// Fills ghost planes from the neighbours: host memory on both sides, or device memory where the
/// communicator exchanges it (a device state's runner stages it otherwise). Collective over the
/// ranks of the communicator; messages in a fixed order.
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
  }

  [[nodiscard]] slab const& where() const noexcept { return slab_; }
  [[nodiscard]] distributed::communicator& comm() const noexcept { return *comm_; }

  /// The slab's place in the whole grid, without ghost planes yet.
  [[nodiscard]] slab_view<T> view() const noexcept
  {
    return {static_cast<std::int64_t>(slab_.offset), static_cast<std::int64_t>(slab_.global), {}, {}};
  }

  /// Collective: starts receiving the `depth` planes beyond each face of `state` (this rank's
  /// fields x extent planes, host memory) from the neighbours into host memory this exchange owns,
  /// and sending them this rank's faces; finish() waits for them. `state` must not change until
  /// then. Planes beyond a fixed grid's edge are not sent (the tile program never reads them).
  /// Throws logic_error for a depth past the one it was made for or an exchange already started,
  /// distributed_error as the communicator.
  void start(T const* state, int depth, stream_view = {}) { start_into(state, depth, nullptr); }

  /// The same, receiving `into` (values(depth) values; null: this exchange's host memory): host
  /// memory both, or device memory both where the communicator exchanges it.
  void start_into(T const* state, int depth, T* into)
  {
    post(depth, into, [&](int f, int side) {
      T const* const field = state + static_cast<std::size_t>(f) * cells_;
      return side == 0 ? field : field + (slab_.extent - static_cast<std::size_t>(depth)) * plane_;
    });
  }

  /// The same from a state's faces already copied out (a device state's, staged in host memory):
  /// `faces` holds, for each field, its first `depth` planes and then its last, as ghost planes
  /// are laid out, and must stay until finish().
  void start_from_faces(T const* faces, int depth)
  {
    post(depth, nullptr, [&](int f, int side) { return faces + offset(f, side, depth); });
  }

  /// Collective: waits for the started exchange; its ghost planes, where it received them (valid
  /// until the next start). Throws logic_error when none was started, distributed_error as the
  /// communicator.
  [[nodiscard]] ghost_planes<T> finish(stream_view = {})
  {
    TAPEFLOW_EXPECTS(started_, "a ghost exchange finishes only what it started");
    started_ = false;
    if (ticket_) { comm_->finish_exchange(*std::exchange(ticket_, std::nullopt)); }
    return {depth_started_, into_};
  }

  /// start(), then finish(): the ghost planes in host memory this exchange owns.
  [[nodiscard]] ghost_planes<T> fill(T const* state, int depth, stream_view s = {})
  {
    start(state, depth, s);
    return finish(s);
  }

  /// Values of `depth` ghost planes (or faces) of every field on both sides.
  [[nodiscard]] std::size_t values(int depth) const noexcept
  {
    return static_cast<std::size_t>(fields_) * 2 * static_cast<std::size_t>(depth) * plane_;
  }
  /// Where field `f`'s planes on `side` (0: below, 1: above) start in ghost planes of `depth`.
  [[nodiscard]] std::size_t offset(int f, int side, int depth) const noexcept
  {
    return ((static_cast<std::size_t>(f) * 2 + static_cast<std::size_t>(side)) * static_cast<std::size_t>(depth)) *
           plane_;
  }
  /// Values of one plane, and of the slab's planes of one field; fields of the state.
  [[nodiscard]] std::size_t plane() const noexcept { return plane_; }
  [[nodiscard]] int fields() const noexcept { return fields_; }
  [[nodiscard]] std::size_t field_values() const noexcept { return cells_; }

 private:
  /// The rank across the face below (-1) or above (+1), or -1 at a fixed grid's edge.
  [[nodiscard]] int neighbour(int side) const noexcept
  {
    int const r = slab_.rank + side;
    if (r >= 0 && r < slab_.ranks) { return r; }
    return periodic_ ? (r + slab_.ranks) % slab_.ranks : -1;
  }
  /// Starts sending face(f, side) — `depth` planes of field f, its first (side 0) or last (side 1)
  /// — to the neighbour across that face, and receiving the neighbours' into the ghost planes.
  template <class Face>
  void post(int depth, T* into, Face&& face)
  {
    TAPEFLOW_EXPECTS(depth >= 0 && depth <= depth_, "asked for " + std::to_string(depth) +
                                                      " ghost planes; the exchange was made for " + std::to_string(depth_));
    TAPEFLOW_EXPECTS(!started_, "a ghost exchange was started twice: finish() the first");
    if (into == nullptr) {
      if (owned_.empty()) { owned_.resize(values(depth_)); }
      into = owned_.data();
    }
    started_ = true;
    depth_started_ = depth;
    into_ = into;
    if (depth == 0) { return; }
    int const below = neighbour(-1);
    int const above = neighbour(+1);
    std::size_t const bytes = static_cast<std::size_t>(depth) * plane_ * sizeof(T);
    std::vector<distributed::outgoing> sends;
    std::vector<distributed::incoming> receives;
    for (int f = 0; f < fields_; ++f) {
      // Tag 2f: planes that become the receiver's ghosts below its lower face; 2f + 1: above.
      if (below >= 0) {
        receives.push_back({below, 2 * f, into_ + offset(f, 0, depth), bytes});
        sends.push_back({below, 2 * f + 1, face(f, 0), bytes});
      }
      if (above >= 0) {
        receives.push_back({above, 2 * f + 1, into_ + offset(f, 1, depth), bytes});
        sends.push_back({above, 2 * f, face(f, 1), bytes});
      }
    }
    ticket_ = comm_->start_exchange(sends, receives);
  }

  std::shared_ptr<distributed::communicator> comm_;
  slab slab_;
  bool periodic_;
  int fields_;
  int depth_;
  std::size_t plane_;
  std::size_t cells_;
  std::vector<T> owned_;  // ghost planes received in host memory, where start() was given no `into`
  T* into_{nullptr};      // where the started exchange receives
  bool started_{false};
  int depth_started_{0};
  std::optional<distributed::exchange_ticket> ticket_;  // none for an exchange of no planes
};

}  // namespace tapeflow::stencil
