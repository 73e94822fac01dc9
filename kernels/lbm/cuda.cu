// SPDX-License-Identifier: Apache-2.0
// LBM's session on the GPU (CUDA, or HIP through the platform header): the chain step of
// cuda_step.cuh, or in segments (and over ranks) the stencil library's (stencil.hpp); the loss as
// one device reduction.
#include "backends.hpp"
#include "cuda_step.cuh"

#include <tapeflow/workloads/common/device_loss.cuh>
#include <tapeflow/workloads/common/state_chain.hpp>

#include <tapeflow/stencil/device.cuh>

namespace tapeflow::workloads::lbm::detail {

template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o)
{
  if (auto const plan = segments_of<T>(p, o)) {
    return open_stencil_segments(stencil<T>{omega_of<T>(p)}, grid_of<T>(p), *plan, o,
                                 tapeflow::stencil::device_segments_maker{}, device_half_squares<T>{});
  }
  int const sms = query_device_limits(gpu_backend).multiprocessors;
  return open_state_chain<T>(cuda_step<T>{p.nx, p.ny, omega_of<T>(p), sms}, p.steps, o, device_half_squares<T>{});
}

template std::unique_ptr<session<float>> open_gpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_gpu(problem const&, options const&);

}  // namespace tapeflow::workloads::lbm::detail
