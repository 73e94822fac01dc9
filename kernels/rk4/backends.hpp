// SPDX-License-Identifier: Apache-2.0
// The RK4 workload on each backend (cpu.cpp, cuda.cu), dispatched by api.cpp: its session, the
// untaped primal with its trip counts, the budgets for given trip counts.
#pragma once

#include "rk4.hpp"

namespace tapeflow::workloads::rk4::detail {

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o);
template <class T>
primal_result<T> primal_cpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o);
template <class T>
std::vector<T> budgets_cpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o);

// The GPU backend of this build (CUDA or HIP): cuda.cu, compiled for one or the other.
template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o);
template <class T>
primal_result<T> primal_gpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o);
template <class T>
std::vector<T> budgets_gpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o);

}  // namespace tapeflow::workloads::rk4::detail
