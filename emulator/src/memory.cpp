// SPDX-License-Identifier: Apache-2.0
// Memory management: device memory is host memory from the allocator (AddressSanitizer sees its
// overflows), filled with 0xFF bytes and counted against the device's size; pinned host memory is
// tracked so that copies know which host memory is pageable; copies and fills check that their
// device pointers lie inside live allocations and run in stream order.
#include "state.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace tapeflow::emu::detail {

cudaError_t allocate_device(void** ptr, std::size_t bytes)
{
  device& d = dev();
  if (ptr == nullptr) { return cudaErrorInvalidValue; }
  std::size_t const size = bytes == 0 ? 1 : bytes;
  if (d.used + size > d.config.memory_bytes) { return cudaErrorMemoryAllocation; }
  void* p = ::operator new(size, std::align_val_t{256}, std::nothrow);
  if (p == nullptr) { return cudaErrorMemoryAllocation; }
  std::memset(p, 0xFF, size);  // fresh device memory holds no zeros to hide an unwritten element
  d.device_memory[reinterpret_cast<std::uintptr_t>(p)] = {size};
  d.used += size;
  *ptr = p;
  return cudaSuccess;
}

void release_device(void* p)
{
  device& d = dev();
  auto const it = d.device_memory.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == d.device_memory.end()) { return; }
  d.used -= it->second.bytes;
  d.device_memory.erase(it);
  ::operator delete(p, std::align_val_t{256});
}

namespace {

/// The live allocation that holds [p, p + bytes), if any.
bool inside(std::map<std::uintptr_t, allocation> const& memory, void const* p, std::size_t bytes)
{
  auto const a = reinterpret_cast<std::uintptr_t>(p);
  auto it = memory.upper_bound(a);
  if (it == memory.begin()) { return false; }
  --it;
  return a >= it->first && a + bytes <= it->first + it->second.bytes;
}

/// Checks a copy's pointers against the memory they must lie in, then enqueues it. Pageable host
/// memory behaves as CUDA's does: a copy from it takes its bytes before the call returns, a copy
/// into it completes before the call returns.
cudaError_t copy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
  device& d = dev();
  if (bytes == 0) { return cudaSuccess; }
  if (dst == nullptr || src == nullptr) { return cudaErrorInvalidValue; }
  bool const dst_device = inside(d.device_memory, dst, bytes);
  bool const src_device = inside(d.device_memory, src, bytes);
  if (kind == cudaMemcpyDefault) {
    kind = src_device ? (dst_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                      : (dst_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  bool const want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool const want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_device != want_dst_device || src_device != want_src_device) { return cudaErrorInvalidValue; }
  bool const src_pageable = !src_device && !inside(d.pinned_memory, src, bytes);
  bool const dst_pageable = !dst_device && !inside(d.pinned_memory, dst, bytes);
  if (src_pageable) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<unsigned char const*>(src),
                                                               static_cast<unsigned char const*>(src) + bytes);
    enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  if (dst_pageable) { run_all(resolve(stream)); }
  return d.sticky;
}

}  // namespace
}  // namespace tapeflow::emu::detail

using namespace tapeflow::emu::detail;

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  return allocate_device(ptr, bytes);
}

cudaError_t cudaFree(void* ptr) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  if (dev().device_memory.count(reinterpret_cast<std::uintptr_t>(ptr)) == 0) { return cudaErrorInvalidDevicePointer; }
  run_everything();  // cudaFree synchronizes the device
  release_device(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaErrorInvalidValue; }
  std::size_t const size = bytes == 0 ? 1 : bytes;
  void* p = ::operator new(size, std::align_val_t{256}, std::nothrow);
  if (p == nullptr) { return cudaErrorMemoryAllocation; }
  dev().pinned_memory[reinterpret_cast<std::uintptr_t>(p)] = {size};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ptr == nullptr) { return cudaSuccess; }
  auto const it = dev().pinned_memory.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == dev().pinned_memory.end()) { return cudaErrorInvalidValue; }
  run_everything();  // cudaFreeHost synchronizes the device
  dev().pinned_memory.erase(it);
  ::operator delete(ptr, std::align_val_t{256});
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (free == nullptr || total == nullptr) { return cudaErrorInvalidValue; }
  *total = dev().config.memory_bytes;
  *free = *total - std::min(*total, dev().used);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (capturing_anywhere()) { return cudaErrorStreamCaptureUnsupported; }
  cudaError_t const status = copy(dst, src, bytes, kind, nullptr);
  if (status != cudaSuccess) { return status; }
  run_all(*dev().legacy);
  return dev().sticky;
}

cudaError_t cudaMemcpyAsync(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  return copy(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (bytes == 0) { return cudaSuccess; }
  if (!inside(dev().device_memory, dst, bytes)) { return cudaErrorInvalidValue; }
  enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) noexcept
{
  TAPEFLOW_EMU_GUARD();
  cudaError_t const status = cudaMemsetAsync(dst, value, bytes, nullptr);
  if (status != cudaSuccess) { return status; }
  run_all(*dev().legacy);
  return dev().sticky;
}
