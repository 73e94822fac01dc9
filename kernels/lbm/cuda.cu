// SPDX-License-Identifier: Apache-2.0
// LBM on the GPU (CUDA, or HIP through the platform header): the workload's entry points over the
// chain step of cuda_step.cuh.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::lbm::detail {

template <class T>
gradient_result<T> gradient_gpu(problem const& p, std::vector<T> const& f0, options const& o)
{
  cuda_step<T> step{p.nx, p.ny, omega_of<T>(p), query_device_limits(gpu_backend).multiprocessors};
  return run_gradient<T>(
    std::move(step), [](device_buffer const& state, stream_view s) { return workloads::detail::half_sum_of_squares_on_device<T>(state, s); }, p, f0, o);
}

template <class T>
std::vector<T> primal_gpu(problem const& p, std::vector<T> const& f0, options const& o)
{
  cuda_step<T> const step{p.nx, p.ny, omega_of<T>(p), query_device_limits(gpu_backend).multiprocessors};
  return run_primal<T>([&step](T const* in, T* out, stream_view s) { step.forward(0, in, out, s); }, p, f0, o);
}

template gradient_result<float> gradient_gpu(problem const&, std::vector<float> const&, options const&);
template gradient_result<double> gradient_gpu(problem const&, std::vector<double> const&, options const&);
template std::vector<float> primal_gpu(problem const&, std::vector<float> const&, options const&);
template std::vector<double> primal_gpu(problem const&, std::vector<double> const&, options const&);

}  // namespace tapeflow::workloads::lbm::detail
