// SPDX-License-Identifier: Apache-2.0
#include "enzyme_example.hpp"
#include "steps.hpp"

#include <tapeflow/error.hpp>

namespace tapeflow::workloads::enzyme_example {

std::unique_ptr<sweeps> open(problem const& p, std::vector<double> const& x0, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::open_cpu(p, x0, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::open_gpu(p, x0, o);
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return detail::open_gpu(p, x0, o);
#endif
    default:
      TAPEFLOW_FAIL(unavailable_error, "the Enzyme example has no " + std::string{to_string(o.kind)} +
                                         " kernels in this build");
  }
}

result gradient(sweeps& s)
{
  s.forward();
  s.reverse();
  return s.collect();
}

result gradient(problem const& p, std::vector<double> const& x0, options const& o)
{
  return gradient(*open(p, x0, o));
}

}  // namespace tapeflow::workloads::enzyme_example
