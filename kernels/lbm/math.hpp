// SPDX-License-Identifier: Apache-2.0
// LBM D2Q9 per-cell math, written once for the CPU reference and the GPU kernels.
//
// State: f as 9 planes of nx*ny values (plane i holds f_i; cell = y*nx + x), periodic. One step is
// BGK collision with omega = 1/tau, then streaming (push):
//
//   rho = sum_i f_i,  m = sum_i c_i f_i,  u = m / rho
//   feq_i = w_i rho (1 + 3 c_i.u + 4.5 (c_i.u)^2 - 1.5 |u|^2)
//   f_next(x + c_i, i) = f_i(x) - omega (f_i(x) - feq_i(rho(x), u(x)))
//
// The adjoint. Streaming is a permutation, so its reverse is the gather
//   gbar_i(x) = g_next(x + c_i, i).
// Collision: post_i = (1 - omega) f_i + omega feq_i(rho, m), with feq_i written in rho and m:
//   feq_i = w_i (rho + 3 c_i.m + 4.5 (c_i.m)^2 / rho - 1.5 |m|^2 / rho), hence
//   d feq_i / d rho = w_i (1 - 4.5 (c_i.u)^2 + 1.5 |u|^2)             (summed with gbar: A)
//   d feq_i / d m   = w_i (3 c_i + 9 (c_i.u) c_i - 3 u)                (summed with gbar: B)
// and d rho / d f_j = 1, d m / d f_j = c_j, so
//   g_f_j(x) = (1 - omega) gbar_j + omega (A + B . c_j).
// A and B depend on the cell's pre-collision state only through u = m / rho: the 2 values of u
// are the whole tape record of a cell (rho and the 9 f_i are not needed by the reverse).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>

namespace tapeflow::workloads::lbm {

/// Discrete velocities: 0 at rest, 1..4 along the axes, 5..8 the diagonals.
inline constexpr int directions = 9;

TAPEFLOW_HOST_DEVICE constexpr int cx(int i) noexcept
{
  // 0: (0,0)  1: (1,0)  2: (0,1)  3: (-1,0)  4: (0,-1)  5: (1,1)  6: (-1,1)  7: (-1,-1)  8: (1,-1)
  return i == 1 || i == 5 || i == 8 ? 1 : (i == 3 || i == 6 || i == 7 ? -1 : 0);
}
TAPEFLOW_HOST_DEVICE constexpr int cy(int i) noexcept
{
  return i == 2 || i == 5 || i == 6 ? 1 : (i == 4 || i == 7 || i == 8 ? -1 : 0);
}
template <class T>
TAPEFLOW_HOST_DEVICE constexpr T weight(int i) noexcept
{
  return i == 0 ? T(4) / T(9) : (i < 5 ? T(1) / T(9) : T(1) / T(36));
}

/// The velocity u = m / rho of one cell: all the reverse needs of its pre-collision state.
template <class T>
struct velocity {
  T x;
  T y;
};

/// Cells per tape record: one 16-byte chunk holds the velocities of 2 cells in f32
/// {ux0, uy0, ux1, uy1}, of 1 cell in f64 {ux, uy}.
template <class T>
inline constexpr std::size_t cells_per_record = values_per_chunk<T> / 2;

/// One region of the tape: the velocities of `cells_per_record<T>` consecutive cells at one step
/// (the last record of a layer holds zeros for cells past the lattice).
template <class T>
using record = value_record<T, 2 * cells_per_record<T>>;

/// Records in one layer (one step) of a lattice of `cells` cells.
template <class T>
TAPEFLOW_HOST_DEVICE constexpr std::size_t records_per_layer(std::size_t cells) noexcept
{
  return (cells + cells_per_record<T> - 1) / cells_per_record<T>;
}

/// The periodic neighbour of `cell` along direction i, on an nx x ny grid.
TAPEFLOW_HOST_DEVICE inline std::size_t neighbour(std::size_t cell, int i, std::size_t nx, std::size_t ny) noexcept
{
  std::size_t const y = cell / nx;
  std::size_t const x = cell - y * nx;
  int const dx = cx(i);
  int const dy = cy(i);
  std::size_t const xn = dx > 0 ? (x + 1 == nx ? 0 : x + 1) : (dx < 0 ? (x == 0 ? nx - 1 : x - 1) : x);
  std::size_t const yn = dy > 0 ? (y + 1 == ny ? 0 : y + 1) : (dy < 0 ? (y == 0 ? ny - 1 : y - 1) : y);
  return yn * nx + xn;
}

/// The density and velocity of one cell.
template <class T>
struct moments {
  T rho;
  velocity<T> u;
};

/// rho = sum_i f_i and u = (sum_i c_i f_i) / rho of one cell's pre-collision values.
template <class T>
TAPEFLOW_HOST_DEVICE moments<T> moments_of(T const (&f)[directions]) noexcept
{
  T rho = 0;
  T mx = 0;
  T my = 0;
  TAPEFLOW_HOST_UNROLL
  for (int i = 0; i < directions; ++i) {
    rho += f[i];
    mx += T(cx(i)) * f[i];
    my += T(cy(i)) * f[i];
  }
  return {rho, {mx / rho, my / rho}};
}

/// |u|² of a cell's velocity.
template <class T>
TAPEFLOW_HOST_DEVICE T squared(velocity<T> u) noexcept
{
  return u.x * u.x + u.y * u.y;
}

/// The post-collision value along direction i of a cell whose pre-collision value there is `fi`,
/// whose moments are `m` and whose |u|² is `usq`: the one expression collide() and a pulling step
/// both evaluate, so that they give the same bits.
template <class T>
TAPEFLOW_HOST_DEVICE T relaxed(T fi, int i, moments<T> const& m, T usq, T omega) noexcept
{
  T const cu = T(cx(i)) * m.u.x + T(cy(i)) * m.u.y;
  T const feq = weight<T>(i) * m.rho * (T(1) + T(3) * cu + T(4.5) * cu * cu - T(1.5) * usq);
  return fi - omega * (fi - feq);
}

/// The post-collision values of one cell from its pre-collision values; returns the cell's
/// velocity u, computed on the way (what the augmented forward tapes).
template <class T>
TAPEFLOW_HOST_DEVICE velocity<T> collide(T const (&f)[directions], T omega, T (&post)[directions]) noexcept
{
  moments<T> const m = moments_of(f);
  T const usq = squared(m.u);
  TAPEFLOW_HOST_UNROLL
  for (int i = 0; i < directions; ++i) { post[i] = relaxed(f[i], i, m, usq, omega); }
  return m.u;
}

/// dL/df of one cell from its pre-collision velocity `u` and the adjoint `gbar` of its
/// post-collision values (the derivation is at the top of this file).
template <class T>
TAPEFLOW_HOST_DEVICE void collide_adjoint(velocity<T> u, T const (&gbar)[directions], T omega,
                                          T (&g)[directions]) noexcept
{
  T const usq = squared(u);
  T a = 0;
  T bx = 0;
  T by = 0;
  TAPEFLOW_HOST_UNROLL
  for (int i = 0; i < directions; ++i) {
    T const cxi = T(cx(i));
    T const cyi = T(cy(i));
    T const cu = cxi * u.x + cyi * u.y;
    T const wg = weight<T>(i) * gbar[i];
    a += wg * (T(1) - T(4.5) * cu * cu + T(1.5) * usq);
    bx += wg * (T(3) * cxi + T(9) * cu * cxi - T(3) * u.x);
    by += wg * (T(3) * cyi + T(9) * cu * cyi - T(3) * u.y);
  }
  TAPEFLOW_HOST_UNROLL
  for (int j = 0; j < directions; ++j) {
    g[j] = (T(1) - omega) * gbar[j] + omega * (a + bx * T(cx(j)) + by * T(cy(j)));
  }
}

/// One step of one cell: collide, push to the neighbours in `out`; returns the cell's velocity.
template <class T>
TAPEFLOW_HOST_DEVICE velocity<T> step_cell(T const* in, T* out, std::size_t nx, std::size_t ny, std::size_t cell,
                                           T omega) noexcept
{
  std::size_t const cells = nx * ny;
  T f[directions];
  for (int i = 0; i < directions; ++i) { f[i] = in[static_cast<std::size_t>(i) * cells + cell]; }
  T post[directions];
  velocity<T> const u = collide(f, omega, post);
  for (int i = 0; i < directions; ++i) {
    out[static_cast<std::size_t>(i) * cells + neighbour(cell, i, nx, ny)] = post[i];
  }
  return u;
}

/// The augmented forward of record `r` of a layer: the primal step of its cells
/// (cells_per_record * r onwards, those inside the lattice), and the record of their velocities.
template <class T>
TAPEFLOW_HOST_DEVICE record<T> forward_region(T const* in, T* out, std::size_t nx, std::size_t ny, std::size_t r,
                                              T omega) noexcept
{
  std::size_t const cells = nx * ny;
  record<T> rec;
  for (std::size_t k = 0; k < cells_per_record<T>; ++k) {
    std::size_t const cell = r * cells_per_record<T> + k;
    velocity<T> u{T(0), T(0)};  // padding past the last cell
    if (cell < cells) { u = step_cell(in, out, nx, ny, cell, omega); }
    rec.values[2 * k] = u.x;
    rec.values[2 * k + 1] = u.y;
  }
  return rec;
}

/// The reverse of record `r` from its staged copy: for each of its cells, gathers g_next from the
/// 9 neighbours the forward pushed to and writes dL/df of the cell's 9 values.
template <class T>
TAPEFLOW_HOST_DEVICE void reverse_region(record<T> const& rec, T const* g_next, T* g_f, std::size_t nx,
                                         std::size_t ny, std::size_t r, T omega) noexcept
{
  std::size_t const cells = nx * ny;
  for (std::size_t k = 0; k < cells_per_record<T>; ++k) {
    std::size_t const cell = r * cells_per_record<T> + k;
    if (cell >= cells) { break; }
    velocity<T> const u{rec.values[2 * k], rec.values[2 * k + 1]};
    T gbar[directions];
    for (int i = 0; i < directions; ++i) {
      gbar[i] = g_next[static_cast<std::size_t>(i) * cells + neighbour(cell, i, nx, ny)];
    }
    T g[directions];
    collide_adjoint(u, gbar, omega, g);
    for (int j = 0; j < directions; ++j) { g_f[static_cast<std::size_t>(j) * cells + cell] = g[j]; }
  }
}

}  // namespace tapeflow::workloads::lbm
