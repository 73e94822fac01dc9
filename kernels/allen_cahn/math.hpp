// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn per-element math, written once for the CPU reference and the GPU kernels.
//
//   lap(u)[i,j] = u[i-1,j] + u[i+1,j] + u[i,j-1] + u[i,j+1] - 4 u[i,j]     (indices mod n)
//   u'          = u + dt * (eps2 * lap(u) + u - u^3)
//
// The adjoint of one step, with g' = dL/du' and the multiset of periodic neighbours N(i,j):
//   dL/du[i,j] = g'[i,j] * (1 + dt * (1 - 4 eps2 - 3 u[i,j]^2)) + dt * eps2 * sum_{m in N(i,j)} g'[m]
// (the Laplacian is symmetric, so the neighbours' contributions gather the same stencil).
//
// What the tape holds per cell (tape_content):
//   values    u[i,j] (the reverse forms the local derivative itself);
//   partials  the reaction's local derivative r'(u) = 1 + dt (1 - 3u^2), computed in the forward
//             by dual numbers through the same reaction() the primal runs; the reverse is then
//             linear: dL/du = r'(u) g' + dt eps2 lap(g')   (lap with its -4 g' diagonal).
//   Same gradient to rounding; the partials variant does no per-cell math in the reverse.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/dual.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/workloads/common/value_cells.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::workloads::allen_cahn {

template <class T>
struct coefficients {
  T dt;
  T eps2;
};

/// What the augmented forward puts on the tape for each cell (see the top of this file).
enum class tape_content { values, partials };

[[nodiscard]] constexpr char const* to_string(tape_content c) noexcept
{
  return c == tape_content::values ? "values" : "partials";
}

// One region of the tape (record<T>): the primal values of `cells_per_record` consecutive cells
// (row-major) at one step — the only value each cell's reverse needs; records_for, and the
// periodic neighbours wrap_prev and wrap_next (tapeflow/workloads/common/value_cells.hpp).
using value_cells::cells_per_record;
using value_cells::record;
using value_cells::records_for;
using value_cells::wrap_next;
using value_cells::wrap_prev;

/// Row i and column j of flat index `cell` in an n x n grid. In 32 bits wherever the grid allows:
/// a GPU divides by a run-time n several times faster in 32 bits than in 64.
struct grid_index {
  std::size_t i;
  std::size_t j;
};
TAPEFLOW_HOST_DEVICE constexpr grid_index locate(std::size_t cell, std::size_t n) noexcept
{
  if (n * n <= UINT32_MAX) {
    auto const c = static_cast<std::uint32_t>(cell);
    auto const m = static_cast<std::uint32_t>(n);
    std::uint32_t const i = c / m;
    return {i, c - i * m};
  }
  std::size_t const i = cell / n;
  return {i, cell - i * n};
}

/// The pointwise part of a step, u + dt (u - u^3); generic so that dual numbers differentiate it.
template <class T, class U>
TAPEFLOW_HOST_DEVICE U reaction(U u, coefficients<T> k) noexcept
{
  return u + k.dt * (u - u * u * u);
}

/// u' of one cell from its value and its four neighbours.
template <class T>
TAPEFLOW_HOST_DEVICE T step_cell(T c, T up, T down, T left, T right, coefficients<T> k) noexcept
{
  T const lap = up + down + left + right - T(4) * c;
  return reaction(c, k) + k.dt * k.eps2 * lap;
}

/// What the tape holds for a cell of value u (forward mode for `partials`).
template <class T>
TAPEFLOW_HOST_DEVICE T taped_value(T u, coefficients<T> k, tape_content content) noexcept
{
  if (content == tape_content::values) { return u; }
  return reaction<T>(variable(u), k).derivative;
}

/// dL/du of one cell from its taped value u and g' at the cell and its four neighbours.
template <class T>
TAPEFLOW_HOST_DEVICE T adjoint_cell(T u, T g, T g_up, T g_down, T g_left, T g_right, coefficients<T> k) noexcept
{
  T const local = T(1) + k.dt * (T(1) - T(4) * k.eps2 - T(3) * u * u);
  return local * g + k.dt * k.eps2 * (g_up + g_down + g_left + g_right);
}

/// u' at flat index `cell` of the n x n state `u`.
template <class T>
TAPEFLOW_HOST_DEVICE T step_at(T const* u, std::size_t n, std::size_t cell, coefficients<T> k) noexcept
{
  auto const [i, j] = locate(cell, n);
  return step_cell(u[cell], u[wrap_prev(i, n) * n + j], u[wrap_next(i, n) * n + j], u[i * n + wrap_prev(j, n)],
                   u[i * n + wrap_next(j, n)], k);
}

/// dL/du of one cell from its taped reaction derivative r'(u) (tape_content::partials).
template <class T>
TAPEFLOW_HOST_DEVICE T adjoint_cell_from_partial(T partial, T g, T g_up, T g_down, T g_left, T g_right,
                                                 coefficients<T> k) noexcept
{
  return partial * g + k.dt * k.eps2 * (g_up + g_down + g_left + g_right - T(4) * g);
}

/// dL/du at flat index `cell`, from what the tape holds for it and the adjoint `g` of the next state.
template <class T>
TAPEFLOW_HOST_DEVICE T adjoint_at(T taped, T const* g, std::size_t n, std::size_t cell, coefficients<T> k,
                                  tape_content content = tape_content::values) noexcept
{
  auto const [i, j] = locate(cell, n);
  T const up = g[wrap_prev(i, n) * n + j];
  T const down = g[wrap_next(i, n) * n + j];
  T const left = g[i * n + wrap_prev(j, n)];
  T const right = g[i * n + wrap_next(j, n)];
  return content == tape_content::values ? adjoint_cell(taped, g[cell], up, down, left, right, k)
                                         : adjoint_cell_from_partial(taped, g[cell], up, down, left, right, k);
}

/// The augmented forward of one region: advances its cells and returns the record to tape.
template <class T>
TAPEFLOW_HOST_DEVICE record<T> forward_region(T const* in, T* out, std::size_t n, std::size_t r,
                                              coefficients<T> k,
                                              tape_content content = tape_content::values) noexcept
{
  record<T> rec;
  std::size_t const cells = n * n;
  for (std::size_t c = 0; c < cells_per_record<T>; ++c) {
    std::size_t const cell = r * cells_per_record<T> + c;
    if (cell < cells) {
      rec.values[c] = taped_value(in[cell], k, content);
      out[cell] = step_at(in, n, cell, k);
    } else {
      rec.values[c] = T(0);
    }
  }
  return rec;
}

/// The reverse of one region from its staged record.
template <class T>
TAPEFLOW_HOST_DEVICE void reverse_region(record<T> const& rec, T const* g_out, T* g_in, std::size_t n,
                                         std::size_t r, coefficients<T> k,
                                         tape_content content = tape_content::values) noexcept
{
  std::size_t const cells = n * n;
  for (std::size_t c = 0; c < cells_per_record<T>; ++c) {
    std::size_t const cell = r * cells_per_record<T> + c;
    if (cell < cells) { g_in[cell] = adjoint_at(rec.values[c], g_out, n, cell, k, content); }
  }
}

}  // namespace tapeflow::workloads::allen_cahn
