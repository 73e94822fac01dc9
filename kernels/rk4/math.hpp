// SPDX-License-Identifier: Apache-2.0
// RK4 particles, per-particle math written once for the CPU reference and the GPU kernels.
//
//   state y = (x, v) in R^3 x R^3,   y' = f(y) = (v, a(x)),   a(x) = -grad V(x)
//   V(x) = 0.5 k |x|^2 + sum_j a_j exp(-|x - s_j|^2 / (2 sigma_j^2))
//   classical RK4 with step h:  k1 = f(y), k2 = f(y + h/2 k1), k3 = f(y + h/2 k2), k4 = f(y + h k3),
//                               y_next = y + h/6 (k1 + 2 k2 + 2 k3 + k4)
//   particle p runs while n < max_steps and its arc length sum_{i<n} |v_i| h is below its budget l_p
//   L = sum_p 0.5 (|x_p,end|^2 + |v_p,end|^2)
//
// The adjoint of one step (the trip count is piecewise constant in the inputs, so the gradient is
// the one of the fixed trip count): with Y_1 = y, Y_2 = y + h/2 k1, Y_3 = y + h/2 k2,
// Y_4 = y + h k3 and J(Y)^T (gx, gv) = (-H(x_Y) gv, gx) (H the Hessian of V):
//   kb_4 = h/6 g', kb_3 = kb_2 = h/3 g', kb_1 = h/6 g', g = g'
//   Yb_4 = J(Y_4)^T kb_4: g += Yb_4, kb_3 += h Yb_4
//   Yb_3 = J(Y_3)^T kb_3: g += Yb_3, kb_2 += h/2 Yb_3
//   Yb_2 = J(Y_2)^T kb_2: g += Yb_2, kb_1 += h/2 Yb_2
//   Yb_1 = J(Y_1)^T kb_1: g += Yb_1
// The reverse recomputes Y_2..Y_4 from the taped y (one record per step).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/device/thread_tape.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tapeflow::workloads::rk4 {

inline constexpr int max_wells = 4;

/// A Gaussian bump (a > 0) or well (a < 0) of the potential.
template <class T>
struct well {
  T s[3];      ///< centre
  T a;         ///< amplitude
  T inv_var;   ///< 1 / sigma^2
};

template <class T>
struct potential {
  T k;                     ///< harmonic confinement
  int wells;
  well<T> w[max_wells];
};

/// What every step needs: the potential, the step h and the cap on steps.
template <class T>
struct params {
  potential<T> pot;
  T dt;
  std::uint32_t max_steps;
};

/// A particle's state: position then velocity (the input and gradient layout, 6 values).
template <class T>
struct state {
  T x[3];
  T v[3];
};

/// One step's record: the state at the start of the step, padded to 8 values (32 B in f32, 64 B in
/// f64: whole 16-byte chunks, one aligned run per step).
template <class T>
struct alignas(16) step_record {
  T y[8];
};

template <class T>
TAPEFLOW_HOST_DEVICE inline step_record<T> record_of(state<T> const& s) noexcept
{
  return {{s.x[0], s.x[1], s.x[2], s.v[0], s.v[1], s.v[2], T(0), T(0)}};
}

template <class T>
TAPEFLOW_HOST_DEVICE inline state<T> state_of(step_record<T> const& r) noexcept
{
  return {{r.y[0], r.y[1], r.y[2]}, {r.y[3], r.y[4], r.y[5]}};
}

template <class T>
TAPEFLOW_HOST_DEVICE inline T speed(state<T> const& s) noexcept
{
  using std::sqrt;
  return sqrt(s.v[0] * s.v[0] + s.v[1] * s.v[1] + s.v[2] * s.v[2]);
}

/// a(x) = -grad V(x).
template <class T>
TAPEFLOW_HOST_DEVICE inline void accel(potential<T> const& p, T const* x, T* a) noexcept
{
  using std::exp;
  for (int i = 0; i < 3; ++i) { a[i] = -p.k * x[i]; }
  for (int j = 0; j < max_wells; ++j) {  // a constant trip count: unrolled, the wells stay in registers
    if (j >= p.wells) { break; }
    well<T> const& w = p.w[j];
    T const d0 = x[0] - w.s[0], d1 = x[1] - w.s[1], d2 = x[2] - w.s[2];
    T const e = w.a * exp(T(-0.5) * (d0 * d0 + d1 * d1 + d2 * d2) * w.inv_var);
    // grad of a e^{-|d|^2/(2 s^2)} is -a e d / s^2, so -grad adds +a e d / s^2.
    T const c = e * w.inv_var;
    a[0] += c * d0;
    a[1] += c * d1;
    a[2] += c * d2;
  }
}

/// out = H(x) u, the Hessian of V times u:
/// H = k I + sum_j a_j e_j (d d^T / s^4 - I / s^2).
template <class T>
TAPEFLOW_HOST_DEVICE inline void hess_vec(potential<T> const& p, T const* x, T const* u, T* out) noexcept
{
  using std::exp;
  for (int i = 0; i < 3; ++i) { out[i] = p.k * u[i]; }
  for (int j = 0; j < max_wells; ++j) {  // a constant trip count: unrolled, the wells stay in registers
    if (j >= p.wells) { break; }
    well<T> const& w = p.w[j];
    T const d0 = x[0] - w.s[0], d1 = x[1] - w.s[1], d2 = x[2] - w.s[2];
    T const e = w.a * exp(T(-0.5) * (d0 * d0 + d1 * d1 + d2 * d2) * w.inv_var);
    T const du = (d0 * u[0] + d1 * u[1] + d2 * u[2]) * w.inv_var;
    T const c = e * w.inv_var;
    out[0] += c * (du * d0 - u[0]);
    out[1] += c * (du * d1 - u[1]);
    out[2] += c * (du * d2 - u[2]);
  }
}

/// One classical RK4 step.
template <class T>
TAPEFLOW_HOST_DEVICE inline state<T> rk4_step(potential<T> const& p, T h, state<T> const& y) noexcept
{
  T const h2 = h / T(2);
  T const h6 = h / T(6);
  T a1[3], a2[3], a3[3], a4[3], x2[3], v2[3], x3[3], v3[3], x4[3], v4[3];
  accel(p, y.x, a1);
  for (int i = 0; i < 3; ++i) { x2[i] = y.x[i] + h2 * y.v[i]; v2[i] = y.v[i] + h2 * a1[i]; }
  accel(p, x2, a2);
  for (int i = 0; i < 3; ++i) { x3[i] = y.x[i] + h2 * v2[i]; v3[i] = y.v[i] + h2 * a2[i]; }
  accel(p, x3, a3);
  for (int i = 0; i < 3; ++i) { x4[i] = y.x[i] + h * v3[i]; v4[i] = y.v[i] + h * a3[i]; }
  accel(p, x4, a4);
  state<T> out;
  for (int i = 0; i < 3; ++i) {
    out.x[i] = y.x[i] + h6 * (y.v[i] + T(2) * v2[i] + T(2) * v3[i] + v4[i]);
    out.v[i] = y.v[i] + h6 * (a1[i] + T(2) * a2[i] + T(2) * a3[i] + a4[i]);
  }
  return out;
}

/// dL/dy of one step from the step's start state `y` and dL/dy_next `g`.
template <class T>
TAPEFLOW_HOST_DEVICE inline state<T> rk4_step_adjoint(potential<T> const& p, T h, state<T> const& y,
                                                      state<T> const& g) noexcept
{
  T const h2 = h / T(2);
  // Recompute the stage positions Y_2..Y_4 (the velocities of the stages only enter through x).
  T a1[3], a2[3], x2[3], v2[3], x3[3], v3[3], x4[3];
  accel(p, y.x, a1);
  for (int i = 0; i < 3; ++i) { x2[i] = y.x[i] + h2 * y.v[i]; v2[i] = y.v[i] + h2 * a1[i]; }
  accel(p, x2, a2);
  for (int i = 0; i < 3; ++i) { x3[i] = y.x[i] + h2 * v2[i]; v3[i] = y.v[i] + h2 * a2[i]; }
  for (int i = 0; i < 3; ++i) { x4[i] = y.x[i] + h * v3[i]; }

  T const c16 = h / T(6), c13 = h / T(3);
  T kx[4][3], kv[4][3];  // adjoints of the stage slopes k_1..k_4 (position and velocity parts)
  for (int i = 0; i < 3; ++i) {
    kx[0][i] = c16 * g.x[i]; kv[0][i] = c16 * g.v[i];
    kx[1][i] = c13 * g.x[i]; kv[1][i] = c13 * g.v[i];
    kx[2][i] = c13 * g.x[i]; kv[2][i] = c13 * g.v[i];
    kx[3][i] = c16 * g.x[i]; kv[3][i] = c16 * g.v[i];
  }
  state<T> out = g;
  T const* const xs[4] = {y.x, x2, x3, x4};
  T const back[4] = {T(0), h2, h2, h};  // stage s+1 is evaluated at y + back[s+1] k_s
  for (int s = 3; s >= 0; --s) {
    // Yb_s = J(Y_s)^T kb_s = (-H(x_s) kv_s, kx_s).
    T hv[3];
    hess_vec(p, xs[s], kv[s], hv);
    T yx[3], yv[3];
    for (int i = 0; i < 3; ++i) {
      yx[i] = -hv[i];
      yv[i] = kx[s][i];
      out.x[i] += yx[i];
      out.v[i] += yv[i];
    }
    if (s > 0) {
      for (int i = 0; i < 3; ++i) {
        kx[s - 1][i] += back[s] * yx[i];
        kv[s - 1][i] += back[s] * yv[i];
      }
    }
  }
  return out;
}

/// True while a particle takes another step.
template <class T>
TAPEFLOW_HOST_DEVICE inline bool keeps_going(T arc, T budget, std::uint32_t n, std::uint32_t max_steps) noexcept
{
  return n < max_steps && arc < budget;
}

// ---------------------------------------------------------------------------------------------
// Regions: one particle's work, called by the CPU loops and the GPU kernels alike.

/// The particle's slice of forward segment `w`: runs on from its current step, taping each step.
template <class T>
TAPEFLOW_HOST_DEVICE inline void segment_region(thread_tape_writer<step_record<T>> const& w, std::size_t t,
                                                state<T>* y, T* arc, T const* budget, params<T> const& k) noexcept
{
  std::uint32_t n = w.steps(t);
  if (n < w.first_step()) { return; }  // finished in an earlier chunk
  state<T> s = y[t];
  T a = arc[t];
  T const l = budget[t];
  std::uint32_t const end = w.end_step();
  while (n < end && keeps_going(a, l, n, k.max_steps)) {
    w.write(t, n, record_of(s));
    a += k.dt * speed(s);
    s = rk4_step(k.pot, k.dt, s);
    ++n;
  }
  y[t] = s;
  arc[t] = a;
  w.finish(t, n, keeps_going(a, l, n, k.max_steps));
}

/// The particle's steps of chunk `r`, last first; g holds dL/dy at the chunk's end, then its start.
/// The next record is loaded before the current one is used (one step of register prefetch).
template <class T>
TAPEFLOW_HOST_DEVICE inline void chunk_reverse_region(thread_tape_reader<step_record<T>> const& r, std::size_t t,
                                                      state<T>* g, params<T> const& k) noexcept
{
  std::uint32_t const count = r.count(t);
  if (count == 0) { return; }
  std::uint32_t const first = r.first_step();
  state<T> adj = g[t];
  step_record<T> next = r.read(t, first + count - 1);
  for (std::uint32_t s = count; s-- > 0;) {
    step_record<T> const current = next;
    if (s > 0) { next = r.read(t, first + s - 1); }
    adj = rk4_step_adjoint(k.pot, k.dt, state_of(current), adj);
  }
  g[t] = adj;
}

/// The particle's whole loop with no tape; returns its steps.
template <class T>
TAPEFLOW_HOST_DEVICE inline std::uint32_t primal_region(std::size_t t, state<T>* y, T const* budget,
                                                        params<T> const& k) noexcept
{
  state<T> s = y[t];
  T a = T(0);
  T const l = budget[t];
  std::uint32_t n = 0;
  while (keeps_going(a, l, n, k.max_steps)) {
    a += k.dt * speed(s);
    s = rk4_step(k.pot, k.dt, s);
    ++n;
  }
  y[t] = s;
  return n;
}

/// The baseline: the whole loop of a particle taping into its own contiguous stack
/// (tape[t * capacity + step], capacity = max_steps), as an Enzyme-style per-thread tape does.
template <class T>
TAPEFLOW_HOST_DEVICE inline void stack_forward_region(std::size_t t, step_record<T>* tape, state<T>* y,
                                                      T const* budget, std::uint32_t* steps,
                                                      params<T> const& k) noexcept
{
  step_record<T>* const mine = tape + t * static_cast<std::size_t>(k.max_steps);
  state<T> s = y[t];
  T a = T(0);
  T const l = budget[t];
  std::uint32_t n = 0;
  while (keeps_going(a, l, n, k.max_steps)) {
    mine[n] = record_of(s);
    a += k.dt * speed(s);
    s = rk4_step(k.pot, k.dt, s);
    ++n;
  }
  y[t] = s;
  steps[t] = n;
}

template <class T>
TAPEFLOW_HOST_DEVICE inline void stack_reverse_region(std::size_t t, step_record<T> const* tape,
                                                      std::uint32_t const* steps, state<T>* g,
                                                      params<T> const& k) noexcept
{
  step_record<T> const* const mine = tape + t * static_cast<std::size_t>(k.max_steps);
  state<T> adj = g[t];
  for (std::uint32_t s = steps[t]; s-- > 0;) { adj = rk4_step_adjoint(k.pot, k.dt, state_of(mine[s]), adj); }
  g[t] = adj;
}

/// Budgets for exact trip counts: runs particle t for targets[t] steps and sets its budget to the
/// middle of its last step's arc increment, so it stops after exactly targets[t] steps (and a
/// rounding difference cannot move the stop).
template <class T>
TAPEFLOW_HOST_DEVICE inline T budget_region(std::size_t t, state<T> const* y0, std::uint32_t const* targets,
                                            params<T> const& k) noexcept
{
  state<T> s = y0[t];
  T a = T(0);
  std::uint32_t const n = targets[t];
  for (std::uint32_t i = 0; i + 1 < n; ++i) {
    a += k.dt * speed(s);
    s = rk4_step(k.pot, k.dt, s);
  }
  return a + T(0.5) * k.dt * speed(s);
}

}  // namespace tapeflow::workloads::rk4
