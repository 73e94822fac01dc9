// SPDX-License-Identifier: Apache-2.0
#include "fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(TAPEFLOW_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace tapeflow::emu::detail {

namespace {
std::size_t page_size() noexcept
{
  static std::size_t const size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
}  // namespace

fiber_stack::fiber_stack(std::size_t bytes)
{
  std::size_t const page = page_size();
  usable_size_ = (bytes + page - 1) / page * page;
  mapping_size_ = usable_size_ + page;
  mapping_ = mmap(nullptr, mapping_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw std::bad_alloc();
  }
  // The lowest page guards against overflow (stacks grow down).
  if (mprotect(mapping_, page, PROT_NONE) != 0) {
    munmap(mapping_, mapping_size_);
    mapping_ = nullptr;
    throw std::bad_alloc();
  }
  usable_ = static_cast<unsigned char*>(mapping_) + page;
}

fiber_stack::~fiber_stack()
{
  if (mapping_ != nullptr) { munmap(mapping_, mapping_size_); }
}

#if defined(__x86_64__)

// tapeflow_emu_switch(save, load): pushes the callee-saved registers and the SSE/x87 control words
// on the current stack, stores the stack pointer in *save, loads `load` and pops the same from
// there. tapeflow_emu_start is where a new fiber's first switch returns to: it calls entry(arg)
// (entry in r13, arg in r12) and never returns.
extern "C" void tapeflow_emu_switch(void** save, void* load);
extern "C" void tapeflow_emu_start();
asm(R"(
  .text
  .globl tapeflow_emu_switch
  .type tapeflow_emu_switch, @function
tapeflow_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tapeflow_emu_switch, .-tapeflow_emu_switch

  .globl tapeflow_emu_start
  .type tapeflow_emu_start, @function
tapeflow_emu_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size tapeflow_emu_start, .-tapeflow_emu_start
)");

void make_context(context& fiber, fiber_stack& stack, void (*entry)(void*), void* arg)
{
  // From the 16-byte aligned top down: the return address of the first switch (tapeflow_emu_start,
  // which then calls with the ABI's alignment), rbp, rbx, r12 = arg, r13 = entry, r14, r15, and the
  // control words (MXCSR's and the x87's defaults).
  auto const top = (reinterpret_cast<std::uintptr_t>(stack.bottom()) + stack.size()) & ~std::uintptr_t{15};
  auto* const slot = reinterpret_cast<std::uint64_t*>(top);
  slot[-1] = reinterpret_cast<std::uint64_t>(&tapeflow_emu_start);
  slot[-2] = 0;                                          // rbp
  slot[-3] = 0;                                          // rbx
  slot[-4] = reinterpret_cast<std::uint64_t>(arg);       // r12
  slot[-5] = reinterpret_cast<std::uint64_t>(entry);     // r13
  slot[-6] = 0;                                          // r14
  slot[-7] = 0;                                          // r15
  slot[-8] = std::uint64_t{0x1F80} | (std::uint64_t{0x037F} << 32U);  // MXCSR, x87 control word
  fiber.sp = slot - 8;
  fiber.stack_bottom = stack.bottom();
  fiber.stack_size = stack.size();
  fiber.fake_stack = nullptr;
}

namespace {
void raw_switch(context& from, context& to) { tapeflow_emu_switch(&from.sp, to.sp); }
}  // namespace

#else

void make_context(context& fiber, fiber_stack& stack, void (*entry)(void*), void* arg)
{
  if (getcontext(&fiber.uc) != 0) {
    std::perror("tapeflow emulator: getcontext");
    std::abort();
  }
  fiber.uc.uc_stack.ss_sp = stack.bottom();
  fiber.uc.uc_stack.ss_size = stack.size();
  fiber.uc.uc_link = nullptr;
  fiber.stack_bottom = stack.bottom();
  fiber.stack_size = stack.size();
  fiber.fake_stack = nullptr;
  // makecontext passes int arguments: the pointers travel as halves.
  auto const bits = reinterpret_cast<std::uintptr_t>(arg);
  auto const trampoline = reinterpret_cast<void (*)()>(+[](unsigned lo, unsigned hi, unsigned f_lo, unsigned f_hi) {
    auto const a = static_cast<std::uintptr_t>(lo) | (static_cast<std::uintptr_t>(hi) << 32U);
    auto const f = static_cast<std::uintptr_t>(f_lo) | (static_cast<std::uintptr_t>(f_hi) << 32U);
    reinterpret_cast<void (*)(void*)>(f)(reinterpret_cast<void*>(a));
    std::fprintf(stderr, "tapeflow emulator: a fiber returned from its entry\n");
    std::abort();
  });
  auto const fbits = reinterpret_cast<std::uintptr_t>(entry);
  makecontext(&fiber.uc, trampoline, 4, static_cast<unsigned>(bits & 0xFFFFFFFFU), static_cast<unsigned>(bits >> 32U),
              static_cast<unsigned>(fbits & 0xFFFFFFFFU), static_cast<unsigned>(fbits >> 32U));
}

namespace {
void raw_switch(context& from, context& to)
{
  if (swapcontext(&from.uc, &to.uc) != 0) {
    std::perror("tapeflow emulator: swapcontext");
    std::abort();
  }
}
}  // namespace

#endif

void switch_context(context& from, context& to, bool from_exits)
{
#if defined(TAPEFLOW_EMU_ASAN)
  __sanitizer_start_switch_fiber(from_exits ? nullptr : &from.fake_stack, to.stack_bottom, to.stack_size);
#else
  static_cast<void>(from_exits);
#endif
  raw_switch(from, to);
#if defined(TAPEFLOW_EMU_ASAN)
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

void enter_fiber(context& starter)
{
#if defined(TAPEFLOW_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &starter.stack_bottom, &starter.stack_size);
#else
  static_cast<void>(starter);
#endif
}

}  // namespace tapeflow::emu::detail
