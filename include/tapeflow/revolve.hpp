// SPDX-License-Identifier: Apache-2.0
// Binomial checkpointing (Revolve, Griewank & Walther) for a chain of l steps with s snapshots,
// s counting the snapshot that holds the initial state.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tapeflow {

/// C(n, k), saturating at SIZE_MAX.
[[nodiscard]] std::size_t binomial(std::size_t n, std::size_t k) noexcept;

/// The repetition number r: the smallest r with C(s + r, s) >= l (s past l counts as l: more
/// snapshots than steps are never used). Throws logic_error for l = 0, s = 0 or l past 2^62.
[[nodiscard]] std::size_t revolve_repetitions(std::size_t l, std::size_t s);

/// The least number of untaped forward steps that reverses l steps with s snapshots:
/// t(l, s) = r l - C(s + r, s + 1). Throws as revolve_repetitions, and logic_error where the count
/// overflows.
[[nodiscard]] std::size_t revolve_forward_steps(std::size_t l, std::size_t s);

enum class revolve_op {
  store,    ///< copy the working state (at step `from`) into snapshot `slot`
  restore,  ///< copy snapshot `slot` (the state at step `from`) into the working state
  advance,  ///< run untaped steps from..to-1: the working state goes from step `from` to `to`
  taped,    ///< run step `from` with its tape recorded (one layer)
  reverse,  ///< reverse step `from` from its layer, then release the layer
  release,  ///< snapshot `slot` is no longer needed
};

struct revolve_action {
  revolve_op op;
  std::size_t from{0};
  std::size_t to{0};
  std::size_t slot{0};
};

/// The schedule that reverses l steps with s snapshots in revolve_forward_steps(l, s) untaped
/// steps. It starts with the working state at step 0 and stores it in slot 0; its first reverse
/// comes right after the taped run of step l - 1 (which yields the final state). At most s slots
/// are live at any time.
[[nodiscard]] std::vector<revolve_action> revolve_schedule(std::size_t l, std::size_t s);

/// Called with each action of a schedule in turn.
using revolve_visitor = std::function<void(revolve_action const&)>;

/// Hands `visit` the actions of revolve_schedule(l, s) in order without storing them: a long
/// chain's schedule is tens of bytes a step.
void visit_revolve_schedule(std::size_t l, std::size_t s, revolve_visitor const& visit);

/// The state copies (stores and restores) revolve_schedule(l, s) makes, counted as it is built.
[[nodiscard]] std::size_t revolve_state_copies(std::size_t l, std::size_t s);

/// Untaped steps a schedule performs (the sum of its advances).
[[nodiscard]] std::size_t count_forward_steps(std::vector<revolve_action> const& schedule) noexcept;

/// State copies a schedule makes: its snapshot stores and restores.
[[nodiscard]] std::size_t count_state_copies(std::vector<revolve_action> const& schedule) noexcept;

[[nodiscard]] std::string to_string(revolve_action const& action);

}  // namespace tapeflow
