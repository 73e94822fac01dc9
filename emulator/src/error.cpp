// SPDX-License-Identifier: Apache-2.0
// Error handling: the errors' names and descriptions, the last launch error, the sticky error a
// failed kernel leaves (and the emulator's own way to clear it).
#include "state.hpp"

using namespace tapeflow::emu::detail;

char const* cudaGetErrorName(cudaError_t error) noexcept
{
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

char const* cudaGetErrorString(cudaError_t error) noexcept
{
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory (emulated device)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: {
      std::lock_guard<std::recursive_mutex> lock(dev().mutex);
      return dev().sticky_message.empty() ? "unspecified launch failure" : dev().sticky_message.c_str();
    }
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() noexcept
{
  cudaError_t const e = last_error;
  last_error = cudaSuccess;
  if (e != cudaSuccess) { return e; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().sticky;
}

cudaError_t cudaPeekAtLastError() noexcept
{
  if (last_error != cudaSuccess) { return last_error; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().sticky;
}

namespace tapeflow::emu {

void clear_error()
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  for (auto const& s : dev().streams) {
    s->executed += s->queue.size();
    s->queue.clear();
  }
  dev().sticky = cudaSuccess;
  dev().sticky_message.clear();
}

}  // namespace tapeflow::emu
