// SPDX-License-Identifier: Apache-2.0
// Writing the tape from a CPU step without reading it first. An augmented forward writes each
// layer once and the reverse reads it much later, after many other layers: keeping the lines in
// the cache buys nothing, and an ordinary store first reads every line it writes (the CPU's
// read-for-ownership), so a tape of M bytes costs 2M of memory traffic and evicts the state the
// step is working on. cpu::store_to_tape writes with non-temporal (streaming) stores where the
// target has them (x86-64's SSE2), so the tape costs M and leaves the caches to the state; then
// it fences, so the records are visible to whichever thread reverses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__) && !defined(TAPEFLOW_NO_STREAMING_STORES)
#include <emmintrin.h>
#define TAPEFLOW_STREAMING_STORES 1
#endif

namespace tapeflow::cpu {

/// Copies `count` values from `src` to `dst` (tape memory, not overlapping `src`), bypassing the
/// caches for the 16-byte-aligned bulk of `dst`, and fences. Same bytes as std::copy.
template <class T>
void store_to_tape(T* dst, T const* src, std::size_t count) noexcept
{
  static_assert(std::is_trivially_copyable_v<T>, "the tape holds trivially copyable values");
  std::size_t bytes = count * sizeof(T);
  auto* d = reinterpret_cast<unsigned char*>(dst);
  auto const* s = reinterpret_cast<unsigned char const*>(src);
#if defined(TAPEFLOW_STREAMING_STORES)
  std::size_t const head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  if (bytes >= head + 64) {
    std::memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    std::size_t const blocks = bytes / 64;
    for (std::size_t b = 0; b < blocks; ++b, d += 64, s += 64) {
      __m128i const v0 = _mm_loadu_si128(reinterpret_cast<__m128i const*>(s));
      __m128i const v1 = _mm_loadu_si128(reinterpret_cast<__m128i const*>(s + 16));
      __m128i const v2 = _mm_loadu_si128(reinterpret_cast<__m128i const*>(s + 32));
      __m128i const v3 = _mm_loadu_si128(reinterpret_cast<__m128i const*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), v0);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), v1);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), v2);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), v3);
    }
    bytes -= blocks * 64;
    _mm_sfence();  // streaming stores are weakly ordered: publish them before the step returns
  }
#endif
  std::memcpy(d, s, bytes);
}

}  // namespace tapeflow::cpu
