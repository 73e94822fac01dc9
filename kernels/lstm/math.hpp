// SPDX-License-Identifier: Apache-2.0
// LSTM per-element math, written once for the CPU reference and the GPU kernels.
//
// One cell (batch element b, hidden unit j) of one step, gate order i, f, g, o as in PyTorch, with
// z = W x_t + U h + b the pre-activations of the four gates:
//   i = σ(z_i)   f = σ(z_f)   g = tanh(z_g)   o = σ(z_o)
//   c' = f c + i g            h' = o tanh(c')
// Its adjoint, given g_h = dL/dh' and g_c = dL/dc' (c' feeds both h' and the next step):
//   g_c_total = g_c + g_h o (1 - tanh²(c'))
//   δz_i = g_c_total g i (1 - i)      δz_f = g_c_total c f (1 - f)
//   δz_g = g_c_total i (1 - g²)       δz_o = g_h tanh(c') o (1 - o)
//   dL/dc = g_c_total f
// The matrix products (dW, dU, dL/dh = Uᵀ δz, db) are the backends' business. With packed
// sequences, a cell whose sequence has ended carries its state forward and its adjoint back.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cmath>
#include <cstddef>

namespace tapeflow::workloads::lstm {

/// The tape record of one cell of one step: everything its reverse needs without recomputing
/// the step's GEMMs — the four gate activations and the step's input state. Padded to 8 values
/// (32 B for f32: two 16-byte chunks), array-of-structs, written by one thread per cell.
template <class T>
struct alignas(record_alignment) record {
  T i;
  T f;
  T g;
  T o;
  T c_prev;
  T h_prev;
  T pad0;
  T pad1;
};

/// The gates of one cell and the state they produce.
template <class T>
struct cell_state {
  T i;
  T f;
  T g;
  T o;
  T c;  ///< c'
  T h;  ///< h'
};

/// The adjoint of one cell: dL/dz of the four gates and dL/dc of the previous cell state.
template <class T>
struct cell_adjoint {
  T dz_i;
  T dz_f;
  T dz_g;
  T dz_o;
  T g_c_prev;
};

// The overloads of the math library for T (float on the device, long double in tests): a
// plain `tanh(x)` after `using std::tanh` picks tanhf for float, tanhl for long double.
template <class T>
TAPEFLOW_HOST_DEVICE T tanh_of(T x) noexcept
{
  using std::tanh;
  return tanh(x);
}

template <class T>
TAPEFLOW_HOST_DEVICE T sigmoid(T x) noexcept
{
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}

/// The forward of one cell from its gates' pre-activations and its previous cell state.
template <class T>
TAPEFLOW_HOST_DEVICE cell_state<T> cell_forward(T z_i, T z_f, T z_g, T z_o, T c_prev) noexcept
{
  cell_state<T> s;
  s.i = sigmoid(z_i);
  s.f = sigmoid(z_f);
  s.g = tanh_of(z_g);
  s.o = sigmoid(z_o);
  s.c = s.f * c_prev + s.i * s.g;
  s.h = s.o * tanh_of(s.c);
  return s;
}

/// The reverse of one cell from its taped gates and previous cell state, and the adjoints of the
/// state it produced.
template <class T>
TAPEFLOW_HOST_DEVICE cell_adjoint<T> cell_reverse(T i, T f, T g, T o, T c_prev, T g_h, T g_c) noexcept
{
  T const c = f * c_prev + i * g;
  T const tc = tanh_of(c);
  T const g_c_total = g_c + g_h * o * (T(1) - tc * tc);
  cell_adjoint<T> a;
  a.dz_i = g_c_total * g * i * (T(1) - i);
  a.dz_f = g_c_total * c_prev * f * (T(1) - f);
  a.dz_g = g_c_total * i * (T(1) - g * g);
  a.dz_o = g_h * tc * o * (T(1) - o);
  a.g_c_prev = g_c_total * f;
  return a;
}

/// The augmented forward of cell r = b H + j: its gates from the GEMM outputs `z` and `wx` (both
/// 4H x B column-major: the gates of batch element b are z[b 4H + k H + j], k = i, f, g, o) and
/// the bias; writes h', c' into `out` (h then c, B x H each) and returns the record.
template <class T>
TAPEFLOW_HOST_DEVICE record<T> forward_cell(T const* z, T const* wx, T const* bias, T const* in, T* out,
                                            std::size_t hidden, std::size_t batch, std::size_t r) noexcept
{
  std::size_t const b = r / hidden;
  std::size_t const j = r - b * hidden;
  std::size_t const base = b * 4 * hidden + j;
  std::size_t const cells = batch * hidden;
  T const c_prev = in[cells + r];
  cell_state<T> const s =
    cell_forward(z[base] + wx[base] + bias[j], z[base + hidden] + wx[base + hidden] + bias[hidden + j],
                 z[base + 2 * hidden] + wx[base + 2 * hidden] + bias[2 * hidden + j],
                 z[base + 3 * hidden] + wx[base + 3 * hidden] + bias[3 * hidden + j], c_prev);
  out[r] = s.h;
  out[cells + r] = s.c;
  return record<T>{s.i, s.f, s.g, s.o, c_prev, in[r], T(0), T(0)};
}

/// The elementwise reverse of cell r from its staged record: δz into `dz` (4H x B column-major,
/// the layout the parameter GEMMs read), h_prev into `h_prev` (B x H) for dU, and dL/dc of the
/// previous state into g_in's c half. g_out holds (g_h, g_c) of the step's output.
template <class T>
TAPEFLOW_HOST_DEVICE void reverse_cell(record<T> const& rec, T const* g_out, T* g_in, T* dz, T* h_prev,
                                       std::size_t hidden, std::size_t batch, std::size_t r) noexcept
{
  std::size_t const b = r / hidden;
  std::size_t const j = r - b * hidden;
  std::size_t const base = b * 4 * hidden + j;
  std::size_t const cells = batch * hidden;
  cell_adjoint<T> const a = cell_reverse(rec.i, rec.f, rec.g, rec.o, rec.c_prev, g_out[r], g_out[cells + r]);
  dz[base] = a.dz_i;
  dz[base + hidden] = a.dz_f;
  dz[base + 2 * hidden] = a.dz_g;
  dz[base + 3 * hidden] = a.dz_o;
  h_prev[r] = rec.h_prev;
  g_in[cells + r] = a.g_c_prev;
}

/// Cell r of a sequence that has ended (packed sequences, r >= B_t H): its state (h, c), or its
/// adjoint (g_h, g_c), passes through the step unchanged.
template <class T>
TAPEFLOW_HOST_DEVICE void carry_cell(T const* in, T* out, std::size_t hidden, std::size_t batch, std::size_t r) noexcept
{
  std::size_t const cells = batch * hidden;
  out[r] = in[r];
  out[cells + r] = in[cells + r];
}

}  // namespace tapeflow::workloads::lstm
