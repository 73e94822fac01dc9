// SPDX-License-Identifier: Apache-2.0
// The LSTM on CUDA: the workload's entry points over the chain step of cuda_step.cuh, one cuBLAS
// handle per call.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::lstm::detail {

template <class T>
gradient_result<T> gradient_cuda(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o)
{
  int const sms = query_device_limits(backend::cuda).multiprocessors;
  device::blas_handle const blas;
  return run_gradient<T>([&](step_buffers<T> buf) { return cuda_step<T>{p, buf, &blas, sms}; }, p, params, seq, o);
}

template <class T>
final_state<T> primal_cuda(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o)
{
  int const sms = query_device_limits(backend::cuda).multiprocessors;
  device::blas_handle const blas;
  return run_primal<T>([&](step_buffers<T> buf) { return cuda_step<T>{p, buf, &blas, sms}; }, p, params, seq, o);
}

template gradient_result<float> gradient_cuda(problem const&, weights<float> const&, sequence<float> const&,
                                              options const&);
template gradient_result<double> gradient_cuda(problem const&, weights<double> const&, sequence<double> const&,
                                               options const&);
template final_state<float> primal_cuda(problem const&, weights<float> const&, sequence<float> const&,
                                        options const&);
template final_state<double> primal_cuda(problem const&, weights<double> const&, sequence<double> const&,
                                         options const&);

}  // namespace tapeflow::workloads::lstm::detail
