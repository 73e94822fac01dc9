// SPDX-License-Identifier: Apache-2.0
// The LBM D2Q9 workload: a periodic nx x ny lattice, T steps of BGK collision and streaming,
// L = 0.5 * sum(f_T^2), gradient dL/df_0 through tapeflow's tape. See docs/workloads/lbm.md.
#pragma once

#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>
#include <tapeflow/workloads/common/state_gradient.hpp>

#include <tapeflow/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::lbm {

struct problem {
  std::size_t nx{0};      ///< lattice width (cell = y * nx + x)
  std::size_t ny{0};      ///< lattice height
  std::size_t steps{0};   ///< T
  double tau{0.8};        ///< BGK relaxation time; omega = 1 / tau; stable only above 0.5

  [[nodiscard]] std::size_t cells() const noexcept { return nx * ny; }
  /// Values of the state f: 9 planes of nx * ny.
  [[nodiscard]] std::size_t values() const noexcept { return 9 * nx * ny; }
};

/// The chain's options and --segment (docs/stencils.md): 1 (the default) one step per layer, the
/// layer being the cells' velocities; K > 1 segments of K steps on the stencil library (stencil.hpp);
/// 0 whichever moves fewer bytes. Ranks cut the lattice along y (docs/distributed.md).
struct options : stencil_options {};

// gradient_result<T> (dL/df_0 (9 planes of nx * ny) and L), gradient(), primal(), loss(): state_gradient.hpp.
using namespace workloads::state_workload;

/// The problem alone: throws logic_error unless nx, ny, steps >= 1, tau > 0.5 (finite) and the
/// lattice is at most 2^40 cells.
void validate(problem const& p);
/// Throws what validate(p) throws, and logic_error unless `values` == 9*nx*ny.
void validate(problem const& p, std::size_t values);

/// A session of this problem on `o.kind`: its input is f_0 (9 planes of nx*ny values), its
/// gradient dL/df_0. Throws what validate() throws, and unavailable_error for a backend without
/// kernels.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// What gradient() will do for this problem and these options (policy, tape size, tiling),
/// without running it.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// A random near-equilibrium state, the distribution every test, benchmark and peer uses:
/// per cell rho = 1 + 0.1 r, u = 0.05 (r', r'') (so |u| < 0.071), and
/// f_i = feq_i(rho, u) (1 + 0.05 r_i), with r, r', r'', r_i uniform in [-1, 1).
template <class T>
[[nodiscard]] std::vector<T> random_state(problem const& p, std::uint64_t seed);

}  // namespace tapeflow::workloads::lbm
