// SPDX-License-Identifier: Apache-2.0
// L = 0.5 * sum(x^2) over a state on the GPU, one device-wide reduction (device/reduce.cuh: CUB on
// CUDA, rocPRIM on HIP, a host loop on the emulated device). Shared by the workloads with that loss
// (Allen–Cahn, LBM).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/reduce.cuh>
#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

namespace tapeflow::workloads::detail {

template <class T>
struct half_square {
  __host__ __device__ T operator()(T v) const noexcept { return T(0.5) * v * v; }
};

/// 0.5 * sum(x^2) of the `T` values in `state` (on the GPU backend), ordered on `s`; waits for it.
template <class T>
T half_sum_of_squares_on_device(device_buffer const& state, stream_view s)
{
  auto const count = static_cast<std::int64_t>(state.size() / sizeof(T));
  device_buffer out(gpu_backend, sizeof(T), s);
  std::size_t temp_bytes = 0;
  auto reduce = [&](void* temp) {
    return device::transform_reduce(temp, temp_bytes, state.data_as<T>(), out.data_as<T>(), count, device::plus{},
                                    half_square<T>{}, T(0), s);
  };
  TAPEFLOW_CUDA_TRY(reduce(nullptr));
  device_buffer temp(gpu_backend, temp_bytes == 0 ? 1 : temp_bytes, s);
  TAPEFLOW_CUDA_TRY(reduce(temp.data()));
  T loss{};
  out.download(&loss, sizeof(T), s);
  return loss;
}

}  // namespace tapeflow::workloads::detail
