// SPDX-License-Identifier: Apache-2.0
// An Enzyme-shaped differentiated function, written once for host and device. Each element runs an
// inner loop of run-time length K:  v <- sin(v) + a v,  K times. The hand-written augmented forward
// and reverse below are Enzyme-shaped (an opaque per-element tape written by the forward, read by
// the reverse) and keep all K values in the tape. Real Enzyme generates the pair from `iterate`
// itself (tests/enzyme, enzyme_kernels.cu; docs/enzyme.md): a 32-byte tape (trip count, a, two
// pointers) plus loop caches it allocates, which tapeflow routes into an enzyme::cache_pool.
#pragma once

#include <tapeflow/config.hpp>

#include <cmath>
#include <cstddef>

namespace tapeflow::workloads::enzyme_example {

struct params {
  std::size_t inner;  ///< K: iterations of the inner loop (the tape's length)
  double a;
};

/// Bytes of one element's hand-written tape (K doubles).
TAPEFLOW_HOST_DEVICE constexpr std::size_t tape_bytes(params p) noexcept { return p.inner * sizeof(double); }

/// The primal.
TAPEFLOW_HOST_DEVICE inline double iterate(double x, params p) noexcept
{
  double v = x;
  for (std::size_t k = 0; k < p.inner; ++k) { v = sin(v) + p.a * v; }
  return v;
}

/// Enzyme-shaped augmented forward: the primal, caching each iterate's input in `tape`.
TAPEFLOW_HOST_DEVICE inline double augmented_forward(double x, params p, void* tape) noexcept
{
  auto* cache = static_cast<double*>(tape);
  double v = x;
  for (std::size_t k = 0; k < p.inner; ++k) {
    cache[k] = v;
    v = sin(v) + p.a * v;
  }
  return v;
}

/// Enzyme-shaped reverse: dL/dx from dL/dy and the tape.
TAPEFLOW_HOST_DEVICE inline double reverse(double dy, params p, void const* tape) noexcept
{
  auto const* cache = static_cast<double const*>(tape);
  double d = dy;
  for (std::size_t k = p.inner; k-- > 0;) { d *= cos(cache[k]) + p.a; }
  return d;
}

}  // namespace tapeflow::workloads::enzyme_example
