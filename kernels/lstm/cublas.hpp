// SPDX-License-Identifier: Apache-2.0
// A small owner of a cuBLAS handle and the two routines the LSTM calls (GEMM, GEMV) for f32 and
// f64, every status checked. CUDA only: there is no hipBLAS path.
//
// Precision: the handle runs in CUBLAS_DEFAULT_MATH, which computes f32 products in f32 (TF32
// tensor cores only ever run under CUBLAS_TF32_TENSOR_OP_MATH or a *_FAST_TF32 compute type, which
// tapeflow never asks for). The peers disable TF32 too, so every row compares full-fp32 gradients.
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#include <cublas_v2.h>

#include <cstdio>
#include <string>
#include <utility>

namespace tapeflow::workloads::lstm::detail {

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, char const* call, char const* file, int line)
{
  std::string const name = cublasGetStatusName(status);
  throw platform_error(tapeflow::detail::where(file, line) + "cuBLAS error " + name + " (" +
                         cublasGetStatusString(status) + ") in " + call,
                       name, static_cast<int>(status));
}

}  // namespace tapeflow::workloads::lstm::detail

/// Calls a cuBLAS function and throws tapeflow::platform_error (with the status's name, e.g.
/// "CUBLAS_STATUS_INVALID_VALUE", and file:line) when it fails.
#define TAPEFLOW_CUBLAS_TRY(call)                                                                        \
  do {                                                                                                   \
    cublasStatus_t const tapeflow_blas_status_ = (call);                                                 \
    if (tapeflow_blas_status_ != CUBLAS_STATUS_SUCCESS) {                                                \
      ::tapeflow::workloads::lstm::detail::throw_cublas_error(tapeflow_blas_status_, #call, __FILE__, __LINE__); \
    }                                                                                                    \
  } while (0)

namespace tapeflow::workloads::lstm::detail {

/// One cuBLAS handle (full-precision math, host scalars), bound to the stream of each call.
class cublas_handle {
 public:
  cublas_handle()
  {
    TAPEFLOW_CUBLAS_TRY(cublasCreate(&handle_));
    try {
      TAPEFLOW_CUBLAS_TRY(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
      TAPEFLOW_CUBLAS_TRY(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
    } catch (...) {
      release();
      throw;
    }
  }
  ~cublas_handle() { release(); }
  cublas_handle(cublas_handle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  cublas_handle& operator=(cublas_handle&& other) noexcept
  {
    if (this != &other) {
      release();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  cublas_handle(cublas_handle const&) = delete;
  cublas_handle& operator=(cublas_handle const&) = delete;

  /// The handle, with its work ordered on `stream`.
  [[nodiscard]] cublasHandle_t on(stream_view stream) const
  {
    TAPEFLOW_CUBLAS_TRY(cublasSetStream(handle_, to_native(stream)));
    return handle_;
  }

 private:
  void release() noexcept
  {
    if (handle_ == nullptr) { return; }
    cublasStatus_t const status = cublasDestroy(handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "tapeflow: cublasDestroy failed: %s\n", cublasGetStatusName(status));
    }
    handle_ = nullptr;
  }

  cublasHandle_t handle_{nullptr};
};

// C = alpha op(A) op(B) + beta C, column-major (cuBLAS's convention).
inline void gemm(cublas_handle const& h, stream_view s, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                 int k, float alpha, float const* a, int lda, float const* b, int ldb, float beta, float* c, int ldc)
{
  TAPEFLOW_CUBLAS_TRY(cublasSgemm(h.on(s), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));
}
inline void gemm(cublas_handle const& h, stream_view s, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                 int k, double alpha, double const* a, int lda, double const* b, int ldb, double beta, double* c,
                 int ldc)
{
  TAPEFLOW_CUBLAS_TRY(cublasDgemm(h.on(s), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));
}

// y = alpha op(A) x + beta y, column-major.
inline void gemv(cublas_handle const& h, stream_view s, cublasOperation_t ta, int m, int n, float alpha,
                 float const* a, int lda, float const* x, float beta, float* y)
{
  TAPEFLOW_CUBLAS_TRY(cublasSgemv(h.on(s), ta, m, n, &alpha, a, lda, x, 1, &beta, y, 1));
}
inline void gemv(cublas_handle const& h, stream_view s, cublasOperation_t ta, int m, int n, double alpha,
                 double const* a, int lda, double const* x, double beta, double* y)
{
  TAPEFLOW_CUBLAS_TRY(cublasDgemv(h.on(s), ta, m, n, &alpha, a, lda, x, 1, &beta, y, 1));
}

}  // namespace tapeflow::workloads::lstm::detail
