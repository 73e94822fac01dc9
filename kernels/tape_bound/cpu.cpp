// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark on the CPU reference backend: the same layouts and math; every
// staged variant reads through the staging ring (its persistent staging thread).
#include "backends.hpp"

#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/error.hpp>

namespace tapeflow::workloads::tape_bound::detail {

std::vector<float> gradient_cpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline)
{
  std::size_t const n = u.size();
  std::vector<float> g_in(n);
  switch (v) {
    case variant::naive_soa: {
      std::vector<float> soa(values_per_region * n);
      for (std::size_t r = 0; r < n; ++r) {
        record const rec = tape_of(u[r]);
        for (std::size_t k = 0; k < values_per_region; ++k) { soa[k * n + r] = rec.values[k]; }
      }
      for (std::size_t r = 0; r < n; ++r) {
        record rec;
        for (std::size_t k = 0; k < values_per_region; ++k) { rec.values[k] = soa[k * n + r]; }
        g_in[r] = adjoint(rec, g_out[r]);
      }
      return g_in;
    }
    case variant::recompute:
      for (std::size_t r = 0; r < n; ++r) { g_in[r] = adjoint(tape_of(u[r]), g_out[r]); }
      return g_in;
    default: break;
  }
  std::vector<record> tape(n);
  for (std::size_t r = 0; r < n; ++r) { tape[r] = tape_of(u[r]); }
  if (v == variant::aos_direct) {
    for (std::size_t r = 0; r < n; ++r) { g_in[r] = adjoint(tape[r], g_out[r]); }
    return g_in;
  }
  pipeline.record_bytes = sizeof(record);
  pipeline.records = n;
  pipeline.staging = cpu_staging::ring;
  pipeline_plan const plan = plan_pipeline(query_device_limits(backend::cpu), pipeline);
  cpu::tile_ring<record> ring(plan);
  ring.reverse(tape_reader<record>{tape.data(), plan.layout()},
               [&](std::size_t, record const* staged, std::size_t first, std::size_t count) {
                 for (std::size_t i = 0; i < count; ++i) { g_in[first + i] = adjoint(staged[i], g_out[first + i]); }
               });
  return g_in;
}

}  // namespace tapeflow::workloads::tape_bound::detail
