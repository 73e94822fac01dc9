// SPDX-License-Identifier: Apache-2.0
// NVTX ranges in the `tapeflow` domain, visible in `nsys profile -t cuda,nvtx`. Compiled away
// unless the library is built with TAPEFLOW_ENABLE_NVTX (which defines TAPEFLOW_NVTX).
#pragma once

#if defined(TAPEFLOW_NVTX)
#include <nvtx3/nvtx3.hpp>

namespace tapeflow {
struct nvtx_domain {
  static constexpr char const* name{"tapeflow"};
};
using nvtx_range = nvtx3::scoped_range_in<nvtx_domain>;
}  // namespace tapeflow

#define TAPEFLOW_NVTX_CONCAT_(a, b) a##b
#define TAPEFLOW_NVTX_CONCAT(a, b) TAPEFLOW_NVTX_CONCAT_(a, b)
/// Opens a range named by a string literal for the rest of the scope.
#define TAPEFLOW_NVTX_RANGE(literal)                                                      \
  static ::nvtx3::registered_string_in<::tapeflow::nvtx_domain> const TAPEFLOW_NVTX_CONCAT( \
    tapeflow_nvtx_name_, __LINE__){literal};                                              \
  ::tapeflow::nvtx_range const TAPEFLOW_NVTX_CONCAT(tapeflow_nvtx_range_, __LINE__)       \
  {                                                                                       \
    TAPEFLOW_NVTX_CONCAT(tapeflow_nvtx_name_, __LINE__)                                   \
  }
/// Opens the range "tapeflow::<function>" for the rest of the scope.
#define TAPEFLOW_FUNC_RANGE() NVTX3_FUNC_RANGE_IN(::tapeflow::nvtx_domain)
#else
#define TAPEFLOW_NVTX_RANGE(literal) static_cast<void>(0)
#define TAPEFLOW_FUNC_RANGE() static_cast<void>(0)
#endif
