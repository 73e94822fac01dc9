// SPDX-License-Identifier: Apache-2.0
// L = 0.5 * sum(x^2) over a state on the GPU, one device-wide reduction: CUB on CUDA, rocPRIM on
// HIP. Shared by the workloads with that loss (Allen–Cahn, LBM).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#if defined(TAPEFLOW_PLATFORM_HIP)
#include <rocprim/rocprim.hpp>
#else
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#endif

namespace tapeflow::workloads::detail {

template <class T>
struct half_square {
  __host__ __device__ T operator()(T v) const noexcept { return T(0.5) * v * v; }
};

/// 0.5 * sum(x^2) of the `T` values in `state` (on the GPU backend), ordered on `s`; waits for it.
template <class T>
T half_sum_of_squares_on_device(device_buffer const& state, stream_view s)
{
  std::size_t const count = state.size() / sizeof(T);
  device_buffer out(gpu_backend, sizeof(T), s);
  std::size_t temp_bytes = 0;
#if defined(TAPEFLOW_PLATFORM_HIP)
  auto const squares = rocprim::make_transform_iterator(state.data_as<T>(), half_square<T>{});
  auto reduce = [&](void* temp) {
    return rocprim::reduce(temp, temp_bytes, squares, out.data_as<T>(), T(0), count, rocprim::plus<T>{},
                           to_native(s));
  };
#else
  auto reduce = [&](void* temp) {
    return cub::DeviceReduce::TransformReduce(temp, temp_bytes, state.data_as<T>(), out.data_as<T>(), count,
                                              cuda::std::plus<T>{}, half_square<T>{}, T(0), to_native(s));
  };
#endif
  TAPEFLOW_CUDA_TRY(reduce(nullptr));
  device_buffer temp(gpu_backend, temp_bytes == 0 ? 1 : temp_bytes, s);
  TAPEFLOW_CUDA_TRY(reduce(temp.data()));
  T loss{};
  out.download(&loss, sizeof(T), s);
  return loss;
}

}  // namespace tapeflow::workloads::detail
