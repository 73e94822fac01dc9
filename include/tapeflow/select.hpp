// SPDX-License-Identifier: Apache-2.0
// tapeflow::select: a choice between two values already computed, without a branch; tapeflow::all:
// its tests joined without a short circuit.
#pragma once

#include <tapeflow/config.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tapeflow {

/// `c ? a : b`, bit for bit, for a and b the caller has computed both of. Per-cell math that picks
/// between values under a test (a neighbour inside the grid, the source cell) writes it so, so
/// that a CPU's compiler can run a row's cells in vector lanes: GCC does not speculate
/// floating-point arithmetic past a branch (its default -ftrapping-math), and it moves an add
/// written before a branch back into it when the branch is the add's only use. On the host the
/// choice is made on the values' bits, which no pass turns back into a branch; on a device it is
/// the plain conditional (a predicated select).
template <class T>
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline T select(bool c, T a, T b) noexcept
{
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "tapeflow::select: float or double");
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return c ? a : b;
#else
  using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  bits x;
  bits y;
  std::memcpy(&x, &a, sizeof(T));
  std::memcpy(&y, &b, sizeof(T));
  bits const mask = bits(0) - static_cast<bits>(c);  // every bit set where c holds
  bits const chosen = (x & mask) | (y & ~mask);
  T out;
  std::memcpy(&out, &chosen, sizeof(T));
  return out;
#endif
}

/// Whether every test holds, `a && b && ...` without its short circuit: the tests are evaluated
/// all, and joined as integers. Write a select()'s condition so: GCC 12 turns `&&` into a choice of
/// one bool or another that it cannot run in vector lanes (the wave's boundary tiles ran their
/// reverse scalar so, docs/benchmarks.md "A boundary tile's core in vector lanes"), and clang warns
/// of `&` between bools.
template <class... Tests>
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr bool all(bool first, Tests... rest) noexcept
{
  static_assert((std::is_same_v<Tests, bool> && ...), "tapeflow::all: tests (bool)");
  return ((static_cast<unsigned>(first)) & ... & static_cast<unsigned>(rest)) != 0U;
}

}  // namespace tapeflow
