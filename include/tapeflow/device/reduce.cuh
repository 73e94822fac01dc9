// SPDX-License-Identifier: Apache-2.0
// Device-wide reductions behind one interface: CUB on CUDA (and the emulated device's CUB subset),
// rocPRIM on HIP. The calls keep CUB's two-phase protocol — with temp == nullptr they only set
// temp_bytes; then they reduce, ordered on `stream` — so a caller can size its temporary storage
// once and reuse it. Each returns the platform's status (check it with TAPEFLOW_CUDA_TRY).
//
//   std::size_t bytes = 0;
//   TAPEFLOW_CUDA_TRY(device::sum(nullptr, bytes, in, out, n, s));
//   device_buffer temp(kind, bytes, s);
//   TAPEFLOW_CUDA_TRY(device::sum(temp.data(), bytes, in, out, n, s));
//
// Iterators: make_transform_iterator and make_counting_iterator give the platform's (Thrust's on
// CUDA, rocPRIM's on HIP).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#if defined(TAPEFLOW_PLATFORM_HIP)
#include <rocprim/rocprim.hpp>
#else
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#endif

namespace tapeflow::device {

/// a + b, on every platform.
struct plus {
  template <class T>
  __host__ __device__ T operator()(T const& a, T const& b) const
  {
    return a + b;
  }
};

#if defined(TAPEFLOW_PLATFORM_HIP)

template <class It, class F>
auto make_transform_iterator(It it, F f)
{
  return rocprim::make_transform_iterator(it, f);
}
template <class I>
auto make_counting_iterator(I start)
{
  return rocprim::make_counting_iterator(start);
}

#else

template <class It, class F>
auto make_transform_iterator(It it, F f)
{
  return thrust::make_transform_iterator(it, f);
}
template <class I>
auto make_counting_iterator(I start)
{
  return thrust::counting_iterator<I>(start);
}

#endif

/// *out = op(...op(op(init, in[0]), in[1])..., in[count-1]) (any association: op must be
/// associative, and the result is the platform's summation order).
template <class In, class Out, class Op, class T>
cudaError_t reduce(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t count, Op op, T init,
                   stream_view stream)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  return rocprim::reduce(temp, temp_bytes, in, out, init, static_cast<std::size_t>(count), op, to_native(stream));
#else
  return cub::DeviceReduce::Reduce(temp, temp_bytes, in, out, count, op, init, to_native(stream));
#endif
}

/// *out = in[0] + ... + in[count-1].
template <class In, class Out>
cudaError_t sum(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t count, stream_view stream)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  using value = std::remove_reference_t<decltype(*out)>;
  return reduce(temp, temp_bytes, in, out, count, plus{}, value{0}, stream);
#else
  return cub::DeviceReduce::Sum(temp, temp_bytes, in, out, count, to_native(stream));
#endif
}

/// *out = op(... op(init, f(in[0])) ..., f(in[count-1])).
template <class In, class Out, class Op, class F, class T>
cudaError_t transform_reduce(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t count, Op op, F f,
                             T init, stream_view stream)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  return reduce(temp, temp_bytes, make_transform_iterator(in, f), out, count, op, init, stream);
#else
  return cub::DeviceReduce::TransformReduce(temp, temp_bytes, in, out, count, op, f, init, to_native(stream));
#endif
}

/// out[s] = the reduction of in[begin[s]] ... in[end[s] - 1] from init, for each of `segments`.
template <class In, class Out, class Offsets, class Op, class T>
cudaError_t segmented_reduce(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t segments,
                             Offsets begin, Offsets end, Op op, T init, stream_view stream)
{
#if defined(TAPEFLOW_PLATFORM_HIP)
  return rocprim::segmented_reduce(temp, temp_bytes, in, out, static_cast<unsigned>(segments), begin, end, op, init,
                                   to_native(stream));
#else
  return cub::DeviceSegmentedReduce::Reduce(temp, temp_bytes, in, out, segments, begin, end, op, init,
                                            to_native(stream));
#endif
}

}  // namespace tapeflow::device
