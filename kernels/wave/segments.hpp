// SPDX-License-Identifier: Apache-2.0
// The wave gradient in the stencil library's segments (stencil.hpp, docs/stencils.md): which
// segments a problem runs in, and the session that runs them on any backend. The chain's state is
// (u_{t-1}, u_t), its layer one checkpoint of it per segment, its parameter adjoint dL/dm; the
// misfit is not part of the state but summed from the traces the forward records at the
// receivers, by the backend in the order its one-step chain sums it (host_misfit, cuda.cu's).
// Over MPI ranks (options::ranks) each rank runs its part of the grid (its cells of m, dL/dm and the
// state). The receivers' row lies along x: slabs and 3-D blocks never cut it, so one rank records
// every trace; a 2-D block cuts it, and the ranks gather the traces before the loss. Either way one
// rank sums the misfit of all of them, bit for bit as one process does.
#pragma once

#include "driver.hpp"
#include "stencil.hpp"
#include "wave.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/workloads/common/slab_session.hpp>
#include <tapeflow/workloads/common/state_chain.hpp>
#include <tapeflow/workloads/common/stencil_workload.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace tapeflow::workloads::wave {

/// Calls f(stencil<T, 2>{}) on a 2-D problem (nz = 1), f(stencil<T, 3>{}) on a 3-D one.
template <class T, class F>
decltype(auto) with_stencil(problem const& p, F&& f)
{
  if (p.nz > 1) { return f(stencil<T, 3>{}); }
  return f(stencil<T, 2>{});
}

/// The segments the problem runs in, planned once: in segments of K > 1, or, with --segment auto,
/// when the planner's segments cost less than the one-step chain (segment_plan::beats_one_step);
/// none when the one-step chain runs. Over ranks always (segments of K, 1 included, on each rank's
/// slab; collective). Throws logic_error for a k the device, or the thinnest slab, cannot hold.
template <class T>
[[nodiscard]] std::optional<tapeflow::stencil::segment_plan> segments_of(problem const& p, options const& o)
{
  if (!segmented(o)) { return std::nullopt; }
  tapeflow::stencil::segment_plan const plan = with_stencil<T>(p, [&](auto s) {
    return stencil_segments<decltype(s)>(grid_of<T>(p), p.steps, o);
  });
  if (!o.ranks && o.segment == 0 && !plan.beats_one_step(one_step_states_per_step)) { return std::nullopt; }
  return plan;
}

namespace detail {

/// The misfit of recorded traces against observed ones (both T x receivers, in host memory):
/// 0.5 sum_t sum_r (u_t(x_r) - d_{t,r})^2, step by step and receiver by receiver as the CPU's
/// one-step chain sums it.
template <class T>
struct host_misfit {
  T operator()(T const* traces, T const* d, std::size_t steps, std::size_t receivers, stream_view) const
  {
    T l = T(0);
    for (std::size_t i = 0; i < steps * receivers; ++i) {
      T const residual = traces[i] - d[i];
      l += T(0.5) * residual * residual;
    }
    return l;
  }
};

/// Where a segment session lies: the whole grid, or over ranks this rank's part (a slab, or a
/// block), and which receivers it holds.
template <class T>
struct segment_place {
  held_cells held;
  std::size_t state_values{0};  ///< the chain's state: the part's padded over ranks
  std::size_t first_receiver{0};
  std::size_t receivers{0};     ///< of them along the receivers' row (x), among the held cells

  /// The place of `plan`'s segments of S on the problem, under o.ranks when there are ranks.
  template <class S>
  [[nodiscard]] static segment_place of(problem const& p, options const& o, tapeflow::stencil::segment_plan const& plan)
  {
    if (!o.ranks) { return {held_cells::whole(p.cells()), 2 * p.cells(), 0, p.receivers()}; }
    tapeflow::stencil::slab_cut<T> const cut = tapeflow::stencil::cut_for<S>(grid_of<T>(p), plan, *o.ranks);
    held_cells const held = held_cells::of(grid_of<T>(p), S::dims, cut.where);
    return segment_place{held, cut.padded, 0, 0}.with_receivers(geometry_of<T>(p), S::dims);
  }

  /// The same, its receivers found: the row y = receiver_y (2-D; the outer cut is y, the inner x)
  /// or y = receiver_y, z = receiver_z (3-D; the cuts are z and y, x never).
  [[nodiscard]] segment_place with_receivers(geometry<T> const& g, int dims) const
  {
    segment_place r = *this;
    tapeflow::stencil::block const& b = held.where;
    auto const within = [](tapeflow::stencil::slab const& s, std::size_t at) {
      return at >= s.offset && at < s.offset + s.extent;
    };
    bool const row = dims == 2 ? within(b.outer, g.receiver_y)
                               : within(b.outer, g.receiver_z) && (!b.cut_inner() || within(b.inner, g.receiver_y));
    r.first_receiver = dims == 2 && b.cut_inner() ? b.inner.offset : 0;
    r.receivers = !row ? 0 : dims == 2 && b.cut_inner() ? b.inner.extent : g.receivers();
    return r;
  }
};

/// A wave problem on a backend, in `plan`'s segments of stencil S: the chain's state is (u_{t-1},
/// u_t) of the grid or, over ranks, of this rank's slab. Step is the backend's segment Step
/// (make_cpu_segments, make_device_segments), made by `make(stencil, grid, plan, ranks, m)` once
/// the session's buffers exist; Misfit sums the loss from the traces in the backend's memory
/// (host_misfit's call).
template <class T, class S, class Step, class Misfit>
class segment_session final : public chain_session<T, Step> {
 public:
  template <class Make>
  segment_session(problem const& p, options const& o, tapeflow::stencil::segment_plan const& plan,
                  segment_place<T> const& place, Make&& make, Misfit misfit)
    : chain_session<T, Step>(p, o, place.held, place.state_values), plan_(plan), place_(place),
      misfit_(std::move(misfit)), traces_(o.kind, p.steps * p.receivers() * sizeof(T), o.stream),
      wavelet_(wavelet_of(p, o)),
      step_(make(S{geometry_of<T>(p), this->d_.template data_as<T>(), traces_.template data_as<T>(),
                   wavelet_.template data_as<T>()},
                 grid_of<T>(p), plan, o.ranks, tapeflow::stencil::coefficient_view<T>{this->m_.template data_as<T>()}))
  {
    // A rank records only its own receivers: the rest of its traces are sent, never read, when the
    // ranks gather them; zeros rather than whatever the allocation held.
    traces_.fill(0, o.stream);
  }

  void primal(stream_view s) override { this->run_primal(step_, plan_.segments, s); }

  void forward(stream_view s) override
  {
    this->run_forward(step_, plan_.segments, s);
    this->adjoint_.fill(0, s);  // L does not read u_T: the seed is zero, the misfit enters step by step
  }

  /// 0.5 sum_t sum_r (u_t(x_r) - d_{t,r})^2 of the traces the last forward recorded; over ranks,
  /// 0 on every rank but the one holding the first receiver (the slab session sums the ranks'
  /// losses). Where the receivers' row is cut over ranks (a 2-D grid cut into blocks), the ranks
  /// first gather every trace (collective), so that the loss is summed as one process sums it.
  T loss(stream_view s) override
  {
    bool const first = place_.receivers > 0 && place_.first_receiver == 0;
    if (S::dims == 2 && place_.held.where.cut_inner()) { gather_traces(s); }  // every rank, holding receivers or not
    if (!first) { return T(0); }
    return misfit_(traces_.template data_as<T>(), this->d_.template data_as<T>(), this->p_.steps,
                   this->p_.receivers(), s);
  }

  tape_report report() const override
  {
    tape_report r = this->report_of_chain();
    report_segments(r, plan_);
    return r;
  }

 private:
  /// Collective: the whole traces from the ranks that recorded them, into traces_ on every rank.
  void gather_traces(stream_view s)
  {
    std::size_t const receivers = this->p_.receivers();
    std::size_t const values = this->p_.steps * receivers;
    std::vector<T> mine(values);
    traces_.download(mine.data(), values * sizeof(T), s);
    distributed::communicator& ranks = *this->o_.ranks;
    std::vector<T> all(values * static_cast<std::size_t>(ranks.size()));
    ranks.allgather(mine.data(), all.data(), values * sizeof(T));
    geometry<T> const g = geometry_of<T>(this->p_);
    for (int r = 0; r < ranks.size(); ++r) {
      segment_place<T> const theirs = segment_place<T>{place_.held.of_rank(r), 0, 0, 0}.with_receivers(g, S::dims);
      T const* const from = all.data() + static_cast<std::size_t>(r) * values;
      for (std::size_t t = 0; t < this->p_.steps; ++t) {
        std::size_t const at = t * receivers + theirs.first_receiver;
        std::copy(from + at, from + at + theirs.receivers, mine.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    traces_.upload(mine.data(), values * sizeof(T), s);
    synchronize(this->kind(), s);  // `mine` is pageable host memory, and goes when this returns
  }

  /// The wavelet at each step (stencil::wavelet), in o.kind's memory.
  [[nodiscard]] static device_buffer wavelet_of(problem const& p, options const& o)
  {
    geometry<T> const g = geometry_of<T>(p);
    std::vector<T> q(p.steps);
    for (std::size_t t = 0; t < p.steps; ++t) { q[t] = ricker(t, g.dt, g.peak_frequency); }
    device_buffer b(o.kind, p.steps * sizeof(T), o.stream);
    b.upload(q.data(), b.size(), o.stream);
    synchronize(o.kind, o.stream);  // `q` is pageable host memory, and goes when this returns
    return b;
  }

  tapeflow::stencil::segment_plan plan_;
  segment_place<T> place_;
  Misfit misfit_;
  device_buffer traces_;
  device_buffer wavelet_;
  Step step_;
};

/// The session of `plan`'s segments of the problem's stencil, its Step made by `make(stencil, grid,
/// plan, ranks, m)` for the backend, its loss summed by `misfit`. Over ranks, the session of this
/// rank's slab made to look like the whole problem's (slab_session: m and d go whole to every
/// rank, dL/dm and u_T are gathered).
template <class T, class Make, class Misfit>
[[nodiscard]] std::unique_ptr<session<T>> open_segments(problem const& p, options const& o,
                                                        tapeflow::stencil::segment_plan const& plan, Make make,
                                                        Misfit misfit)
{
  return with_stencil<T>(p, [&](auto s) -> std::unique_ptr<session<T>> {
    using S = decltype(s);
    using Step = std::invoke_result_t<Make&, S, tapeflow::stencil::grid<T> const&, tapeflow::stencil::segment_plan const&,
                                      std::shared_ptr<distributed::communicator> const&,
                                      tapeflow::stencil::coefficient_view<T>>;
    auto const place = segment_place<T>::template of<S>(p, o, plan);
    auto inner = std::make_unique<segment_session<T, S, Step, Misfit>>(p, o, plan, place, make, std::move(misfit));
    if (!o.ranks) { return inner; }
    return std::make_unique<slab_session<T>>(std::move(inner), o.ranks, place.held, slab_layout{{0, 0}, {1}, {1}});
  });
}

}  // namespace detail

/// What the chain of the problem's segments will do, without running it.
template <class T>
[[nodiscard]] chain_stats plan_segments(problem const& p, tapeflow::stencil::segment_plan const& plan, options const& o)
{
  return with_stencil<T>(p, [&](auto s) { return plan_stencil_chain<decltype(s)>(grid_of<T>(p), plan, o); });
}

}  // namespace tapeflow::workloads::wave
