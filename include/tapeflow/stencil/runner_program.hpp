// SPDX-License-Identifier: Apache-2.0
// What a segment runner (cpu.hpp, device.cuh) hands its tiles at each call: the tile program on the
// whole grid or, over ranks, on this rank's slab (slab.hpp), and the call split around its ghost
// exchange so that the tiles that read no ghost plane run while the planes travel
// (docs/distributed.md, "Overlap").
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/stencil.hpp>
#include <tapeflow/stencil/tile_program.hpp>
#include <tapeflow/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

namespace tapeflow::stencil {

/// One call of a segment runner (an advance or a reverse), split around its ghost exchange so that
/// the exchange overlaps work: run() hands the interior tiles, which read no ghost plane, to the
/// runner while the planes travel, waits for them, then hands it the boundary tiles with the
/// program that reads them. On a grid that is not cut every tile is interior and nothing is
/// waited for. A call refers to its runner's exchanges: run it before the runner's next call.
template <class S, class Ghosts>
class slab_call {
 public:
  using T = typename S::value_type;

  /// A call of `program` (without the call's ghost planes yet) whose boxes reach `halo` cells
  /// past a tile.
  slab_call(tile_program<S> program, int halo)
    : program_(std::move(program)), interior_(program_.interior_tiles(halo)), boundary_(program_.boundary_tiles(halo))
  {
  }

  /// Collective: starts exchanging `depth` ghost planes of the state `from` through `ghosts`.
  void start_state(Ghosts& ghosts, T const* from, int depth, stream_view s)
  {
    ghosts.start(from, depth, s);
    state_ = &ghosts;
  }
  /// Collective: the same for the adjoint.
  void start_adjoint(Ghosts& ghosts, T const* from, int depth, stream_view s)
  {
    ghosts.start(from, depth, s);
    adjoint_ = &ghosts;
  }

  /// Collective: the whole call, in the order that overlaps the exchange: run_tiles(program,
  /// tiles) for the interior tiles (the program without the call's ghost planes), then, once the
  /// planes are here, for the boundary tiles (the program with them).
  template <class Run>
  void run(Run&& run_tiles, stream_view s)
  {
    run_tiles(program_, interior_);
    run_tiles(finish(s), boundary_);
  }

 private:
  /// Waits for the ghost planes; the program of the boundary tiles, which reads them.
  [[nodiscard]] tile_program<S> finish(stream_view s)
  {
    tile_program<S> p = program_;
    if (state_) { p.slab.state = std::exchange(state_, nullptr)->finish(s); }
    if (adjoint_) { p.slab.adjoint = std::exchange(adjoint_, nullptr)->finish(s); }
    return p;
  }

  tile_program<S> program_;
  tile_range interior_;
  tile_range boundary_;
  Ghosts* state_{nullptr};
  Ghosts* adjoint_{nullptr};
};

/// The tile program a segment runner hands its tiles at each call, on the whole grid or, over
/// ranks, on this rank's part with the call's ghost cells filled. `Ghosts` fills them from a state
/// in the runner's memory: ghost_exchange (host memory) or device_ghosts (device.cuh).
template <class S, class Ghosts>
class runner_program {
 public:
  using T = typename S::value_type;

  /// The program over `g`; with `comm`, over this rank's part of `g` (the whole grid) cut over the
  /// ranks of `comm` (the plan is the part's: plan_slab_segments), reading the coefficients `c`
  /// where S has them: the whole grid's, or over ranks the part's cells of them (laid out as its
  /// state, without the padding). Throws logic_error for a stencil with coefficients without them,
  /// and what Ghosts throws.
  runner_program(S stencil, grid<T> const& g, segment_plan const& plan,
                 std::shared_ptr<distributed::communicator> comm = nullptr, coefficient_view<T> c = {})
    : program_{stencil, g, reach::of<S>(), plan.tile}, forward_tile_(plan.forward_tile)
  {
    TAPEFLOW_EXPECTS(forward_tile_.x > 0 && forward_tile_.y > 0 && forward_tile_.z > 0,
                     "a segment plan names the forward's tile (plan_segments fills it)");
    TAPEFLOW_EXPECTS(coefficients_v<S> == 0 || c.values != nullptr,
                     "a stencil with coefficients needs them: pass their values (coefficient_view) to its segments");
    program_.coefficient_values = c.values;
    if (!comm) { return; }
    slab_cut<T> const cut = cut_for<S>(g, plan, *comm);
    program_.g = cut.local;
    padded_ = cut.padded;
    if constexpr (coefficients_v<S> > 0) {
      coefficients_ = std::make_shared<constant_ghosts>(
        constant_ghosts{Ghosts(comm, cut.where, g, S::dims, coefficients_v<S>, cut.depth), c.values, cut.depth, {}});
    }
    state_ghosts_ = std::make_shared<Ghosts>(comm, cut.where, g, S::dims, S::fields, cut.depth);
    adjoint_ghosts_ = std::make_shared<Ghosts>(std::move(comm), cut.where, g, S::dims, S::fields, cut.depth);
    program_.slab = state_ghosts_->view();
  }

  /// The program without ghost planes (the reverse's tiling, its grid).
  [[nodiscard]] tile_program<S> const& base() const noexcept { return program_; }
  /// Values of the runner's state: the grid's fields, one after the other; over ranks, the part's
  /// (used_values()), then zeros up to the widest part's size.
  [[nodiscard]] std::size_t state_size() const noexcept { return padded_ != 0 ? padded_ : used_values(); }
  [[nodiscard]] std::size_t used_values() const noexcept { return program_.g.cells() * S::fields; }
  /// Values of the coefficients (and of their adjoint).
  [[nodiscard]] std::size_t parameter_size() const noexcept
  {
    return program_.g.cells() * static_cast<std::size_t>(coefficients_v<S>);
  }

  /// Collective over ranks: the call of a forward of `k` steps from `in` on the forward's tiles,
  /// its ghost planes on the way (`in` must not change until the call has finished).
  [[nodiscard]] slab_call<S, Ghosts> advancing(int k, T const* in, stream_view s) const
  {
    int const halo = segment_shape{k, program_.r}.forward_halo(0);
    tile_program<S> forward = with_coefficients(s);
    forward.tile = forward_tile_;
    slab_call<S, Ghosts> call{std::move(forward), halo};
    if (state_ghosts_) { call.start_state(*state_ghosts_, in, halo, s); }
    return call;
  }
  /// Collective over ranks: the call of the reverse of `k` steps from `checkpoint` and
  /// `lambda_out`, their ghost planes on the way (neither may change until the call has finished).
  [[nodiscard]] slab_call<S, Ghosts> reversing(int k, T const* checkpoint, T const* lambda_out, stream_view s) const
  {
    segment_shape const shape{k, program_.r};
    slab_call<S, Ghosts> call{with_coefficients(s), std::max(shape.state_halo(0), shape.lambda_halo(k))};
    if (state_ghosts_) {
      call.start_state(*state_ghosts_, checkpoint, shape.state_halo(0), s);
      call.start_adjoint(*adjoint_ghosts_, lambda_out, shape.lambda_halo(k), s);
    }
    return call;
  }

 private:
  /// Over ranks, the coefficients' ghost planes, as deep as any call reads: exchanged at the first
  /// call (the ranks make it together; a constructor is not collective) and kept, since the
  /// coefficients never change.
  struct constant_ghosts {
    Ghosts exchange;
    T const* values;
    int depth;
    std::optional<ghost_planes<T>> filled;
  };
  /// The program with the coefficients' ghost planes (collective at the first call over ranks).
  [[nodiscard]] tile_program<S> with_coefficients(stream_view s) const
  {
    tile_program<S> p = program_;
    if (!coefficients_) { return p; }
    if (!coefficients_->filled) {
      coefficients_->filled = coefficients_->exchange.fill(coefficients_->values, coefficients_->depth, s);
    }
    p.slab.coefficients = *coefficients_->filled;
    return p;
  }

  tile_program<S> program_;
  tile_extent forward_tile_;
  std::size_t padded_{0};  // over ranks: the widest part's values; 0: not cut
  std::shared_ptr<constant_ghosts> coefficients_;  // over ranks, for a stencil with coefficients
  // Over ranks: the ghost planes of the state and of the adjoint (shared by the copies a chain
  // makes of its Step; its calls come one at a time).
  std::shared_ptr<Ghosts> state_ghosts_;
  std::shared_ptr<Ghosts> adjoint_ghosts_;
};

}  // namespace tapeflow::stencil
