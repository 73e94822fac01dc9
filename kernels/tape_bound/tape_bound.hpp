// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark (docs/benchmarks.md): one layer of 32-byte records, read back by
// the reverse sweep in each of the ways a GPU AD tool can read a tape. Every variant computes the
// same g_in; the benchmark suite `tape_bound` times their reverse sweeps against the same-run
// device-to-device copy bandwidth.
#pragma once

#include <tapeflow/workloads/tape_bound/math.hpp>

#include <tapeflow/backend.hpp>
#include <tapeflow/plan.hpp>

#include <cstddef>
#include <string_view>
#include <vector>

namespace tapeflow::workloads::tape_bound {

/// How the reverse reads the tape.
enum class variant {
  naive_soa,    ///< Enzyme-style: one global array per taped value, read directly
  aos_direct,   ///< tapeflow's records, read directly from global memory (no staging)
  staged,       ///< tapeflow's records through the cp.async tile pipeline (CPU: the staging ring)
  register_db,  ///< tapeflow's records through register double-buffering
  bulk,         ///< tapeflow's records through sm_90 bulk copies (cp.async.bulk + mbarrier)
  recompute,    ///< no tape: the reverse recomputes the record from u
};

inline constexpr variant all_variants[] = {variant::naive_soa, variant::aos_direct, variant::staged,
                                           variant::register_db, variant::bulk, variant::recompute};

[[nodiscard]] std::string_view to_string(variant v) noexcept;

/// Whether `v` runs on `kind` in this build (bulk needs an sm_90 CUDA device).
[[nodiscard]] bool supported(variant v, backend kind);

/// The timed sweep of one variant: medians of the augmented forward and of the reverse.
struct sweep_timing {
  double forward_ms{0};
  double reverse_ms{0};
  std::size_t tape_bytes{0};  ///< tape the forward writes (0: the reverse recomputes)
  pipeline_plan plan{};       ///< the reverse's staging
};

/// g_in = dL/du for g_out = dL/du' through the augmented forward and the reverse of `v` on `kind`.
/// Throws logic_error when u and g_out differ in length or are empty, unavailable_error when `v`
/// does not run on `kind`.
[[nodiscard]] std::vector<float> gradient(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                          backend kind, pipeline_request pipeline = {});

/// Times the augmented forward and the reverse of `v` on a GPU `kind` (event-timed medians of
/// `repeats` runs after `warmup`). Throws what gradient() throws, unavailable_error on the CPU
/// backend, and logic_error unless repeats >= 1 and warmup >= 0.
[[nodiscard]] sweep_timing benchmark(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                     backend kind, int warmup, int repeats, pipeline_request pipeline = {});

}  // namespace tapeflow::workloads::tape_bound
