// SPDX-License-Identifier: Apache-2.0
// A machine's copy bandwidths: what the tier planner's cost model prices host copies, checkpoints
// and (without measured step costs) steps at (docs/tiers.md).
#pragma once

#include <tapeflow/backend.hpp>

#include <cstddef>

namespace tapeflow {

/// Copy bandwidths of a machine, in GB/s (1e9 bytes per second).
struct bandwidths {
  double h2d_GBps{0};  ///< host (pinned) to device
  double d2h_GBps{0};  ///< device to host (pinned)
  double d2d_GBps{0};  ///< bytes copied per second (a copy reads and writes them)
};

/// Measures the backend's copy bandwidths with `bytes`-sized event-timed copies on a stream of its
/// own (median of 5 after a warm-up). Cached per backend after the first call, whatever `bytes`.
/// Throws what allocating the buffers or copying throws (out_of_memory, platform_error).
[[nodiscard]] bandwidths measure_bandwidths(backend kind, std::size_t bytes = std::size_t{64} << 20);

}  // namespace tapeflow
