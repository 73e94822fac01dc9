// SPDX-License-Identifier: Apache-2.0
// Burgers' equation in 1-D, per-element math written once (host and device).
//
// State u: n cells on a periodic line. One explicit step, central differences, with the advection
// number a = dt / (2 dx) and the diffusion number b = nu dt / dx^2:
//
//   u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1})      (indices mod n)
//
// The adjoint gathers what u_j fed into u'_{j-1}, u'_j and u'_{j+1}, with g = dL/du':
//
//   dL/du_j = g_j (1 - a (u_{j+1} - u_{j-1}) - 2 b) + g_{j-1} (b - a u_{j-1}) + g_{j+1} (b + a u_{j+1})
//
// so the reverse of cell j needs u_{j-1} and u_{j+1} — its neighbours' values, not its own (the
// advection term is linear in u_j). The tape holds every u_j once (cells_per_record consecutive
// cells per record), and the reverse reads the neighbours of a record's first and last cells from
// the records beside it: a halo of one record on each side of every tile (tapeflow/halo.hpp).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/workloads/common/value_cells.hpp>

#include <cstddef>

namespace tapeflow::workloads::burgers {

template <class T>
struct coefficients {
  T a;  ///< advection number dt / (2 dx)
  T b;  ///< diffusion number nu dt / dx^2
};

// One region of the tape (record<T>): the values of `cells_per_record<T>` consecutive cells at one
// step; records_for, and the periodic neighbours wrap_prev and wrap_next
// (tapeflow/workloads/common/value_cells.hpp).
using value_cells::cells_per_record;
using value_cells::record;
using value_cells::records_for;
using value_cells::wrap_next;
using value_cells::wrap_prev;

/// The records a reverse reads on each side of a tile: a cell's neighbours are at most one cell
/// away, so at most one record away.
inline constexpr std::size_t halo_records = 1;


/// u'_j from u_{j-1}, u_j, u_{j+1}.
template <class T>
TAPEFLOW_HOST_DEVICE T step_cell(T left, T u, T right, coefficients<T> k) noexcept
{
  return u - k.a * u * (right - left) + k.b * (right - T(2) * u + left);
}

/// dL/du_j from u_{j-1}, u_{j+1} and g at j-1, j, j+1.
template <class T>
TAPEFLOW_HOST_DEVICE T adjoint_cell(T u_left, T u_right, T g_left, T g, T g_right, coefficients<T> k) noexcept
{
  return g * (T(1) - k.a * (u_right - u_left) - T(2) * k.b) + g_left * (k.b - k.a * u_left) +
         g_right * (k.b + k.a * u_right);
}

/// The augmented forward of record `r`: advances its cells and returns the record to tape.
template <class T>
TAPEFLOW_HOST_DEVICE record<T> forward_region(T const* in, T* out, std::size_t n, std::size_t r,
                                              coefficients<T> k) noexcept
{
  record<T> rec;
  for (std::size_t c = 0; c < cells_per_record<T>; ++c) {
    std::size_t const j = r * cells_per_record<T> + c;
    if (j < n) {
      rec.values[c] = in[j];
      out[j] = step_cell(in[wrap_prev(j, n)], in[j], in[wrap_next(j, n)], k);
    } else {
      rec.values[c] = T(0);
    }
  }
  return rec;
}

/// The taped u_j, from a window onto the layer (anything whose [r] is record r: a tile_window, or
/// the layer's records themselves).
template <class T, class Window>
TAPEFLOW_HOST_DEVICE T taped_value(Window const& window, std::size_t j) noexcept
{
  return window[j / cells_per_record<T>].values[j % cells_per_record<T>];
}

/// The reverse of record `r`: dL/du of its cells from the taped values of the cells and their
/// neighbours (read through `window`, which holds the records beside r) and g = dL/du'.
template <class T, class Window>
TAPEFLOW_HOST_DEVICE void reverse_region(Window const& window, T const* g_out, T* g_in, std::size_t n,
                                         std::size_t r, coefficients<T> k) noexcept
{
  for (std::size_t c = 0; c < cells_per_record<T>; ++c) {
    std::size_t const j = r * cells_per_record<T> + c;
    if (j >= n) { break; }
    std::size_t const l = wrap_prev(j, n);
    std::size_t const rt = wrap_next(j, n);
    g_in[j] = adjoint_cell(taped_value<T>(window, l), taped_value<T>(window, rt), g_out[l], g_out[j], g_out[rt], k);
  }
}

}  // namespace tapeflow::workloads::burgers
