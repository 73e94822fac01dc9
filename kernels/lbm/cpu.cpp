// SPDX-License-Identifier: Apache-2.0
// LBM on the CPU reference backend: the same plan, layers and tiles as the GPU, every loop spread
// over the CPU backend's threads (cpu::parallel_for; the reverse through cpu::reverse_tiles). A
// cell pushes to its own set of destinations and gathers from them in the reverse, so cells never
// write the same value. In segments, or over ranks, the stencil library's CPU segments (stencil.hpp).
#include "backends.hpp"
#include "math.hpp"

#include <tapeflow/workloads/common/state_chain.hpp>

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/stencil/cpu.hpp>

#include <memory>

namespace tapeflow::workloads::lbm::detail {
namespace {

template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t nx;
  std::size_t ny;
  T omega;
  std::shared_ptr<cpu::ring_stats> staging;

  [[nodiscard]] std::size_t state_size() const noexcept { return 9 * nx * ny; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_per_layer<T>(nx * ny); }

  void forward(std::size_t, T const* in, T* out, stream_view) const
  {
    std::size_t const cells = nx * ny;
    cpu::parallel_for(cells, cpu::grain_for(cells, 256),
                      [&](std::size_t begin, std::size_t end) { forward_cells(begin, end, in, out); });
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    cpu::parallel_for(tape.size(), cpu::grain_for(tape.size(), 256),
                      [&](std::size_t begin, std::size_t end) { augmented_records(begin, end, in, out, tape); });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_next, T* g_f,
               stream_view) const
  {
    cpu::reverse_tiles(
      tape, plan,
      [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
        reverse_records(staged, first, count, g_next, g_f);
      },
      staging.get());
  }

  // The loops of the three above, each compiled as one function (TAPEFLOW_FLATTEN) for the baseline
  // and for AVX2 (TAPEFLOW_CPU_CLONES), as the segments' tile programs are, so that the two compare
  // on the same vectors.
  TAPEFLOW_CPU_KERNEL
  void forward_cells(std::size_t begin, std::size_t end, T const* in, T* out) const
  {
    for (std::size_t cell = begin; cell < end; ++cell) { step_cell(in, out, nx, ny, cell, omega); }
  }
  TAPEFLOW_CPU_KERNEL
  void augmented_records(std::size_t begin, std::size_t end, T const* in, T* out,
                         tape_writer<record_type> tape) const
  {
    for (std::size_t r = begin; r < end; ++r) { tape.write(r, forward_region(in, out, nx, ny, r, omega)); }
  }
  TAPEFLOW_CPU_KERNEL
  void reverse_records(record_type const* staged, std::size_t first, std::size_t count,
                       T const* g_next, T* g_f) const
  {
    for (std::size_t i = 0; i < count; ++i) { reverse_region(staged[i], g_next, g_f, nx, ny, first + i, omega); }
  }
};

}  // namespace

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  if (auto const plan = segments_of<T>(p, o)) {
    return open_stencil_segments(stencil<T>{omega_of<T>(p)}, grid_of<T>(p), *plan, o,
                                 tapeflow::stencil::cpu_segments_maker{}, host_half_squares<T>{});
  }
  auto staging = std::make_shared<cpu::ring_stats>();
  cpu_step<T> step{p.nx, p.ny, omega_of<T>(p), staging};
  return open_state_chain<T>(std::move(step), p.steps, o, host_half_squares<T>{}, std::move(staging));
}

template std::unique_ptr<session<float>> open_cpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);

}  // namespace tapeflow::workloads::lbm::detail
