// SPDX-License-Identifier: Apache-2.0
// Tape tiers and the one planner that picks a tier per layer under a device-memory budget.
//
//   device     the layer's records stay in device memory from its forward to its reverse;
//   host       written out to pinned host memory on a D2H copy stream as its forward completes,
//              prefetched back on an H2D copy stream a planned number of layers ahead of its
//              reverse, through a bounded ring of device buffers;
//   recompute  not kept: rebuilt just before its reverse by re-running the forward from a
//              checkpointed state (Revolve for chains; DTR-style greedy eviction for layers of
//              unequal size and cost).
#pragma once

#include <tapeflow/bandwidth.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/schedule.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow {

enum class tier { device, host, recompute };

[[nodiscard]] std::string_view to_string(tier t) noexcept;

/// What the planner knows of one layer.
struct layer_info {
  std::size_t tape_bytes{0};
  double forward_ms{0};   ///< cost of re-running its (untaped) forward
  double reverse_ms{0};   ///< cost of its reverse: the time a prefetch can hide behind
  double aug_forward_ms{0};  ///< cost of its taped forward; 0: the same as forward_ms
};

/// Byte budgets; 0 means no limit.
struct tier_budgets {
  std::size_t device_bytes{0};
  std::size_t host_bytes{0};
};

struct tier_request {
  tape_policy policy{tape_policy::automatic};
  std::vector<layer_info> layers;   ///< in forward order
  /// Bytes of one checkpointed state (the recompute tier's snapshots); 0 for tapes that are not
  /// chains (recompute then evicts greedily).
  std::size_t state_bytes{0};
  /// The least device memory anything runs in: a layer's staged tiles (one tile and its halo when
  /// read in place on the CPU), or the layer if smaller.
  std::size_t min_device_bytes{0};
  tier_budgets budgets{};
  bandwidths bw{};
  /// Whether `automatic` may put layers and checkpoints in host memory. plan_chain turns it off
  /// on the CPU backend, where a copy into host memory saves nothing.
  bool host_helps{true};
};

struct tier_plan {
  tape_policy policy{tape_policy::store};  ///< the resolved policy (never automatic)
  std::vector<tier> tiers;                 ///< one per layer
  std::size_t prefetch_distance{0};        ///< host tier: layers prefetched ahead of the reverse
  std::size_t ring_slots{0};               ///< host tier: device buffers the layers cycle through
  std::size_t snapshots{0};                ///< recompute (chains): Revolve snapshots, initial state included
  std::size_t recompute_steps{0};          ///< untaped forward steps the recompute tier runs
  std::size_t device_bytes{0};             ///< most tape bytes on the device at once, as planned
  std::size_t host_bytes{0};               ///< pinned host bytes of the host tier
  std::size_t bytes_per_tier[3]{0, 0, 0};  ///< tape bytes placed in each tier
  double overhead_ms{0};                   ///< estimated time over keeping everything on the device
  /// Policy mixed: the schedule the chain runs (tapeflow/schedule.hpp): per step, its layer on
  /// the device, on the host or recomputed, and where its checkpoints live.
  schedule mixed;
  /// Estimated forward + reverse time of the whole chain under the cost model (docs/tiers.md).
  double predicted_ms{0};

  [[nodiscard]] std::size_t count(tier t) const noexcept;
  /// A few lines a person can read.
  [[nodiscard]] std::string describe() const;
};

/// The one planner. `automatic` keeps the whole tape on the device when it fits; otherwise it
/// runs the mixed schedule's optimiser (tapeflow/schedule.hpp) for chains (state_bytes > 0),
/// and greedy eviction for other tapes. Throws budget_error when no placement fits the budgets (including a device
/// budget below `min_device_bytes`), logic_error for an empty or malformed request.
[[nodiscard]] tier_plan plan_tiers(tier_request const& request);

/// The schedule a chain runs for `plan` (tapeflow/schedule.hpp's actions; one executor runs
/// every policy): the optimiser's for `mixed` (and recompute over unequal layers); Revolve's for
/// `recompute`, its snapshot slots named by the step whose state they hold; and for `store` and
/// `offload`, every step taped in order with its layer kept on the device or the host, then
/// reversed last-first. Throws logic_error when the plan does not describe `steps` steps.
[[nodiscard]] std::vector<schedule_action> chain_actions(tier_plan const& plan, std::size_t steps);

/// DTR-style greedy eviction for layers of unequal size and cost: the layers are pushed in order;
/// whenever the resident ones exceed `device_budget`, the resident layer with the lowest
/// forward_ms / (tape_bytes * staleness) is evicted (staleness: layers pushed since it was).
/// Returns, per layer, whether it is evicted (recomputed). Throws budget_error when a single
/// layer exceeds the budget.
[[nodiscard]] std::vector<bool> greedy_eviction(std::vector<layer_info> const& layers, std::size_t device_budget);

}  // namespace tapeflow
