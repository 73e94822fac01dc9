// SPDX-License-Identifier: Apache-2.0
// The wave workload on the CPU backend: every cell's update and its reverse over the CPU
// backend's threads (cpu::parallel_for; the reverse's records through cpu::reverse_tiles), the
// misfit summed over the receivers in their order, all through math.hpp's per-cell functions.
// Instantiated once per value type, in cpu_f32.cpp and cpu_f64.cpp: each holds flattened tile
// programs for 2-D and 3-D in two CPU copies (tapeflow/config.hpp's TAPEFLOW_CPU_KERNEL), which as
// one file was the longest compile of the build, alone on the CPU at its end.
#pragma once

#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"
#include "segments.hpp"

#include <tapeflow/workloads/common/staged_cells.hpp>

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/tape_store.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/stencil/cpu.hpp>

#include <algorithm>
#include <memory>

namespace tapeflow::workloads::wave::detail {

template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  geometry<T> g;
  T const* m;  // squared slowness, one per cell
  T const* d;  // observed data, T x receivers
  std::shared_ptr<cpu::ring_stats> staging;

  [[nodiscard]] std::size_t state_size() const noexcept { return 2 * g.cells() + 1; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(g.cells()); }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return g.cells(); }

  /// (u_{t-1}, u_t, L_t) -> (u_t, u_{t+1}, L_{t+1}); `taped`: s and u of every cell, interleaved.
  void advance(std::size_t t, T const* in, T* out, T* taped) const
  {
    std::size_t const cells = g.cells();
    T const* const cur = in + cells;
    cpu::parallel_for(cells, cpu::grain_for(cells),
                      [&](std::size_t begin, std::size_t end) { advance_cells(t, begin, end, in, out, taped); });
    T misfit = in[2 * cells];
    for (std::size_t r = 0; r < g.receivers(); ++r) {
      T const residual = cur[g.receiver_cell(r)] - d[t * g.receivers() + r];
      misfit += T(0.5) * residual * residual;
    }
    out[2 * cells] = misfit;
  }

  void forward(std::size_t t, T const* in, T* out, stream_view) const { advance(t, in, out, nullptr); }

  void augmented_forward(std::size_t t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    T* const taped = reinterpret_cast<T*>(tape.data());  // value_record<T, N>: N values, no padding
    advance(t, in, out, taped);
    std::fill(taped + 2 * g.cells(), taped + tape.size() * 2 * cells_per_record<T>, T(0));  // the last record's padding
  }

  void reverse(std::size_t t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               T* dm, stream_view) const
  {
    std::size_t const cells = g.cells();
    reverse_staged_cells<T, cells_per_record<T>>(
      tape, plan, cells, staging.get(),
      [&](T const* taped, std::size_t begin, std::size_t end) {
        reverse_cells(t, taped, begin, end, g_out, g_in, dm);
      });
    g_in[2 * cells] = g_out[2 * cells];
  }

  // The loops of advance and reverse, each compiled as one function (TAPEFLOW_FLATTEN) for the
  // baseline and for AVX2 (TAPEFLOW_CPU_CLONES), as the segments' tile programs are, so that the two
  // compare on the same vectors.
  TAPEFLOW_CPU_KERNEL
  void advance_cells(std::size_t t, std::size_t begin, std::size_t end, T const* in, T* out,
                     T* taped) const
  {
    for (std::size_t cell = begin; cell < end; ++cell) { advance_cell(in, out, taped, m, g, cell, t); }
  }
  TAPEFLOW_CPU_KERNEL
  void reverse_cells(std::size_t t, T const* taped, std::size_t begin, std::size_t end,
                     T const* g_out, T* g_in, T* dm) const
  {
    std::size_t const cells = g.cells();
    T const* const a = g_out;
    T const* const b = g_out + cells;
    T const c = g_out[2 * cells];
    for (std::size_t cell = begin; cell < end; ++cell) {
      T const s = taped[2 * (cell - begin)];
      T const u = taped[2 * (cell - begin) + 1];
      g_in[cell] = -b[cell];
      g_in[cells + cell] = current_adjoint(a, b, m, g, cell, c, residual(t, cell, u));
      dm[cell] += slowness_adjoint(b[cell], s, m[cell], g);
    }
  }

  /// u_t - d at a receiver's cell, else 0.
  [[nodiscard]] T residual(std::size_t t, std::size_t cell, T u) const noexcept
  {
    std::size_t const row = g.receiver_cell(0);
    return cell >= row && cell < row + g.receivers() ? u - d[t * g.receivers() + (cell - row)] : T(0);
  }
};

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  if (auto const plan = segments_of<T>(p, o)) {
    return open_segments<T>(p, o, *plan, tapeflow::stencil::cpu_segments_maker{}, host_misfit<T>{});
  }
  auto staging = std::make_shared<cpu::ring_stats>();
  return open_wave<T>(p, o, cpu_step<T>{{}, nullptr, nullptr, staging}, staging);
}

}  // namespace tapeflow::workloads::wave::detail
