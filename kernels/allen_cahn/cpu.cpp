// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on the CPU reference backend: the same plan, layers and tiles as the GPU. Every step
// runs on the CPU backend's threads (cpu::parallel_for over rows; the reverse over tiles through
// cpu::reverse_tiles) and walks the grid row by row, so the periodic wrap is decided once per row
// and the interior columns form a loop the compiler vectorises. The per-cell math is math.hpp's,
// the same the GPU kernels run.
#include "backends.hpp"
#include "math.hpp"

#include <tapeflow/workloads/common/staged_cells.hpp>
#include <tapeflow/workloads/common/state_chain.hpp>

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/tape_store.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/stencil/cpu.hpp>

#include <algorithm>
#include <memory>

namespace tapeflow::workloads::allen_cahn::detail {
namespace {

// A record holds cells_per_record<T> consecutive cells and nothing else, so a run of records,
// seen as an array of T, is indexed by cell like the state (as the GPU kernels index it).
static_assert(sizeof(record<float>) == cells_per_record<float> * sizeof(float) &&
                sizeof(record<double>) == cells_per_record<double> * sizeof(double),
              "a record is its cells' values and nothing else: the tape is indexed by cell");

/// Calls at(j, left, right) for the columns j in [j0, j1) of a row of n periodic columns, where
/// left and right are the columns of j's neighbours: the two edge columns apart, the interior as
/// one loop with left = j - 1 and right = j + 1.
template <class At>
inline void for_columns(std::size_t j0, std::size_t j1, std::size_t n, At&& at)
{
  std::size_t j = j0;
  if (j == 0 && j < j1) {
    at(std::size_t{0}, n - 1, n > 1 ? std::size_t{1} : std::size_t{0});
    j = 1;
  }
  std::size_t const interior_end = std::min(j1, n - 1);
  for (; j < interior_end; ++j) { at(j, j - 1, j + 1); }
  if (j < j1) { at(j, j - 1, std::size_t{0}); }  // j == n - 1
}

/// Calls row(i, j0, j1) for the row segments that cover cells [begin, end) of the n x n grid.
template <class Row>
inline void for_rows(std::size_t begin, std::size_t end, std::size_t n, Row&& row)
{
  std::size_t i = begin / n;
  std::size_t j0 = begin - i * n;
  for (std::size_t cell = begin; cell < end; ++i, j0 = 0) {
    std::size_t const j1 = std::min(n, j0 + (end - cell));
    row(i, j0, j1);
    cell += j1 - j0;
  }
}

template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t n;
  coefficients<T> k;
  std::shared_ptr<cpu::ring_stats> staging;
  tape_content content{tape_content::values};

  [[nodiscard]] std::size_t state_size() const noexcept { return n * n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(n * n); }
  /// The values content tapes u: the record is the input state, which the chain then keeps as the layer.
  [[nodiscard]] bool tapes_state() const noexcept { return content == tape_content::values; }

  /// u' for the rows [r0, r1), and (when `taped` is given) what the tape holds for each cell. This
  /// and reverse_cells are each compiled as one function (TAPEFLOW_FLATTEN) for the baseline and for
  /// AVX2 (TAPEFLOW_CPU_CLONES), as the segments' tile programs are, so that the two compare on the
  /// same vectors.
  TAPEFLOW_CPU_KERNEL void advance_rows(std::size_t r0, std::size_t r1, T const* in, T* out,
                                        T* taped) const
  {
    for (std::size_t i = r0; i < r1; ++i) {
      T const* const u = in + i * n;
      T const* const up = in + wrap_prev(i, n) * n;
      T const* const down = in + wrap_next(i, n) * n;
      T* const o = out + i * n;
      coefficients<T> const kk = k;
      for_columns(0, n, n, [&](std::size_t j, std::size_t l, std::size_t r) {
        o[j] = step_cell(u[j], up[j], down[j], u[l], u[r], kk);
      });
      if (taped == nullptr) { continue; }
      T* const t = taped + i * n;
      if (content == tape_content::values) {
        cpu::store_to_tape(t, u, n);  // streaming stores: the tape is read back only in the reverse
      } else {
        for (std::size_t j = 0; j < n; ++j) { t[j] = taped_value(u[j], kk, tape_content::partials); }
      }
    }
  }

  void forward(std::size_t, T const* in, T* out, stream_view) const
  {
    cpu::parallel_for(n, cpu::grain_for(n), [&](std::size_t r0, std::size_t r1) { advance_rows(r0, r1, in, out, nullptr); });
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    T* const taped = reinterpret_cast<T*>(tape.data());
    cpu::parallel_for(n, cpu::grain_for(n), [&](std::size_t r0, std::size_t r1) { advance_rows(r0, r1, in, out, taped); });
    // The last record's padding past the grid.
    std::fill(taped + n * n, taped + tape.size() * cells_per_record<T>, T(0));
  }

  /// The adjoint of the cells [begin, end), whose tape (what tapes_state names) is `taped`.
  TAPEFLOW_CPU_KERNEL void reverse_cells(T const* taped, std::size_t begin, std::size_t end,
                                         T const* g_out, T* g_in) const
  {
    coefficients<T> const kk = k;
    for_rows(begin, end, n, [&](std::size_t i, std::size_t j0, std::size_t j1) {
      T const* const g = g_out + i * n;
      T const* const up = g_out + wrap_prev(i, n) * n;
      T const* const down = g_out + wrap_next(i, n) * n;
      T* const o = g_in + i * n;
      std::size_t const at = i * n - begin;  // taped[at + j] is cell (i, j); j >= j0 keeps it in the tile
      if (content == tape_content::values) {
        for_columns(j0, j1, n, [&](std::size_t j, std::size_t l, std::size_t r) {
          o[j] = adjoint_cell(taped[at + j], g[j], up[j], down[j], g[l], g[r], kk);
        });
      } else {
        for_columns(j0, j1, n, [&](std::size_t j, std::size_t l, std::size_t r) {
          o[j] = adjoint_cell_from_partial(taped[at + j], g[j], up[j], down[j], g[l], g[r], kk);
        });
      }
    });
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               stream_view) const
  {
    reverse_staged_cells<T, cells_per_record<T>>(
      tape, plan, n * n, staging.get(),
      [&](T const* taped, std::size_t begin, std::size_t end) { reverse_cells(taped, begin, end, g_out, g_in); });
  }
};

}  // namespace

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  if (segmented(o)) {
    return open_stencil_segments(stencil<T>{coefficients_of<T>(p)}, grid_of<T>(p), segment_plan_of<T>(p, o), o,
                                 tapeflow::stencil::cpu_segments_maker{}, host_half_squares<T>{});
  }
  auto staging = std::make_shared<cpu::ring_stats>();
  cpu_step<T> step{p.n, coefficients_of<T>(p), staging, o.content};
  return open_state_chain<T>(std::move(step), p.steps, o, host_half_squares<T>{}, std::move(staging));
}

template std::unique_ptr<session<float>> open_cpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);

}  // namespace tapeflow::workloads::allen_cahn::detail
