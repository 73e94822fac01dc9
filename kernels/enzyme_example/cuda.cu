// SPDX-License-Identifier: Apache-2.0
// The Enzyme example on the GPU (CUDA, or HIP through the platform header), with the hand-written
// Enzyme-shaped functions of math.hpp. The same kernels with Enzyme-generated code are
// enzyme_kernels.cu, built through the Enzyme route (TAPEFLOW_ENZYME; docs/enzyme.md).
#include "steps.hpp"

#include <tapeflow/device/enzyme.cuh>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>

namespace tapeflow::workloads::enzyme_example::detail {
namespace {

constexpr int threads = 256;

__global__ void primal_kernel(double const* __restrict__ in, double* __restrict__ out, std::size_t n, params p)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = iterate(in[i], p);
  }
}

__global__ void augmented_kernel(double const* __restrict__ in, double* __restrict__ out,
                                 tape_writer<enzyme::chunk> tape, std::size_t n, params p)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    void* slot = enzyme::slot(tape, tape_bytes(p), i);
    out[i] = enzyme_example::augmented_forward(in[i], p, slot);
  }
}

template <int Stages>
__global__ void reverse_kernel(tape_reader<enzyme::chunk> tape, double const* __restrict__ g_out,
                               double* __restrict__ g_in, params p)
{
  enzyme::for_each_slot_reverse<Stages>(tape, tape_bytes(p), [&](std::size_t i, void const* slot) {
    g_in[i] = enzyme_example::reverse(g_out[i], p, slot);
  });
}

int grid_for(std::size_t n) { return device::grid_for(n, threads, query_device_limits(gpu_backend).multiprocessors); }

struct gpu_step : step_shape {
  void forward(std::size_t, double const* in, double* out, stream_view s) const
  {
    device::launch(primal_kernel, grid_for(n), threads, 0, s, in, out, n, p);
  }

  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<record_type> tape,
                         stream_view s) const
  {
    device::launch(augmented_kernel, grid_for(n), threads, 0, s, in, out, tape, n, p);
  }

  [[nodiscard]] bool bulk_copy_runs() const
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_kernel<decltype(stages)::value>; });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view s) const
  {
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_kernel<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_out, g_in, p);
    });
  }
};

}  // namespace

std::unique_ptr<sweeps> open_gpu(problem const& p, std::vector<double> const& x0, options const& o)
{
  return open_hand_written(gpu_step{{p.n, {p.inner, p.a}}}, p, x0, o);
}

}  // namespace tapeflow::workloads::enzyme_example::detail
