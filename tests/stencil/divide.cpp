// SPDX-License-Identifier: Apache-2.0
// The segment kernels' divisions without a divider (tapeflow/stencil/divide.hpp) against the
// integer division they replace: at the numerators where a quotient changes (a multiple of the
// divisor and the number before it), where a rounding error would show first, across each one's
// whole contract.
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/divide.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tapeflow {
namespace {

namespace st = stencil;

/// Numerators next to where n / d changes: q d - 1 and q d for the quotients `q` given, within
/// [0, limit].
std::vector<std::uint64_t> edges(std::uint64_t d, std::uint64_t limit, std::vector<std::uint64_t> const& q)
{
  std::vector<std::uint64_t> n;
  for (std::uint64_t const k : q) {
    for (std::uint64_t const m : {k * d - 1, k * d, k * d + 1}) {
      if (k * d >= 1 && m <= limit) { n.push_back(m); }
    }
  }
  return n;
}

TEST(StencilDivide, AFastDivisorDividesEveryThirtyTwoBitNumerator)
{
  constexpr std::uint64_t top = 0xffffffffu;
  std::mt19937_64 rng(20261127);
  std::vector<std::uint64_t> divisors;
  for (std::uint64_t d = 1; d <= 3000; ++d) { divisors.push_back(d); }
  for (int p = 12; p <= 31; ++p) {
    for (std::int64_t e : {-1, 0, 1}) { divisors.push_back((std::uint64_t{1} << p) + static_cast<std::uint64_t>(e)); }
  }
  for (int i = 0; i < 2000; ++i) { divisors.push_back(1 + rng() % (std::uint64_t{1} << 31)); }
  for (std::uint64_t const d : divisors) {
    if (d > (std::uint64_t{1} << 31)) { continue; }  // 2^31 + 1
    st::fast_divisor const f(d);
    std::uint64_t const last = top / d;  // the largest quotient of a 32-bit numerator
    std::vector<std::uint64_t> n = edges(d, top, {1, 2, 3, last / 2, last - 1, last, last + 1});
    for (std::uint64_t const m : {std::uint64_t{0}, top, top - 1, rng() & top, rng() & top}) { n.push_back(m); }
    for (std::uint64_t const m : n) {
      auto const v = static_cast<std::uint32_t>(m);
      ASSERT_EQ(f.divide(v), v / d) << v << " / " << d;
      ASSERT_EQ(f.remainder(v), v % d) << v << " % " << d;
    }
  }
}

TEST(StencilDivide, AFastDivisorRefusesWhatItCannotDivideBy)
{
  EXPECT_THROW(st::fast_divisor(0), tapeflow::logic_error);
  EXPECT_THROW(st::fast_divisor((std::uint64_t{1} << 31) + 1), tapeflow::logic_error);
  EXPECT_EQ(st::fast_divisor(std::uint64_t{1} << 31).divide(0xffffffffu), 1u);
  EXPECT_EQ(st::fast_divisor(1).divide(0xffffffffu), 0xffffffffu);
}

/// Whether narrow_divide's arithmetic divides n by d with the reciprocal off by up to two ulps
/// either way (the device's approximate reciprocal is within one).
bool narrow_exact(int n, int d)
{
  float const exact = 1.0f / static_cast<float>(d);
  float below = exact;
  float above = exact;
  for (int ulp = 0; ulp <= 2; ++ulp) {
    for (float const inverse : {below, above}) {
      st::quotient const got = st::detail::divide_by_inverse(n, d, inverse);
      if (got.q != n / d || got.r != n % d) { return false; }
    }
    below = std::nextafter(below, 0.0f);
    above = std::nextafter(above, 1.0f);
  }
  return true;
}

TEST(StencilDivide, NarrowDivisionIsExactBelowItsLimit)
{
  constexpr int limit = st::narrow_limit - 1;
  // Every divisor, at its first quotients and its largest (where the float's error is largest).
  for (int d = 1; d <= limit; ++d) {
    auto const last = static_cast<std::uint64_t>(limit / d);
    for (std::uint64_t const n : edges(static_cast<std::uint64_t>(d), limit, {1, 2, last - 1, last})) {
      ASSERT_TRUE(narrow_exact(static_cast<int>(n), d)) << n << " / " << d;
    }
    ASSERT_TRUE(narrow_exact(limit, d)) << limit << " / " << d;
    ASSERT_TRUE(narrow_exact(0, d)) << "0 / " << d;
  }
  // Every numerator of a block's geometry (a thread index, a box's extent) by the small divisors.
  for (int d = 1; d <= 64; ++d) {
    for (int n = 0; n < (1 << 14); ++n) { ASSERT_TRUE(narrow_exact(n, d)) << n << " / " << d; }
  }
  st::quotient const q = st::narrow_divide(limit, 1021);
  EXPECT_EQ(q.q, limit / 1021);
  EXPECT_EQ(q.r, limit % 1021);
}

}  // namespace
}  // namespace tapeflow
