// SPDX-License-Identifier: Apache-2.0
// The LBM D2Q9 workload: a periodic nx x ny lattice, T steps of BGK collision and streaming,
// L = 0.5 * sum(f_T^2), gradient dL/df_0 through tapeflow's tape. See docs/workloads/lbm.md.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
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

struct options {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::automatic};
  std::size_t budget_bytes{0};       ///< device bytes the tape may hold; 0: no limit
  std::size_t host_budget_bytes{0};  ///< pinned host bytes the host tier may hold; 0: no limit
  bandwidths bw{};                   ///< copy bandwidths for the planner; zeros: measured
  pipeline_request pipeline{};       ///< tile/stage/thread overrides
  /// Stream the work is ordered on (the backend's default stream when default-constructed).
  /// gradient() and primal() return host vectors, so they wait for it before returning.
  stream_view stream{};
  bool measure_time{true};
  /// Keep the tape resident and replay the reverse as one captured program (store policy only).
  bool capture_reverse{false};
  /// Fill every buffer the chain writes with NaN before it is written (tests).
  bool poison{false};
  std::function<void(chain_phase, std::size_t, std::size_t)> progress{};
};

template <class T>
struct gradient_result {
  T loss{};
  std::vector<T> gradient;             ///< dL/df_0, 9 planes of nx * ny
  chain_stats chain{};
  std::size_t peak_device_bytes{0};    ///< every tapeflow allocation on the backend, peak
  cpu::ring_stats staging{};           ///< CPU backend only
};

/// Throws logic_error unless nx, ny, steps >= 1, tau > 0.5 (finite), 9*nx*ny does not overflow
/// and `values` == 9*nx*ny.
void validate(problem const& p, std::size_t values);

/// dL/df_0 and L for the initial state `f0` (9 planes of nx*ny values).
template <class T>
[[nodiscard]] gradient_result<T> gradient(problem const& p, std::vector<T> const& f0, options const& o);

/// What gradient() will do for this problem and these options (policy, tape size, tiling),
/// without running it.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// f_T for the initial state `f0`, without a tape.
template <class T>
[[nodiscard]] std::vector<T> primal(problem const& p, std::vector<T> const& f0, options const& o);

/// L = 0.5 * sum(f^2), accumulated in double.
template <class T>
[[nodiscard]] T loss(std::vector<T> const& f);

/// A random near-equilibrium state, the distribution every test, benchmark and peer uses:
/// per cell rho = 1 + 0.1 r, u = 0.05 (r', r'') (so |u| < 0.071), and
/// f_i = feq_i(rho, u) (1 + 0.05 r_i), with r, r', r'', r_i uniform in [-1, 1).
template <class T>
[[nodiscard]] std::vector<T> random_state(problem const& p, std::uint64_t seed);

}  // namespace tapeflow::workloads::lbm
