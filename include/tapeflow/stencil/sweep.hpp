// SPDX-License-Identifier: Apache-2.0
// A level of a tile program as column sweeps: a thread walks a run of cells along the last axis
// (y in 2-D, z in 3-D) and keeps the values its cells share in registers. The taps of a stencil
// fall on lines along that axis — one per field and offset across it — and a cell's taps on a line
// are the previous cell's shifted by one, so a cell loads one value a line (the farthest along it)
// instead of one a tap, at an offset from its own that is fixed for the whole run. Allen–Cahn's
// five taps lie on three lines; its level loads 3 values a cell instead of 5, and the address
// arithmetic of a cell is one add a line. docs/stencils.md "Column sweeps".
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tapeflow::stencil {

/// Values laid out field by field, x fastest, with these strides: a level in a team's scratch, or
/// a state in global memory. at(x, y, z) is the value of field 0 at (x, y, z).
template <class T>
struct strided {
  T* base{nullptr};
  std::size_t field{0};  ///< from one field to the next
  std::ptrdiff_t row{0};    ///< one cell along y
  std::ptrdiff_t plane{0};  ///< one cell along z

  [[nodiscard]] TAPEFLOW_HOST_DEVICE T* at(int x, int y, int z) const noexcept
  {
    return base + static_cast<std::ptrdiff_t>(z) * plane + static_cast<std::ptrdiff_t>(y) * row + x;
  }
  /// One cell along the last of `dims` axes (the sweep's).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::ptrdiff_t along(int dims) const noexcept { return dims == 3 ? plane : row; }
};

/// The taps of `List` on a grid of `Dims` axes (2 or 3), grouped into lines along the last axis.
/// A line is a field and an offset across the axis (dx, and dy in 3-D); its taps lie at offsets
/// lo .. hi along it. A run keeps each line's values at lo .. hi around its cell in registers: the
/// window, `values` in all, line l's from slot base[l]; tap i is slot slot[i].
template <class List, int Dims>
struct tap_lines {
  static_assert(Dims == 2 || Dims == 3, "tapeflow::stencil: column sweeps run along the last of 2 or 3 axes");
  static constexpr int taps = List::size;

  struct table {
    int count{0};               ///< lines
    int values{0};              ///< the window's values
    int field[taps]{};          ///< of line l
    int dx[taps]{};             ///< across: along x
    int dy[taps]{};             ///< across: along y (3-D)
    int lo[taps]{};             ///< the nearest offset along the sweep axis
    int hi[taps]{};             ///< the farthest
    int base[taps]{};           ///< line l's first slot
    int slot[taps]{};           ///< tap i's slot
  };

 private:
  template <int... I>
  static constexpr table make(std::integer_sequence<int, I...>)
  {
    int const f[] = {List::template at<I>::field...};
    int const x[] = {List::template at<I>::dx...};
    int const y[] = {(Dims == 3 ? List::template at<I>::dy : 0)...};
    int const d[] = {(Dims == 3 ? List::template at<I>::dz : List::template at<I>::dy)...};
    table t{};
    int line_of[taps]{};
    for (int i = 0; i < taps; ++i) {
      int l = 0;
      while (l < t.count && !(t.field[l] == f[i] && t.dx[l] == x[i] && t.dy[l] == y[i])) { ++l; }
      if (l == t.count) {
        t.field[l] = f[i];
        t.dx[l] = x[i];
        t.dy[l] = y[i];
        t.lo[l] = d[i];
        t.hi[l] = d[i];
        ++t.count;
      }
      t.lo[l] = d[i] < t.lo[l] ? d[i] : t.lo[l];
      t.hi[l] = d[i] > t.hi[l] ? d[i] : t.hi[l];
      line_of[i] = l;
    }
    for (int l = 0; l < t.count; ++l) {
      t.base[l] = t.values;
      t.values += t.hi[l] - t.lo[l] + 1;
    }
    for (int i = 0; i < taps; ++i) { t.slot[i] = t.base[line_of[i]] + d[i] - t.lo[line_of[i]]; }
    return t;
  }

 public:
  static constexpr table lines = make(std::make_integer_sequence<int, taps>{});
};

namespace detail {
template <class F, int... I>
TAPEFLOW_HOST_DEVICE inline void each_index(F& f, std::integer_sequence<int, I...>)
{
  (f(std::integral_constant<int, I>{}), ...);
}
}  // namespace detail

/// f(std::integral_constant<int, i>{}) for i = 0 .. N-1, unrolled.
template <int N, class F>
TAPEFLOW_HOST_DEVICE inline void for_each_index(F&& f)
{
  detail::each_index(f, std::make_integer_sequence<int, N>{});
}

/// A thread's window on the taps of `List` as it sweeps a run of cells of a level along the last of
/// `Dims` axes: constructed at the run's first cell, each next() moves it onto the next cell of the
/// run (the first call onto the first), after which gather() hands that cell's taps' values in
/// List's order (compile-time slots: registers).
template <class T, class List, int Dims>
class column_window {
  using lines_of = tap_lines<List, Dims>;
  static constexpr auto lines = lines_of::lines;
  static constexpr int count = lines.count;

 public:
  /// The window of the run whose first cell is `first` of `level` (its pointer to field 0 there).
  TAPEFLOW_HOST_DEVICE column_window(strided<T const> level, T const* first)
    : step_(level.along(Dims)), at_(first)
  {
    for_each_index<count>([&](auto l) {
      constexpr int i = decltype(l)::value;
      constexpr int field = lines.field[i];
      constexpr int dx = lines.dx[i];
      constexpr int dy = lines.dy[i];
      constexpr int lo = lines.lo[i];
      constexpr int hi = lines.hi[i];
      constexpr int base = lines.base[i];
      std::ptrdiff_t const across = field * static_cast<std::ptrdiff_t>(level.field) + dy * level.row + dx;
      far_[i] = across + hi * step_;
      // The values at lo .. hi - 1 around the run's first cell, where next() finds them a cell on.
      for_each_index<hi - lo>([&](auto j) {
        constexpr int k = decltype(j)::value;
        value_[base + k + 1] = first[across + (lo + k) * step_];
      });
    });
  }

  /// Moves onto the next cell of the run: each line's values shift by one and its farthest is
  /// loaded.
  TAPEFLOW_HOST_DEVICE void next() noexcept
  {
    for_each_index<count>([&](auto l) {
      constexpr int i = decltype(l)::value;
      constexpr int base = lines.base[i];
      constexpr int last = base + lines.hi[i] - lines.lo[i];
      for_each_index<last - base>([&](auto j) {
        constexpr int k = base + decltype(j)::value;
        value_[k] = value_[k + 1];
      });
      value_[last] = at_[far_[i]];
    });
    at_ += step_;
  }

  /// The values at the taps of List around the current cell, in List's order.
  TAPEFLOW_HOST_DEVICE void gather(T* u) const noexcept
  {
    for_each_index<List::size>([&](auto t) {
      constexpr int i = decltype(t)::value;
      constexpr int slot = lines.slot[i];
      u[i] = value_[slot];
    });
  }

 private:
  std::ptrdiff_t step_;
  T const* at_;
  std::ptrdiff_t far_[count];
  T value_[lines.values];
};

}  // namespace tapeflow::stencil
