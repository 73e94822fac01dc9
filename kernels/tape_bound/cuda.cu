// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark on the GPU: upload, augmented forward, reverse, download; and the
// same sweep timed.
#include "backends.hpp"
#include "cuda_step.cuh"

#include <tapeflow/memory.hpp>
#include <tapeflow/timing.hpp>

namespace tapeflow::workloads::tape_bound::detail {

bool bulk_kernels_runnable()
{
  // The device may be sm_90+ while this binary holds only older code (an sm_80-only build run on
  // Hopper: compute_80 PTX compiled for sm_90), whose bulk kernels are traps: ask which virtual
  // architecture the loaded code was compiled for.
  return device::bulk_copy_runs([](auto stages) { return reverse_staged<decltype(stages)::value>; });
}

namespace {

/// One layer's buffers on the device: u and g_out uploaded, the tape (AoS records, or the naive
/// variant's separate arrays) and g_in.
struct sweep {
  device_buffer u, g_out, g_in, tape, soa;
  buffers views;

  sweep(std::vector<float> const& u_host, std::vector<float> const& g_out_host, variant v, stream_view s)
    : u(gpu_backend, u_host.size() * sizeof(float), s), g_out(gpu_backend, u.size(), s), g_in(gpu_backend, u.size(), s),
      tape(gpu_backend, aos(v) ? u_host.size() * sizeof(record) : 1, s),
      soa(gpu_backend, v == variant::naive_soa ? u_host.size() * sizeof(record) : 1, s),
      views{this->u.data_as<float>(), tape.data_as<record>(), soa.data_as<float>(), g_out.data_as<float>(),
            g_in.data_as<float>(), u_host.size()}
  {
    u.upload(u_host.data(), u.size(), s);
    g_out.upload(g_out_host.data(), g_out.size(), s);
  }

  static bool aos(variant v) noexcept { return v != variant::naive_soa && v != variant::recompute; }
};

}  // namespace

std::vector<float> gradient_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline)
{
  device_limits const limits = query_device_limits(gpu_backend);
  stream_view const s{};
  sweep b(u, g_out, v, s);
  b.g_in.fill(0xff, s);  // NaN: every element must be written
  pipeline_plan const plan = plan_for(v, u.size(), limits, pipeline);
  launch_forward(v, b.views, limits.multiprocessors, s);
  launch_reverse(v, b.views, plan, limits.multiprocessors, s);
  std::vector<float> g_in(u.size());
  b.g_in.download(g_in.data(), b.g_in.size(), s);
  return g_in;
}

sweep_timing benchmark_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v, int warmup,
                           int repeats, pipeline_request pipeline)
{
  device_limits const limits = query_device_limits(gpu_backend);
  stream_view const s{};
  sweep b(u, g_out, v, s);
  sweep_timing t;
  t.plan = plan_for(v, u.size(), limits, pipeline);
  lap_timer forward(gpu_backend, s, 1);
  lap_timer reverse(gpu_backend, s, 1);
  for (int run = 0; run < warmup + repeats; ++run) {
    forward.start();
    launch_forward(v, b.views, limits.multiprocessors, s);
    forward.lap(run >= warmup);
    reverse.start();
    launch_reverse(v, b.views, t.plan, limits.multiprocessors, s);
    reverse.lap(run >= warmup);
  }
  t.forward_ms = forward.median_total_ms();
  t.reverse_ms = reverse.median_total_ms();
  t.tape_bytes = sweep::aos(v) || v == variant::naive_soa ? u.size() * sizeof(record) : 0;
  return t;
}

}  // namespace tapeflow::workloads::tape_bound::detail
