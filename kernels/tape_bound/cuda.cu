// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark on the GPU: upload, augmented forward, reverse, download.
#include "backends.hpp"
#include "cuda_step.cuh"

#include <tapeflow/memory.hpp>

namespace tapeflow::workloads::tape_bound::detail {

bool bulk_kernels_runnable()
{
  // The device may be sm_90+ while this binary holds only older code (an sm_80-only build run on
  // Hopper), whose bulk kernels would trap: ask which code the driver loaded.
  return device::bulk_copy_runs([](auto stages) { return reverse_staged<decltype(stages)::value>; });
}

std::vector<float> gradient_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline)
{
  device_limits const limits = query_device_limits(gpu_backend);
  std::size_t const n = u.size();
  std::size_t const bytes = n * sizeof(float);
  stream_view const s{};
  device_buffer du(gpu_backend, bytes, s);
  device_buffer dg_out(gpu_backend, bytes, s);
  device_buffer dg_in(gpu_backend, bytes, s);
  bool const aos = v != variant::naive_soa && v != variant::recompute;
  device_buffer tape(gpu_backend, aos ? n * sizeof(record) : 1, s);
  device_buffer soa(gpu_backend, v == variant::naive_soa ? n * sizeof(record) : 1, s);
  du.upload(u.data(), bytes, s);
  dg_out.upload(g_out.data(), bytes, s);
  dg_in.fill(0xff, s);  // NaN: every element must be written
  buffers const b{du.data_as<float>(), tape.data_as<record>(), soa.data_as<float>(), dg_out.data_as<float>(),
                  dg_in.data_as<float>(), n};
  pipeline_plan const plan = plan_for(v, n, limits, pipeline);
  launch_forward(v, b, limits.multiprocessors, s);
  launch_reverse(v, b, plan, limits.multiprocessors, s);
  std::vector<float> g_in(n);
  dg_in.download(g_in.data(), bytes, s);
  return g_in;
}

}  // namespace tapeflow::workloads::tape_bound::detail
