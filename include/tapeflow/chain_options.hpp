// SPDX-License-Identifier: Apache-2.0
// What a tapeflow::chain is asked to do (chain_options) and what it planned and did (chain_stats).
// docs/tiers.md explains the budgets, the policies and the cost model these feed.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/bandwidth.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/schedule.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow {

/// The sweep a chain's progress callback reports on.
enum class chain_phase { forward, reverse };

/// How a chain runs.
struct chain_options {
  backend kind{backend::cpu};                  ///< where the tape lives and the steps run
  tape_policy policy{tape_policy::automatic};  ///< where the layers go (docs/tiers.md)
  /// Most device bytes the tape (layers, host-tier ring, snapshots) may occupy at once; 0: no limit.
  std::size_t budget_bytes{0};
  /// Most pinned host bytes the host tier may occupy; 0: no limit.
  std::size_t host_budget_bytes{0};
  /// Copy bandwidths for the cost model; zeros: measured once per process, when the plan needs them.
  bandwidths bw{};
  /// Lets `auto` use host memory on the CPU backend, where a copy there saves nothing (for tests).
  bool host_tier_on_cpu{false};
  /// Measured step costs (layer_bytes ignored): one for every step, or one per step; empty: estimated.
  std::vector<step_cost> step_costs{};
  /// Time the step before planning a tape that does not fit, and plan with that (docs/tiers.md).
  bool measure_steps{false};
  /// Tile, stage and block overrides; `record_bytes` and `records` are filled in by the chain.
  pipeline_request pipeline{};
  /// Keep every layer resident and replay the reverse as one captured program (needs policy store).
  bool capture_reverse{false};
  /// Synchronise around forward() and reverse() and record wall, stall and recompute times.
  bool measure_time{false};
  /// Fill each buffer a step is handed to write with NaN bytes (0xFF) first, so tests see every write.
  bool poison{false};
  /// Called after each step: (phase, steps done, steps in all).
  std::function<void(chain_phase, std::size_t, std::size_t)> progress{};
  /// The ranks whose chains run together (a decomposed problem whose steps exchange halos;
  /// docs/distributed.md): planning is collective — least budgets and bandwidths, greatest step
  /// costs, the schedule's fingerprint checked — a failing rank announces its failure, and pinned
  /// memory that cannot be had fails the call instead of re-planning one rank alone. Null: one
  /// process plans alone.
  std::shared_ptr<distributed::communicator> collective{};
};

/// What a chain planned and did.
struct chain_stats {
  backend kind{backend::cpu};              ///< where it runs
  tape_policy policy{tape_policy::store};  ///< resolved
  pipeline_plan plan{};                    ///< tiling of every layer (of the largest, when they differ)
  std::vector<pipeline_plan> step_plans;   ///< per step when layers differ; empty: every layer is `plan`
  tier_plan tiers{};                       ///< per-layer tiers, ring, snapshots
  std::size_t steps{0};                    ///< steps in the chain
  std::size_t layer_bytes{0};              ///< tape bytes of one layer (the largest, when they differ)
  std::size_t tape_bytes{0};               ///< tape bytes of all layers
  std::size_t peak_tape_bytes{0};          ///< most tape bytes held on the device at once (measured)
  std::size_t host_tape_bytes{0};          ///< pinned host bytes of the host tier
  std::size_t budget_bytes{0};             ///< 0: unlimited
  std::size_t prefetches{0};               ///< host-tier layers copied back
  std::size_t recompute_steps{0};          ///< untaped forward steps run to rebuild layers
  double forward_ms{0};                    ///< wall time of the last forward(); measure_time only
  double reverse_ms{0};                    ///< wall time of the last reverse(); measure_time only
  double stall_ms{0};                      ///< compute waiting on the ring or on prefetches
  double recompute_ms{0};                  ///< time of the untaped forward steps
  std::string fallback;                    ///< why the tiers changed at run time (empty: they did not)
  std::vector<step_cost> step_costs;       ///< the step costs planned with, given or measured; empty: estimated
  std::size_t program_launches{0};         ///< capture_reverse: reverses run as one program
  bool graph_captured{false};              ///< capture_reverse: a device graph was captured
};

namespace detail {
/// The tiling of step `t`'s layer: `stats.plan`, or `stats.step_plans[t]` when layers differ.
[[nodiscard]] inline pipeline_plan const& step_plan(chain_stats const& stats, std::size_t t) noexcept
{
  return stats.step_plans.empty() ? stats.plan : stats.step_plans[t];
}
}  // namespace detail

}  // namespace tapeflow
