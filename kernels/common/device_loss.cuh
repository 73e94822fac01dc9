// SPDX-License-Identifier: Apache-2.0
// L = 0.5 * sum(x^2) over a state on the GPU, one device-wide reduction (device/reduce.cuh: CUB on
// CUDA, rocPRIM on HIP, a host loop on the emulated device). Shared by the workloads with that loss
// (Allen–Cahn, LBM).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/reduce.cuh>
#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include <cstdint>
#include <optional>

namespace tapeflow::workloads {

namespace detail {
template <class T>
struct half_square {
  __host__ __device__ T operator()(T v) const noexcept { return T(0.5) * v * v; }
};
}  // namespace detail

/// 0.5 * sum(x^2) of the `T` values of a buffer on the GPU backend, ordered on the stream it is
/// given; waits for it. Keeps its result and scratch buffers from the first call on.
template <class T>
class device_half_squares {
 public:
  T operator()(device_buffer const& x, stream_view s)
  {
    auto const count = static_cast<std::int64_t>(x.size() / sizeof(T));
    if (!out_) { out_.emplace(gpu_backend, sizeof(T), s); }
    auto reduce = [&](void* temp, std::size_t& temp_bytes) {
      return device::transform_reduce(temp, temp_bytes, x.data_as<T>(), out_->data_as<T>(), count, device::plus{},
                                      detail::half_square<T>{}, T(0), s);
    };
    std::size_t temp_bytes = 0;
    TAPEFLOW_CUDA_TRY(reduce(nullptr, temp_bytes));
    if (!temp_ || temp_->size() < temp_bytes) { temp_.emplace(gpu_backend, temp_bytes == 0 ? 1 : temp_bytes, s); }
    temp_bytes = temp_->size();
    TAPEFLOW_CUDA_TRY(reduce(temp_->data(), temp_bytes));
    T loss{};
    out_->download(&loss, sizeof(T), s);
    return loss;
  }

 private:
  std::optional<device_buffer> out_;
  std::optional<device_buffer> temp_;
};

}  // namespace tapeflow::workloads
