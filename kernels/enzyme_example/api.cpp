// SPDX-License-Identifier: Apache-2.0
#include "enzyme_example.hpp"
#include "steps.hpp"

#include <tapeflow/error.hpp>

namespace tapeflow::workloads::enzyme_example {

result gradient(problem const& p, std::vector<double> const& x0, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::gradient_cpu(p, x0, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::gradient_gpu(p, x0, o);
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return detail::gradient_gpu(p, x0, o);
#endif
    default:
      TAPEFLOW_FAIL(unavailable_error, "the Enzyme example has no " + std::string{to_string(o.kind)} +
                                         " kernels in this build");
  }
}

}  // namespace tapeflow::workloads::enzyme_example
