// SPDX-License-Identifier: Apache-2.0
// The backend a test executable tests: the CPU backend in the host tests, this build's GPU in the
// GPU tests and their emulated twins (TAPEFLOW_TEST_ON_GPU). The workloads' tests are written once
// against it and compiled into each.
#pragma once

#include "gpu_backend.hpp"

#include <tapeflow/backend.hpp>

namespace tapeflow::testing {
#if defined(TAPEFLOW_TEST_ON_GPU)
inline constexpr backend target = gpu;
#else
inline constexpr backend target = backend::cpu;
#endif
/// Whether the backend under test is a GPU (a real one, or the emulated device).
inline constexpr bool on_gpu = target != backend::cpu;
/// Whether that GPU is the emulated device, whose kernels the host compiler builds (and so
/// computes as the CPU backend does, bit for bit, where both run the same per-element math).
inline constexpr bool emulated =
#if defined(TAPEFLOW_EMULATED)
  true;
#else
  false;
#endif
}  // namespace tapeflow::testing
