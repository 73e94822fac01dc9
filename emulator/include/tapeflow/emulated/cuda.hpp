// SPDX-License-Identifier: Apache-2.0
// The emulated device's subset of libcu++ that tapeflow's tile pipelines use, with the semantics
// that matter for finding bugs:
//
//   cuda::pipeline<thread_scope_thread>   per-thread groups of asynchronous copies (cp.async):
//     memcpy_async fills its destination with 0xFF bytes when issued and copies the source only
//     when a consumer wait lands its group, so reading a slot before its wait, or refilling a slot
//     another thread still reads, gives wrong values in a test, not right ones by luck; a
//     pipeline that goes away with copies not waited for traps.
//   cuda::barrier<thread_scope_block>      arrival counts, phases and parity waits, and the sm_90
//     transaction count: cuda::device::memcpy_async_tx (the bulk-copy engine) likewise poisons its
//     destination and lands when a thread waits for the phase its bytes complete.
//
// Anything else of libcu++ is absent on purpose: a kernel that needs more fails to compile in the
// emulated build rather than running under made-up semantics.
#pragma once

#include <tapeflow/emulated/device.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <vector>

namespace cuda {

enum thread_scope { thread_scope_system = 0, thread_scope_device = 1, thread_scope_block = 2, thread_scope_thread = 3 };

/// A copy size promised to be a multiple of `Alignment`, with both pointers so aligned.
template <std::size_t Alignment>
struct aligned_size_t {
  static constexpr std::size_t align = Alignment;
  std::size_t value;
  constexpr explicit aligned_size_t(std::size_t size) noexcept : value(size) {}
  constexpr operator std::size_t() const noexcept { return value; }
};

namespace emulated_detail {

struct pending_copy {
  void* dst;
  void const* src;
  std::size_t bytes;
};

/// Checks a copy's alignment promise (a broken one is undefined behaviour on the GPU: a trap
/// here), then poisons the destination until the copy lands.
inline void issue(pending_copy const& c, std::size_t alignment)
{
  auto const misaligned = [alignment](std::uintptr_t v) { return alignment > 1 && v % alignment != 0; };
  if (misaligned(reinterpret_cast<std::uintptr_t>(c.dst)) || misaligned(reinterpret_cast<std::uintptr_t>(c.src)) ||
      misaligned(c.bytes)) {
    ::tapeflow::emu::trap();
  }
  std::memset(c.dst, 0xFF, c.bytes);
}

inline void land(pending_copy const& c) { std::memcpy(c.dst, c.src, c.bytes); }

}  // namespace emulated_detail

template <thread_scope Scope>
class pipeline;

/// A thread's own pipeline: each producer_commit closes a group of its copies.
template <>
class pipeline<thread_scope_thread> {
 public:
  pipeline() = default;
  pipeline(pipeline&&) = default;
  pipeline(pipeline const&) = delete;
  pipeline& operator=(pipeline const&) = delete;
  pipeline& operator=(pipeline&&) = delete;
  /// Copies still in flight when the pipeline goes away are a kernel's bug: on the GPU nothing
  /// tells the thread, or a barrier after it, when they land (libcu++'s thread-scope pipeline
  /// forgets its groups). The emulator traps, naming the thread — unless a trap already unwinds.
  ~pipeline() noexcept(false)
  {
    bool pending = !open_.empty();
    for (auto const& group : groups_) { pending = pending || !group.empty(); }
    if (pending && std::uncaught_exceptions() == 0) { ::tapeflow::emu::trap(); }
  }

  void producer_acquire() { ::tapeflow::emu::yield_point(); }
  void producer_commit()
  {
    groups_.push_back(std::move(open_));
    open_.clear();
    ::tapeflow::emu::yield_point();
  }
  void consumer_wait() { land_all_but(0); }
  void consumer_release() { ::tapeflow::emu::yield_point(); }
  bool quit() noexcept { return true; }

  // The emulator's side.
  void add(emulated_detail::pending_copy const& c) { open_.push_back(c); }
  void land_all_but(std::size_t newest)
  {
    while (groups_.size() > newest) {
      for (auto const& c : groups_.front()) { emulated_detail::land(c); }
      groups_.pop_front();
    }
    ::tapeflow::emu::yield_point();
  }

 private:
  std::vector<emulated_detail::pending_copy> open_;
  std::deque<std::vector<emulated_detail::pending_copy>> groups_;
};

inline pipeline<thread_scope_thread> make_pipeline() { return {}; }

template <std::size_t Alignment>
void memcpy_async(void* dst, void const* src, aligned_size_t<Alignment> size, pipeline<thread_scope_thread>& pipe)
{
  emulated_detail::pending_copy const c{dst, src, size.value};
  emulated_detail::issue(c, Alignment);
  pipe.add(c);
  ::tapeflow::emu::yield_point();
}
inline void memcpy_async(void* dst, void const* src, std::size_t bytes, pipeline<thread_scope_thread>& pipe)
{
  memcpy_async(dst, src, aligned_size_t<1>(bytes), pipe);
}

/// Waits until all but the newest `Prior` committed groups of the thread have landed.
template <std::uint8_t Prior>
void pipeline_consumer_wait_prior(pipeline<thread_scope_thread>& pipe)
{
  pipe.land_all_but(Prior);
}

/// A block-scoped barrier (an mbarrier): `expected` arrivals and, on sm_90, a transaction count of
/// bytes complete each phase.
template <thread_scope Scope>
class barrier {
  static_assert(Scope == thread_scope_block, "the emulated device has block-scoped barriers only");

 public:
  using arrival_token = std::uint64_t;

  barrier() = default;
  explicit barrier(std::ptrdiff_t expected) { reset(expected); }
  barrier(barrier const&) = delete;
  barrier& operator=(barrier const&) = delete;

  friend void init(barrier* b, std::ptrdiff_t expected) { b->reset(expected); }

  arrival_token arrive(std::ptrdiff_t count = 1)
  {
    ::tapeflow::emu::yield_point();
    if (pending_ == 0) { complete(); }  // the previous phase's copies land before this phase counts
    if (count <= 0 || count > pending_) { ::tapeflow::emu::trap(); }  // more arrivals than the phase expects
    arrival_token const token = phase_;
    pending_ -= count;
    return token;
  }
  void wait(arrival_token&& token)
  {
    arrival_token const mine = token;
    ::tapeflow::emu::wait_until(
      [this, mine] {
        try_complete();
        return phase_ != mine;
      },
      "cuda::barrier::wait");
  }
  void arrive_and_wait() { wait(arrive()); }
  /// Returns once the phase of parity `parity` has completed.
  void wait_parity(bool parity)
  {
    ::tapeflow::emu::wait_until(
      [this, parity] {
        try_complete();
        return ((phase_ & 1U) != 0) != parity;
      },
      "cuda::barrier::wait_parity");
  }
  bool try_wait_parity(bool parity)
  {
    ::tapeflow::emu::yield_point();
    try_complete();
    return ((phase_ & 1U) != 0) != parity;
  }

  // The emulator's side: sm_90 transaction counts and the copies that complete them.
  void expect_tx(std::ptrdiff_t bytes) { tx_ += bytes; }
  void add_copy(emulated_detail::pending_copy const& c) { copies_.push_back(c); }

 private:
  void reset(std::ptrdiff_t expected)
  {
    expected_ = expected;
    pending_ = expected;
    tx_ = 0;
    phase_ = 0;
    copies_.clear();
  }
  /// With every arrival in, the phase's copies land (their bytes complete the transaction count)
  /// and the phase completes when the count is met.
  void try_complete()
  {
    if (pending_ == 0) { complete(); }
  }
  void complete()
  {
    for (auto const& c : copies_) {
      emulated_detail::land(c);
      tx_ -= static_cast<std::ptrdiff_t>(c.bytes);
    }
    copies_.clear();
    if (tx_ == 0) {
      ++phase_;
      pending_ = expected_;
    }
  }

  std::ptrdiff_t expected_{0};
  std::ptrdiff_t pending_{0};
  std::ptrdiff_t tx_{0};
  std::uint64_t phase_{0};
  std::vector<emulated_detail::pending_copy> copies_;
};

namespace device {

/// The bulk-copy engine (cp.async.bulk): `size` bytes to shared memory, completing on `b`'s
/// transaction count.
template <std::size_t Alignment>
void memcpy_async_tx(void* dst, void const* src, aligned_size_t<Alignment> size, barrier<thread_scope_block>& b)
{
  static_assert(Alignment % 16 == 0, "bulk copies move 16-byte multiples");
  emulated_detail::pending_copy const c{dst, src, size.value};
  emulated_detail::issue(c, Alignment);
  b.add_copy(c);
  ::tapeflow::emu::yield_point();
}

inline barrier<thread_scope_block>::arrival_token barrier_arrive_tx(barrier<thread_scope_block>& b,
                                                                    std::ptrdiff_t count, std::ptrdiff_t tx_bytes)
{
  b.expect_tx(tx_bytes);
  return b.arrive(count);
}

namespace experimental {
/// Orders generic-proxy writes before the copy engine's reads: nothing to order on the CPU.
inline void fence_proxy_async_shared_cta() { ::tapeflow::emu::yield_point(); }
}  // namespace experimental

}  // namespace device
}  // namespace cuda
