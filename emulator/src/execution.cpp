// SPDX-License-Identifier: Apache-2.0
// Execution control: what the device reports about kernels (as the settings virtual_arch= and
// kernel_threads= ask), their names, and the emulator's launches of kernels and host work, queued
// on a stream and checked like a CUDA launch.
#include "state.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <utility>

using namespace tapeflow::emu::detail;

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void const* function) noexcept
{
  if (attributes == nullptr || function == nullptr) { return cudaErrorInvalidValue; }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  tapeflow::emu::settings const& config = dev().config;
  attributes->binaryVersion = compute_major * 10 + compute_minor;  // older virtual code is compiled for it
  attributes->ptxVersion = config.kernel_virtual_arch;
  attributes->maxThreadsPerBlock =
    config.kernel_max_threads > 0 ? std::min(config.kernel_max_threads, max_threads_per_block) : max_threads_per_block;
  attributes->numRegs = config.kernel_registers;
  attributes->sharedSizeBytes = 0;
  auto const opted = dev().opted_in.find(function);
  attributes->maxDynamicSharedSizeBytes =
    static_cast<int>(opted == dev().opted_in.end() ? shared_per_block : opted->second);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(void const* function, cudaFuncAttribute attribute, int value) noexcept
{
  if (function == nullptr || attribute != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<std::size_t>(value) > shared_per_block_optin) {
    return cudaErrorInvalidValue;
  }
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  dev().opted_in[function] = static_cast<std::size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void const* function, int block_size,
                                                          std::size_t dynamic_smem) noexcept
{
  cudaFuncAttributes attributes{};
  if (blocks == nullptr || block_size <= 0) { return cudaErrorInvalidValue; }
  if (cudaError_t const e = cudaFuncGetAttributes(&attributes, function); e != cudaSuccess) { return e; }
  if (block_size > attributes.maxThreadsPerBlock ||
      dynamic_smem > static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes)) {
    *blocks = 0;
    return cudaSuccess;
  }
  int const warps = (block_size + warp_size - 1) / warp_size;
  int resident = std::min(max_threads_per_multiprocessor / warp_size / warps, max_blocks_per_multiprocessor);
  resident = std::min(resident, static_cast<int>(shared_per_multiprocessor / (dynamic_smem + shared_reserved_per_block)));
  if (attributes.numRegs > 0) {
    int const per_warp = (attributes.numRegs * warp_size + register_allocation_unit - 1) / register_allocation_unit *
                         register_allocation_unit;
    resident = std::min(resident, registers_per_multiprocessor / (per_warp * warps));
  }
  *blocks = resident;
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(char const** name, void const* function) noexcept
{
  if (name == nullptr || function == nullptr) { return cudaErrorInvalidValue; }
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != function) {
    return cudaErrorInvalidDeviceFunction;
  }
  *name = info.dli_sname;
  return cudaSuccess;
}

namespace tapeflow::emu {

void launch_kernel(void const* function, dim3 grid, dim3 block, std::size_t dynamic_smem_bytes, cudaStream_t stream,
                   kernel_body body)
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  std::size_t const threads = static_cast<std::size_t>(block.x) * block.y * block.z;
  bool const bad_grid = grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFU || grid.y > 65535U ||
                        grid.z > 65535U;
  bool const bad_block = threads == 0 || threads > static_cast<std::size_t>(max_threads_per_block) ||
                         block.x > 1024U || block.y > 1024U || block.z > 64U;
  if (bad_grid || bad_block) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  // Past what a block gets without opting in, only as far as the kernel opted in to.
  auto const opted = dev().opted_in.find(function);
  std::size_t const allowed = opted == dev().opted_in.end() ? shared_per_block : opted->second;
  if (dynamic_smem_bytes > allowed) {
    last_error = cudaErrorInvalidValue;
    return;
  }
  if (dev().sticky != cudaSuccess) { return; }
  auto launch = std::make_shared<kernel_launch>();
  launch->grid = grid;
  launch->block = block;
  launch->dynamic_smem = dynamic_smem_bytes;
  launch->body = std::move(body);
  launch->id = ++dev().launches;
  launches.fetch_add(1, std::memory_order_relaxed);
  enqueue(stream, [launch] {
    std::string const failure = run_kernel(*launch, dev().config);
    if (!failure.empty()) { fail_device(failure); }
  });
}

void enqueue_host(cudaStream_t stream, std::function<void()> work_item)
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (dev().sticky != cudaSuccess) { return; }
  enqueue(stream, std::move(work_item));
}

}  // namespace tapeflow::emu
