// SPDX-License-Identifier: Apache-2.0
// The emulated device's internals shared by the runtime (the CUDA runtime API's sections, on the
// device's state: state.hpp) and the block scheduler (fibers, builtins: scheduler.cpp).
#pragma once

#include <tapeflow/emulated/runtime.hpp>

#include <atomic>
#include <cstdint>
#include <string>

namespace tapeflow::emu::detail {

/// One kernel launch, as enqueued.
struct kernel_launch {
  dim3 grid;
  dim3 block;
  std::size_t dynamic_smem{0};
  kernel_body body;
  std::uint64_t id{0};  ///< launches counted from 1, for messages and the random schedule's seeds
};

/// Runs every block of `launch` (on up to `settings.threads` host threads); returns an empty string
/// on success, else what went wrong (a trap, a deadlock, an exception out of a kernel), naming the
/// launch, block and thread.
std::string run_kernel(kernel_launch const& launch, settings const& config);

/// The settings in force (read by the scheduler at each launch).
settings active_settings();

inline std::atomic<std::uint64_t> launches{0};
inline std::atomic<std::uint64_t> blocks_run{0};
inline std::atomic<std::uint64_t> fiber_switches{0};

/// Device limits the emulated device reports (and the launch checks).
inline constexpr int compute_major = 9;  // an sm_90 device: every kernel's machine code is sm_90's
inline constexpr int compute_minor = 0;
inline constexpr int warp_size = 32;
inline constexpr int max_threads_per_block = 1024;
inline constexpr int max_threads_per_multiprocessor = 2048;
inline constexpr int multiprocessors = 4;
inline constexpr std::size_t shared_per_block = 48 * 1024;
inline constexpr std::size_t shared_per_block_optin = 227 * 1024;
inline constexpr std::size_t shared_per_multiprocessor = 228 * 1024;
inline constexpr std::size_t shared_reserved_per_block = 1024;  // what the driver keeps of it per resident block
inline constexpr int registers_per_multiprocessor = 65536;
inline constexpr int register_allocation_unit = 256;  // registers are given to a warp in these
inline constexpr int max_blocks_per_multiprocessor = 32;

}  // namespace tapeflow::emu::detail
