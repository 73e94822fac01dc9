// SPDX-License-Identifier: Apache-2.0
// The stream-ordered memory allocator: cudaMallocAsync allocates and cudaFreeAsync frees in stream
// order, with no pool behind them; the device's default pool exists only as its release-threshold
// attribute (set by the CUDA backend, read by a test).
#include "state.hpp"

#include <atomic>

struct CUmemPoolHandle_st {
  std::atomic<unsigned long long> release_threshold{0};  // CUDA's default: keep nothing
};

namespace {
CUmemPoolHandle_st& default_pool() noexcept
{
  static CUmemPoolHandle_st pool;
  return pool;
}
}  // namespace

using namespace tapeflow::emu::detail;

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (resolve(stream).capture) { return cudaErrorStreamCaptureUnsupported; }
  return allocate_device(ptr, bytes);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  if (resolve(stream).capture) { return cudaErrorStreamCaptureUnsupported; }
  if (dev().device_memory.count(reinterpret_cast<std::uintptr_t>(ptr)) == 0) { return cudaErrorInvalidDevicePointer; }
  enqueue(stream, [ptr] { release_device(ptr); });  // freed in stream order, after the work before it
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) noexcept
{
  if (pool == nullptr || device != 0) { return cudaErrorInvalidValue; }
  *pool = &default_pool();
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept
{
  if (pool == nullptr || value == nullptr || attr != cudaMemPoolAttrReleaseThreshold) { return cudaErrorInvalidValue; }
  pool->release_threshold.store(*static_cast<unsigned long long*>(value));
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) noexcept
{
  if (pool == nullptr || value == nullptr || attr != cudaMemPoolAttrReleaseThreshold) { return cudaErrorInvalidValue; }
  *static_cast<unsigned long long*>(value) = pool->release_threshold.load();
  return cudaSuccess;
}
