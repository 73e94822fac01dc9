// SPDX-License-Identifier: Apache-2.0
// The wave workload on the GPU (CUDA, or HIP through the platform header): a thread per cell for
// the update (writing s and u of its cell to the tape, one coalesced run of records per warp), one
// block summing the receivers' misfit in a fixed order, and the reverse reading the tape only
// through the staged tile pipeline, a thread per staged cell. The per-cell math is math.hpp's.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"
#include "segments.hpp"

#include <tapeflow/workloads/common/staged_cells.cuh>

#include <tapeflow/device/block_reduce.cuh>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/stencil/device.cuh>

namespace tapeflow::workloads::wave::detail {
namespace {

constexpr int cell_threads = 256;
constexpr int misfit_threads = 256;

static_assert(sizeof(record<float>) == 2 * cells_per_record<float> * sizeof(float) &&
                sizeof(record<double>) == 2 * cells_per_record<double> * sizeof(double),
              "a record is its cells' (s, u) and nothing else: the tape is indexed by cell");

template <class T>
__global__ void advance_kernel(T const* __restrict__ in, T* __restrict__ out, T* __restrict__ taped,
                               T const* __restrict__ m, geometry<T> g, std::size_t t, std::size_t slots)
{
  std::size_t const cells = g.cells();
  for (std::size_t cell = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; cell < slots;
       cell += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (cell >= cells) {  // the last record's padding
      taped[2 * cell] = T(0);
      taped[2 * cell + 1] = T(0);
      continue;
    }
    advance_cell(in, out, taped, m, g, cell, t);
  }
}

template <class T>
using misfit_reduce = device::block_reduce<T, misfit_threads>;

/// 0.5 sum_r (u(x_r) - d_{t,r})^2 of step t, u(x_r) = at(r), summed by one block in the same order
/// every run (valid in thread 0).
template <class T, class At>
__device__ T step_misfit(At const& at, T const* __restrict__ d, std::size_t receivers, std::size_t t,
                         typename misfit_reduce<T>::TempStorage& temp)
{
  T mine = T(0);
  for (std::size_t r = threadIdx.x; r < receivers; r += blockDim.x) {
    T const residual = at(r) - d[t * receivers + r];
    mine += T(0.5) * residual * residual;
  }
  return misfit_reduce<T>(temp).Sum(mine);
}

/// L_{t+1} = L_t + step_misfit of u_t: one block.
template <class T>
__global__ void __launch_bounds__(misfit_threads) misfit_kernel(T const* __restrict__ in, T* __restrict__ out,
                                                                T const* __restrict__ d, geometry<T> g, std::size_t t)
{
  __shared__ typename misfit_reduce<T>::TempStorage temp;
  T const* const cur = in + g.cells();
  T const total = step_misfit<T>([&](std::size_t r) { return cur[g.receiver_cell(r)]; }, d, g.receivers(), t, temp);
  if (threadIdx.x == 0) { out[2 * g.cells()] = in[2 * g.cells()] + total; }
}

/// The misfit of recorded traces (T x receivers), step after step as the chain's misfit_kernel
/// adds it: one block.
template <class T>
__global__ void __launch_bounds__(misfit_threads) traces_misfit_kernel(T const* __restrict__ traces,
                                                                       T const* __restrict__ d, std::size_t receivers,
                                                                       std::size_t steps, T* __restrict__ loss)
{
  __shared__ typename misfit_reduce<T>::TempStorage temp;
  T l = T(0);
  for (std::size_t t = 0; t < steps; ++t) {
    T const* const row = traces + t * receivers;
    T const total = step_misfit<T>([row](std::size_t r) { return row[r]; }, d, receivers, t, temp);
    l = l + total;
    __syncthreads();  // temp is reused by the next step's reduction
  }
  if (threadIdx.x == 0) { *loss = l; }
}

template <class T, int Stages>
__global__ void reverse_kernel(tape_reader<record<T>> tape, T const* __restrict__ g_out, T* __restrict__ g_in,
                               T* __restrict__ dm, T const* __restrict__ m, T const* __restrict__ d, geometry<T> g,
                               std::size_t t)
{
  std::size_t const cells = g.cells();
  T const* const a = g_out;
  T const* const b = g_out + cells;
  T const c = g_out[2 * cells];
  std::size_t const row = g.receiver_cell(0);
  reverse_staged_cells<T, cells_per_record<T>, 2, Stages>(tape, cells, [&](std::size_t cell, T const* taped) {
    T const s = taped[0];
    T const u = taped[1];
    T const residual = cell >= row && cell < row + g.receivers() ? u - d[t * g.receivers() + (cell - row)] : T(0);
    g_in[cell] = -b[cell];
    g_in[cells + cell] = current_adjoint(a, b, m, g, cell, c, residual);
    dm[cell] += slowness_adjoint(b[cell], s, m[cell], g);
  });
  if (blockIdx.x == 0 && threadIdx.x == 0) { g_in[2 * cells] = c; }
}

}  // namespace

template <class T>
struct gpu_step {
  using value_type = T;
  using record_type = record<T>;

  geometry<T> g;
  T const* m;
  T const* d;
  int multiprocessors;

  [[nodiscard]] std::size_t state_size() const noexcept { return 2 * g.cells() + 1; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(g.cells()); }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return g.cells(); }

  void advance(std::size_t t, T const* in, T* out, T* taped, std::size_t slots, stream_view s) const
  {
    int const grid = device::grid_for(slots, cell_threads, multiprocessors);
    device::launch(advance_kernel<T>, grid, cell_threads, 0, s, in, out, taped, m, g, t, slots);
    device::launch(misfit_kernel<T>, 1, misfit_threads, 0, s, in, out, d, g, t);
  }

  void forward(std::size_t t, T const* in, T* out, stream_view s) const
  {
    advance(t, in, out, nullptr, g.cells(), s);
  }

  void augmented_forward(std::size_t t, T const* in, T* out, tape_writer<record_type> tape, stream_view s) const
  {
    advance(t, in, out, reinterpret_cast<T*>(tape.data()), tape.size() * cells_per_record<T>, s);
  }

  [[nodiscard]] bool bulk_copy_runs() const
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_kernel<T, decltype(stages)::value>; });
  }

  void reverse(std::size_t t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               T* dm, stream_view s) const
  {
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_kernel<T, S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_out, g_in,
        dm, m, d, g, t);
    });
  }
};

/// The segments' loss (segments.hpp): traces_misfit_kernel into a device scalar, read back.
template <class T>
struct device_misfit {
  std::shared_ptr<device_buffer> loss;

  T operator()(T const* traces, T const* d, std::size_t steps, std::size_t receivers, stream_view s) const
  {
    device::launch(traces_misfit_kernel<T>, 1, misfit_threads, 0, s, traces, d, receivers, steps,
                   loss->template data_as<T>());
    T l{};
    loss->download(&l, sizeof(T), s);
    return l;
  }
};

template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o)
{
  if (auto const plan = segments_of<T>(p, o)) {
    return open_segments<T>(p, o, *plan, tapeflow::stencil::device_segments_maker{},
                            device_misfit<T>{std::make_shared<device_buffer>(o.kind, sizeof(T), o.stream)});
  }
  return open_wave<T>(p, o, gpu_step<T>{{}, nullptr, nullptr, query_device_limits(gpu_backend).multiprocessors});
}

template std::unique_ptr<session<float>> open_gpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_gpu(problem const&, options const&);

}  // namespace tapeflow::workloads::wave::detail
