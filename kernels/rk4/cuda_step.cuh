// SPDX-License-Identifier: Apache-2.0
// RK4 particles' GPU kernels (CUDA, or HIP through the platform header), one thread per particle,
// each calling the regions of math.hpp: forward segments writing the arena's warp-interleaved
// chunks, chunk reverses reading them (one record of register prefetch), the Enzyme-style global
// stack baseline, the untaped primal and the budget calibration. Shared by the workload (cuda.cu)
// and the benchmark suite. The reverse reads the arena directly, not through tile_pipeline: at
// each step a warp reads 32 consecutive records, already one coalesced run (docs/thread-tape.md).
#pragma once

#include "math.hpp"
#include "rk4.hpp"

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/thread_tape.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::workloads::rk4::detail {

inline constexpr int gpu_block_threads = 256;

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  segment_kernel(thread_tape_writer<step_record<T>> w, state<T>* y, T* arc, T const* budget, params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < w.threads()) { segment_region(w, t, y, arc, budget, k); }
}

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  chunk_reverse_kernel(thread_tape_reader<step_record<T>> r, state<T>* g, params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < r.threads()) { chunk_reverse_region(r, t, g, k); }
}

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  stack_forward_kernel(std::size_t n, step_record<T>* tape, state<T>* y, T const* budget, std::uint32_t* steps,
                       params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) { stack_forward_region(t, tape, y, budget, steps, k); }
}

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  stack_reverse_kernel(std::size_t n, step_record<T> const* tape, std::uint32_t const* steps, state<T>* g,
                       params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) { stack_reverse_region(t, tape, steps, g, k); }
}

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  primal_kernel(std::size_t n, state<T>* y, T const* budget, std::uint32_t* steps, params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) { steps[t] = primal_region(t, y, budget, k); }
}

template <class T>
__global__ void __launch_bounds__(gpu_block_threads)
  budget_kernel(std::size_t n, state<T> const* y0, std::uint32_t const* targets, T* out, params<T> k)
{
  std::size_t const t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) { out[t] = budget_region(t, y0, targets, k); }
}

/// The Kernels of driver.hpp on the GPU: one thread per particle.
template <class T>
struct gpu_kernels {
  std::size_t n;

  [[nodiscard]] unsigned blocks() const noexcept
  {
    return static_cast<unsigned>((n + gpu_block_threads - 1) / gpu_block_threads);
  }

  void segment(thread_tape_writer<step_record<T>> w, state<T>* y, T* arc, T const* budget, params<T> const& k,
               stream_view s) const
  {
    device::launch(segment_kernel<T>, blocks(), gpu_block_threads, 0, s, w, y, arc, budget, k);
  }
  void chunk_reverse(thread_tape_reader<step_record<T>> r, state<T>* g, params<T> const& k, stream_view s) const
  {
    device::launch(chunk_reverse_kernel<T>, blocks(), gpu_block_threads, 0, s, r, g, k);
  }
  void stack_forward(step_record<T>* tape, state<T>* y, T const* budget, std::uint32_t* steps, params<T> const& k,
                     stream_view s) const
  {
    device::launch(stack_forward_kernel<T>, blocks(), gpu_block_threads, 0, s, n, tape, y, budget, steps, k);
  }
  void stack_reverse(step_record<T> const* tape, std::uint32_t const* steps, state<T>* g, params<T> const& k,
                     stream_view s) const
  {
    device::launch(stack_reverse_kernel<T>, blocks(), gpu_block_threads, 0, s, n, tape, steps, g, k);
  }
  void primal(state<T>* y, T const* budget, std::uint32_t* steps, params<T> const& k, stream_view s) const
  {
    device::launch(primal_kernel<T>, blocks(), gpu_block_threads, 0, s, n, y, budget, steps, k);
  }
  void budgets(state<T> const* y0, std::uint32_t const* targets, T* out, params<T> const& k, stream_view s) const
  {
    device::launch(budget_kernel<T>, blocks(), gpu_block_threads, 0, s, n, y0, targets, out, k);
  }
};

}  // namespace tapeflow::workloads::rk4::detail
