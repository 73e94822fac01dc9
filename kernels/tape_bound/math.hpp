// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark's math: a broadcast step whose reverse does almost no arithmetic,
// so the reverse sweep's speed is the speed of reading the tape. Each region r (one cell) tapes
// eight values derived from u[r]; the reverse forms the local derivative from them:
//   v_0 = u,  v_k = 0.5 u v_{k-1} + 0.25          (what the forward computes and tapes)
//   d   = sum_k v_k / (k + 1)                      (the local derivative the reverse needs)
//   g_in[r] = d * g_out[r]
// Written once for the CPU reference and every GPU variant, so all variants agree bit for bit.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>

namespace tapeflow::workloads::tape_bound {

inline constexpr std::size_t values_per_region = 8;

/// One region's tape: 8 floats, 32 bytes (two 16-byte chunks).
using record = value_record<float, values_per_region>;

TAPEFLOW_HOST_DEVICE inline record tape_of(float u) noexcept
{
  record r;
  r.values[0] = u;
  for (std::size_t k = 1; k < values_per_region; ++k) { r.values[k] = 0.5F * u * r.values[k - 1] + 0.25F; }
  return r;
}

TAPEFLOW_HOST_DEVICE inline float local_derivative(float const (&v)[values_per_region]) noexcept
{
  float d = 0;
  for (std::size_t k = 0; k < values_per_region; ++k) { d += v[k] / static_cast<float>(k + 1); }
  return d;
}

TAPEFLOW_HOST_DEVICE inline float adjoint(record const& r, float g_out) noexcept
{
  return local_derivative(r.values) * g_out;
}

}  // namespace tapeflow::workloads::tape_bound
