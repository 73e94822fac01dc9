// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn's GPU kernels and chain step (CUDA, or HIP through the platform header): the primal and augmented forward write coalesced
// 16-byte records; the reverse reads the tape only through the staged tile pipeline. Shared by
// the workload (cuda.cu) and the benchmark driver.
#pragma once

#include "allen_cahn.hpp"
#include "math.hpp"

#include <tapeflow/workloads/common/staged_cells.cuh>

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/memory.hpp>


namespace tapeflow::workloads::allen_cahn::detail {

inline constexpr int forward_threads = 256;

template <class T>
__global__ void primal_kernel(T const* __restrict__ in, T* __restrict__ out, std::size_t n, coefficients<T> k)
{
  std::size_t const cells = n * n;
  for (std::size_t cell = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; cell < cells;
       cell += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[cell] = step_at(in, n, cell, k);
  }
}

// The augmented forward and the reverse map one thread to one cell, not to one record: a record
// holds values_per_chunk<T> consecutive cells, so the tape, seen as an array of T, is indexed by
// cell like the state, and every global and shared access of a warp is one contiguous run. (One
// thread per 16-byte record made 72 % of the reverse's global sectors excess and left it at 41 %
// of DRAM bandwidth on an H100: docs/gpu-validation.md.) The per-cell math is math.hpp's, the
// same the CPU backend runs record by record.
static_assert(sizeof(record<float>) == cells_per_record<float> * sizeof(float) &&
                sizeof(record<double>) == cells_per_record<double> * sizeof(double),
              "a record is its cells' values and nothing else: the tape is indexed by cell");

template <class T>
__global__ void augmented_forward_kernel(T const* __restrict__ in, T* __restrict__ out,
                                         tape_writer<record<T>> tape, std::size_t n, coefficients<T> k,
                                         tape_content content)
{
  T* const taped = reinterpret_cast<T*>(tape.data());  // value_record<T, N>: N values, no padding
  std::size_t const cells = n * n;
  std::size_t const slots = tape.size() * cells_per_record<T>;  // the last record's padding too
  for (std::size_t cell = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; cell < slots;
       cell += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (cell < cells) {
      taped[cell] = taped_value(in[cell], k, content);
      out[cell] = step_at(in, n, cell, k);
    } else {
      taped[cell] = T(0);
    }
  }
}

template <class T, int Stages>
__global__ void reverse_kernel(tape_reader<record<T>> tape, T const* __restrict__ g_out, T* __restrict__ g_in,
                               std::size_t n, coefficients<T> k, tape_content content)
{
  reverse_staged_cells<T, cells_per_record<T>, 1, Stages>(tape, n * n, [&](std::size_t cell, T const* taped) {
    g_in[cell] = adjoint_at(*taped, g_out, n, cell, k, content);
  });
}

/// One primal step on the device.
template <class T>
void cuda_primal_step(T const* in, T* out, std::size_t n, coefficients<T> k, int multiprocessors, stream_view s)
{
  int const grid = device::grid_for(n * n, forward_threads, multiprocessors);
  device::launch(primal_kernel<T>, grid, forward_threads, 0, s, in, out, n, k);
}

template <class T>
struct cuda_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t n;
  coefficients<T> k;
  int multiprocessors;
  tape_content content{tape_content::values};

  [[nodiscard]] std::size_t state_size() const noexcept { return n * n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(n * n); }
  /// The values content tapes u: the record is the input state, which the chain then keeps as the layer.
  [[nodiscard]] bool tapes_state() const noexcept { return content == tape_content::values; }

  void forward(std::size_t, T const* in, T* out, stream_view s) const
  {
    cuda_primal_step(in, out, n, k, multiprocessors, s);
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view s) const
  {
    int const grid = device::grid_for(tape.size() * cells_per_record<T>, forward_threads, multiprocessors);
    device::launch(augmented_forward_kernel<T>, grid, forward_threads, 0, s, in, out, tape, n, k, content);
  }

  [[nodiscard]] bool bulk_copy_runs() const
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_kernel<T, decltype(stages)::value>; });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               stream_view s) const
  {
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_kernel<T, S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_out, g_in,
        n, k, content);
    });
  }
};

}  // namespace tapeflow::workloads::allen_cahn::detail
