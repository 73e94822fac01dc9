// SPDX-License-Identifier: Apache-2.0
// Device and version management: one device, ordinal 0, with sm_90's compute capability and the
// limits of emulator.hpp; no driver.
#include "state.hpp"

#include <cstdio>

using namespace tapeflow::emu::detail;

cudaError_t cudaGetDeviceCount(int* count) noexcept
{
  if (count == nullptr) { return cudaErrorInvalidValue; }
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) noexcept
{
  if (device == nullptr) { return cudaErrorInvalidValue; }
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int device) noexcept
{
  if (props == nullptr || device != 0) { return cudaErrorInvalidValue; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  *props = {};
  std::snprintf(props->name, sizeof props->name, "tapeflow emulated device (CPU fibers, sm_90 semantics)");
  props->totalGlobalMem = dev().config.memory_bytes;
  props->sharedMemPerBlock = shared_per_block;
  props->warpSize = warp_size;
  props->maxThreadsPerBlock = max_threads_per_block;
  props->multiProcessorCount = multiprocessors;
  props->major = compute_major;
  props->minor = compute_minor;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) noexcept
{
  if (value == nullptr || device != 0) { return cudaErrorInvalidValue; }
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock: *value = max_threads_per_block; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(shared_per_block); break;
    case cudaDevAttrWarpSize: *value = warp_size; break;
    case cudaDevAttrMultiProcessorCount: *value = multiprocessors; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = max_threads_per_multiprocessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = compute_major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = compute_minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(shared_per_multiprocessor); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(shared_per_block_optin); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) noexcept
{
  if (version == nullptr) { return cudaErrorInvalidValue; }
  *version = 0;  // no driver: the emulator
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  run_everything();
  return dev().sticky;
}
