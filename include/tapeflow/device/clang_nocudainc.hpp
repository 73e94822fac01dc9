// SPDX-License-Identifier: Apache-2.0
// The little of CUDA that device code compiled by clang with -nocudainc needs: the Enzyme route for
// device code (cmake/TapeflowEnzyme.cmake: clang-15 -x cuda -nocudainc, then Enzyme's LLVM 15
// plugin; clang-15 cannot parse CUDA 12/13's headers). CUDA's keywords as clang's attributes, the
// built-in index variables, the libdevice math tapeflow's workloads call (Enzyme differentiates
// __nv_* by name; libdevice is linked after Enzyme) and the atomics enzyme_cache.hpp uses.
#pragma once

#if !defined(__CUDA__) || defined(__CUDACC__)
#error "clang_nocudainc.hpp is for clang -x cuda -nocudainc only"
#endif

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))

#include <__clang_cuda_builtin_vars.h>  // threadIdx, blockIdx, blockDim, gridDim

extern "C" {
__device__ double __nv_sin(double);
__device__ double __nv_cos(double);
__device__ double __nv_exp(double);
__device__ double __nv_log(double);
__device__ double __nv_sqrt(double);
__device__ double __nv_tanh(double);
}

#if defined(__CUDA_ARCH__)
__device__ inline double sin(double x) { return __nv_sin(x); }
__device__ inline double cos(double x) { return __nv_cos(x); }
__device__ inline double exp(double x) { return __nv_exp(x); }
__device__ inline double log(double x) { return __nv_log(x); }
__device__ inline double sqrt(double x) { return __nv_sqrt(x); }
__device__ inline double tanh(double x) { return __nv_tanh(x); }

__device__ inline unsigned long long atomicAdd(unsigned long long* word, unsigned long long value)
{
  return static_cast<unsigned long long>(
    __nvvm_atom_add_gen_ll(reinterpret_cast<long long*>(word), static_cast<long long>(value)));
}
__device__ inline unsigned long long atomicMax(unsigned long long* word, unsigned long long value)
{
  return __nvvm_atom_max_gen_ull(word, value);
}
#endif
