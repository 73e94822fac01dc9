// SPDX-License-Identifier: Apache-2.0
// The GPU backend this build's GPU tests run on: CUDA, or HIP in a HIP build.
#pragma once

#include <tapeflow/backend.hpp>

namespace tapeflow::testing {
#if defined(TAPEFLOW_HAS_HIP)
inline constexpr backend gpu = backend::hip;
#else
inline constexpr backend gpu = backend::cuda;
#endif
}  // namespace tapeflow::testing
