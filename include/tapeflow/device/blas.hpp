// SPDX-License-Identifier: Apache-2.0
// The dense linear algebra tapeflow's workloads call (GEMM and GEMV, f32 and f64, column-major as
// BLAS has it), behind one interface: cuBLAS on CUDA (and the emulated device's cuBLAS subset).
// There is no HIP implementation (no hipBLAS here): on HIP the header compiles to nothing and the
// LSTM's GPU path reports itself unavailable.
//
// Precision on CUDA: the handle runs in CUBLAS_DEFAULT_MATH, which computes f32 products in f32
// (TF32 tensor cores only ever run under CUBLAS_TF32_TENSOR_OP_MATH or a *_FAST_TF32 compute type,
// which tapeflow never asks for). The peers disable TF32 too, so every row compares full-fp32
// gradients.
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#if !defined(TAPEFLOW_PLATFORM_HIP)

#include <cublas_v2.h>

#include <cstdio>
#include <string>
#include <utility>

namespace tapeflow::device {

/// op(A): A itself or its transpose.
enum class blas_op { none, transpose };

namespace detail {
[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, char const* call, char const* file, int line)
{
  std::string const name = cublasGetStatusName(status);
  throw platform_error(tapeflow::detail::where(file, line) + "cuBLAS error " + name + " (" +
                         cublasGetStatusString(status) + ") in " + call,
                       name, static_cast<int>(status));
}
}  // namespace detail

/// Calls a cuBLAS function and throws tapeflow::platform_error (with the status's name, e.g.
/// "CUBLAS_STATUS_INVALID_VALUE", and file:line) when it fails.
#define TAPEFLOW_CUBLAS_TRY(call)                                                                           \
  do {                                                                                                      \
    cublasStatus_t const tapeflow_blas_status_ = (call);                                                    \
    if (tapeflow_blas_status_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      ::tapeflow::device::detail::throw_cublas_error(tapeflow_blas_status_, #call, __FILE__, __LINE__);     \
    }                                                                                                       \
  } while (0)

/// One cuBLAS handle (full-precision math, host scalars), bound to the stream of each call.
class blas_handle {
 public:
  blas_handle()
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
  ~blas_handle() { release(); }
  blas_handle(blas_handle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  blas_handle& operator=(blas_handle&& other) noexcept
  {
    if (this != &other) {
      release();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  blas_handle(blas_handle const&) = delete;
  blas_handle& operator=(blas_handle const&) = delete;

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

namespace detail {
inline cublasOperation_t to_cublas(blas_op op) noexcept { return op == blas_op::none ? CUBLAS_OP_N : CUBLAS_OP_T; }
}  // namespace detail

/// C = alpha op(A) op(B) + beta C, column-major.
inline void gemm(blas_handle const& h, stream_view s, blas_op ta, blas_op tb, int m, int n, int k, float alpha,
                 float const* a, int lda, float const* b, int ldb, float beta, float* c, int ldc)
{
  TAPEFLOW_CUBLAS_TRY(cublasSgemm(h.on(s), detail::to_cublas(ta), detail::to_cublas(tb), m, n, k, &alpha, a, lda, b,
                                  ldb, &beta, c, ldc));
}
inline void gemm(blas_handle const& h, stream_view s, blas_op ta, blas_op tb, int m, int n, int k, double alpha,
                 double const* a, int lda, double const* b, int ldb, double beta, double* c, int ldc)
{
  TAPEFLOW_CUBLAS_TRY(cublasDgemm(h.on(s), detail::to_cublas(ta), detail::to_cublas(tb), m, n, k, &alpha, a, lda, b,
                                  ldb, &beta, c, ldc));
}

/// y = alpha op(A) x + beta y, column-major.
inline void gemv(blas_handle const& h, stream_view s, blas_op ta, int m, int n, float alpha, float const* a, int lda,
                 float const* x, float beta, float* y)
{
  TAPEFLOW_CUBLAS_TRY(cublasSgemv(h.on(s), detail::to_cublas(ta), m, n, &alpha, a, lda, x, 1, &beta, y, 1));
}
inline void gemv(blas_handle const& h, stream_view s, blas_op ta, int m, int n, double alpha, double const* a,
                 int lda, double const* x, double beta, double* y)
{
  TAPEFLOW_CUBLAS_TRY(cublasDgemv(h.on(s), detail::to_cublas(ta), m, n, &alpha, a, lda, x, 1, &beta, y, 1));
}

}  // namespace tapeflow::device

#endif  // !TAPEFLOW_PLATFORM_HIP
