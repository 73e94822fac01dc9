// SPDX-License-Identifier: Apache-2.0
// The emulated device's subset of cuBLAS that tapeflow's BLAS wrappers use
// (<tapeflow/device/blas.hpp>), under cuBLAS's names (emulator/src/cublas.cpp): a handle bound to a
// stream, GEMM and GEMV in f32 and f64, column-major, scalars read from host memory at the call.
// Each product is a host loop queued on the handle's stream like a kernel; C (or y) is not read
// when beta is 0. Arguments are checked as cuBLAS checks them.
#pragma once

#include <tapeflow/emulated/runtime.hpp>

enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
};
enum cublasOperation_t : int {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
};
enum cublasMath_t : int {
  CUBLAS_DEFAULT_MATH = 0,
};
enum cublasPointerMode_t : int {
  CUBLAS_POINTER_MODE_HOST = 0,
};

struct cublasContext;
using cublasHandle_t = cublasContext*;

[[nodiscard]] char const* cublasGetStatusName(cublasStatus_t status) noexcept;
[[nodiscard]] char const* cublasGetStatusString(cublasStatus_t status) noexcept;

cublasStatus_t cublasCreate(cublasHandle_t* handle) noexcept;
cublasStatus_t cublasDestroy(cublasHandle_t handle) noexcept;
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) noexcept;
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) noexcept;
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) noexcept;

/// C = alpha op(A) op(B) + beta C, with C m x n and the inner dimension k.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, float const* alpha, float const* A, int lda, float const* B, int ldb,
                           float const* beta, float* C, int ldc) noexcept;
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, double const* alpha, double const* A, int lda, double const* B, int ldb,
                           double const* beta, double* C, int ldc) noexcept;

/// y = alpha op(A) x + beta y, with A m x n.
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, float const* alpha,
                           float const* A, int lda, float const* x, int incx, float const* beta, float* y,
                           int incy) noexcept;
cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, double const* alpha,
                           double const* A, int lda, double const* x, int incx, double const* beta, double* y,
                           int incy) noexcept;
