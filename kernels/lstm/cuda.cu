// SPDX-License-Identifier: Apache-2.0
// The LSTM's session on CUDA: the chain step of cuda_step.cuh, one cuBLAS handle per session.
#include "backends.hpp"
#include "cuda_step.cuh"
#include "driver.hpp"

namespace tapeflow::workloads::lstm::detail {
namespace {

/// What the CUDA steps share: the cuBLAS handle (the session owns the kit, so it outlives them).
template <class T>
struct cuda_kit {
  using step_type = cuda_step<T>;
  device::blas_handle blas;
  int multiprocessors = query_device_limits(backend::cuda).multiprocessors;

  [[nodiscard]] step_type step(problem const& p, step_buffers<T> buf) const { return {p, buf, &blas, multiprocessors}; }
  [[nodiscard]] static cpu::ring_stats staging() noexcept { return {}; }
};

}  // namespace

template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o)
{
  return std::make_unique<lstm_session<T, cuda_kit<T>>>(p, o, cuda_kit<T>{});
}

template std::unique_ptr<session<float>> open_gpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_gpu(problem const&, options const&);

}  // namespace tapeflow::workloads::lstm::detail
