// SPDX-License-Identifier: Apache-2.0
// The GMM workload: ADBench's Gaussian-mixture objective (d dimensions, K components, N points,
// f64) and its gradient with respect to alphas, means and the inverse-covariance factors, through
// one tape layer of per-(point, component) records. See docs/workloads/gmm.md.
#pragma once

#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/gmm/math.hpp>
#include <tapeflow/workloads/common/session.hpp>

#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::workloads::gmm {

struct problem {
  std::size_t d{0};    ///< dimensions
  std::size_t k{0};    ///< components
  std::size_t n{0};    ///< points
  double gamma{1.0};   ///< Wishart prior
  int m{0};
};

/// The parameters and the data, laid out as ADBench lays them out (row-major).
struct inputs {
  std::vector<double> alphas;  ///< K
  std::vector<double> means;   ///< K x d
  std::vector<double> icf;     ///< K x d(d+1)/2: log-diagonal, then the strict lower triangle column by column
  std::vector<double> x;       ///< N x d
};

/// Where GMM runs (base_options; `progress` is called once after the forward and once after the
/// reverse, (forward, 1, 1) and (reverse, 1, 1): GMM's tape is one layer) and how its layer is tiled.
struct options : base_options {
  /// Tile and stage overrides for the tape layer. tile_records must be a multiple of 32 (64 points)
  /// and at most 2^20; the GPU reverse kernel runs 256-thread blocks.
  pipeline_request pipeline{};
};

struct gradient_result {
  double objective{0};
  std::vector<double> d_alphas;  ///< K
  std::vector<double> d_means;   ///< K x d
  std::vector<double> d_icf;     ///< K x d(d+1)/2
  pipeline_plan plan{};          ///< the tape layer's tiling and the reverse launch
  std::size_t tape_bytes{0};
  std::size_t peak_device_bytes{0};  ///< every tapeflow allocation on the backend, peak
  cpu::ring_stats staging{};         ///< CPU backend only
};

/// The problem alone: throws logic_error unless d, K, N >= 1, gamma > 0, m >= 0 and the sizes are
/// within the workload's limits (d <= 4096, K <= 2^24, N <= 2^34, N K <= 2^40).
void validate(problem const& p);
/// Throws what validate(p) throws, and logic_error unless every array has the length the problem
/// needs.
void validate(problem const& p, inputs const& in);

/// ADBench-like random inputs: x, means ~ U(0,1); alphas ~ N(0,1); icf ~ 0.1 N(0,1).
[[nodiscard]] inputs random_inputs(problem const& p, std::uint64_t seed);

/// A session of this problem on `o.kind`: its inputs are alphas, means, icf and x, its gradients
/// d alphas, d means and d icf, its loss the objective (f64). Throws logic_error for a bad problem,
/// unavailable_error on a backend without GMM kernels (HIP).
[[nodiscard]] std::unique_ptr<session<double>> open(problem const& p, options const& o);

/// The objective, without a tape.
[[nodiscard]] double objective(problem const& p, inputs const& in, options const& o);

/// The objective and its gradient.
[[nodiscard]] gradient_result gradient(problem const& p, inputs const& in, options const& o);

/// The tape layer's tiling for this problem on `o.kind`, without running anything.
[[nodiscard]] pipeline_plan plan(problem const& p, options const& o);

}  // namespace tapeflow::workloads::gmm
