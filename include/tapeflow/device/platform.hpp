// SPDX-License-Identifier: Apache-2.0
// The one platform header of the device side: includes the CUDA runtime and defines the checked
// call macros every CUDA call and launch in tapeflow goes through.
#pragma once

#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace tapeflow::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, char const* call, char const* file, int line)
{
  std::string const name = cudaGetErrorName(status);
  std::string const what = where(file, line) + "CUDA error " + name + " (" + cudaGetErrorString(status) +
                           ") in " + call;
  if (status == cudaErrorMemoryAllocation) { throw out_of_memory(what, 0); }
  throw platform_error(what, name, static_cast<int>(status));
}

}  // namespace tapeflow::detail

/// Calls a CUDA runtime function and throws tapeflow::platform_error (out_of_memory for
/// cudaErrorMemoryAllocation) with file:line and the error's name when it fails. A non-sticky
/// error is cleared first so the runtime stays usable.
#define TAPEFLOW_CUDA_TRY(call)                                                       \
  do {                                                                                \
    cudaError_t const tapeflow_status_ = (call);                                      \
    if (tapeflow_status_ != cudaSuccess) {                                            \
      static_cast<void>(cudaGetLastError());                                          \
      ::tapeflow::detail::throw_cuda_error(tapeflow_status_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

/// Checks the launch that precedes it (configuration and launch errors).
#define TAPEFLOW_CHECK_LAUNCH() TAPEFLOW_CUDA_TRY(cudaGetLastError())

/// For noexcept paths (destructors, deallocation): a failure is reported on stderr, not thrown.
#define TAPEFLOW_ASSERT_CUDA_SUCCESS(call)                                                        \
  do {                                                                                            \
    cudaError_t const tapeflow_status_ = (call);                                                  \
    if (tapeflow_status_ != cudaSuccess) {                                                        \
      static_cast<void>(cudaGetLastError());                                                      \
      std::fprintf(stderr, "tapeflow: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
                   cudaGetErrorName(tapeflow_status_));                                           \
    }                                                                                             \
  } while (0)

namespace tapeflow {
/// The CUDA stream behind a view.
[[nodiscard]] inline cudaStream_t to_native(stream_view stream) noexcept
{
  return static_cast<cudaStream_t>(stream.native());
}
}  // namespace tapeflow
