// SPDX-License-Identifier: Apache-2.0
// A block-wide sum behind one interface: CUB's BlockReduce on CUDA (and the emulated device's CUB
// subset); on HIP a shared-memory gather summed by thread 0 in thread order. As with CUB, every
// thread of the block calls Sum, the result is valid in thread 0 only, and a __syncthreads() must
// separate two uses of one TempStorage.
//
//   using reduce = tapeflow::device::block_reduce<double, 256>;
//   __shared__ typename reduce::TempStorage temp;
//   double const total = reduce(temp).Sum(mine);
#pragma once

#include <tapeflow/device/platform.hpp>

#if !defined(TAPEFLOW_PLATFORM_HIP)
#include <cub/block/block_reduce.cuh>
#endif

namespace tapeflow::device {

#if !defined(TAPEFLOW_PLATFORM_HIP)

template <class T, int Threads>
class block_reduce {
  using cub_reduce = cub::BlockReduce<T, Threads>;

 public:
  using TempStorage = typename cub_reduce::TempStorage;
  __device__ explicit block_reduce(TempStorage& temp) : reduce_(temp) {}
  __device__ T Sum(T value) { return reduce_.Sum(value); }

 private:
  cub_reduce reduce_;
};

#else

template <class T, int Threads>
class block_reduce {
 public:
  struct TempStorage {
    T partial[Threads];
  };
  __device__ explicit block_reduce(TempStorage& temp) : temp_(temp) {}
  __device__ T Sum(T value)
  {
    temp_.partial[threadIdx.x] = value;
    __syncthreads();
    T total = value;
    if (threadIdx.x == 0) {
      for (unsigned i = 1; i < blockDim.x; ++i) { total += temp_.partial[i]; }
    }
    return total;
  }

 private:
  TempStorage& temp_;
};

#endif

}  // namespace tapeflow::device
