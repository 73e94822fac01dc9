// SPDX-License-Identifier: Apache-2.0
// The LSTM's CUDA kernels and chain step: cuBLAS for the matrix products, tapeflow's kernels for
// the cells. The augmented forward writes one coalesced 32-byte record per cell; the reverse's
// cell kernel reads the tape only through the staged tile pipeline. Shared by the workload
// (cuda.cu) and the benchmark suite (bench/suites/lstm.cu). CUDA only (cuBLAS).
//
// Layouts, column-major in cuBLAS's sense (G = 4H):
//   W (4H x I row-major) is W_cm = Wᵀ (I x G, ld I); U likewise (H x G, ld H)
//   x_t (B x I row-major) is X_t (I x B, ld I); all steps X (I x T B)
//   h, c and their adjoints (B x H row-major) are H x B, ld H
//   z, wx_t, δz: G x B, ld G (the gates of batch element b are one contiguous column)
//
//   forward   WX = W_cmᵀ X                  one GEMM for every step (project_inputs)
//             Z  = U_cmᵀ h                  per step
//             cells: gates(Z + WX_t + b), c', h', record
//   reverse   cells: δz, dL/dc, h_prev     staged from the tape
//             dW_cm += X_t δzᵀ,  dU_cm += H_prev δzᵀ,  dL/dh = U_cm δz,  db += δz 1
//
// Packed sequences (lstm.hpp): step t advances the first B_t sequences, so every per-step product
// runs over the first B_t columns and the tape holds B_t H records; the cell kernels carry the
// ended sequences' state forward and their adjoint back.
#pragma once

#include <tapeflow/device/blas.hpp>
#include "driver.hpp"
#include "lstm.hpp"
#include "math.hpp"

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>

#include <cstddef>

namespace tapeflow::workloads::lstm::detail {

inline constexpr int cell_threads = 256;

/// The primal cells of a step: the first `active` cells (B_t H) advance, the others carry their state.
template <class T>
__global__ void primal_cells_kernel(T const* __restrict__ z, T const* __restrict__ wx, T const* __restrict__ bias,
                                    T const* __restrict__ in, T* __restrict__ out, std::size_t hidden,
                                    std::size_t batch, std::size_t active)
{
  std::size_t const cells = batch * hidden;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < cells;
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (r < active) {
      static_cast<void>(forward_cell(z, wx, bias, in, out, hidden, batch, r));
    } else {
      carry_cell(in, out, hidden, batch, r);
    }
  }
}

/// The augmented cells: one record for each of the tape's B_t H cells; the others carry their state.
template <class T>
__global__ void augmented_cells_kernel(T const* __restrict__ z, T const* __restrict__ wx,
                                       T const* __restrict__ bias, T const* __restrict__ in, T* __restrict__ out,
                                       tape_writer<record<T>> tape, std::size_t hidden, std::size_t batch)
{
  std::size_t const cells = batch * hidden;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < cells;
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (r < tape.size()) {
      tape.write(r, forward_cell(z, wx, bias, in, out, hidden, batch, r));
    } else {
      carry_cell(in, out, hidden, batch, r);
    }
  }
}

/// The reverse cells: the tape's records through the tile pipeline, then the cells of ended
/// sequences pass their adjoint back.
template <class T, int Stages>
__global__ void reverse_cells_kernel(tape_reader<record<T>> tape, T const* __restrict__ g_out, T* __restrict__ g_in,
                                     T* __restrict__ dz, T* __restrict__ h_prev, std::size_t hidden,
                                     std::size_t batch)
{
  device::tile_pipeline<record<T>, Stages>::reverse(
    tape, [&](std::size_t, record<T> const* staged, std::size_t first, std::size_t count) {
      for (std::size_t k = threadIdx.x; k < count; k += blockDim.x) {
        reverse_cell(staged[k], g_out, g_in, dz, h_prev, hidden, batch, first + k);
      }
    });
  std::size_t const cells = batch * hidden;
  std::size_t const first = tape.layout().records + blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (std::size_t r = first; r < cells; r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    carry_cell(g_out, g_in, hidden, batch, r);
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ out, std::size_t count, T value)
{
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[k] = value;
  }
}

/// Sets `count` values to `value` on the device (the seed g_h = 1).
template <class T>
void fill(T* out, std::size_t count, T value, int multiprocessors, stream_view s)
{
  int const grid = device::grid_for(count, cell_threads, multiprocessors);
  device::launch(fill_kernel<T>, grid, cell_threads, 0, s, out, count, value);
}

template <class T>
struct cuda_step {
  using value_type = T;
  using record_type = record<T>;

  problem p;
  step_buffers<T> buf;
  device::blas_handle const* blas;
  int multiprocessors;

  [[nodiscard]] int gates() const noexcept { return static_cast<int>(4 * p.hidden); }
  [[nodiscard]] int hidden() const noexcept { return static_cast<int>(p.hidden); }
  [[nodiscard]] int input() const noexcept { return static_cast<int>(p.input); }
  [[nodiscard]] std::size_t state_size() const noexcept { return 2 * p.batch * p.hidden; }
  [[nodiscard]] std::size_t cells() const noexcept { return p.batch * p.hidden; }
  /// B_t: the sequences step t advances (all B unless the sequences are packed).
  [[nodiscard]] int active(std::size_t t) const noexcept { return static_cast<int>(active_sequences(p, t)); }
  [[nodiscard]] std::size_t records_per_step(std::size_t t) const noexcept { return active_sequences(p, t) * p.hidden; }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return parameter_count(p); }

  /// WX = W_cmᵀ X: the input projection of every step in one GEMM (G x T B).
  void project_inputs(stream_view s) const
  {
    device::gemm(*blas, s, device::blas_op::transpose, device::blas_op::none, gates(),
      static_cast<int>(p.steps * p.batch), input(), T(1), buf.w, input(), buf.x, input(), T(0), buf.wx, gates());
  }

  /// Z = U_cmᵀ h (G x B_t): the sequences step t advances are h's first B_t columns.
  void recurrent(std::size_t t, T const* h, stream_view s) const
  {
    device::gemm(*blas, s, device::blas_op::transpose, device::blas_op::none, gates(), active(t), hidden(), T(1),
      buf.u, hidden(), h, hidden(), T(0), buf.z, gates());
  }

  [[nodiscard]] T const* wx_of(std::size_t t) const noexcept { return buf.wx + t * p.batch * 4 * p.hidden; }

  void forward(std::size_t t, T const* in, T* out, stream_view s) const
  {
    recurrent(t, in, s);
    int const grid = device::grid_for(cells(), cell_threads, multiprocessors);
    device::launch(primal_cells_kernel<T>, grid, cell_threads, 0, s, buf.z, wx_of(t), buf.b, in, out, p.hidden,
      p.batch, records_per_step(t));
  }

  void augmented_forward(std::size_t t, T const* in, T* out, tape_writer<record_type> tape, stream_view s) const
  {
    recurrent(t, in, s);
    int const grid = device::grid_for(cells(), cell_threads, multiprocessors);
    device::launch(augmented_cells_kernel<T>, grid, cell_threads, 0, s, buf.z, wx_of(t), buf.b, in, out, tape, p.hidden,
      p.batch);
  }

  [[nodiscard]] bool bulk_copy_runs() const
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_cells_kernel<T, decltype(stages)::value>; });
  }

  /// Adds this step's dL/dW, dL/dU and dL/db to the chain's parameter adjoint `g_theta`.
  void reverse(std::size_t t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               T* g_theta, stream_view s) const
  {
    parameter_gradients<T> const g(p, g_theta);
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_cells_kernel<T, S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_out,
        g_in, buf.dz, buf.h_prev, p.hidden, p.batch);
    });
    T const* x_t = buf.x + t * p.batch * p.input;
    // Over the B_t sequences the step advanced (the first B_t columns of X_t, δz, H_prev, g_in):
    int const n = active(t);
    // dW_cm (I x G) += X_t δzᵀ
    device::gemm(*blas, s, device::blas_op::none, device::blas_op::transpose, input(), gates(), n, T(1), x_t, input(),
      buf.dz, gates(), T(1), g.dw, input());
    // dU_cm (H x G) += H_prev δzᵀ
    device::gemm(*blas, s, device::blas_op::none, device::blas_op::transpose, hidden(), gates(), n, T(1), buf.h_prev,
      hidden(), buf.dz, gates(), T(1), g.du, hidden());
    // dL/dh_prev (H x B_t) = U_cm δz: the h half of g_in (its c half came from the cells; the ended
    // sequences' from the carry)
    device::gemm(*blas, s, device::blas_op::none, device::blas_op::none, hidden(), n, gates(), T(1), buf.u, hidden(),
      buf.dz, gates(), T(0), g_in, hidden());
    // db += δz 1
    device::gemv(*blas, s, device::blas_op::none, gates(), n, T(1), buf.dz, gates(), buf.ones, T(1), g.db);
  }
};

}  // namespace tapeflow::workloads::lstm::detail
