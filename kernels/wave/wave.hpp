// SPDX-License-Identifier: Apache-2.0
// The acoustic wave workload: the wave equation, second order in time, on a 2-D or 3-D grid with
// a Ricker source at its centre and a line of receivers; the misfit of the recorded traces
// against observed data at every step; the gradient with respect to the squared slowness m of
// every cell — the full-waveform-inversion gradient of seismic imaging. See docs/workloads/wave.md.
#pragma once

#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>
#include <tapeflow/workloads/wave/math.hpp>

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::wave {

/// The grid (nz = 1: 2-D), the time stepping and the source. The source sits at the grid's centre;
/// the receivers are every x of the row y = 1 (y = 0 when ny = 1) in the middle z-plane.
struct problem {
  std::size_t nx{0};
  std::size_t ny{0};
  std::size_t nz{1};
  std::size_t steps{0};           ///< T
  double dt{0.2};
  double h{1.0};                  ///< grid spacing
  double peak_frequency{0.1};     ///< of the Ricker source wavelet

  [[nodiscard]] std::size_t cells() const noexcept { return nx * ny * nz; }
  [[nodiscard]] std::size_t receivers() const noexcept { return nx; }
};

/// How the gradient runs: the chain's options, and its segments (stencil_options::segment: 1, the
/// default, tapes s_t and u_t at every step; K > 1 or 0 (auto) runs the stencil library's segments,
/// segments.hpp).
struct options : stencil_options {};

/// States (u_{t-1} and u_t: two values per cell) the one-step chain's gradient moves per step: the
/// forward reads u_{t-1}, u_t and m and writes u_t, u_{t+1} and the tape's s and u (7 values per
/// cell); the reverse reads the tape, both adjoints and m, writes both adjoints and updates dL/dm
/// (9). What --segment auto compares the segments' plan with.
inline constexpr double one_step_states_per_step = 16.0 / 2.0;

/// L and dL/dm, with what the chain did.
template <class T>
struct gradient_result {
  T loss{};
  std::vector<T> gradient;           ///< dL/dm, one value per cell
  chain_stats chain{};
  std::size_t peak_device_bytes{0};  ///< every tapeflow allocation on the backend, peak
  cpu::ring_stats staging{};         ///< CPU backend only
};

/// Throws logic_error unless nx, ny, nz >= 1 (nx, ny >= 2), steps >= 1, dt, h and the peak
/// frequency are positive and finite, and the grid's size does not overflow.
void validate(problem const& p);

/// The grid and acquisition of `p` in precision T.
template <class T>
[[nodiscard]] geometry<T> geometry_of(problem const& p);

/// A session of this problem on `o.kind`: its inputs are m (one positive value per cell, x fastest)
/// and the observed data d (T x receivers, step-major), its gradient dL/dm, its loss the misfit.
/// Loading m checks its values: finite, positive and within the time step's stability limit
/// (dt <= h sqrt(min m / dims)), a logic_error otherwise. Throws what validate() throws, and
/// unavailable_error for a backend without kernels.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// L and dL/dm for the model `m` and the data `d`.
template <class T>
[[nodiscard]] gradient_result<T> gradient(problem const& p, std::vector<T> const& m, std::vector<T> const& d,
                                          options const& o);

/// What gradient() will do (policy, tape size, tiling), without running it.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// A smooth random model: m = 0.55 + 0.35 sin(...) products of random phase, within [0.2, 0.9]
/// (wave speeds 1.05 to 2.24), stable for dt <= 0.2 h.
template <class T>
[[nodiscard]] std::vector<T> random_model(problem const& p, std::uint64_t seed);

}  // namespace tapeflow::workloads::wave
