// SPDX-License-Identifier: Apache-2.0
// The RK4 particles workload: P particles, each integrated by classical RK4 in a smooth potential
// until its arc length reaches its own budget (at most max_steps steps: the trip count depends on
// the data and differs per thread). L = sum_p 0.5 (|x_p,end|^2 + |v_p,end|^2); the gradient is
// dL/d(x0, v0) per particle, through tapeflow's per-thread tape arena (or the Enzyme-style
// per-thread global stack as the baseline). See docs/workloads/rk4.md.
#pragma once

#include <tapeflow/workloads/rk4/math.hpp>

#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>

#include <tapeflow/thread_tape.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::rk4 {

struct well_spec {
  double centre[3];
  double amplitude;
  double sigma;
};

struct problem {
  std::size_t particles{0};
  /// The cap on any particle's steps: a particle that has not used its budget after max_steps
  /// steps stops there (a clamp, part of the problem's definition, not an error).
  std::size_t max_steps{512};
  double dt{0.01};
  double k{0.5};
  /// At most max_wells; the default: two wells and two bumps near the origin.
  std::vector<well_spec> wells{{{0.6, 0.0, 0.0}, -0.8, 0.5},
                               {{-0.5, 0.5, 0.2}, -0.6, 0.7},
                               {{0.0, -0.6, 0.4}, 0.5, 0.4},
                               {{0.2, 0.3, -0.7}, 0.4, 0.6}};
};

enum class method {
  arena,         ///< tapeflow's per-thread tape arena (chunked, warp-interleaved, tiered)
  global_stack,  ///< baseline: one contiguous stack of max_steps records per thread
};

/// Where RK4 runs (base_options; `progress` is called once after the forward and once after the
/// reverse are queued, (forward, 1, 1) and (reverse, 1, 1): a forward's segment count is known only
/// when it ends) and how it tapes.
struct options : base_options {
  method tape{method::arena};
  std::size_t chunk_steps{32};          ///< arena: steps per chunk
  std::size_t device_budget_bytes{0};   ///< arena: device bytes of chunk slots; 0: no limit
  std::size_t host_budget_bytes{0};     ///< arena: pinned bytes of pushed-out chunks; 0: no limit
  std::size_t prefetch_distance{2};     ///< arena: chunks prefetched ahead of the reverse
};

template <class T>
struct gradient_result {
  T loss{};
  std::vector<T> gradient;            ///< dL/d(x0, v0): 6 values per particle (x then v)
  std::vector<std::uint32_t> steps;   ///< each particle's trip count
  thread_tape_stats arena{};          ///< arena only
  std::size_t tape_bytes{0};          ///< bytes of tape storage the forward used
  std::size_t peak_device_bytes{0};   ///< every tapeflow allocation on the backend, peak
};

template <class T>
struct primal_result {
  std::vector<T> final_state;         ///< 6 values per particle
  std::vector<std::uint32_t> steps;
  T loss{};
};

/// The problem alone: throws logic_error unless 1 <= particles < 2^32, 1 <= max_steps < 2^31,
/// dt > 0, k >= 0, and at most max_wells wells with sigma > 0 (all finite).
void validate(problem const& p);
/// Throws what validate(p) throws, and logic_error unless `state_values` == 6 * particles and
/// `budget_values` == particles.
void validate(problem const& p, std::size_t state_values, std::size_t budget_values);

/// The potential and step parameters of a problem in precision T.
template <class T>
[[nodiscard]] params<T> params_of(problem const& p);

/// A session of this problem on `o.kind`: its inputs are the particles' states (6 values each, x
/// then v) and their arc-length budgets, its gradient dL/d(x0, v0). Throws logic_error for a bad
/// problem, unavailable_error for a backend without kernels.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// dL/d(x0, v0) and L. `state0`: 6 values per particle (x then v); `budgets`: one arc length per
/// particle (finite, >= 0).
template <class T>
[[nodiscard]] gradient_result<T> gradient(problem const& p, std::vector<T> const& state0,
                                          std::vector<T> const& budgets, options const& o);

/// The final states and trip counts with no tape.
template <class T>
[[nodiscard]] primal_result<T> primal(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                                      options const& o);

/// Budgets under which particle p takes exactly targets[p] steps (1 <= targets[p] <= max_steps):
/// the middle of its last step's arc increment, computed on o.kind in precision T.
template <class T>
[[nodiscard]] std::vector<T> budgets_for_steps(problem const& p, std::vector<T> const& state0,
                                               std::vector<std::uint32_t> const& targets, options const& o);

/// L = sum 0.5 (|x|^2 + |v|^2) of final states (6 values per particle), accumulated in double.
template <class T>
[[nodiscard]] T loss(std::vector<T> const& final_state);

/// Arena options from workload options.
[[nodiscard]] thread_tape_options arena_options(problem const& p, options const& o);

}  // namespace tapeflow::workloads::rk4
