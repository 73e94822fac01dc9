// SPDX-License-Identifier: Apache-2.0
// The GPU backend this build's GPU tests run on: CUDA, or HIP in a HIP build.
#pragma once

#include <tapeflow/backend.hpp>

#include <gtest/gtest.h>

namespace tapeflow::testing {
#if defined(TAPEFLOW_HAS_HIP)
inline constexpr backend gpu = backend::hip;
#else
inline constexpr backend gpu = backend::cuda;
#endif
}  // namespace tapeflow::testing

/// Skips the test when `kind` truly has nothing to run on (not compiled in, no device, no driver);
/// fails it when a driver or device is there but unusable (a driver older than the toolkit), so a
/// broken GPU machine does not pass as "no GPU". For SetUp() and test bodies.
#define TAPEFLOW_REQUIRE_DEVICE(kind)                                                                   \
  do {                                                                                                  \
    ::tapeflow::backend_status const tapeflow_status_ = ::tapeflow::query_backend_status(kind);         \
    if (tapeflow_status_ == ::tapeflow::backend_status::unusable) {                                    \
      FAIL() << "the " << ::tapeflow::to_string(kind)                                                   \
             << " device is there but unusable: " << ::tapeflow::backend_unavailable_reason(kind);     \
    }                                                                                                   \
    if (tapeflow_status_ != ::tapeflow::backend_status::available) {                                   \
      GTEST_SKIP() << "GPU test skipped: " << ::tapeflow::backend_unavailable_reason(kind);             \
    }                                                                                                   \
  } while (0)
