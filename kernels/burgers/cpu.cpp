// SPDX-License-Identifier: Apache-2.0
// Burgers on the CPU backend: the forward over the CPU's threads, the reverse through
// cpu::reverse_windows — each tile with its halo of one record on each side (read in place, or
// staged by the ring with the halo when the plan asks for it). In segments, or over ranks, the
// stencil library's CPU segments (stencil.hpp).
#include "backends.hpp"
#include "math.hpp"

#include <tapeflow/workloads/common/state_chain.hpp>

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/stencil/cpu.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <memory>

namespace tapeflow::workloads::burgers::detail {

template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t n;
  coefficients<T> k;
  std::shared_ptr<cpu::ring_stats> staging;

  [[nodiscard]] std::size_t state_size() const noexcept { return n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(n); }
  /// The tape holds u: the record is the input state, which the chain then keeps as the layer.
  [[nodiscard]] bool tapes_state() const noexcept { return true; }
  /// The stencil reaches one cell, so one record, past each end of a tile.
  [[nodiscard]] std::size_t halo_records() const noexcept { return burgers::halo_records; }

  void forward(std::size_t, T const* in, T* out, stream_view) const
  {
    cpu::parallel_for(n, cpu::grain_for(n, 4096),
                      [&](std::size_t begin, std::size_t end) { forward_cells(begin, end, in, out); });
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    cpu::parallel_for(tape.size(), cpu::grain_for(tape.size(), 1024),
                      [&](std::size_t begin, std::size_t end) { augmented_records(begin, end, in, out, tape); });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               stream_view) const
  {
    cpu::reverse_windows(
      tape, plan,
      [&](std::size_t, tile_window<record_type> const& window, std::size_t first, std::size_t count) {
        for (std::size_t r = first; r < first + count; ++r) { reverse_region(window, g_out, g_in, n, r, k); }
      },
      staging.get());
  }

  // The forward's loops, each a TAPEFLOW_CPU_KERNEL as the segments' tile programs are, so that the
  // two compare on the same vectors. The reverse's loop (above) is not: its AVX2 copy was slower
  // (docs/benchmarks.md, "AVX2 on the CPUs that have it").
  TAPEFLOW_CPU_KERNEL
  void forward_cells(std::size_t begin, std::size_t end, T const* in, T* out) const
  {
    for (std::size_t j = begin; j < end; ++j) {
      out[j] = step_cell(in[wrap_prev(j, n)], in[j], in[wrap_next(j, n)], k);
    }
  }
  TAPEFLOW_CPU_KERNEL
  void augmented_records(std::size_t begin, std::size_t end, T const* in, T* out,
                         tape_writer<record_type> tape) const
  {
    for (std::size_t r = begin; r < end; ++r) { tape.write(r, forward_region(in, out, n, r, k)); }
  }
};

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  if (segmented(o)) {
    return open_stencil_segments(stencil<T>{coefficients_of<T>(p)}, grid_of<T>(p), segment_plan_of<T>(p, o), o,
                                 tapeflow::stencil::cpu_segments_maker{}, host_half_squares<T>{});
  }
  auto staging = std::make_shared<cpu::ring_stats>();
  cpu_step<T> step{p.n, coefficients_of<T>(p), staging};
  return open_state_chain<T>(std::move(step), p.steps, o, host_half_squares<T>{}, std::move(staging));
}

template std::unique_ptr<session<float>> open_cpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);

}  // namespace tapeflow::workloads::burgers::detail
