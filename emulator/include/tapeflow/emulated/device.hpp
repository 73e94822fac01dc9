// SPDX-License-Identifier: Apache-2.0
// The emulated device's kernel-side builtins: what nvcc gives a .cu file for free (the execution
// space keywords, threadIdx and friends, __syncthreads, atomics, warp votes, __trap), so that
// tapeflow's kernels compile unchanged as C++ and run as fibers (emulator/src/). Included by the
// emulator's <cuda_runtime.h>, as nvcc includes its own in every .cu file; docs/emulation.md gives
// the model.
//
// Each block runs on one host thread as blockDim fibers, switched cooperatively: at every
// __syncthreads and blocking wait, and, under the random schedule, at every yield point (an
// atomic, a warp vote, an asynchronous copy, a pipeline or barrier operation). `__shared__`
// variables are per host thread (static thread_local): one block runs at a time on each.
#pragma once

#include <tapeflow/emulated/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace tapeflow::emu {

[[nodiscard]] uint3 const& thread_idx() noexcept;
[[nodiscard]] uint3 const& block_idx() noexcept;
[[nodiscard]] dim3 const& block_dim() noexcept;
[[nodiscard]] dim3 const& grid_dim() noexcept;
/// True inside a kernel (a fiber of a running block); device functions called from host code see
/// a lone thread: one lane, barriers and votes of one.
[[nodiscard]] bool in_kernel() noexcept;

/// __syncthreads(): every live thread of the block arrives before any leaves (a thread that has
/// returned counts as arrived, as on sm_70 and later).
void syncthreads();
/// A point where the random schedule may switch to another thread of the block.
void yield_point();
/// Blocks the calling thread (switching to the others) until `ready(context)` holds. A block whose
/// every live thread waits on something that cannot happen is a deadlock: the launch fails.
void wait_until(bool (*ready)(void const*), void const* context, char const* what);
template <class Ready>
void wait_until(Ready const& ready, char const* what)
{
  wait_until([](void const* c) { return (*static_cast<Ready const*>(c))(); }, &ready, what);
}

/// The lanes of the calling thread's warp that run with it now: the emulator's warps are always
/// fully diverged (a legal state under independent thread scheduling), so the caller's lane alone.
[[nodiscard]] unsigned active_mask() noexcept;
/// __ballot_sync: waits for every lane of `mask` that has not returned, then returns the lanes
/// whose `predicate` was true.
[[nodiscard]] unsigned ballot(unsigned mask, bool predicate);
[[nodiscard]] unsigned lane_mask_lt() noexcept;

/// __trap(): ends the launch with cudaErrorLaunchFailure naming the block and thread.
[[noreturn]] void trap();

/// The block's dynamic shared memory (filled with 0xFF bytes when the block starts, so a read of
/// a slot nothing wrote shows up as NaN or an all-ones pattern).
[[nodiscard]] unsigned char* dynamic_shared() noexcept;

}  // namespace tapeflow::emu

// ---------------------------------------------------------------------------------------------
// nvcc's keywords, as plain C++.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) alignas(n)

#define threadIdx (::tapeflow::emu::thread_idx())
#define blockIdx (::tapeflow::emu::block_idx())
#define blockDim (::tapeflow::emu::block_dim())
#define gridDim (::tapeflow::emu::grid_dim())

inline void __syncthreads() { ::tapeflow::emu::syncthreads(); }
[[noreturn]] inline void __trap() { ::tapeflow::emu::trap(); }
inline unsigned __activemask() noexcept { return ::tapeflow::emu::active_mask(); }
inline unsigned __ballot_sync(unsigned mask, int predicate) { return ::tapeflow::emu::ballot(mask, predicate != 0); }
inline void __threadfence() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Atomics: real atomics (blocks run on several host threads), and a yield point each.
template <class T>
inline T atomicAdd(T* address, T value)
{
  ::tapeflow::emu::yield_point();
  if constexpr (std::is_floating_point_v<T>) {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T desired;
    do {
      desired = old + value;
    } while (!__atomic_compare_exchange(address, &old, &desired, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
  } else {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  }
}
template <class T>
inline T atomicOr(T* address, T value)
{
  ::tapeflow::emu::yield_point();
  return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST);
}
template <class T>
inline T atomicMax(T* address, T value)
{
  ::tapeflow::emu::yield_point();
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (old < value && !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
inline T atomicCAS(T* address, T compare, T value)
{
  ::tapeflow::emu::yield_point();
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}

// CUDA's math library overloads float functions (and min/max) in the global namespace; so does this.
using std::abs;
using std::max;
using std::min;
using std::ceil;
using std::exp;
using std::fabs;
using std::floor;
using std::fma;
using std::fmax;
using std::fmin;
using std::log;
using std::log1p;
using std::pow;
using std::sqrt;
using std::tanh;
