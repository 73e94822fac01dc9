// SPDX-License-Identifier: Apache-2.0
// Burgers' session on the GPU (CUDA, or HIP through the platform header): the stencil library's
// step (stencil.hpp), one step per launch or segments of k, the loss as one device reduction.
#include "backends.hpp"

#include <tapeflow/workloads/common/device_loss.cuh>

#include <tapeflow/stencil/device.cuh>

namespace tapeflow::workloads::burgers::detail {

template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o)
{
  return open_stencil_segments(stencil<T>{coefficients_of<T>(p)}, grid_of<T>(p), segment_plan_of<T>(p, o), o,
                               tapeflow::stencil::device_segments_maker{}, device_half_squares<T>{});
}

template std::unique_ptr<session<float>> open_gpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_gpu(problem const&, options const&);

}  // namespace tapeflow::workloads::burgers::detail
