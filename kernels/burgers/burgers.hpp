// SPDX-License-Identifier: Apache-2.0
// The Burgers workload: viscous Burgers' equation on a periodic line of n cells, T explicit steps,
// L = 0.5 * sum(u_T^2), gradient dL/du_0 through tapeflow's tape. A stencil whose reverse needs
// its neighbours' values: on the CPU backend's one-step chain the tape holds each value once and
// the reverse reads the neighbours through a halo of one record on each side of its tile; on a
// GPU, and in segments (--segment K) on either, it runs on the stencil library
// (docs/stencils.md), whose tile program recomputes the halo on chip. See docs/workloads/burgers.md.
#pragma once

#include <tapeflow/workloads/burgers/math.hpp>
#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>
#include <tapeflow/workloads/common/state_gradient.hpp>

#include <tapeflow/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::burgers {

struct problem {
  std::size_t n{0};       ///< cells
  std::size_t steps{0};   ///< T
  double a{0.1};          ///< advection number dt / (2 dx)
  double b{0.2};          ///< diffusion number nu dt / dx^2; the explicit scheme needs b <= 1/2
};

/// The chain's options and the steps per segment (stencil_options::segment: 1, one step per
/// layer; K > 1, segments of K steps recomputed on chip in the reverse; 0, the planner's K).
struct options : stencil_options {};

// gradient_result<T> (dL/du_0 and L), gradient(), primal(), loss(): state_gradient.hpp.
using namespace workloads::state_workload;

/// The problem alone: throws logic_error unless 1 <= n <= 2^40, steps >= 1, a is finite and
/// 0 < b <= 1/2.
void validate(problem const& p);
/// Throws what validate(p) throws, and logic_error unless `values` == n.
void validate(problem const& p, std::size_t values);

/// A session of this problem on `o.kind`: its input is u_0 (n values), its gradient dL/du_0.
/// Throws what validate() throws, logic_error for a segment length the device cannot hold, and
/// unavailable_error for a backend without kernels in this build.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// What gradient() will do (policy, tape size, tiling and halo, or segments), without running it.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// A smooth random start: u_j = sum of 4 sines of random phase and amplitude 0.1 to 0.5.
template <class T>
[[nodiscard]] std::vector<T> random_state(problem const& p, std::uint64_t seed);

}  // namespace tapeflow::workloads::burgers
