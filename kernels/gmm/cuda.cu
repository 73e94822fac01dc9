// SPDX-License-Identifier: Apache-2.0
// GMM's session on the GPU (CUDA): the engine of cuda_step.cuh.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::gmm::detail {

std::unique_ptr<session<double>> open_gpu(problem const& p, options const& o)
{
  options granted = o;  // bulk copies are a preference, granted where the reverse kernel's code runs them
  granted.pipeline.bulk_copy = o.pipeline.bulk_copy && gpu_engine::bulk_copy_runs();
  return std::make_unique<gmm_session<gpu_engine>>(p, granted);
}

}  // namespace tapeflow::workloads::gmm::detail
