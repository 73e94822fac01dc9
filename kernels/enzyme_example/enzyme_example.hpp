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
#include <memory>
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
/// The example's chain opened on x0 (on o.kind, the hand-written pair of math.hpp, or Enzyme's
/// kernels: enzyme_device.hpp): its sweeps one by one, device-resident, for a benchmark to time.
class sweeps {
 public:
  virtual ~sweeps() = default;
  /// x_0 -> x_T, taping. Asynchronous on the default stream.
  virtual void forward() = 0;
  /// dL/dx_T = x_T -> dL/dx_0, consuming the forward's tape. Asynchronous on the default stream.
  virtual void reverse() = 0;
  /// The loss and gradient of the last forward and reverse, downloaded.
  [[nodiscard]] virtual result collect() = 0;
};

/// The hand-written pair's sweeps. Throws logic_error for a zero size or an x0 not of n values,
/// unavailable_error when the build has no kernels for o.kind.
[[nodiscard]] std::unique_ptr<sweeps> open(problem const& p, std::vector<double> const& x0, options const& o);

/// forward(), reverse(), collect().
[[nodiscard]] result gradient(sweeps& s);

/// gradient(*open(p, x0, o)).
[[nodiscard]] result gradient(problem const& p, std::vector<double> const& x0, options const& o);

}  // namespace tapeflow::workloads::enzyme_example
