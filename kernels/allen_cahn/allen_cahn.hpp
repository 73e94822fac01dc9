// SPDX-License-Identifier: Apache-2.0
// The Allen–Cahn workload: an n x n periodic grid, T explicit steps, L = 0.5 * sum(u_T^2),
// gradient dL/du_0 through tapeflow's tape. See docs/architecture.md.
#pragma once

#include "math.hpp"

#include <workload_common/run_options.hpp>
#include <workload_common/state_gradient.hpp>

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <functional>
#include <vector>

namespace tapeflow::workloads::allen_cahn {

struct problem {
  std::size_t n{0};       ///< grid side
  std::size_t steps{0};   ///< T
  double dt{0.05};
  double eps2{1.0};
};

struct options : run_options {
  /// What the tape holds per cell: u (values) or the reaction's partial derivative by duals.
  tape_content content{tape_content::values};
};

/// dL/du_0 (row-major), L, the chain's stats and the peak device bytes.
template <class T>
using gradient_result = state_gradient<T>;

/// Throws logic_error unless n >= 1, steps >= 1, n*n does not overflow and `values` == n*n.
void validate(problem const& p, std::size_t values);

/// dL/du_0 and L for the initial state `u0` (n*n values, row-major).
template <class T>
[[nodiscard]] gradient_result<T> gradient(problem const& p, std::vector<T> const& u0, options const& o);

/// What gradient() will do for this problem and these options (policy, tape size, tiling),
/// without running it. Throws what gradient() would throw for a bad configuration.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// u_T for the initial state `u0`, without a tape.
template <class T>
[[nodiscard]] std::vector<T> primal(problem const& p, std::vector<T> const& u0, options const& o);

/// Medians of event-timed runs after a warm-up, device-resident (no transfers timed).
struct bench_result {
  double primal_ms{0};    ///< T untaped steps
  double grad_ms{0};      ///< augmented forward + seed + reverse
  double forward_ms{0};
  double reverse_ms{0};
  chain_stats chain{};
  std::size_t peak_device_bytes{0};
  /// Device and pinned allocations (and their bytes) made by every run after the first: the
  /// chain's tape memory comes from its pools, so 0.
  std::size_t repeat_allocations{0};
  std::size_t repeat_allocated_bytes{0};
};

/// Times the primal and the gradient on `o.kind` (repeats >= 1, warmup >= 0).
template <class T>
[[nodiscard]] bench_result benchmark(problem const& p, std::vector<T> const& u0, options const& o, int warmup,
                                     int repeats);

/// L = 0.5 * sum(u^2), accumulated in double.
template <class T>
[[nodiscard]] T loss(std::vector<T> const& u);

}  // namespace tapeflow::workloads::allen_cahn
