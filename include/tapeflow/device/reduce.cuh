// SPDX-License-Identifier: Apache-2.0
// Device-wide reductions behind one interface: CUB on CUDA, rocPRIM on HIP, a host loop ordered on
// the stream on the emulated device. The calls keep CUB's two-phase protocol — with temp ==
// nullptr they only set temp_bytes; then they reduce, ordered on `stream` — so a caller can size
// its temporary storage once and reuse it. Each returns the platform's status (check it with
// TAPEFLOW_CUDA_TRY).
//
//   std::size_t bytes = 0;
//   TAPEFLOW_CUDA_TRY(device::sum(nullptr, bytes, in, out, n, s));
//   device_buffer temp(kind, bytes, s);
//   TAPEFLOW_CUDA_TRY(device::sum(temp.data(), bytes, in, out, n, s));
//
// Iterators: make_transform_iterator and make_counting_iterator give the platform's (Thrust's on
// CUDA, rocPRIM's on HIP, tapeflow's own on the emulated device).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#if defined(TAPEFLOW_PLATFORM_EMULATED)
#include <iterator>
#elif defined(TAPEFLOW_PLATFORM_HIP)
#include <rocprim/rocprim.hpp>
#else
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/std/functional>
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

#if defined(TAPEFLOW_PLATFORM_EMULATED)

/// The values start, start + 1, ... (random access).
template <class I>
class counting_iterator {
 public:
  using value_type = I;
  using difference_type = std::ptrdiff_t;
  explicit counting_iterator(I start) noexcept : value_(start) {}
  I operator[](difference_type n) const noexcept { return static_cast<I>(value_ + static_cast<I>(n)); }
  I operator*() const noexcept { return value_; }
  counting_iterator operator+(difference_type n) const noexcept { return counting_iterator(static_cast<I>(value_ + static_cast<I>(n))); }

 private:
  I value_;
};

/// f(it[0]), f(it[1]), ... (random access).
template <class It, class F>
class transform_iterator {
 public:
  using difference_type = std::ptrdiff_t;
  transform_iterator(It it, F f) : it_(it), f_(f) {}
  auto operator[](difference_type n) const { return f_(it_[n]); }
  auto operator*() const { return f_(*it_); }
  transform_iterator operator+(difference_type n) const { return transform_iterator(it_ + n, f_); }

 private:
  It it_;
  F f_;
};

template <class It, class F>
transform_iterator<It, F> make_transform_iterator(It it, F f)
{
  return {it, f};
}
template <class I>
counting_iterator<I> make_counting_iterator(I start)
{
  return counting_iterator<I>(start);
}

namespace detail {
/// in[lo] op ... op in[hi - 1] (lo < hi) as a balanced tree, like a device reduction: a float
/// sum's rounding error then grows with log(count), not count. Deterministic.
template <class T, class In, class Op>
T tree_fold(In const& in, std::int64_t lo, std::int64_t hi, Op const& op)
{
  if (hi - lo <= 16) {
    T acc = static_cast<T>(in[lo]);
    for (std::int64_t i = lo + 1; i < hi; ++i) { acc = op(acc, static_cast<T>(in[i])); }
    return acc;
  }
  std::int64_t const mid = lo + (hi - lo) / 2;
  return op(tree_fold<T>(in, lo, mid, op), tree_fold<T>(in, mid, hi, op));
}
template <class In, class Op, class T>
T fold(In in, std::int64_t count, Op op, T init)
{
  return count <= 0 ? init : op(init, tree_fold<T>(in, 0, count, op));
}
}  // namespace detail

#elif defined(TAPEFLOW_PLATFORM_HIP)

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
#if defined(TAPEFLOW_PLATFORM_EMULATED)
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  emu::enqueue_host(to_native(stream), [=] { *out = detail::fold(in, count, op, init); });
  return cudaSuccess;
#elif defined(TAPEFLOW_PLATFORM_HIP)
  return rocprim::reduce(temp, temp_bytes, in, out, init, static_cast<std::size_t>(count), op, to_native(stream));
#else
  return cub::DeviceReduce::Reduce(temp, temp_bytes, in, out, count, op, init, to_native(stream));
#endif
}

/// *out = in[0] + ... + in[count-1].
template <class In, class Out>
cudaError_t sum(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t count, stream_view stream)
{
#if defined(TAPEFLOW_PLATFORM_EMULATED) || defined(TAPEFLOW_PLATFORM_HIP)
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
#if defined(TAPEFLOW_PLATFORM_EMULATED) || defined(TAPEFLOW_PLATFORM_HIP)
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
#if defined(TAPEFLOW_PLATFORM_EMULATED)
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  emu::enqueue_host(to_native(stream), [=] {
    for (std::int64_t s = 0; s < segments; ++s) {
      auto const first = static_cast<std::int64_t>(begin[s]);
      auto const last = static_cast<std::int64_t>(end[s]);
      out[s] = last <= first ? init : op(init, detail::tree_fold<T>(in, first, last, op));
    }
  });
  return cudaSuccess;
#elif defined(TAPEFLOW_PLATFORM_HIP)
  return rocprim::segmented_reduce(temp, temp_bytes, in, out, static_cast<unsigned>(segments), begin, end, op, init,
                                   to_native(stream));
#else
  return cub::DeviceSegmentedReduce::Reduce(temp, temp_bytes, in, out, segments, begin, end, op, init,
                                            to_native(stream));
#endif
}

}  // namespace tapeflow::device
