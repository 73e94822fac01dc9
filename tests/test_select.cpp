// SPDX-License-Identifier: Apache-2.0
// tapeflow::select: the bits of `c ? a : b`, signed zeros and NaN payloads included, which is what
// lets per-cell math swap a branch for it without changing a gradient's bits.
#include <tapeflow/select.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

namespace tapeflow {
namespace {

template <class T>
auto bits_of(T v)
{
  std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t> b;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

template <class T>
void check_select()
{
  std::mt19937_64 rng(20261128);
  std::uniform_real_distribution<T> any(T(-1e3), T(1e3));
  T const specials[] = {T(0), -T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::denorm_min(), any(rng), any(rng)};
  for (T a : specials) {
    for (T b : specials) {
      EXPECT_EQ(bits_of(select(true, a, b)), bits_of(a));
      EXPECT_EQ(bits_of(select(false, a, b)), bits_of(b));
    }
  }
}

TEST(Select, GivesTheBitsOfTheChosenValueInF32) { check_select<float>(); }
TEST(Select, GivesTheBitsOfTheChosenValueInF64) { check_select<double>(); }

}  // namespace
}  // namespace tapeflow

// tapeflow::all is `&&` without its short circuit: every combination of one to three tests, and a
// compile-time use (constexpr).
TEST(All, HoldsExactlyWhereEveryTestHolds)
{
  static_assert(tapeflow::all(true, true, true) && !tapeflow::all(true, false, true), "constexpr");
  for (int bits = 0; bits < 8; ++bits) {
    bool const a = (bits & 1) != 0;
    bool const b = (bits & 2) != 0;
    bool const c = (bits & 4) != 0;
    EXPECT_EQ(tapeflow::all(a), a);
    EXPECT_EQ(tapeflow::all(a, b), a && b) << bits;
    EXPECT_EQ(tapeflow::all(a, b, c), a && b && c) << bits;
  }
}
