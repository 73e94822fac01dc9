// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the Allen–Cahn workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "allen_cahn.hpp"

namespace tapeflow::workloads::allen_cahn::detail {

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
std::vector<T> primal_cpu(problem const& p, std::vector<T> const& u0, options const& o);

#if defined(TAPEFLOW_HAS_CUDA)
template <class T>
gradient_result<T> gradient_cuda(problem const& p, std::vector<T> const& u0, options const& o);
template <class T>
std::vector<T> primal_cuda(problem const& p, std::vector<T> const& u0, options const& o);
#endif

}  // namespace tapeflow::workloads::allen_cahn::detail
