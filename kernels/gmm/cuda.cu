// SPDX-License-Identifier: Apache-2.0
// GMM on the GPU (CUDA): the workload's entry points over the engine of cuda_step.cuh.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::gmm::detail {
namespace {
/// Bulk copies are a preference, granted where the reverse kernel's loaded code runs them.
options granted(options o)
{
  o.pipeline.bulk_copy = o.pipeline.bulk_copy && gpu_engine::bulk_copy_runs();
  return o;
}
}  // namespace

double objective_gpu(problem const& p, inputs const& in, options const& o)
{
  return run_objective<gpu_engine>(p, in, granted(o));
}

gradient_result gradient_gpu(problem const& p, inputs const& in, options const& o)
{
  return run_gradient<gpu_engine>(p, in, granted(o));
}

bench_result benchmark_gpu(problem const& p, inputs const& in, options const& o, int warmup, int repeats)
{
  return run_benchmark<gpu_engine>(p, in, granted(o), warmup, repeats);
}

}  // namespace tapeflow::workloads::gmm::detail
