// SPDX-License-Identifier: Apache-2.0
// The Enzyme example on the CPU reference backend: slots written per element, read back whole by
// cpu::reverse_tiles (tiles hold whole slots).
#include "steps.hpp"

#include <tapeflow/cpu/reverse.hpp>

#include <memory>

namespace tapeflow::workloads::enzyme_example::detail {
namespace {

struct cpu_step : step_shape {
  void forward(std::size_t, double const* in, double* out, stream_view) const
  {
    for (std::size_t i = 0; i < n; ++i) { out[i] = iterate(in[i], p); }
  }

  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<record_type> tape, stream_view) const
  {
    for (std::size_t i = 0; i < n; ++i) {
      void* slot = enzyme::slot(tape, tape_bytes(p), i);
      out[i] = enzyme_example::augmented_forward(in[i], p, slot);
    }
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view) const
  {
    std::size_t const per_slot = slot_chunks();
    cpu::reverse_tiles(tape, plan, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t s = 0; s < count / per_slot; ++s) {
        std::size_t const i = first / per_slot + s;
        g_in[i] = enzyme_example::reverse(g_out[i], p, staged + s * per_slot);
      }
    });
  }
};

}  // namespace

std::unique_ptr<sweeps> open_cpu(problem const& p, std::vector<double> const& x0, options const& o)
{
  return open_hand_written(cpu_step{{p.n, {p.inner, p.a}}}, p, x0, o);
}

}  // namespace tapeflow::workloads::enzyme_example::detail
