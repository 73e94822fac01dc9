// SPDX-License-Identifier: Apache-2.0
// The Enzyme interop example as a workload: a chain of `steps` launches, each applying the
// Enzyme-shaped function of math.hpp to every element; L = 0.5 * sum(x_T^2); dL/dx_0 through
// per-thread tape slots of a run-time size, staged back by the tile pipeline, under any policy.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <vector>

namespace tapeflow::workloads::enzyme_example {

struct problem {
  std::size_t n{0};      ///< elements (threads)
  std::size_t steps{0};  ///< launches (layers)
  std::size_t inner{0};  ///< K: the inner loop's length, known at run time
  double a{0.5};
};

struct options {
  backend kind{backend::cpu};
  tape_policy policy{tape_policy::automatic};
  std::size_t budget_bytes{0};
  bandwidths bw{};
  pipeline_request pipeline{};
  bool poison{false};
};

struct result {
  double loss{0};
  std::vector<double> gradient;
  chain_stats chain{};
};

/// dL/dx0. Throws logic_error for sizes of zero or values that do not match n.
[[nodiscard]] result gradient(problem const& p, std::vector<double> const& x0, options const& o);

}  // namespace tapeflow::workloads::enzyme_example
