// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the RK4 workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "rk4.hpp"

namespace tapeflow::workloads::rk4::detail {

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                                options const& o);
template <class T>
primal_result<T> primal_cpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o);
template <class T>
std::vector<T> budgets_cpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o);

#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
/// The GPU backend of this build (CUDA or HIP): cuda.cu, compiled for one or the other.
template <class T>
gradient_result<T> gradient_gpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                                options const& o);
template <class T>
primal_result<T> primal_gpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o);
template <class T>
std::vector<T> budgets_gpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o);
#endif

}  // namespace tapeflow::workloads::rk4::detail
