// SPDX-License-Identifier: Apache-2.0
// Enzyme's split-mode ABI, as its LLVM plugin accepts it, for translation units compiled through
// Enzyme (clang -> opt with LLVMEnzyme and tapeflow's cache pass; TAPEFLOW_WITH_ENZYME; see
// docs/enzyme.md and cmake/TapeflowEnzyme.cmake). Host and device.
//
//   y  = enzyme::augmented_forward<TapeBytes, double>(f, slot, cache, enzyme::active{x}, enzyme::constant{&p});
//   dx = enzyme::reverse<TapeBytes, double>(f, slot, enzyme::active{x}, enzyme::constant{&p}, enzyme::d_return{dy});
//
// expand to Enzyme's calls
//
//   __enzyme_augmentfwd(f, enzyme_allocated, TapeBytes, enzyme_tape, slot, enzyme_out, x, enzyme_const, &p)
//   __enzyme_reverse   (f, enzyme_allocated, TapeBytes, enzyme_tape, slot, enzyme_out, x, enzyme_const, &p, dy)
//
// TapeBytes is a compile-time constant, as Enzyme requires. Enzyme checks it against the size its
// tape needs (what __enzyme_augmentsize(f, <the same activities>) reports) when it generates the
// forward: a slot too small stops the build with "Enzyme: need X bytes have TapeBytes bytes". The
// activities are typed, so the forward and the reverse cannot disagree: active (by-value scalar, enzyme_out:
// the reverse returns its adjoint), constant (enzyme_const), duplicated (a pointer and its shadow,
// enzyme_dup: the reverse adds into the shadow). Pass aggregates by pointer: the C ABI splits small
// structs passed by value into several IR arguments, each of which Enzyme wants annotated.
#pragma once

#if !defined(TAPEFLOW_WITH_ENZYME)
#error "tapeflow/enzyme_abi.hpp is for translation units compiled through Enzyme (define TAPEFLOW_WITH_ENZYME; docs/enzyme.md)"
#endif

#include <tapeflow/config.hpp>
#include <tapeflow/enzyme_cache.hpp>

#include <cstddef>
#include <type_traits>

#if defined(__CUDA__) || defined(__CUDACC__)
#define TAPEFLOW_ENZYME_VAR __device__
#else
#define TAPEFLOW_ENZYME_VAR
#endif
// The activity expansion must be inlined before Enzyme runs: Enzyme reads the markers as loads of
// its globals at the call it replaces.
#define TAPEFLOW_ENZYME_INLINE __attribute__((always_inline))

// Enzyme's markers and entry points: its plugin recognises them by name and replaces the calls.
extern TAPEFLOW_ENZYME_VAR int enzyme_allocated;
extern TAPEFLOW_ENZYME_VAR int enzyme_tape;
extern TAPEFLOW_ENZYME_VAR int enzyme_out;
extern TAPEFLOW_ENZYME_VAR int enzyme_const;
extern TAPEFLOW_ENZYME_VAR int enzyme_dup;
template <class Return, class... Args>
TAPEFLOW_HOST_DEVICE Return __enzyme_augmentfwd(void*, Args...);
template <class Return, class... Args>
TAPEFLOW_HOST_DEVICE Return __enzyme_reverse(void*, Args...);
template <class Return, class... Args>
TAPEFLOW_HOST_DEVICE Return __enzyme_augmentsize(void*, Args...);

extern "C" {
#if !defined(__CUDA_ARCH__)
// Where tapeflow's pass sends Enzyme's cache allocations (enzyme_cache.hpp): defined in libtapeflow
// for the host (src/enzyme.cpp), and at the end of this header for the device.
void* tapeflow_enzyme_cache_alloc(std::size_t bytes);
void* tapeflow_enzyme_cache_realloc(void* p, std::size_t bytes);
void tapeflow_enzyme_cache_free(void* p);
#endif
}

namespace tapeflow::enzyme {

/// A by-value scalar Enzyme differentiates (enzyme_out); the reverse returns its adjoint.
template <class T>
struct active {
  T value;
};
/// An argument Enzyme treats as constant (enzyme_const).
template <class T>
struct constant {
  T value;
};
/// A pointer and its shadow (enzyme_dup): the reverse adds the adjoint of *value into *shadow.
template <class T>
struct duplicated {
  T value;
  T shadow;
};
/// The adjoint of the function's result, the last argument of a reverse.
template <class T>
struct d_return {
  T value;
};
template <class T>
active(T) -> active<T>;
template <class T>
constant(T) -> constant<T>;
template <class T>
duplicated(T, T) -> duplicated<T>;
template <class T>
d_return(T) -> d_return<T>;

namespace detail {

/// The activity markers alone, as __enzyme_augmentsize takes them:
///   std::size_t n = __enzyme_augmentsize<std::size_t>((void*)f, enzyme::detail::marker(args)...);
template <class T>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE int marker(active<T>) noexcept { return enzyme_out; }
template <class T>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE int marker(constant<T>) noexcept { return enzyme_const; }
template <class T>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE int marker(duplicated<T>) noexcept { return enzyme_dup; }

/// Calls f with each activity expanded to Enzyme's flat form (marker, value[, shadow]).
template <class F>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE decltype(auto) flatten(F&& f) { return f(); }
template <class F, class T, class... Rest>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE decltype(auto) flatten(F&& f, active<T> a, Rest... rest)
{
  return flatten([&](auto... tail) TAPEFLOW_ENZYME_INLINE { return f(enzyme_out, a.value, tail...); }, rest...);
}
template <class F, class T, class... Rest>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE decltype(auto) flatten(F&& f, constant<T> a, Rest... rest)
{
  return flatten([&](auto... tail) TAPEFLOW_ENZYME_INLINE { return f(enzyme_const, a.value, tail...); }, rest...);
}
template <class F, class T, class... Rest>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE decltype(auto) flatten(F&& f, duplicated<T> a, Rest... rest)
{
  return flatten([&](auto... tail) TAPEFLOW_ENZYME_INLINE { return f(enzyme_dup, a.value, a.shadow, tail...); },
                 rest...);
}
template <class F, class T>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE decltype(auto) flatten(F&& f, d_return<T> d)
{
  return f(d.value);
}

template <class T>
struct is_d_return : std::false_type {};
template <class T>
struct is_d_return<d_return<T>> : std::true_type {};

#if !defined(__CUDA_ARCH__)
/// The thread's cache cursor while an augmented forward runs (null otherwise): thread_local in
/// libtapeflow on the host; a shared-memory table on the device (end of this header).
cache_cursor*& current_cache() noexcept;
#else
__device__ inline cache_cursor*& current_cache() noexcept;
#endif

/// Sets the thread's cache cursor for one call and clears it after.
class cache_scope {
 public:
  TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE explicit cache_scope(cache_cursor& cursor) noexcept
  {
    current_cache() = &cursor;
  }
  TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE ~cache_scope() { current_cache() = nullptr; }
  cache_scope(cache_scope const&) = delete;
  cache_scope& operator=(cache_scope const&) = delete;
};

}  // namespace detail

/// Enzyme's augmented forward of `fn`: runs it, writes Enzyme's tape (at most TapeBytes bytes) into
/// `slot` and its loop caches into `cache`'s region; returns fn's result.
template <std::size_t TapeBytes, class Return, class Fn, class... Args>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE Return augmented_forward(Fn* fn, void* slot, cache_cursor& cache,
                                                                     Args... args)
{
  static_assert(TapeBytes > 0, "an Enzyme tape slot needs a positive size");
  static_assert(!(detail::is_d_return<Args>::value || ...), "d_return belongs to the reverse");
  detail::cache_scope const scope(cache);
  return detail::flatten(
    [&](auto... flat) TAPEFLOW_ENZYME_INLINE {
      return __enzyme_augmentfwd<Return>(reinterpret_cast<void*>(fn), enzyme_allocated, TapeBytes, enzyme_tape, slot,
                                         flat...);
    },
    args...);
}

/// Enzyme's reverse of `fn` from the tape in `slot` (written by augmented_forward with the same
/// TapeBytes and activities; `slot` may be a staged copy, the caches it points to stay in place).
/// Returns the adjoints of the active arguments (one: a scalar; several: a struct of them).
template <std::size_t TapeBytes, class Return, class Fn, class... Args>
TAPEFLOW_ENZYME_INLINE TAPEFLOW_HOST_DEVICE Return reverse(Fn* fn, void const* slot, Args... args)
{
  static_assert(TapeBytes > 0, "an Enzyme tape slot needs a positive size");
  return detail::flatten(
    [&](auto... flat) TAPEFLOW_ENZYME_INLINE {
      return __enzyme_reverse<Return>(reinterpret_cast<void*>(fn), enzyme_allocated, TapeBytes, enzyme_tape,
                                      const_cast<void*>(slot), flat...);
    },
    args...);
}

}  // namespace tapeflow::enzyme

#if defined(__CUDA_ARCH__)
// The device side of the cache hooks: each thread finds its cursor through a per-block table in
// shared memory (8 KiB, only in kernels that run an augmented forward), indexed by its thread
// index in the block. Shared memory starts undefined, so the table's null check (a hook called
// outside augmented_forward) holds only after the thread's first augmented_forward has left its
// entry null; tapeflow's pass calls the hooks only where Enzyme's augmented forward allocates,
// inside augmented_forward.
namespace tapeflow::enzyme::detail {
static __shared__ cache_cursor* cache_cursors[1024];
__device__ inline cache_cursor*& current_cache() noexcept
{
  unsigned const t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return cache_cursors[t];
}
__device__ inline cache_cursor& cursor_or_trap() noexcept
{
  cache_cursor* const c = current_cache();
  if (c == nullptr) { __builtin_trap(); }  // an Enzyme cache allocation outside augmented_forward
  return *c;
}
}  // namespace tapeflow::enzyme::detail

// Not inlined: one call per cache allocation (one per loop and thread, not per iteration), and the
// calls stay visible in the PTX, where tests/enzyme/check_ptx.cmake looks for them.
extern "C" {
__device__ __attribute__((used, noinline)) void* tapeflow_enzyme_cache_alloc(std::size_t bytes)
{
  return tapeflow::enzyme::detail::cursor_or_trap().allocate(bytes);
}
__device__ __attribute__((used, noinline)) void* tapeflow_enzyme_cache_realloc(void* p, std::size_t bytes)
{
  return tapeflow::enzyme::detail::cursor_or_trap().reallocate(p, bytes);
}
__device__ __attribute__((used, noinline)) void tapeflow_enzyme_cache_free(void*) {}  // regions are rewound, not freed
}
#endif
