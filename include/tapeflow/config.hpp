// SPDX-License-Identifier: Apache-2.0
// tapeflow — compile-time configuration shared by host and device code.
#pragma once

#include <cstddef>

// Functions that run on both sides: the per-element derivative math, the tile layout and the
// tape views. Compiled as plain C++ when no device compiler is involved.
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__CUDA__)
#define TAPEFLOW_HOST_DEVICE __host__ __device__
#define TAPEFLOW_DEVICE __device__
#else
#define TAPEFLOW_HOST_DEVICE
#define TAPEFLOW_DEVICE
#endif

// TAPEFLOW_WARP_VOTES: the code runs on CUDA's 32-lane warps and may vote in them (__activemask,
// __ballot_sync). Set for CUDA device code; a build whose host code runs on a device's warps defines
// it for every file (the emulated device's, where a device function called from host code is a lone
// lane).
#if defined(__CUDA_ARCH__) && !defined(TAPEFLOW_WARP_VOTES)
#define TAPEFLOW_WARP_VOTES 1
#endif

// Loop unrolling hints for device compilers (nvcc, hipcc); nothing for a host compiler, which
// would warn about the unknown pragma (the emulated device compiles kernels as plain C++).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define TAPEFLOW_UNROLL _Pragma("unroll")
#define TAPEFLOW_UNROLL_BY(n) _Pragma(#n)
#else
#define TAPEFLOW_UNROLL
#define TAPEFLOW_UNROLL_BY(n)
#endif

// Two loop hints for host compilers (GCC, Clang), where a CPU's vector units depend on them; nothing
// in a device compiler's passes, which decide for themselves (and whose validated code stays as it
// was), nor in a CUDA or HIP source's host pass.
// TAPEFLOW_HOST_UNROLL: the loop that follows, a few iterations of per-cell math (LBM's nine
//   directions), is unrolled whole, so that the loop over cells around it is one straight body a
//   vectoriser can take: nested, GCC's own limits stop short of unrolling it.
// TAPEFLOW_HOST_INDEPENDENT: the iterations of the loop that follows touch disjoint memory, so the
//   compiler may run them in vector lanes without testing its pointers for overlap at run time,
//   which GCC gives up on past ten pairs (LBM's levels read 81 taps and write 9 fields: 729). GCC
//   only: Clang's nearest, vectorize(assume_safety), also demands the loop be vectorised and warns
//   where it cannot.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__CUDA__)
#if defined(__clang__)
#define TAPEFLOW_HOST_UNROLL _Pragma("unroll")
#define TAPEFLOW_HOST_INDEPENDENT
#else
#define TAPEFLOW_HOST_UNROLL _Pragma("GCC unroll 32")
#define TAPEFLOW_HOST_INDEPENDENT _Pragma("GCC ivdep")
#endif
#else
#define TAPEFLOW_HOST_UNROLL
#define TAPEFLOW_HOST_INDEPENDENT
#endif

// A host function kept out of line, for a path rarely taken inside code that host compilers inline
// whole (the CPU runner's flattened tile programs, tapeflow/stencil/cpu.hpp): a GPU compiler inlines
// it as usual.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define TAPEFLOW_HOST_NOINLINE __attribute__((noinline))
#else
#define TAPEFLOW_HOST_NOINLINE
#endif

// A host function compiled with every call inside it inlined, however deep (GCC and Clang): the CPU
// runner's tile programs (tapeflow/stencil/cpu.hpp), so that its level loops, its per-cell functions and the stencil's own math are one loop
// nest that the compiler optimises whole, rather than calls it weighs one by one against its growth
// limits. (Left to those limits, GCC kept the wave's per-cell functions out of line, 40 % of its
// samples, and a change elsewhere in the program moved which ones: docs/benchmarks.md.) Not under
// AddressSanitizer: a build that checks memory, not speed, where the flattened programs more than
// doubled the wave's compile time (39 -> 89 s); the code and its bits are the same either way. Nor
// where the build defines TAPEFLOW_NO_FLATTEN: the emulated device's (emulator/CMakeLists.txt), whose
// CPU loops are the emulated tests' references, run for their bits, not their speed.
#if defined(__SANITIZE_ADDRESS__)
#define TAPEFLOW_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAPEFLOW_SANITIZED_BUILD 1
#endif
#endif
#if (defined(__GNUC__) || defined(__clang__)) && !defined(TAPEFLOW_SANITIZED_BUILD) && !defined(TAPEFLOW_NO_FLATTEN)
#define TAPEFLOW_FLATTEN __attribute__((flatten))
#else
#define TAPEFLOW_FLATTEN
#endif

// A hint to bring the cache line at address p toward the host CPU's caches ahead of its use
// (GCC and Clang); nothing in a device pass, where the GPU's own pipelines stage the data.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define TAPEFLOW_HOST_PREFETCH(p) __builtin_prefetch(p)
#else
#define TAPEFLOW_HOST_PREFETCH(p) static_cast<void>(p)
#endif

// A host function compiled twice, for the x86-64 baseline and for AVX2, the copy chosen once, when
// the program loads, by the CPU it runs on (GCC's target_clones: an ifunc, so glibc on x86-64): the
// CPU's compute-bound loops, the stencil tile programs and the stencil workloads' one-step kernels,
// get 256-bit vectors wherever the CPU has them, from one portable binary. Neither copy uses FMA,
// so both compute the same bits (an FMA rounds once where a multiply and an add round twice). Empty
// elsewhere (Clang, other CPUs, device compilers' passes), under AddressSanitizer (one copy is
// enough to check memory), and where the build turns it off (TAPEFLOW_CPU_CLONES=OFF in CMake,
// which defines TAPEFLOW_NO_CPU_CLONES: for a build that targets its CPU with -march already; the
// emulated device's build defines it too).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
  !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(TAPEFLOW_SANITIZED_BUILD) &&        \
  !defined(TAPEFLOW_NO_CPU_CLONES)
#define TAPEFLOW_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#define TAPEFLOW_HAS_CPU_CLONES 1
#else
#define TAPEFLOW_CPU_CLONES
#endif

// A CPU hot loop: compiled as one function (TAPEFLOW_FLATTEN), in a baseline and an AVX2 copy
// (TAPEFLOW_CPU_CLONES). The CPU runner's tile programs and the stencil workloads' one-step loops.
#define TAPEFLOW_CPU_KERNEL TAPEFLOW_FLATTEN TAPEFLOW_CPU_CLONES

#define TAPEFLOW_VERSION_MAJOR 0
#define TAPEFLOW_VERSION_MINOR 1
#define TAPEFLOW_VERSION_PATCH 0

namespace tapeflow {

/// Every tape record is aligned to (and sized in multiples of) this many bytes, the unit of the
/// asynchronous copies (`cp.async` moves 16-byte chunks) and of coalesced record writes.
inline constexpr std::size_t record_alignment = 16;

}  // namespace tapeflow
