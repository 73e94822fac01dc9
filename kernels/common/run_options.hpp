// SPDX-License-Identifier: Apache-2.0
// What every workload's entry points take besides their problem: where they run and what they
// report (base_options), and for the workloads built on a chain, how the chain runs (run_options).
// Each workload's `options` derives from one of them and adds its own knobs.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/stencil/ghosts.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace tapeflow::workloads {

/// What every workload takes: where it runs and what it reports while it does.
struct base_options {
  backend kind{backend::cpu};
  /// Stream the work is ordered on (the backend's default stream when default-constructed).
  /// Entry points that return host vectors wait for it before returning.
  stream_view stream{};
  /// Fill every buffer the workload's kernels write with NaN bytes first (tests: every element is
  /// written where it should be).
  bool poison{false};
  /// Called as the gradient advances: (phase, steps done, steps in all).
  std::function<void(chain_phase, std::size_t, std::size_t)> progress{};
};

/// A chain workload's options: base_options and how its chain runs (chain_options).
struct run_options : base_options {
  tape_policy policy{tape_policy::automatic};
  std::size_t budget_bytes{0};       ///< device bytes the tape may hold; 0: no limit
  std::size_t host_budget_bytes{0};  ///< pinned host bytes the host tier may hold; 0: no limit
  bandwidths bw{};                   ///< copy bandwidths for the planner; zeros: measured
  bool host_tier_on_cpu{false};      ///< let auto use host memory on the CPU backend (chain_options)
  pipeline_request pipeline{};       ///< tile/stage/thread overrides of the staged reverse
  bool measure_time{true};           ///< record forward, reverse, stall and recompute times
  /// Keep the tape resident and replay the reverse as one captured program (store policy only).
  bool capture_reverse{false};
  /// Measured step costs for the planner, and whether the chain measures its step before planning
  /// a tape that does not fit (chain_options::step_costs, measure_steps).
  std::vector<step_cost> step_costs{};
  bool measure_steps{false};
  /// The ranks a decomposed run is cut over (docs/distributed.md; the workloads that decompose say
  /// so in their description); null: one process. Their chains plan collectively.
  std::shared_ptr<distributed::communicator> ranks{};
};

/// The options of a workload whose step is a stencil: the chain's, and how many steps a segment
/// holds.
struct stencil_options : run_options {
  /// Steps per segment (docs/stencils.md): 1 runs one step per layer; K > 1 runs segments of K
  /// steps (a layer is the checkpoint u_{jK}; the reverse recomputes the segment on chip); 0 lets
  /// the segment planner pick K. Segments tape the state's values
  /// (kernels/common/stencil_workload.hpp).
  int segment{1};
  /// Time the candidate segment lengths on this machine first and run the fastest (--segment
  /// measure; workloads::settle_segment, kernels/common/segment_trials.hpp). The CLI and the
  /// benchmarks settle it before opening a session; a workload handed it unsettled runs `segment`.
  bool measure_segment{false};
  /// GPU: segments may use the shared memory a block gets on opt-in, not only 48 KiB
  /// (stencil::segment_request::shared_opt_in).
  bool shared_opt_in{false};
  /// Cells of a segment's tile along each axis (stencil::segment_request::tile); 0 x 0 x 0: the
  /// planner's (on a GPU 1024, 32 x 32 or 8 x 8 x 8 cells, shrunk until the segment fits).
  stencil::tile_extent segment_tile{0, 0, 0};
  /// GPU: threads of a segment tile's block (stencil::segment_request::block_threads; a multiple of
  /// 32); 0: the planner's (256). The CPU runs a tile on one thread whatever this says.
  int segment_threads{0};
  /// Over ranks: their process grid (rows along the grid's last axis x columns along the one
  /// before it; docs/distributed.md); 0 x 0: the most square one (--ranks-grid).
  stencil::ranks_grid ranks_grid{};
};

/// The chain's share of a chain workload's options.
[[nodiscard]] inline chain_options chain_options_of(run_options const& o)
{
  chain_options c;
  c.kind = o.kind;
  c.policy = o.policy;
  c.budget_bytes = o.budget_bytes;
  c.host_budget_bytes = o.host_budget_bytes;
  c.bw = o.bw;
  c.host_tier_on_cpu = o.host_tier_on_cpu;
  c.pipeline = o.pipeline;
  c.measure_time = o.measure_time;
  c.capture_reverse = o.capture_reverse;
  c.poison = o.poison;
  c.step_costs = o.step_costs;
  c.measure_steps = o.measure_steps;
  c.progress = o.progress;
  c.collective = o.ranks;
  return c;
}

}  // namespace tapeflow::workloads
