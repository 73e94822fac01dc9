// SPDX-License-Identifier: Apache-2.0
// Integer division without a divider. A GPU has none: nvcc turns a 32-bit quotient by a run-time
// value into about 20 issued instructions (a reciprocal, a correction, signs), a 64-bit one into a
// call. The segment kernels divided about two dozen times a tile in each thread — the tile's number
// into its position, a thread's first cell of each box, its run of each level — as many
// instructions as the tile's cells cost (docs/benchmarks.md, "Stencil segments: no divisions").
// Two ways out, one for each kind of number:
// - fast_divisor: a divisor fixed for a whole launch (the grid of tiles), whose magic number the
//   host works out once; n / d is then a multiply-high, an add and a shift for any 32-bit n.
// - narrow_divide: the small numbers of a block's geometry (thread indices, box extents, all below
//   2^16), divided through a float reciprocal: six instructions, nothing worked out beforehand.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/error.hpp>

#include <cstdint>

namespace tapeflow::stencil {

/// n / d for any 32-bit n by a divisor d in [1, 2^31] fixed beforehand: q = (mulhi(n, m) + n) >> l
/// with l = ceil(log2 d) and m = ceil(2^(32 + l) / d) - 2^32 (Granlund and Montgomery's round-up
/// method: m + 2^32 overshoots 2^(32 + l) / d by less than 2^l / d, so n (m + 2^32) / 2^(32 + l)
/// exceeds n / d by less than 1 / d and has the same floor).
struct fast_divisor {
  std::uint32_t d{1};
  std::uint32_t magic{0};
  std::uint32_t shift{0};

  fast_divisor() = default;
  /// Works out d's magic number (on the host). Throws logic_error outside [1, 2^31].
  explicit fast_divisor(std::uint64_t divisor) : d(static_cast<std::uint32_t>(divisor))
  {
    TAPEFLOW_EXPECTS(divisor >= 1 && divisor <= (std::uint64_t{1} << 31),
                     "tapeflow::stencil::fast_divisor: a divisor lies in [1, 2^31]");
    while ((std::uint64_t{1} << shift) < divisor) { ++shift; }
    std::uint64_t const scaled = ((std::uint64_t{1} << (32 + shift)) + divisor - 1) / divisor;  // < 2^33
    magic = static_cast<std::uint32_t>(scaled - (std::uint64_t{1} << 32));
  }

  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t divide(std::uint32_t n) const noexcept
  {
    auto const high = (static_cast<std::uint64_t>(n) * magic) >> 32;
    return static_cast<std::uint32_t>((high + n) >> shift);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::uint32_t remainder(std::uint32_t n) const noexcept
  {
    return n - divide(n) * d;
  }
};

/// n / d, by a plain divisor or by a fast_divisor (code written once for both: tile_range::at).
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::uint32_t divided(std::uint32_t n, std::uint32_t d) noexcept
{
  return n / d;
}
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline std::uint32_t divided(std::uint32_t n, fast_divisor const& d) noexcept
{
  return d.divide(n);
}
/// The divisor itself, plain or a fast_divisor's.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::uint32_t value_of(std::uint32_t d) noexcept { return d; }
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::uint32_t value_of(fast_divisor const& d) noexcept { return d.d; }

/// A quotient and its remainder.
struct quotient {
  int q;
  int r;
};

namespace detail {
/// narrow_divide with `inverse` ≈ 1 / d: exact where inverse is within 2 ulps of 1 / d.
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline quotient divide_by_inverse(int n, int d, float inverse) noexcept
{
  int const q = static_cast<int>((static_cast<float>(n) + 0.5f) * inverse);
  return {q, n - q * d};
}
}  // namespace detail

/// The largest numerator (exclusive) and divisor narrow_divide is exact for.
inline constexpr int narrow_limit = 1 << 20;

/// n / d and n % d for 0 <= n, d in [1, 2^20) by a float reciprocal: (n + 1/2) / d lies at least
/// 1 / (2d) from an integer, and its float rounding (the reciprocal within 2 ulps — the device's
/// approximate one is within 1 — and one multiply) moves it by less than (n + 1/2) 2^-21 / d, which
/// for n < 2^20 is less than that. For a block's geometry: thread indices, box extents and runs.
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline quotient narrow_divide(int n, int d) noexcept
{
#if defined(__CUDA_ARCH__)
  float inverse;  // one MUFU.RCP: d is a normal float, nothing to flush
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inverse) : "f"(static_cast<float>(d)));
#elif defined(__HIP_DEVICE_COMPILE__)
  float const inverse = __fdividef(1.0f, static_cast<float>(d));
#else
  float const inverse = 1.0f / static_cast<float>(d);
#endif
  return detail::divide_by_inverse(n, d, inverse);
}

}  // namespace tapeflow::stencil
