// SPDX-License-Identifier: Apache-2.0
// How the chains of a distributed run come to one schedule (chain_options::collective;
// docs/distributed.md): every rank plans from the same inputs — the least of the budgets, the
// least of the measured bandwidths, the greatest of the step costs — and the schedule's
// fingerprint is compared across ranks before the first step. Ranks running different schedules
// would call their steps, and so their halo exchanges, in different orders and wait for ever.
#pragma once

#include <tapeflow/chain_options.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tapeflow::detail {

/// Collective: first checks that the ranks ask for the same policy, measure_steps and number of
/// step costs (distributed_error on every rank where they differ: they decide what planning does
/// collectively); then `options`' budgets replaced by their least over the ranks (0, "no limit",
/// counts as the greatest), and, where the plan prices copies (a budget, offload, measured steps),
/// its bandwidths, measured here when zero, by their least.
void agree_plan_inputs(distributed::communicator& comm, chain_options& options);

/// Collective: every step cost replaced by its greatest over the ranks (logic_error on every rank
/// when they hold different numbers of costs).
void agree_step_costs(distributed::communicator& comm, std::vector<step_cost>& costs);

/// A fingerprint of what a chain of `steps` steps will do: the policy, every layer's tier and
/// records, the host ring and the order of the schedule's actions.
[[nodiscard]] std::uint64_t schedule_fingerprint(chain_stats const& stats, std::size_t steps);

}  // namespace tapeflow::detail
