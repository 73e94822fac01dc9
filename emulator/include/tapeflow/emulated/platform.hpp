// SPDX-License-Identifier: Apache-2.0
// The emulated device's side of tapeflow's platform layer: what <tapeflow/device/platform.hpp>
// defines with CUDA's own means on CUDA and HIP (a <<<...>>> launch, %lanemask_lt, extern
// __shared__, the device's ordinal) and the emulator cannot take under CUDA's names. Included by
// platform.hpp, and only there, in a TAPEFLOW_EMULATED build; everything else of CUDA the emulator
// gives under CUDA's own headers' names (emulator/include/).
#pragma once

#include <tapeflow/emulated/device.hpp>
#include <tapeflow/emulated/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

// The emulated device is an sm_90 device, and its kernels are compiled once, for it.
#define TAPEFLOW_DEVICE_BULK_COPY 1

namespace tapeflow::device {

/// The block's dynamic shared memory (the launch's shared-memory bytes), 16-byte aligned.
template <class T>
T* dynamic_shared() noexcept
{
  return reinterpret_cast<T*>(::tapeflow::emu::dynamic_shared());
}

namespace detail {

/// Queues `kernel(args...)` on `stream` as blocks of fibers; the arguments convert to the kernel's
/// parameter types at the call, as in a CUDA launch. A bad shape sets the last error.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream,
                   Args&&... args)
{
  ::tapeflow::emu::launch_kernel(reinterpret_cast<void const*>(kernel), grid, block, smem_bytes, stream,
                                 [kernel, params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
                                   std::apply(kernel, params);
                                 });
}

/// The lanes of the calling thread's warp below it (%lanemask_lt).
inline unsigned lane_mask_lt() noexcept { return ::tapeflow::emu::lane_mask_lt(); }

/// The current device, as far as what it reports about kernels goes: the emulator's configuration
/// epoch, since a reconfigured emulator reports other facts.
inline std::uint64_t current_device() noexcept { return ::tapeflow::emu::configuration_epoch(); }

}  // namespace detail
}  // namespace tapeflow::device
