// SPDX-License-Identifier: Apache-2.0
// The acoustic wave equation as a tapeflow stencil (tapeflow/stencil/stencil.hpp), so that its
// gradient runs in the library's segments: k steps per launch, the reverse of k steps on chip,
// one checkpoint of (u_{t-1}, u_t) per segment as the chain's layer, where the one-step chain
// (cpu.cpp, cuda.cu) tapes s_t and u_t at every step.
//
// The state is two fields, u_{t-1} and u_t; m is the stencil's one coefficient per cell, and dL/dm
// its parameter adjoint. The step index and the cell's place come with each call (a site): the
// wavelet is injected at the source cell, the misfit's adjoint at the receivers, and observe()
// records u_t at the receivers for the loss. Every value is math.hpp's expression of the same
// inputs in the same order as the one-step chain's, so segments give the chain's gradient bits.
// The boundary is fixed (zero outside); the functions skip the neighbours outside the grid as
// neighbour_sum does, rather than reading the zeros there.
#pragma once

#include "math.hpp"
#include "wave.hpp"

#include <tapeflow/config.hpp>
#include <tapeflow/select.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>

namespace tapeflow::workloads::wave {

namespace detail {
/// Field `Field` at the cell and at its neighbours x-1, x+1, y-1, y+1 (and z-1, z+1 in 3-D), in
/// neighbour_sum's order.
template <int Dims, int Field>
struct around;
template <int Field>
struct around<2, Field> {
  template <class... Before>
  using taps = tapeflow::stencil::taps<Before..., tapeflow::stencil::tap<0, 0, 0, Field>, tapeflow::stencil::tap<-1, 0, 0, Field>,
                                       tapeflow::stencil::tap<1, 0, 0, Field>, tapeflow::stencil::tap<0, -1, 0, Field>,
                                       tapeflow::stencil::tap<0, 1, 0, Field>>;
};
template <int Field>
struct around<3, Field> {
  template <class... Before>
  using taps =
    tapeflow::stencil::taps<Before..., tapeflow::stencil::tap<0, 0, 0, Field>, tapeflow::stencil::tap<-1, 0, 0, Field>,
                            tapeflow::stencil::tap<1, 0, 0, Field>, tapeflow::stencil::tap<0, -1, 0, Field>,
                            tapeflow::stencil::tap<0, 1, 0, Field>, tapeflow::stencil::tap<0, 0, -1, Field>,
                            tapeflow::stencil::tap<0, 0, 1, Field>>;
};
}  // namespace detail

/// The wave step on a `Dims`-D grid (2: nz = 1).
template <class T, int Dims>
struct stencil {
  using value_type = T;
  static constexpr int dims = Dims;
  static constexpr int fields = 2;        ///< u_{t-1}, u_t
  static constexpr int coefficients = 1;  ///< m, the squared slowness
  /// u_{t-1} at the cell, then u_t at the cell and its neighbours.
  using forward_taps = typename detail::around<Dims, 1>::template taps<tapeflow::stencil::tap<0, 0, 0, 0>>;
  /// λ' of u_t at the cell (a), then λ' of u_{t+1} at the cell and its neighbours (b).
  using adjoint_taps = forward_taps;

  geometry<T> g;
  T const* d;  ///< the observed traces, T x receivers (in the runner's memory)
  T* traces;   ///< u_t at the receivers, T x receivers, written by observe()
  /// The wavelet at each step, ricker(t, g.dt, g.peak_frequency) for t < T (in the runner's
  /// memory), which host passes read rather than compute per cell: an exp, a call a CPU's
  /// compiler neither hoists nor runs in vector lanes. Device passes compute it at the source cell,
  /// with the device's exp, as the GPU's one-step chain does.
  T const* wavelet;

  /// (u_{t-1}, u_t) -> (u_t, u_{t+1}) at the cell.
  TAPEFLOW_HOST_DEVICE void forward(T const* u, T* out, tapeflow::stencil::site<T> const& at) const
  {
    out[0] = u[1];
    out[1] = next_value(u[0], u[1], source(u, at), at.coefficients[0], g);
  }

  /// λ of (u_{t-1}, u_t) at the cell: the chain's dL/du_{t-1} and dL/du_t (current_adjoint) with
  /// the misfit's adjoint c = dL/dL_{t+1} = 1 at the receivers. at.coefficients holds m at each
  /// adjoint tap's cell.
  TAPEFLOW_HOST_DEVICE void adjoint(T const* u, T const* gv, T* lambda, tapeflow::stencil::site<T> const& at) const
  {
    T const* const m = at.coefficients;
    T const neighbours = sum_around(at, [&](int n) { return neighbour(gv, n) / neighbour(m, n); });
    lambda[0] = -gv[1];
    lambda[1] = current_adjoint_value(gv[0], gv[1], neighbours, gv[1] / m[1], g, T(1), residual(u[1], at), Dims);
  }

  /// This step's dL/dm of the cell: slowness_adjoint of its λ'(u_{t+1}) and its s_t.
  TAPEFLOW_HOST_DEVICE void parameter_adjoint(T const* u, T const* gv, T* dm, tapeflow::stencil::site<T> const& at) const
  {
    dm[0] = slowness_adjoint(gv[1], source(u, at), at.coefficients[0], g);
  }

  /// u_t at a receiver, into the traces.
  TAPEFLOW_HOST_DEVICE void observe(T const* u, tapeflow::stencil::site<T> const& at) const
  {
    if (receives(at)) { traces[at.step * g.receivers() + cell_x(at)] = u[1]; }
  }

 private:
  /// The value at neighbour n (neighbour_sum's numbering) of values gathered at the taps; a 2-D
  /// grid has no neighbour 4 or 5 (neighbour_sum does not ask for them when nz = 1).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static T neighbour(T const* at_taps, int n) noexcept
  {
    return Dims == 3 || n < 4 ? at_taps[2 + n] : T(0);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static std::size_t cell_x(tapeflow::stencil::site<T> const& at) noexcept
  {
    return static_cast<std::size_t>(at.x);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static std::size_t cell_y(tapeflow::stencil::site<T> const& at) noexcept
  {
    return static_cast<std::size_t>(at.y);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE static std::size_t cell_z(tapeflow::stencil::site<T> const& at) noexcept
  {
    return static_cast<std::size_t>(at.z);
  }
  /// Whether the cell is on the receivers' line. (Its tests, and the source's, are joined by
  /// tapeflow::all, not `&&`, which kept a CPU's compiler from running a boundary tile's reverse in
  /// vector lanes: the vector_lanes test.)
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool receives(tapeflow::stencil::site<T> const& at) const noexcept
  {
    return tapeflow::all(cell_y(at) == g.receiver_y, cell_z(at) == g.receiver_z);
  }
  /// neighbour_sum around the cell of `at` of nth(n): without its tests where the library knows
  /// every neighbour lies in the grid (at.interior: an inner tile's cells).
  template <class Nth>
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T sum_around(tapeflow::stencil::site<T> const& at, Nth const& nth) const noexcept
  {
    if (at.interior) { return interior_neighbour_sum<T, Dims>(nth); }
    return neighbour_sum<T, Dims>(nth, g, cell_x(at), cell_y(at), cell_z(at));
  }
  /// s_t of the cell from u at the forward taps. (The grid's dimensions are the stencil's: Dims is
  /// chosen by nz, with_stencil.)
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T source(T const* u, tapeflow::stencil::site<T> const& at) const noexcept
  {
    T const neighbours = sum_around(at, [u](int n) { return neighbour(u, n); });
    bool const at_source =
      tapeflow::all(cell_x(at) == g.source_x, cell_y(at) == g.source_y, cell_z(at) == g.source_z);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return source_value(neighbours, u[1], g, at_source, at.step, Dims);
#else
    return source_value_of(neighbours, u[1], g, at_source, wavelet[at.step], Dims);
#endif
  }
  /// u_t - d at a receiver, else 0. On the host both are computed and selected
  /// (tapeflow::select): d holds a value for every x of the grid at every step.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE T residual(T u, tapeflow::stencil::site<T> const& at) const noexcept
  {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return receives(at) ? u - d[at.step * g.receivers() + cell_x(at)] : T(0);
#else
    return tapeflow::select(receives(at), u - d[at.step * g.receivers() + cell_x(at)], T(0));
#endif
  }
};

/// The problem's grid for its stencil: fixed, zero outside.
template <class T>
[[nodiscard]] tapeflow::stencil::grid<T> grid_of(problem const& p) noexcept
{
  return {p.nx, p.ny, p.nz, tapeflow::stencil::boundary::fixed, T(0)};
}

}  // namespace tapeflow::workloads::wave
