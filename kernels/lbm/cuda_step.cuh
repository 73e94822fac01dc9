// SPDX-License-Identifier: Apache-2.0
// LBM's GPU kernels and chain step (CUDA, or HIP through the platform header). The primal runs one
// thread per cell: it reads the cell's 9 values from the SoA planes, collides and pushes to the
// neighbours. The augmented forward and the reverse run one thread per record (2 cells in f32, 1
// in f64): the forward steps the record's cells and writes their velocities as one 16-byte store
// (consecutive threads, consecutive chunks); the reverse reads the tape only through the staged
// tile pipeline and gathers g_next from the 9 neighbours of each cell (no atomics).
// Shared by the workload (cuda.cu) and the benchmark suite.
#pragma once

#include "lbm.hpp"
#include "math.hpp"

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/memory.hpp>


namespace tapeflow::workloads::lbm::detail {

inline constexpr int forward_threads = 256;

template <class T>
__global__ void primal_kernel(T const* __restrict__ in, T* __restrict__ out, std::size_t nx, std::size_t ny, T omega)
{
  std::size_t const cells = nx * ny;
  for (std::size_t cell = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; cell < cells;
       cell += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    step_cell(in, out, nx, ny, cell, omega);
  }
}

template <class T>
__global__ void augmented_forward_kernel(T const* __restrict__ in, T* __restrict__ out, tape_writer<record<T>> tape,
                                         std::size_t nx, std::size_t ny, T omega)
{
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < tape.size();
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    tape.write(r, forward_region(in, out, nx, ny, r, omega));
  }
}

template <class T, int Stages>
__global__ void reverse_kernel(tape_reader<record<T>> tape, T const* __restrict__ g_next, T* __restrict__ g_f,
                               std::size_t nx, std::size_t ny, T omega)
{
  device::tile_pipeline<record<T>, Stages>::reverse(
    tape, [&](std::size_t, record<T> const* staged, std::size_t first, std::size_t count) {
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        reverse_region(staged[i], g_next, g_f, nx, ny, first + i, omega);
      }
    });
}

template <class T>
struct cuda_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t nx;
  std::size_t ny;
  T omega;
  int multiprocessors;

  [[nodiscard]] std::size_t state_size() const noexcept { return 9 * nx * ny; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_per_layer<T>(nx * ny); }

  void forward(std::size_t, T const* in, T* out, stream_view s) const
  {
    int const grid = device::grid_for(nx * ny, forward_threads, multiprocessors);
    device::launch(primal_kernel<T>, grid, forward_threads, 0, s, in, out, nx, ny, omega);
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view s) const
  {
    int const grid = device::grid_for(tape.size(), forward_threads, multiprocessors);
    device::launch(augmented_forward_kernel<T>, grid, forward_threads, 0, s, in, out, tape, nx, ny, omega);
  }

  [[nodiscard]] bool bulk_copy_runs() const
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_kernel<T, decltype(stages)::value>; });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_next, T* g_f,
               stream_view s) const
  {
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_kernel<T, S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_next, g_f,
        nx, ny, omega);
    });
  }
};

}  // namespace tapeflow::workloads::lbm::detail
