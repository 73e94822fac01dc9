// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the LBM workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "lbm.hpp"

namespace tapeflow::workloads::lbm::detail {

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& f0, options const& o);
template <class T>
std::vector<T> primal_cpu(problem const& p, std::vector<T> const& f0, options const& o);

#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
/// The GPU backend of this build (CUDA or HIP): cuda.cu, compiled for one or the other.
template <class T>
gradient_result<T> gradient_gpu(problem const& p, std::vector<T> const& f0, options const& o);
template <class T>
std::vector<T> primal_gpu(problem const& p, std::vector<T> const& f0, options const& o);
#endif

}  // namespace tapeflow::workloads::lbm::detail
