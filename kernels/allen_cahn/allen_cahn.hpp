// SPDX-License-Identifier: Apache-2.0
// The Allen–Cahn workload: an n x n periodic grid, T explicit steps, L = 0.5 * sum(u_T^2),
// gradient dL/du_0 through tapeflow's tape. See docs/architecture.md.
#pragma once

#include <tapeflow/workloads/allen_cahn/math.hpp>
#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>
#include <tapeflow/workloads/common/state_gradient.hpp>

#include <tapeflow/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::allen_cahn {

struct problem {
  std::size_t n{0};       ///< grid side
  std::size_t steps{0};   ///< T
  double dt{0.05};
  double eps2{1.0};
};

struct options : stencil_options {
  /// What the tape holds per cell: u (values) or the reaction's partial derivative by duals. The
  /// segments (stencil_options::segment other than 1) tape values.
  tape_content content{tape_content::values};
};

// gradient_result<T> (dL/du_0 (row-major) and L), gradient(), primal(), loss(): state_gradient.hpp.
using namespace workloads::state_workload;

/// The problem alone: throws logic_error unless 1 <= n <= 2^30, steps >= 1, dt > 0 and eps2 >= 0
/// (both finite).
void validate(problem const& p);
/// Throws what validate(p) throws, and logic_error unless `values` == n*n.
void validate(problem const& p, std::size_t values);

/// A session of this problem on `o.kind`: its input is u_0 (n*n values, row-major), its gradient
/// dL/du_0. Throws what validate() throws, and unavailable_error for a backend without kernels.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// What gradient() will do for this problem and these options (policy, tape size, tiling),
/// without running it. Throws what gradient() would throw for a bad configuration.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// Small noise around zero, uniform in [-0.9, 0.9): the classic spinodal-decomposition start, the
/// initial state the CLI's init, the benchmarks and the tests draw.
template <class T>
[[nodiscard]] std::vector<T> random_state(std::size_t n, std::uint64_t seed);

}  // namespace tapeflow::workloads::allen_cahn
