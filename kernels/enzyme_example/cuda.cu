// SPDX-License-Identifier: Apache-2.0
// The Enzyme example on the GPU (CUDA, or HIP through the platform header). Without Enzyme the
// kernels call the hand-written Enzyme-shaped functions of math.hpp; compiled with Enzyme's plugin
// (TAPEFLOW_WITH_ENZYME) they call Enzyme's generated split-mode code on the same slots.
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

#if defined(TAPEFLOW_WITH_ENZYME)
__device__ double iterate_for_enzyme(double x, params const* p) { return iterate(x, *p); }
#endif

__global__ void augmented_kernel(double const* __restrict__ in, double* __restrict__ out,
                                 tape_writer<enzyme::chunk> tape, std::size_t n, params p)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    void* slot = enzyme::slot(tape, tape_bytes(p), i);
#if defined(TAPEFLOW_WITH_ENZYME)
    // Enzyme writes its tape into the slot tapeflow hands it: enzyme_allocated gives the slot's
    // size (the host took it from __enzyme_augmentsize), enzyme_tape the slot itself.
    out[i] = __enzyme_augmentfwd<double>(reinterpret_cast<void*>(iterate_for_enzyme), enzyme_allocated,
                                         tape_bytes(p), enzyme_tape, slot, in[i], enzyme_const, &p);
#else
    out[i] = enzyme_example::augmented_forward(in[i], p, slot);
#endif
  }
}

template <int Stages>
__global__ void reverse_kernel(tape_reader<enzyme::chunk> tape, double const* __restrict__ g_out,
                               double* __restrict__ g_in, params p)
{
  enzyme::for_each_slot_reverse<Stages>(tape, tape_bytes(p), [&](std::size_t i, void const* slot) {
#if defined(TAPEFLOW_WITH_ENZYME)
    // The active input's value is on the tape; Enzyme returns its adjoint.
    g_in[i] = __enzyme_reverse<double>(reinterpret_cast<void*>(iterate_for_enzyme), 0.0, enzyme_const, &p, g_out[i],
                                       const_cast<void*>(slot));
#else
    g_in[i] = enzyme_example::reverse(g_out[i], p, slot);
#endif
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

result gradient_gpu(problem const& p, std::vector<double> const& x0, options const& o)
{
  return run(gpu_step{{p.n, {p.inner, p.a}}}, p, x0, o);
}

}  // namespace tapeflow::workloads::enzyme_example::detail
