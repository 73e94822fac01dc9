// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the GMM workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "gmm.hpp"

namespace tapeflow::workloads::gmm::detail {

double objective_cpu(problem const& p, inputs const& in, options const& o);
gradient_result gradient_cpu(problem const& p, inputs const& in, options const& o);
bench_result benchmark_cpu(problem const& p, inputs const& in, options const& o, int warmup, int repeats);

#if defined(TAPEFLOW_HAS_CUDA)
/// The CUDA backend (cuda.cu): CUB reductions, so CUDA only.
double objective_gpu(problem const& p, inputs const& in, options const& o);
gradient_result gradient_gpu(problem const& p, inputs const& in, options const& o);
bench_result benchmark_gpu(problem const& p, inputs const& in, options const& o, int warmup, int repeats);
#endif

}  // namespace tapeflow::workloads::gmm::detail
