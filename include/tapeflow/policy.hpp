// SPDX-License-Identifier: Apache-2.0
// Tape policies: where a layer's tape lives.
#pragma once

#include <string_view>

namespace tapeflow {

/// `store` keeps every layer on the device. `offload` (pinned host memory, prefetched back) and
/// `recompute` (rebuilt from checkpoints) are the other tiers; `automatic` lets the planner pick.
/// `mixed` is what `automatic` resolves to when it runs the optimiser's schedule (per step:
/// device, host or recompute; tapeflow/schedule.hpp); it is never asked for.
enum class tape_policy { automatic, store, offload, recompute, mixed };

[[nodiscard]] std::string_view to_string(tape_policy policy) noexcept;
/// Parses "auto", "store", "offload" or "recompute"; throws logic_error otherwise ("mixed" too:
/// it is a result of "auto", not a choice).
[[nodiscard]] tape_policy parse_policy(std::string_view name);

}  // namespace tapeflow
