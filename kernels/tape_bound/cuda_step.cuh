// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark's GPU kernels and launchers: the augmented forward in both tape
// layouts and one reverse kernel per variant. Shared by the workload (cuda.cu, tested against the
// CPU) and the benchmark suite (bench/suites/tape_bound.cu, timed).
#pragma once

#include "tape_bound.hpp"

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/stream.hpp>

namespace tapeflow::workloads::tape_bound::detail {

inline constexpr int threads = 256;

// The kernels are templates on the record type (always `record`) so that every translation unit
// including this header gets its own instantiation instead of a duplicate definition.

__device__ inline std::size_t first_index() noexcept
{
  return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
}
__device__ inline std::size_t grid_stride() noexcept { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

/// u' = u (the step itself is the identity: only the tape matters) and the tape in AoS records.
template <class R>
__global__ void forward_aos(float const* __restrict__ u, tape_writer<R> tape)
{
  for (std::size_t r = first_index(); r < tape.size(); r += grid_stride()) { tape.write(r, tape_of(u[r])); }
}

/// The Enzyme-style tape: value k of region r at soa[k * n + r].
template <class R>
__global__ void forward_soa(float const* __restrict__ u, float* __restrict__ soa, std::size_t n)
{
  for (std::size_t r = first_index(); r < n; r += grid_stride()) {
    R const rec = tape_of(u[r]);
    for (std::size_t k = 0; k < values_per_region; ++k) { soa[k * n + r] = rec.values[k]; }
  }
}

template <class R>
__global__ void reverse_soa(float const* __restrict__ soa, float const* __restrict__ g_out, float* __restrict__ g_in,
                            std::size_t n)
{
  for (std::size_t r = first_index(); r < n; r += grid_stride()) {
    R rec;
    for (std::size_t k = 0; k < values_per_region; ++k) { rec.values[k] = soa[k * n + r]; }
    g_in[r] = adjoint(rec, g_out[r]);
  }
}

template <class R>
__global__ void reverse_aos_direct(R const* __restrict__ tape, float const* __restrict__ g_out,
                                   float* __restrict__ g_in, std::size_t n)
{
  for (std::size_t r = first_index(); r < n; r += grid_stride()) { g_in[r] = adjoint(tape[r], g_out[r]); }
}

template <class R>
__global__ void reverse_recompute(float const* __restrict__ u, float const* __restrict__ g_out,
                                  float* __restrict__ g_in, std::size_t n)
{
  for (std::size_t r = first_index(); r < n; r += grid_stride()) { g_in[r] = adjoint(tape_of(u[r]), g_out[r]); }
}

template <class Pipeline>
__device__ void reverse_through(tape_reader<record> tape, float const* __restrict__ g_out, float* __restrict__ g_in)
{
  Pipeline::reverse(tape, [&](std::size_t, record const* staged, std::size_t first, std::size_t count) {
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      g_in[first + i] = adjoint(staged[i], g_out[first + i]);
    }
  });
}

/// Stages > 0: cp.async; 0: register double-buffering; < 0: bulk copies (launch.cuh).
template <int Stages>
__global__ void reverse_staged(tape_reader<record> tape, float const* __restrict__ g_out, float* __restrict__ g_in)
{
  reverse_through<device::tile_pipeline<record, Stages>>(tape, g_out, g_in);
}

/// Device pointers of one run: the state u, both tape layouts (either may be null when unused)
/// and the adjoints.
struct buffers {
  float const* u;
  record* aos;
  float* soa;
  float const* g_out;
  float* g_in;
  std::size_t n;
};

/// The plan a staged variant launches with (`pipeline` overrides the planner's choices).
inline pipeline_plan plan_for(variant v, std::size_t n, device_limits const& limits, pipeline_request pipeline)
{
  pipeline.record_bytes = sizeof(record);
  pipeline.records = n;
  pipeline.force_plain = pipeline.force_plain || v == variant::register_db;
  // Register double-buffering has exactly two stages (one tile in registers, one in shared
  // memory): a stage count asked of the run applies to the asynchronous variants only.
  if (pipeline.force_plain) { pipeline.stages = 0; }
  pipeline.bulk_copy = v == variant::bulk;
  return plan_pipeline(limits, pipeline);
}

inline void launch_forward(variant v, buffers const& b, int multiprocessors, stream_view s)
{
  int const grid = device::grid_for(b.n, threads, multiprocessors);
  if (v == variant::naive_soa) {
    device::launch(forward_soa<record>, grid, threads, 0, s, b.u, b.soa, b.n);
  } else if (v != variant::recompute) {
    device::launch(forward_aos<record>, grid, threads, 0, s, b.u, tape_writer<record>{b.aos, {b.n, 1}});
  }
  TAPEFLOW_CHECK_LAUNCH();
}

inline void launch_reverse(variant v, buffers const& b, pipeline_plan const& plan, int multiprocessors, stream_view s)
{
  int const grid = device::grid_for(b.n, threads, multiprocessors);
  tape_reader<record> const tape{b.aos, plan.layout()};
  switch (v) {
    case variant::naive_soa:
      device::launch(reverse_soa<record>, grid, threads, 0, s, b.soa, b.g_out, b.g_in, b.n);
      break;
    case variant::aos_direct:
      device::launch(reverse_aos_direct<record>, grid, threads, 0, s, b.aos, b.g_out, b.g_in, b.n);
      break;
    case variant::recompute:
      device::launch(reverse_recompute<record>, grid, threads, 0, s, b.u, b.g_out, b.g_in, b.n);
      break;
    case variant::staged:
    case variant::register_db:
    case variant::bulk:
      TAPEFLOW_EXPECTS(v != variant::bulk || plan.bulk_copy, "the bulk variant needs a bulk-copy plan (an sm_90 device)");
      device::with_tile_pipeline<record>(plan, [&](auto stages) {
        constexpr int S = decltype(stages)::value;
        device::launch(reverse_staged<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, b.g_out,
          b.g_in);
      });
      break;
  }
  TAPEFLOW_CHECK_LAUNCH();
}

}  // namespace tapeflow::workloads::tape_bound::detail
