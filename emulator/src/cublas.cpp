// SPDX-License-Identifier: Apache-2.0
// The emulated device's cuBLAS subset (tapeflow/emulated/cublas.hpp): products as host loops
// queued on the handle's stream.
#include <tapeflow/emulated/cublas.hpp>

#include <algorithm>
#include <cstddef>
#include <new>

struct cublasContext {
  cudaStream_t stream{nullptr};  ///< where the handle's products are ordered
};

namespace {

bool valid(cublasOperation_t op) noexcept { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; }

/// op(A)(row, col) of the column-major A.
template <class T>
T matrix_at(T const* a, int lda, cublasOperation_t op, int row, int col) noexcept
{
  return op == CUBLAS_OP_N ? a[row + static_cast<std::size_t>(col) * lda] : a[col + static_cast<std::size_t>(row) * lda];
}

/// Element i of a vector of `count` elements `inc` apart (from its far end when inc < 0, as BLAS
/// has it).
template <class T>
T& vector_at(T* v, int count, int inc, int i) noexcept
{
  return v[inc > 0 ? static_cast<std::ptrdiff_t>(i) * inc : static_cast<std::ptrdiff_t>(count - 1 - i) * -inc];
}

template <class T>
cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    T const* alpha, T const* a, int lda, T const* b, int ldb, T const* beta, T* c, int ldc)
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  if (!valid(ta) || !valid(tb) || m < 0 || n < 0 || k < 0 || lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m) || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  T const al = *alpha;
  T const be = *beta;
  tapeflow::emu::enqueue_host(handle->stream, [=] {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        T acc = 0;
        for (int p = 0; p < k; ++p) { acc += matrix_at(a, lda, ta, i, p) * matrix_at(b, ldb, tb, p, j); }
        T& out = c[i + static_cast<std::size_t>(j) * ldc];
        out = be == T(0) ? al * acc : al * acc + be * out;
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t gemv(cublasHandle_t handle, cublasOperation_t ta, int m, int n, T const* alpha, T const* a, int lda,
                    T const* x, int incx, T const* beta, T* y, int incy)
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  if (!valid(ta) || m < 0 || n < 0 || lda < std::max(1, m) || incx == 0 || incy == 0 || alpha == nullptr ||
      beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  T const al = *alpha;
  T const be = *beta;
  tapeflow::emu::enqueue_host(handle->stream, [=] {
    int const rows = ta == CUBLAS_OP_N ? m : n;
    int const inner = ta == CUBLAS_OP_N ? n : m;
    for (int i = 0; i < rows; ++i) {
      T acc = 0;
      for (int p = 0; p < inner; ++p) { acc += matrix_at(a, lda, ta, i, p) * vector_at(x, inner, incx, p); }
      T& out = vector_at(y, rows, incy, i);
      out = be == T(0) ? al * acc : al * acc + be * out;
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

char const* cublasGetStatusName(cublasStatus_t status) noexcept
{
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

char const* cublasGetStatusString(cublasStatus_t status) noexcept
{
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  }
  return "unknown error";
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) noexcept
{
  if (handle == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
  *handle = new (std::nothrow) cublasContext{};
  return *handle == nullptr ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) noexcept
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) noexcept
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) noexcept
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  return mode == CUBLAS_DEFAULT_MATH ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) noexcept
{
  if (handle == nullptr) { return CUBLAS_STATUS_NOT_INITIALIZED; }
  return mode == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, float const* alpha, float const* A, int lda, float const* B, int ldb,
                           float const* beta, float* C, int ldc) noexcept
{
  return gemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, double const* alpha, double const* A, int lda, double const* B, int ldb,
                           double const* beta, double* C, int ldc) noexcept
{
  return gemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, float const* alpha,
                           float const* A, int lda, float const* x, int incx, float const* beta, float* y,
                           int incy) noexcept
{
  return gemv(handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}

cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, double const* alpha,
                           double const* A, int lda, double const* x, int incx, double const* beta, double* y,
                           int incy) noexcept
{
  return gemv(handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
