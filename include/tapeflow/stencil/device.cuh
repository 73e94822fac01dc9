// SPDX-License-Identifier: Apache-2.0
// Stencil segments on a GPU (CUDA, HIP, or the emulated device, from this one source): the tile
// program (tile_program.hpp) run by a block per tile, its levels in the block's shared memory, a
// barrier between levels. A persistent grid walks the tiles. Include it from the .cu file that
// names the stencil: the kernels are instantiated for it there.
#pragma once

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/tile_program.hpp>

#include <cstddef>

namespace tapeflow::stencil {

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(TAPEFLOW_EMULATED)
#define TAPEFLOW_STENCIL_DEVICE_PASS 1
#endif

/// A GPU block working a tile: its threads stride over the cells, and wait for each other at
/// sync(). (Host+device only so that the tile program, written once for both, compiles on either
/// side; it runs in kernels.)
struct block_team {
  template <class F>
  TAPEFLOW_HOST_DEVICE void for_each(box const& b, F&& f) const
  {
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    int const cells = static_cast<int>(b.cells());
    for (int i = static_cast<int>(threadIdx.x); i < cells; i += static_cast<int>(blockDim.x)) {
      int const x = i % b.ex;
      int const rest = i / b.ex;
      f(x, rest % b.ey, rest / b.ey);
    }
#else
    static_cast<void>(b);
    static_cast<void>(f);
#endif
  }
  TAPEFLOW_HOST_DEVICE void sync() const noexcept
  {
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    __syncthreads();
#endif
  }
};

#undef TAPEFLOW_STENCIL_DEVICE_PASS

namespace detail {

template <class S>
__global__ void advance_kernel(tile_program<S> program, int k, typename S::value_type const* __restrict__ in,
                               typename S::value_type* __restrict__ out)
{
  using T = typename S::value_type;
  T* const scratch = device::dynamic_shared<T>();
  std::size_t const tiles = program.tiles();
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    program.advance(block_team{}, program.tile_box(t), k, in, out, scratch);
    __syncthreads();  // the next tile reuses the scratch
  }
}

template <class S>
__global__ void reverse_kernel(tile_program<S> program, int k, typename S::value_type const* __restrict__ checkpoint,
                               typename S::value_type const* __restrict__ lambda_out,
                               typename S::value_type* __restrict__ lambda_in)
{
  using T = typename S::value_type;
  T* const scratch = device::dynamic_shared<T>();
  std::size_t const tiles = program.tiles();
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    program.reverse(block_team{}, program.tile_box(t), k, checkpoint, lambda_out, lambda_in, scratch);
    __syncthreads();
  }
}

/// taped[0, values) = in, taped[values, padded) = 0.
template <class T>
__global__ void record_kernel(T const* __restrict__ in, T* __restrict__ taped, std::size_t values, std::size_t padded)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < padded;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    taped[i] = i < values ? in[i] : T(0);
  }
}

}  // namespace detail

/// Runs the tile program of stencil S on the GPU of this build (segment_step's Runner).
template <class S>
class device_runner {
 public:
  using T = typename S::value_type;

  device_runner(S stencil, grid<T> g, segment_plan const& plan)
    : program_{stencil, g, reach::of<S>(), plan.tile}, block_threads_(plan.block_threads), grid_blocks_(plan.grid_blocks)
  {
    TAPEFLOW_EXPECTS(plan.kind != backend::cpu, "a device_runner needs a segment plan made for a GPU backend");
  }

  [[nodiscard]] std::size_t state_size() const noexcept { return program_.g.cells() * S::fields; }

  void advance(int k, T const* in, T* out, stream_view s) const
  {
    device::launch(detail::advance_kernel<S>, grid_blocks_, block_threads_, program_.advance_scratch(k) * sizeof(T), s,
                   program_, k, in, out);
  }

  void reverse(int k, T const* checkpoint, T const* lambda_out, T* lambda_in, stream_view s) const
  {
    device::launch(detail::reverse_kernel<S>, grid_blocks_, block_threads_, program_.reverse_scratch(k) * sizeof(T), s,
                   program_, k, checkpoint, lambda_out, lambda_in);
  }

  void record(T const* in, T* taped, std::size_t padded_values, stream_view s) const
  {
    device::launch(detail::record_kernel<T>, grid_blocks_, block_threads_, 0, s, in, taped, state_size(), padded_values);
  }

 private:
  tile_program<S> program_;
  int block_threads_;
  int grid_blocks_;
};

/// The chain Step of stencil S's segments on a GPU backend.
template <class S>
using device_segments = segment_step<S, device_runner<S>>;

/// The GPU Step of `plan`'s segments of `stencil` over `g`.
template <class S>
[[nodiscard]] device_segments<S> make_device_segments(S stencil, grid<typename S::value_type> g,
                                                      segment_plan const& plan)
{
  return device_segments<S>(device_runner<S>(stencil, g, plan), plan);
}

}  // namespace tapeflow::stencil
