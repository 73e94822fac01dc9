// SPDX-License-Identifier: Apache-2.0
// A state-chain workload whose step is a tapeflow stencil (tapeflow/stencil/stencil.hpp), run in
// the library's segments (docs/stencils.md): its segment plan, the chain's plan over
// one checkpoint per segment, and its session, cut over MPI ranks when the options name them
// (docs/distributed.md). Allen–Cahn and Burgers are made this way: the workload supplies its
// stencil, its grid and its loss; this header the rest.
#pragma once

#include "run_options.hpp"
#include "session.hpp"
#include "slab_session.hpp"
#include "state_chain.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>
#include <memory>
#include <utility>

namespace tapeflow::workloads {

/// Whether a stencil workload runs in the library's segments: the options ask for segments
/// (segment != 1), or for ranks, whose parts always do (of `segment` steps).
[[nodiscard]] inline bool segmented(stencil_options const& o) noexcept { return o.segment != 1 || o.ranks != nullptr; }

/// The segments stencil S runs in over `whole` for `steps` steps on o.kind: k = o.segment (0: the
/// planner's), planned for this rank's part over o.ranks (collective; o.ranks_grid) when there are
/// ranks. Throws logic_error for a k that the device, or the thinnest part, cannot hold, and for a
/// process grid that is not the ranks.
template <class S>
[[nodiscard]] tapeflow::stencil::segment_plan stencil_segments(tapeflow::stencil::grid<typename S::value_type> const& whole,
                                                               std::size_t steps, stencil_options const& o)
{
  tapeflow::stencil::segment_request r;
  r.k = o.segment;
  r.shared_opt_in = o.shared_opt_in;
  r.tile = o.segment_tile;
  r.block_threads = o.segment_threads;
  r.ranks = o.ranks_grid;
  device_limits const limits = query_device_limits(o.kind);
  if (o.ranks) { return tapeflow::stencil::plan_slab_segments<S>(whole, steps, limits, r, *o.ranks); }
  return tapeflow::stencil::plan_segments<S>(whole, steps, limits, r);
}

/// What the chain of `plan`'s segments of S will do (one layer per segment: its checkpoint),
/// without running it.
template <class S>
[[nodiscard]] chain_stats plan_stencil_chain(tapeflow::stencil::grid<typename S::value_type> const& whole,
                                             tapeflow::stencil::segment_plan const& plan, stencil_options const& o)
{
  using T = typename S::value_type;
  using record = tapeflow::value_record<T, tapeflow::values_per_chunk<T>>;
  // The state one session holds: the grid's, or this rank's padded slab's.
  std::size_t const values = o.ranks ? tapeflow::stencil::cut_for<S>(whole, plan, *o.ranks).padded
                                     : whole.cells() * static_cast<std::size_t>(S::fields);
  std::size_t const records = (values + tapeflow::values_per_chunk<T> - 1) / tapeflow::values_per_chunk<T>;
  return plan_chain(sizeof(record), records, plan.segments, values * sizeof(T), chain_options_of(o));
}

/// The session of a chain of `plan`'s segments of S over `whole`: `step` is the backend's segment
/// Step (make_cpu_segments, make_device_segments, given o.ranks), `half_squares` the backend's
/// loss. Under ranks, the session of this rank's part made to look like the whole problem's.
template <class S, class Step, class HalfSquares, class T = typename S::value_type>
[[nodiscard]] std::unique_ptr<session<T>> open_stencil_chain(Step step, tapeflow::stencil::grid<T> const& whole,
                                                             tapeflow::stencil::segment_plan const& plan,
                                                             stencil_options const& o, HalfSquares half_squares)
{
  std::unique_ptr<session<T>> chain = open_state_chain<T>(std::move(step), plan.segments, o, std::move(half_squares));
  if (!o.ranks) { return chain; }
  tapeflow::stencil::slab_cut<T> const cut = tapeflow::stencil::cut_for<S>(whole, plan, *o.ranks);
  return std::make_unique<slab_session<T>>(std::move(chain), o.ranks, part_place::of(whole, S::dims, cut.where),
                                           slab_layout::of_state(S::fields));
}

/// open_stencil_chain of stencil `s`'s segments, made by the backend's `make`
/// (stencil::cpu_segments_maker, stencil::device_segments_maker) for o.ranks.
template <class S, class Make, class HalfSquares, class T = typename S::value_type>
[[nodiscard]] std::unique_ptr<session<T>> open_stencil_segments(S s, tapeflow::stencil::grid<T> const& whole,
                                                                tapeflow::stencil::segment_plan const& plan,
                                                                stencil_options const& o, Make make,
                                                                HalfSquares half_squares)
{
  return open_stencil_chain<S>(make(std::move(s), whole, plan, o.ranks), whole, plan, o, std::move(half_squares));
}

}  // namespace tapeflow::workloads
