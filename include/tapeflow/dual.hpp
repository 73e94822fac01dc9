// SPDX-License-Identifier: Apache-2.0
// Forward mode: dual numbers v + d·ε (ε² = 0) for broadcast (elementwise) kernels, host and
// device. Evaluating a function written generically on `dual<T>` with derivative 1 on one input
// gives its value and its derivative along that input in one pass; a kernel can then put the
// local partial derivative on the tape instead of the primal value (docs/workloads/duals.md).
//
//   auto const d = tapeflow::differentiate([](auto u) { return u + dt * (u - u * u * u); }, u);
//   d.value, d.derivative;   // f(u), f'(u)
#pragma once

#include <tapeflow/config.hpp>

#include <cmath>
#include <type_traits>

namespace tapeflow {

template <class T>
struct dual {
  static_assert(std::is_floating_point_v<T>, "dual<T> needs a floating-point T");
  using value_type = T;

  T value{};
  T derivative{};

  constexpr dual() noexcept = default;  // defaulted: host and device alike
  /// A constant: derivative 0. Implicit, so constants mix with duals in generic code.
  TAPEFLOW_HOST_DEVICE constexpr dual(T v) noexcept : value(v) {}  // NOLINT(google-explicit-constructor)
  TAPEFLOW_HOST_DEVICE constexpr dual(T v, T d) noexcept : value(v), derivative(d) {}

  TAPEFLOW_HOST_DEVICE constexpr dual& operator+=(dual b) noexcept { return *this = *this + b; }
  TAPEFLOW_HOST_DEVICE constexpr dual& operator-=(dual b) noexcept { return *this = *this - b; }
  TAPEFLOW_HOST_DEVICE constexpr dual& operator*=(dual b) noexcept { return *this = *this * b; }
  TAPEFLOW_HOST_DEVICE constexpr dual& operator/=(dual b) noexcept { return *this = *this / b; }

  friend TAPEFLOW_HOST_DEVICE constexpr dual operator+(dual a) noexcept { return a; }
  friend TAPEFLOW_HOST_DEVICE constexpr dual operator-(dual a) noexcept { return {-a.value, -a.derivative}; }
  friend TAPEFLOW_HOST_DEVICE constexpr dual operator+(dual a, dual b) noexcept
  {
    return {a.value + b.value, a.derivative + b.derivative};
  }
  friend TAPEFLOW_HOST_DEVICE constexpr dual operator-(dual a, dual b) noexcept
  {
    return {a.value - b.value, a.derivative - b.derivative};
  }
  friend TAPEFLOW_HOST_DEVICE constexpr dual operator*(dual a, dual b) noexcept
  {
    return {a.value * b.value, a.derivative * b.value + a.value * b.derivative};
  }
  friend TAPEFLOW_HOST_DEVICE constexpr dual operator/(dual a, dual b) noexcept
  {
    T const q = a.value / b.value;
    return {q, (a.derivative - q * b.derivative) / b.value};
  }
  friend TAPEFLOW_HOST_DEVICE constexpr bool operator<(dual a, dual b) noexcept { return a.value < b.value; }
  friend TAPEFLOW_HOST_DEVICE constexpr bool operator>(dual a, dual b) noexcept { return a.value > b.value; }
};

/// The input variable of a forward-mode pass: value `v`, derivative 1.
template <class T>
TAPEFLOW_HOST_DEVICE constexpr dual<T> variable(T v) noexcept
{
  return {v, T(1)};
}

/// f(x) and f'(x) of a function written generically (it must accept `dual<T>`).
template <class T, class F>
TAPEFLOW_HOST_DEVICE constexpr dual<T> differentiate(F&& f, T x) noexcept(noexcept(f(dual<T>{})))
{
  return f(variable(x));
}

// Elementary functions: chain rule on the value. Overloads for dual<T> only, so plain T calls
// keep resolving to <cmath> (host) or the device math library.
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> exp(dual<T> a) noexcept
{
  using std::exp;
  T const e = exp(a.value);
  return {e, e * a.derivative};
}
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> log(dual<T> a) noexcept
{
  using std::log;
  return {log(a.value), a.derivative / a.value};
}
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> sqrt(dual<T> a) noexcept
{
  using std::sqrt;
  T const s = sqrt(a.value);
  return {s, a.derivative / (T(2) * s)};
}
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> sin(dual<T> a) noexcept
{
  using std::cos;
  using std::sin;
  return {sin(a.value), cos(a.value) * a.derivative};
}
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> cos(dual<T> a) noexcept
{
  using std::cos;
  using std::sin;
  return {cos(a.value), -sin(a.value) * a.derivative};
}
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> tanh(dual<T> a) noexcept
{
  using std::tanh;
  T const t = tanh(a.value);
  return {t, (T(1) - t * t) * a.derivative};
}
/// a^p for a real exponent p (a > 0 where p is not an integer).
template <class T>
TAPEFLOW_HOST_DEVICE dual<T> pow(dual<T> a, T p) noexcept
{
  using std::pow;
  T const v = pow(a.value, p);
  return {v, p * pow(a.value, p - T(1)) * a.derivative};
}

}  // namespace tapeflow
