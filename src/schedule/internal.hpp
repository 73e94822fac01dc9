// SPDX-License-Identifier: Apache-2.0
// What the sources of the mixed schedule (tapeflow/schedule.hpp) share; private to the library.
//   optimiser.cpp  the dynamic program, and the memory unit it counts in
//   replay.cpp     a schedule checked and costed by replaying it under a model
//   blocks.cpp     a long chain's steps grouped into blocks, and a schedule of blocks as steps
//   cache.cpp      the outcomes of the last models planned
//   choice.cpp     optimal_schedule: the optimiser's schedule, or on long chains a cheaper candidate
//   actions.cpp    schedules written out directly (every layer kept, Revolve's), and their text
// docs/tiers.md ("The mixed schedule") states the model, the class of schedules and the
// optimality claim.
#pragma once

#include <tapeflow/schedule.hpp>

#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

namespace tapeflow::detail::scheduling {

inline constexpr double inf = std::numeric_limits<double>::infinity();

/// `bytes` in whole units of `unit` bytes, rounded up.
[[nodiscard]] inline std::size_t units(std::size_t bytes, std::size_t unit)
{
  return bytes / unit + (bytes % unit != 0 ? 1 : 0);  // bytes + unit - 1 could wrap
}

/// What keeping step `i`'s layer on the host costs beyond its taped forward (0 when the model
/// gives no host costs).
[[nodiscard]] inline double host_penalty(schedule_model const& m, std::size_t i)
{
  return m.host_layer_ms.empty() ? 0.0 : m.host_layer_ms[i];
}

/// Every step the same (size, costs, host cost): the tables then depend on an interval's length
/// only.
[[nodiscard]] bool equal_steps(schedule_model const& m);

// ---- the optimiser (optimiser.cpp) ---------------------------------------------------------

/// The finest unit a model's schedules are judged in: its own, or the largest unit that divides
/// every size the optimiser counts.
[[nodiscard]] std::size_t finest_unit(schedule_model const& m);

/// The unit the optimiser counts in: the model's, or the finest unit coarsened until the tables
/// are small enough to solve in well under a second.
[[nodiscard]] std::size_t table_unit(schedule_model const& model);

/// The optimiser's actions for `model` in `unit`. Empty when nothing fits.
[[nodiscard]] std::optional<std::vector<schedule_action>> solved_actions(schedule_model const& model,
                                                                         std::size_t unit);

// ---- replay and costing (replay.cpp) -------------------------------------------------------

/// Throws logic_error for a malformed model: no steps, no state, a host cost per step missing,
/// an empty layer or a negative cost.
void check_model(schedule_model const& m);

/// What a replay found: the cost, and per step its layer's fate and its untaped runs.
struct replayed {
  double cost{0};
  std::vector<layer_fate> fate;
  std::vector<std::size_t> recomputed;
  std::size_t peak_device{0};
  std::size_t peak_host{0};
  std::size_t stores[2]{0, 0};
};

/// Replays `actions` under `m`, memory counted in `unit`. Throws logic_error, naming the action,
/// for an invalid schedule (evaluate_schedule's checks).
[[nodiscard]] replayed replay(schedule_model const& m, std::vector<schedule_action> const& actions, std::size_t unit);

/// A schedule of `actions`, its cost and fates from a replay under `measure` (the model whose
/// memory, counted in `unit`, and costs it is judged by).
[[nodiscard]] schedule costed(std::vector<schedule_action> actions, std::size_t unit, schedule_model const& measure);

// ---- blocks (blocks.cpp) -------------------------------------------------------------------

/// A chain's steps grouped into blocks of consecutive steps, about equal in bytes: block b is the
/// steps [first[b], first[b + 1]).
struct blocks {
  std::vector<std::size_t> first;
  schedule_model model;  ///< one step per block
};

/// `m` in about `count` blocks: a block's costs and layer are its steps' sums, so a schedule of the
/// blocks, each block's steps run in order where it runs the block (`unblocked`), costs under `m`
/// exactly what it costs under the blocks' model. A block that is the working layer keeps its
/// steps but the last on the device until their reverse, so the blocks' device budget is `m`'s
/// less the most any block keeps that way. Empty when that leaves nothing.
[[nodiscard]] std::optional<blocks> in_blocks(schedule_model const& m, std::size_t count);

/// A schedule of `b`'s blocks as one of their steps: a block advanced, taped or reversed is its
/// steps advanced, taped in order or reversed last first; a block taped as the working layer
/// keeps its steps but the last on the device; a checkpoint of a block is one of its first step.
[[nodiscard]] std::vector<schedule_action> unblocked(blocks const& b, std::vector<schedule_action> const& coarse);

// ---- the outcomes of the last models (cache.cpp) -------------------------------------------

/// The outcome kept for a model equal to `model` in every field (a schedule, or none when nothing
/// fits), if any; counts a hit or a miss. Thread-safe.
[[nodiscard]] std::optional<std::optional<schedule>> cached_outcome(schedule_model const& model);

/// Keeps `outcome` for `model` unless it alone holds more than the cache's byte limit, forgetting
/// the least recently used beyond the last eight or the limit. Thread-safe.
void keep_outcome(schedule_model const& model, std::optional<schedule> const& outcome);

}  // namespace tapeflow::detail::scheduling
