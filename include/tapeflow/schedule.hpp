// SPDX-License-Identifier: Apache-2.0
// One schedule for a chain's tape: per step, keep its layer on the device, keep it in pinned host
// memory, or recompute it from checkpoints of the state that live on the device or on the host.
// The optimiser is a dynamic program over (interval of steps, free device memory, free host
// memory) under the cost model of docs/tiers.md ("The mixed schedule"); it is optimal within the
// schedule class described there, for memory counted in whole units (`unit_bytes`).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tapeflow {

/// Where a checkpoint (a copy of the state) or a kept layer lives.
enum class level { device = 0, host = 1 };

[[nodiscard]] char const* to_string(level l) noexcept;

/// The largest cost of one step or copy the planners take, in milliseconds (31 years): costs are
/// finite and at most this, so that no schedule's sum of them overflows to infinity.
inline constexpr double max_cost_ms = 1e12;
/// The largest state or layer the planners take, in bytes (64 PiB): no rounding or sum of them
/// overflows.
inline constexpr std::size_t max_plan_bytes = std::size_t{1} << 56;

/// Whether `ms` is a cost the planners take: finite, from 0 to max_cost_ms.
[[nodiscard]] constexpr bool plannable_ms(double ms) noexcept { return ms >= 0 && ms <= max_cost_ms; }

/// What the planner knows of one step. Times in milliseconds.
struct step_cost {
  double forward_ms{0};      ///< untaped forward (recomputation)
  double aug_forward_ms{0};  ///< taped (augmented) forward
  double reverse_ms{0};      ///< reverse from its layer
  std::size_t layer_bytes{0};
};

/// The cost model and the budgets. A budget of 0 bytes means "none of that memory"; the caller
/// turns "unlimited" into a number (plan_chain uses the whole tape).
struct schedule_model {
  std::vector<step_cost> steps;
  std::size_t state_bytes{0};
  /// Memory free for checkpoints and kept layers: beyond the working layer (the one taped just
  /// before its reverse) and, when host layers are allowed, the ring slot they pass through.
  std::size_t device_bytes{0};
  std::size_t host_bytes{0};
  /// Cost of writing the state into / reading it back from a checkpoint on each level.
  double write_ms[2]{0, 0};
  double read_ms[2]{0, 0};
  /// Time a layer kept on the host costs beyond its taped forward: its D2H and H2D copies where
  /// they do not hide behind the neighbouring step's compute (one entry per step; empty: 0).
  std::vector<double> host_layer_ms;
  /// The choices the optimiser may make. store = device layers only, and so on.
  bool device_layers{true};
  bool host_layers{true};
  bool checkpoints[2]{true, true};
  /// Memory is counted in units of this many bytes (sizes round up, budgets down). 0: chosen
  /// by the optimiser (the largest common divisor of the sizes, coarsened when the tables
  /// would be too large).
  std::size_t unit_bytes{0};
};

enum class action_kind {
  advance,  ///< untaped steps [step, to): the working state goes from `step` to `to`
  taped,    ///< taped forward of `step`; its layer is kept on `where` (or is the working layer)
  store,    ///< copy the working state (at `step`) into a checkpoint on `where`
  restore,  ///< copy the checkpoint of the state at `step` on `where` into the working state
  release,  ///< the checkpoint of the state at `step` on `where` is no longer needed
  reverse,  ///< reverse `step` from its layer, then release the layer
};

struct schedule_action {
  action_kind kind{action_kind::advance};
  std::size_t step{0};
  std::size_t to{0};          ///< advance only
  level where{level::device};
  bool kept{false};           ///< taped: the layer is kept (on `where`) for a later reverse
};

[[nodiscard]] std::string to_string(schedule_action const& a);

/// What a step's layer does in a schedule.
enum class layer_fate { device, host, recompute };

struct schedule {
  std::vector<schedule_action> actions;
  double predicted_ms{0};               ///< forward + reverse under the model
  /// per step: kept on the host; recomputed (the step ran untaped before its layer was taped
  /// from a checkpoint); or kept on the device from the first sweep to its reverse
  std::vector<layer_fate> fate;
  std::vector<std::size_t> recomputed;  ///< per step: times it runs untaped
  std::size_t unit_bytes{0};            ///< the memory unit the optimiser counted in
  std::size_t peak_device_bytes{0};     ///< most checkpoint + kept-layer bytes on the device (beyond the working layer)
  std::size_t peak_host_bytes{0};
  std::size_t checkpoints[2]{0, 0};     ///< stores per level
};

/// The cheapest schedule of the class under the model, with memory counted in the model's unit or
/// in the largest unit dividing every size. A chain too long for tables in that unit gets the
/// cheapest of the tables in a coarser unit and of candidates costed exactly, the chain's steps
/// in blocks among them (docs/tiers.md, "Long chains"). Throws budget_error when none fits
/// (always one fits when every layer may be the working layer and the state fits one
/// checkpoint... or the chain has one step), logic_error for a malformed model.
///
/// The outcomes of the last eight models are kept, up to set_schedule_cache_limit's bytes
/// (thread-safe): a model equal in every field to one of them gets its schedule, or its
/// budget_error, without solving again — a chain built again for the same problem plans in no time.
[[nodiscard]] schedule optimal_schedule(schedule_model const& model);

/// How often optimal_schedule found a model among those it keeps, how often it solved, and what it
/// keeps now.
struct schedule_cache_stats {
  std::size_t hits{0};
  std::size_t misses{0};
  std::size_t entries{0};  ///< outcomes kept
  std::size_t bytes{0};    ///< the memory they hold: their models' and schedules' arrays
};
[[nodiscard]] schedule_cache_stats schedule_cache_counts();

/// The most bytes optimal_schedule's kept outcomes hold unless set_schedule_cache_limit says else.
inline constexpr std::size_t default_schedule_cache_bytes = std::size_t{64} << 20;

/// Sets the most bytes the kept outcomes may hold (0: keep none) and returns the previous limit.
/// Outcomes beyond it are forgotten, least recently used first; an outcome larger than the limit
/// is not kept (a million-step chain's model and schedule hold about 150 MB, and its solve takes
/// about a second, less than running it). Thread-safe.
std::size_t set_schedule_cache_limit(std::size_t bytes);

/// The longest chain whose tables optimal_schedule solves step by step: they grow with the steps
/// squared (unequal steps) or the steps (equal ones, whose costs are then equal too). Longer
/// chains are planned with their steps in blocks and by the candidates (docs/tiers.md).
[[nodiscard]] std::size_t max_schedule_steps(bool equal_steps) noexcept;

/// Revolve's schedule (tapeflow/revolve.hpp) of `steps` steps with `snapshots` checkpoints on
/// `where`, as actions of this class: a checkpoint is named by the step whose state it holds
/// (Revolve names it by its slot), and a slot stored over releases its old step first.
[[nodiscard]] std::vector<schedule_action> revolve_actions(std::size_t steps, std::size_t snapshots,
                                                           level where = level::device);

/// Every step taped once, its layer kept on `where[t]`, then every layer reversed last-first (no
/// recomputation). With `last_working`, the last step's layer is the working layer instead: taped
/// right before its reverse and not kept.
[[nodiscard]] std::vector<schedule_action> kept_actions(std::vector<level> const& where, bool last_working);

/// Replays a schedule: checks it is valid (every step reversed once, last first, from a layer
/// taped from the right state; checkpoints restored only while held; memory within the model's
/// budgets, counted in the model's unit) and returns its cost under the model. Throws
/// logic_error, naming the action, for an invalid one.
[[nodiscard]] double evaluate_schedule(schedule_model const& model, std::vector<schedule_action> const& actions,
                                       std::size_t unit_bytes);

}  // namespace tapeflow
