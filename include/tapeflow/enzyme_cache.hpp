// SPDX-License-Identifier: Apache-2.0
// Where Enzyme's split-mode caches go (host and device). For a loop of run-time trip count,
// Enzyme's augmented forward allocates arrays for the values its reverse needs, stores their
// pointers in its tape, and the reverse frees them. tapeflow's LLVM pass (tools/enzyme) rewrites
// those allocations into tapeflow_enzyme_cache_alloc / _realloc / _free, which take memory from the
// calling thread's *cache region*: a fixed number of bytes per slot, in a pool the host owns
// (tapeflow::enzyme::cache_pool), at an address that stays put from the augmented forward to the
// reverse (Enzyme keeps raw pointers to it in the tape). Nothing comes from the heap.
//
// A region is a bump allocator: each block carries a 16-byte header with its size, realloc grows
// the last block in place, free does nothing (the region is rewound by the next augmented forward
// of its slot). A region that runs out raises the pool's overflow status with the bytes the slot
// needed, and the allocation is served from the layer's whole pool so that the kernel finishes
// without faulting; the host then throws (cache_pool::check) and the layer's results are void. A
// request larger than the whole pool traps (device) or aborts the process (host).
#pragma once

#include <tapeflow/config.hpp>

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>  // atomicAdd and atomicMax in device code (nvcc includes its runtime in every .cu)
#endif

#include <cstddef>
#include <cstdint>
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <cstdio>
#include <cstdlib>
#endif

namespace tapeflow::enzyme {

/// What a pool's kernels report to the host (zeroed by cache_pool::reset).
struct cache_status {
  unsigned long long overflows;    ///< allocations that did not fit their slot's region
  unsigned long long needed;       ///< the most bytes one slot's region would have needed (a lower bound)
  unsigned long long largest;      ///< the largest single request that overflowed
};

namespace detail {

TAPEFLOW_HOST_DEVICE inline void atomic_add(unsigned long long* word, unsigned long long value) noexcept
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  atomicAdd(word, value);
#else
  __atomic_fetch_add(word, value, __ATOMIC_RELAXED);
#endif
}

TAPEFLOW_HOST_DEVICE inline void atomic_max(unsigned long long* word, unsigned long long value) noexcept
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  atomicMax(word, value);
#else
  unsigned long long seen = __atomic_load_n(word, __ATOMIC_RELAXED);
  while (seen < value && !__atomic_compare_exchange_n(word, &seen, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

[[noreturn]] TAPEFLOW_HOST_DEVICE inline void cache_exhausted() noexcept
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  __builtin_trap();
#else
  std::fputs("tapeflow: an Enzyme cache request is larger than its layer's whole cache pool\n", stderr);
  std::abort();
#endif
}

}  // namespace detail

/// Bytes of a block's header (its size), keeping every block 16-byte aligned.
inline constexpr std::size_t cache_header_bytes = 16;

/// Bytes a request of `bytes` takes in a region.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t cache_block_bytes(std::size_t bytes) noexcept
{
  return cache_header_bytes + (bytes + 15) / 16 * 16;
}

/// One thread's allocator for one call of an Enzyme augmented forward: its slot's region, and the
/// layer's pool as the overflow sink.
class cache_cursor {
 public:
  cache_cursor() = default;
  TAPEFLOW_HOST_DEVICE cache_cursor(unsigned char* region, std::size_t region_bytes, unsigned char* sink,
                                    std::size_t sink_bytes, cache_status* status) noexcept
    : begin_(region), next_(region), end_(region + region_bytes), sink_(sink), sink_bytes_(sink_bytes),
      status_(status)
  {
  }

  /// `bytes` from the region, 16-byte aligned.
  TAPEFLOW_HOST_DEVICE void* allocate(std::size_t bytes) noexcept
  {
    std::size_t const need = cache_block_bytes(bytes);
    if (need > static_cast<std::size_t>(end_ - next_)) { return overflow(bytes, need); }
    unsigned char* const block = next_;
    *reinterpret_cast<std::size_t*>(block) = bytes;
    next_ += need;
    return block + cache_header_bytes;
  }

  /// Grows (or shrinks) `p` to `bytes`: in place when it is the region's last block, else by a
  /// new block and a copy.
  TAPEFLOW_HOST_DEVICE void* reallocate(void* p, std::size_t bytes) noexcept
  {
    auto* const data = static_cast<unsigned char*>(p);
    if (data == nullptr) { return allocate(bytes); }
    if (!owns(data)) { return overflow(bytes, cache_block_bytes(bytes)); }  // an overflowed block: still void
    auto* const header = reinterpret_cast<std::size_t*>(data - cache_header_bytes);
    std::size_t const old = *header;
    if (data - cache_header_bytes + cache_block_bytes(old) == next_ &&
        cache_block_bytes(bytes) <= static_cast<std::size_t>(end_ - (data - cache_header_bytes))) {
      *header = bytes;
      next_ = data - cache_header_bytes + cache_block_bytes(bytes);
      return data;
    }
    void* const moved = allocate(bytes);
    if (owns(static_cast<unsigned char*>(moved))) {
      // A plain loop: memcpy is a host function to clang's CUDA mode without CUDA's headers.
      std::size_t const keep = old < bytes ? old : bytes;
      for (std::size_t b = 0; b < keep; ++b) { static_cast<unsigned char*>(moved)[b] = data[b]; }
    }
    return moved;
  }

  /// Bytes of the region in use.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t used() const noexcept
  {
    return static_cast<std::size_t>(next_ - begin_);
  }

 private:
  /// Whether `p` is a block of this region: past its first header. The overflow sink is the
  /// layer's base, which is slot 0's region's first byte, and no block starts there.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool owns(unsigned char const* p) const noexcept
  {
    return p >= begin_ + cache_header_bytes && p < end_;
  }

  TAPEFLOW_HOST_DEVICE void* overflow(std::size_t bytes, std::size_t need) noexcept
  {
    wanted_ = (wanted_ == 0 ? used() : wanted_) + need;
    detail::atomic_add(&status_->overflows, 1);
    detail::atomic_max(&status_->needed, static_cast<unsigned long long>(wanted_));
    detail::atomic_max(&status_->largest, static_cast<unsigned long long>(bytes));
    next_ = end_;  // later requests of this call overflow too and add to wanted_
    if (bytes > sink_bytes_) { detail::cache_exhausted(); }  // nothing can serve it
    return sink_;
  }

  unsigned char* begin_{nullptr};
  unsigned char* next_{nullptr};
  unsigned char* end_{nullptr};
  unsigned char* sink_{nullptr};
  std::size_t sink_bytes_{0};
  cache_status* status_{nullptr};
  std::size_t wanted_{0};  // bytes the region would have needed, once it overflowed
};

/// One layer's part of a cache pool, for kernels: a region of `region_bytes` per slot.
struct cache_view {
  unsigned char* base{nullptr};
  std::size_t region_bytes{0};
  std::size_t slots{0};
  cache_status* status{nullptr};

  /// The allocator for slot `i`'s call (its region rewound).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE cache_cursor cursor(std::size_t i) const noexcept
  {
    return cache_cursor{base + i * region_bytes, region_bytes, base, slots * region_bytes, status};
  }
};

}  // namespace tapeflow::enzyme
