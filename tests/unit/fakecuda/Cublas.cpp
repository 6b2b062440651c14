//===- Cublas.cpp - the fake cuBLAS ---------------------------------------===//
//
// A fake cuBLAS in the same library ($KILN_CUBLAS points here too): handles
// belong to the context current at creation, GEMMs run on the handle's
// stream in column-major order, and every matrix must lie in a live
// allocation of that context's device.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <string>

namespace fake {
namespace {
enum { BlasNotInitialized = 1, BlasInvalidValue = 7, BlasExecutionFailed = 13 };
struct BlasHandle {
  Ctx *ctx;
  Stream *stream;
};
std::set<BlasHandle *> blasHandles;
long gemms = 0;

/// Column-major C = alpha op(A) op(B) + beta C for each batch (cuBLAS's
/// definition), after checking the handle, its stream and every extent.
template <typename T>
int fakeGemm(BlasHandle *h, int opA, int opB, int m, int n, int k,
             const T *alpha, const T *A, int lda, long long sA, const T *B,
             int ldb, long long sB, const T *beta, T *C, int ldc, long long sC,
             int batch) {
  LOCK;
  if (!blasHandles.count(h) || !h->stream || current != h->ctx)
    return BlasNotInitialized;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || (opA != 0 && opA != 1) ||
      (opB != 0 && opB != 1) || lda < (opA ? k : m) || ldb < (opB ? n : k) ||
      ldc < m)
    return BlasInvalidValue;
  if (!m || !n || !batch)
    return 0;
  auto fits = [&](const void *p, long long stride, long long last) {
    size_t bytes = size_t((batch - 1) * stride + last + 1) * sizeof(T);
    return deviceOf(uintptr_t(p), bytes) == h->ctx->device;
  };
  long long lastA = opA ? (k - 1) + (long long)(m - 1) * lda
                        : (m - 1) + (long long)(k - 1) * lda;
  long long lastB = opB ? (n - 1) + (long long)(k - 1) * ldb
                        : (k - 1) + (long long)(n - 1) * ldb;
  if ((k && (!fits(A, sA, lastA) || !fits(B, sB, lastB))) ||
      !fits(C, sC, (m - 1) + (long long)(n - 1) * ldc))
    return BlasExecutionFailed;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T sum = 0;
        for (int l = 0; l < k; ++l)
          sum += (opA ? A[b * sA + l + i * lda] : A[b * sA + i + l * lda]) *
                 (opB ? B[b * sB + j + l * ldb] : B[b * sB + l + j * ldb]);
        T &c = C[b * sC + i + (long long)j * ldc];
        c = *alpha * sum + (*beta == 0 ? T(0) : *beta * c);
      }
  ++gemms;
  return 0;
}
} // namespace

long blasCount(const std::string &what) {
  if (what == "blas")
    return long(blasHandles.size());
  if (what == "gemms")
    return gemms;
  return -1;
}
} // namespace fake

using namespace fake;

extern "C" {

int cublasCreate_v2(BlasHandle **h) {
  LOCK;
  if (!initialized || !current || current->retained <= 0)
    return BlasNotInitialized;
  *h = new BlasHandle{current, nullptr};
  blasHandles.insert(*h);
  return 0;
}

int cublasDestroy_v2(BlasHandle *h) {
  LOCK;
  if (!blasHandles.erase(h))
    return BlasNotInitialized;
  delete h;
  return 0;
}

int cublasSetStream_v2(BlasHandle *h, Stream *s) {
  LOCK;
  if (!blasHandles.count(h) || !streams.count(s) || s->ctx != h->ctx)
    return BlasInvalidValue;
  h->stream = s;
  return 0;
}

const char *cublasGetStatusString(int status) {
  switch (status) {
  case 0:
    return "CUBLAS_STATUS_SUCCESS";
  case BlasNotInitialized:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case BlasInvalidValue:
    return "CUBLAS_STATUS_INVALID_VALUE";
  default:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
}

int cublasSgemmStridedBatched(BlasHandle *h, int opA, int opB, int m, int n,
                              int k, const float *alpha, const float *A,
                              int lda, long long sA, const float *B, int ldb,
                              long long sB, const float *beta, float *C,
                              int ldc, long long sC, int batch) {
  return fakeGemm(h, opA, opB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C,
                  ldc, sC, batch);
}

int cublasDgemmStridedBatched(BlasHandle *h, int opA, int opB, int m, int n,
                              int k, const double *alpha, const double *A,
                              int lda, long long sA, const double *B, int ldb,
                              long long sB, const double *beta, double *C,
                              int ldc, long long sC, int batch) {
  return fakeGemm(h, opA, opB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C,
                  ldc, sC, batch);
}
} // extern "C"
