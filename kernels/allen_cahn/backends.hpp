// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the Allen–Cahn workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "allen_cahn.hpp"

namespace tapeflow::workloads::allen_cahn::detail {

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
std::vector<T> primal_cpu(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
bench_result benchmark_cpu(problem const& p, std::vector<T> const& u0, options const& o, int warmup, int repeats);

#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
/// The GPU backend of this build (CUDA or HIP): cuda.cu, compiled for one or the other.
template <class T>
gradient_result<T> gradient_gpu(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
std::vector<T> primal_gpu(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
bench_result benchmark_gpu(problem const& p, std::vector<T> const& u0, options const& o, int warmup, int repeats);
#endif

}  // namespace tapeflow::workloads::allen_cahn::detail
