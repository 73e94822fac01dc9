// SPDX-License-Identifier: Apache-2.0
// Fibers for the emulated device: a context (registers and stack) that a host thread switches
// into and out of explicitly. On x86-64 a few instructions switch the callee-saved registers and
// the stack pointer (no system call: ucontext's swapcontext saves the signal mask with one on every
// switch); elsewhere ucontext does it. Under AddressSanitizer every switch is announced to it
// (__sanitizer_start/finish_switch_fiber) so that it tracks the right stack.
#pragma once

#include <ucontext.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define TAPEFLOW_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAPEFLOW_EMU_ASAN 1
#endif
#endif

namespace tapeflow::emu::detail {

/// A fiber's stack: mapped memory with an inaccessible guard page below it, so an overflow faults
/// instead of corrupting its neighbour.
class fiber_stack {
 public:
  explicit fiber_stack(std::size_t bytes);
  ~fiber_stack();
  fiber_stack(fiber_stack const&) = delete;
  fiber_stack& operator=(fiber_stack const&) = delete;

  [[nodiscard]] void* bottom() const noexcept { return usable_; }
  [[nodiscard]] std::size_t size() const noexcept { return usable_size_; }

 private:
  void* mapping_{nullptr};
  std::size_t mapping_size_{0};
  void* usable_{nullptr};
  std::size_t usable_size_{0};
};

/// A saved execution context, with what AddressSanitizer needs to know about its stack.
struct context {
#if defined(__x86_64__)
  void* sp{nullptr};  // the saved stack pointer; the registers are on that stack
#else
  ucontext_t uc{};
#endif
  void const* stack_bottom{nullptr};
  std::size_t stack_size{0};
  void* fake_stack{nullptr};
};

/// Prepares `fiber` to start in `entry(arg)` on `stack` (returning from entry is not allowed:
/// it must switch away for the last time).
void make_context(context& fiber, fiber_stack& stack, void (*entry)(void*), void* arg);

/// Saves the running context in `from` and resumes `to`. `from_exits`: `from` will never be
/// resumed (its fake stack, under ASan, is released).
void switch_context(context& from, context& to, bool from_exits = false);

/// Called first thing in a new fiber's entry: completes the switch that started it and records
/// the stack of the context that started it in `starter` (under ASan).
void enter_fiber(context& starter);

}  // namespace tapeflow::emu::detail
