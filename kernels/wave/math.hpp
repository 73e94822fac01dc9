// SPDX-License-Identifier: Apache-2.0
// The acoustic wave equation's per-cell math, written once for the CPU backend and the GPU
// kernels. On an nx x ny x nz grid (nz = 1: 2-D) of spacing h with zero values outside (Dirichlet),
// m the squared slowness 1/c^2 of each cell, q_t a Ricker wavelet injected at the source cell:
//
//   s_t      = lap(u_t) + q_t delta_source                      lap: the 2d+1-point Laplacian / h^2
//   u_{t+1}  = 2 u_t - u_{t-1} + (dt^2 / m) s_t
//   L        = 0.5 sum_{t < T} sum_r (u_t(x_r) - d_{t,r})^2     receivers r along a line
//
// The chain's state is (u_{t-1}, u_t, L_t): the misfit L_t accumulated so far is part of it, so a
// step recomputed from a checkpoint recomputes it too and every policy gives the same bits. A step
// tapes, per cell, s_t and u_t: everything its reverse needs at that cell. With (a, b, c) the
// adjoint of the step's output (u_t, u_{t+1}, L_{t+1}):
//
//   dL/du_{t-1}[j] = -b_j
//   dL/du_t[j]     = a_j + 2 b_j + sum_{i in N(j)} w_i - 2 dims w_j + c (u_t[j] - d_{t,r(j)}) [j = x_r]
//                    with w_i = dt^2 b_i / (m_i h^2): the Laplacian is symmetric, so the gather
//                    reads the neighbours' adjoints (and m), not their tape
//   dL/dL_t        = c
//   dL/dm_j       += -b_j dt^2 s_j / m_j^2                      (the parameter adjoint)
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/select.hpp>

#include <cmath>
#include <cstddef>

namespace tapeflow::workloads::wave {

/// The grid, the time step and the acquisition, in the precision of the computation.
template <class T>
struct geometry {
  std::size_t nx, ny, nz;
  T dt;
  T inv_h2;           ///< 1 / h^2
  std::size_t receiver_y, receiver_z;  ///< the receivers: every x of row (receiver_y, receiver_z)
  T peak_frequency;   ///< of the Ricker wavelet
  std::size_t source_x, source_y, source_z;  ///< the source cell

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t cells() const noexcept { return nx * ny * nz; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t receivers() const noexcept { return nx; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE int dims() const noexcept { return nz > 1 ? 3 : 2; }
  /// The flat index of the source cell.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t source_cell() const noexcept
  {
    return (source_z * ny + source_y) * nx + source_x;
  }
  /// The flat index of receiver r.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t receiver_cell(std::size_t r) const noexcept
  {
    return (receiver_z * ny + receiver_y) * nx + r;
  }
};

/// One tape record: s and u of `cells_per_record<T>` consecutive cells, interleaved (s, u).
template <class T>
using record = value_record<T, 16 / sizeof(T)>;
template <class T>
inline constexpr std::size_t cells_per_record = 8 / sizeof(T);

template <class T>
TAPEFLOW_HOST_DEVICE constexpr std::size_t records_for(std::size_t cells) noexcept
{
  return (cells + cells_per_record<T> - 1) / cells_per_record<T>;
}

/// The Ricker wavelet of peak frequency f at step t, centred at 1/f: (1 - 2 a) exp(-a), a = (pi f tau)^2.
template <class T>
TAPEFLOW_HOST_DEVICE T ricker(std::size_t t, T dt, T f) noexcept
{
  T const tau = static_cast<T>(t) * dt - T(1) / f;
  T const a = T(9.869604401089358) * f * f * tau * tau;  // pi^2 f^2 tau^2
  using std::exp;  // expf for float (host and device)
  return (T(1) - T(2) * a) * exp(-a);
}

/// The sum of nth(n) over the neighbours of the cell (x, y, z) that lie in the grid, n numbering
/// them x-1, x+1, y-1, y+1, z-1, z+1 (the last two in 3-D only): the Laplacian's off-diagonal part,
/// gathered, always in this order (the one-step chain and the stencil library's segments add the
/// same terms in the same order). `Dims`: the grid's (g.dims()), where the caller knows it at
/// compile time; 0: read from g.
template <class T, int Dims = 0, class Nth>
TAPEFLOW_HOST_DEVICE T neighbour_sum(Nth const& nth, geometry<T> const& g, std::size_t x, std::size_t y,
                                     std::size_t z) noexcept
{
  T sum = T(0);
  if (x > 0) { sum += nth(0); }
  if (x + 1 < g.nx) { sum += nth(1); }
  if (y > 0) { sum += nth(2); }
  if (y + 1 < g.ny) { sum += nth(3); }
  if (Dims == 3 || (Dims == 0 && g.nz > 1)) {
    if (z > 0) { sum += nth(4); }
    if (z + 1 < g.nz) { sum += nth(5); }
  }
  return sum;
}

/// neighbour_sum of a cell whose neighbours all lie in the grid (stencil::site::interior): the same
/// terms in the same order, without the tests, so that a CPU's compiler can run a row of such
/// cells in vector lanes.
template <class T, int Dims, class Nth>
TAPEFLOW_HOST_DEVICE T interior_neighbour_sum(Nth const& nth) noexcept
{
  T sum = T(0);
  sum += nth(0);
  sum += nth(1);
  sum += nth(2);
  sum += nth(3);
  if constexpr (Dims == 3) {
    sum += nth(4);
    sum += nth(5);
  }
  return sum;
}

/// The same over a whole-grid array: at(i) of the neighbours' flat indices i.
template <class T, class At>
TAPEFLOW_HOST_DEVICE T neighbour_sum(At const& at, geometry<T> const& g, std::size_t cell) noexcept
{
  std::size_t const plane = g.nx * g.ny;
  auto const nth = [&](int n) {
    switch (n) {
      case 0: return at(cell - 1);
      case 1: return at(cell + 1);
      case 2: return at(cell - g.nx);
      case 3: return at(cell + g.nx);
      case 4: return at(cell - plane);
      default: return at(cell + plane);
    }
  };
  return neighbour_sum<T>(nth, g, cell % g.nx, cell / g.nx % g.ny, cell / plane);
}

/// The Laplacian at a cell from its u_t (`centre`) and the sum of its neighbours' (neighbour_sum).
/// `dims`: g.dims().
template <class T>
TAPEFLOW_HOST_DEVICE T laplacian(T neighbours, T centre, geometry<T> const& g, int dims) noexcept
{
  return (neighbours - T(2 * dims) * centre) * g.inv_h2;
}

/// s_t at a cell from its u_t (`centre`) and the sum of its neighbours' (neighbour_sum): the
/// Laplacian, and at the source cell the wavelet. `dims`: g.dims().
template <class T>
TAPEFLOW_HOST_DEVICE T source_value(T neighbours, T centre, geometry<T> const& g, bool at_source, std::size_t t,
                                    int dims) noexcept
{
  T const lap = laplacian(neighbours, centre, g, dims);
  return at_source ? lap + ricker(t, g.dt, g.peak_frequency) : lap;
}

/// source_value with the wavelet's value at the step, q = ricker(t, g.dt, g.peak_frequency), given:
/// the same bits, the choice a select (tapeflow::select) of values computed both, for per-cell code
/// that a CPU's compiler runs in vector lanes.
template <class T>
TAPEFLOW_HOST_DEVICE T source_value_of(T neighbours, T centre, geometry<T> const& g, bool at_source, T q,
                                       int dims) noexcept
{
  T const lap = laplacian(neighbours, centre, g, dims);
  return select(at_source, lap + q, lap);
}

/// s_t at `cell` of the whole-grid u_t.
template <class T>
TAPEFLOW_HOST_DEVICE T source_term(T const* u, geometry<T> const& g, std::size_t cell, std::size_t t) noexcept
{
  return source_value(neighbour_sum<T>([u](std::size_t i) { return u[i]; }, g, cell), u[cell], g, cell == g.source_cell(), t,
                      g.dims());
}

/// u_{t+1} at a cell from u_{t-1}, u_t, its s_t and its m.
template <class T>
TAPEFLOW_HOST_DEVICE T next_value(T prev, T cur, T s, T m, geometry<T> const& g) noexcept
{
  return T(2) * cur - prev + g.dt * g.dt / m * s;
}

/// One cell of the step (u_{t-1}, u_t) -> (u_t, u_{t+1}) over the state `in` = (u_{t-1}, u_t) and
/// `out` = (u_t, u_{t+1}), each of them two planes of g.cells(); with a tape (`taped` not null),
/// the cell's s_t and u_t, interleaved.
template <class T>
TAPEFLOW_HOST_DEVICE void advance_cell(T const* in, T* out, T* taped, T const* m, geometry<T> const& g, std::size_t cell,
                                       std::size_t t) noexcept
{
  std::size_t const cells = g.cells();
  T const* const prev = in;
  T const* const cur = in + cells;
  T const s = source_term(cur, g, cell, t);
  out[cell] = cur[cell];
  out[cells + cell] = next_value(prev[cell], cur[cell], s, m[cell], g);
  if (taped != nullptr) {
    taped[2 * cell] = s;
    taped[2 * cell + 1] = cur[cell];
  }
}

/// dL/du_t at a cell from the adjoints a, b of the output's u_t and u_{t+1} at the cell, the sum
/// of b / m over its neighbours (`neighbours`, neighbour_sum) and b / m at the cell (`own`), c of
/// L_{t+1}, and the cell's misfit `residual` (u_t - d at a receiver, else 0). `dims`: g.dims().
template <class T>
TAPEFLOW_HOST_DEVICE T current_adjoint_value(T a, T b, T neighbours, T own, geometry<T> const& g, T c, T residual,
                                             int dims) noexcept
{
  T const through_laplacian = (neighbours - T(2 * dims) * own) * g.dt * g.dt * g.inv_h2;
  return a + T(2) * b + through_laplacian + c * residual;
}

/// The same at `cell` of the whole-grid adjoints a, b and model m (b gathered from the neighbours,
/// weighted by dt^2 / (m h^2)).
template <class T>
TAPEFLOW_HOST_DEVICE T current_adjoint(T const* a, T const* b, T const* m, geometry<T> const& g, std::size_t cell, T c,
                                       T residual) noexcept
{
  auto const w = [b, m](std::size_t i) { return b[i] / m[i]; };
  return current_adjoint_value(a[cell], b[cell], neighbour_sum<T>(w, g, cell), w(cell), g, c, residual, g.dims());
}

/// What the step adds to dL/dm at a cell.
template <class T>
TAPEFLOW_HOST_DEVICE T slowness_adjoint(T b, T s, T m, geometry<T> const& g) noexcept
{
  return -b * g.dt * g.dt * s / (m * m);
}

}  // namespace tapeflow::workloads::wave
