// SPDX-License-Identifier: Apache-2.0
// The emulated device's subset of CUB that tapeflow's reductions use (<tapeflow/device/reduce.cuh>,
// <tapeflow/device/block_reduce.cuh>), under CUB's names and protocols:
//
//   cub::DeviceReduce::{Reduce, Sum, TransformReduce}, cub::DeviceSegmentedReduce::Reduce
//     the two-phase protocol (a call with d_temp_storage == nullptr only sets the bytes it needs),
//     then a host loop ordered on the stream like a kernel, summing as a balanced tree, as a device
//     reduction does: a float sum's rounding then grows with log n, not n. Deterministic.
//   cub::BlockReduce<T, BlockDimX>::Sum
//     every thread of the block calls it, the result is valid in thread 0 only (the partials summed
//     in thread order), and a block of another shape traps (CUB leaves it undefined).
#pragma once

#include <tapeflow/emulated/device.hpp>
#include <tapeflow/emulated/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <type_traits>

namespace cub {

namespace emulated_detail {

/// op(in(lo), ..., in(hi - 1)) (lo < hi) as a balanced tree.
template <class T, class In, class Op>
T tree_fold(In const& in, std::int64_t lo, std::int64_t hi, Op const& op)
{
  if (hi - lo <= 16) {
    T acc = static_cast<T>(in(lo));
    for (std::int64_t i = lo + 1; i < hi; ++i) { acc = op(acc, static_cast<T>(in(i))); }
    return acc;
  }
  std::int64_t const mid = lo + (hi - lo) / 2;
  return op(tree_fold<T>(in, lo, mid, op), tree_fold<T>(in, mid, hi, op));
}

/// *out = op(init, the tree over f(in[0]) ... f(in[count - 1])), or init when count is 0; queued on
/// `stream` after the two-phase protocol's sizing call.
template <class In, class Out, class NumItems, class Op, class F, class T>
cudaError_t transform_reduce(void* temp, std::size_t& temp_bytes, In in, Out out, NumItems count, Op op, F f,
                             T init, cudaStream_t stream)
{
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  auto const n = static_cast<std::int64_t>(count);
  ::tapeflow::emu::enqueue_host(stream, [=] {
    *out = n <= 0 ? init : op(init, tree_fold<T>([&](std::int64_t i) { return f(in[i]); }, 0, n, op));
  });
  return cudaSuccess;
}

/// The identity, as a transform.
struct identity {
  template <class T>
  T operator()(T const& value) const
  {
    return value;
  }
};

}  // namespace emulated_detail

/// Device-wide reductions of one sequence.
struct DeviceReduce {
  template <class In, class Out, class NumItems, class Op, class T>
  static cudaError_t Reduce(void* d_temp_storage, std::size_t& temp_storage_bytes, In d_in, Out d_out,
                            NumItems num_items, Op reduction_op, T init, cudaStream_t stream = nullptr)
  {
    return emulated_detail::transform_reduce(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, reduction_op,
                                             emulated_detail::identity{}, init, stream);
  }

  /// The sum from the output's zero.
  template <class In, class Out, class NumItems>
  static cudaError_t Sum(void* d_temp_storage, std::size_t& temp_storage_bytes, In d_in, Out d_out, NumItems num_items,
                         cudaStream_t stream = nullptr)
  {
    using T = std::remove_reference_t<decltype(*d_out)>;
    return Reduce(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, std::plus<T>{}, T{0}, stream);
  }

  template <class In, class Out, class NumItems, class Op, class F, class T>
  static cudaError_t TransformReduce(void* d_temp_storage, std::size_t& temp_storage_bytes, In d_in, Out d_out,
                                     NumItems num_items, Op reduction_op, F transform_op, T init,
                                     cudaStream_t stream = nullptr)
  {
    return emulated_detail::transform_reduce(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, reduction_op,
                                             transform_op, init, stream);
  }
};

/// Device-wide reductions of segments: out[s] reduces in[begin[s]] ... in[end[s] - 1] from init.
struct DeviceSegmentedReduce {
  template <class In, class Out, class NumSegments, class Begin, class End, class Op, class T>
  static cudaError_t Reduce(void* d_temp_storage, std::size_t& temp_storage_bytes, In d_in, Out d_out,
                            NumSegments num_segments, Begin d_begin_offsets, End d_end_offsets, Op reduction_op,
                            T initial_value, cudaStream_t stream = nullptr)
  {
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = 1;
      return cudaSuccess;
    }
    auto const segments = static_cast<std::int64_t>(num_segments);
    ::tapeflow::emu::enqueue_host(stream, [=] {
      for (std::int64_t s = 0; s < segments; ++s) {
        auto const first = static_cast<std::int64_t>(d_begin_offsets[s]);
        auto const last = static_cast<std::int64_t>(d_end_offsets[s]);
        d_out[s] = last <= first ? initial_value
                                 : reduction_op(initial_value, emulated_detail::tree_fold<T>(
                                                                 [&](std::int64_t i) { return d_in[i]; }, first, last,
                                                                 reduction_op));
      }
    });
    return cudaSuccess;
  }
};

/// A block-wide reduction of one value per thread of a block of BlockDimX threads.
template <class T, int BlockDimX>
class BlockReduce {
 public:
  struct TempStorage {
    T partial[BlockDimX];
  };

  explicit BlockReduce(TempStorage& temp) : temp_(temp) {}

  /// The sum of every thread's `input`, valid in thread 0.
  T Sum(T input)
  {
    if (blockDim.x != static_cast<unsigned>(BlockDimX) || blockDim.y * blockDim.z != 1U) { __trap(); }
    temp_.partial[threadIdx.x] = input;
    __syncthreads();
    return threadIdx.x == 0 ? std::accumulate(temp_.partial + 1, temp_.partial + BlockDimX, input) : input;
  }

 private:
  TempStorage& temp_;
};

}  // namespace cub
