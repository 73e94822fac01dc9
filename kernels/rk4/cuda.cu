// SPDX-License-Identifier: Apache-2.0
// RK4 particles on the GPU (CUDA, or HIP through the platform header): the workload's entry points
// over the kernels of cuda_step.cuh and the backend-independent driver.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::rk4::detail {

template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o)
{
  return std::make_unique<rk4_session<T, gpu_kernels<T>>>(gpu_kernels<T>{p.particles}, p, o);
}

template <class T>
primal_result<T> primal_gpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o)
{
  return run_primal<T>(gpu_kernels<T>{p.particles}, p, state0, budgets, o);
}

template <class T>
std::vector<T> budgets_gpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o)
{
  return run_budgets<T>(gpu_kernels<T>{p.particles}, p, state0, targets, o);
}

template std::unique_ptr<session<float>> open_gpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_gpu(problem const&, options const&);
template primal_result<float> primal_gpu(problem const&, std::vector<float> const&, std::vector<float> const&,
                                         options const&);
template primal_result<double> primal_gpu(problem const&, std::vector<double> const&, std::vector<double> const&,
                                          options const&);
template std::vector<float> budgets_gpu(problem const&, std::vector<float> const&, std::vector<std::uint32_t> const&,
                                        options const&);
template std::vector<double> budgets_gpu(problem const&, std::vector<double> const&,
                                         std::vector<std::uint32_t> const&, options const&);

}  // namespace tapeflow::workloads::rk4::detail
