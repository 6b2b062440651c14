//===- CudaBlas.cpp - GEMM launches through a dlopen'ed cuBLAS ------------===//
//
// kiln's matrices are row-major, cuBLAS's column-major: a row-major M×N
// matrix is a column-major N×M one with the same bytes. So C = A·B becomes
// Cᵀ = Bᵀ·Aᵀ in cuBLAS's terms: gemm(opB, opA, n, m, k, B, A, C), each
// leading dimension the row length of the row-major matrix as stored.
// cuBLAS works on the current (primary) context, the one kiln retained;
// each Context creates its handle on first use and points it at the run's
// stream under a mutex, since concurrent runs use streams of their own.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"
#include "runtime/CudaLibrary.h"

#include "kiln/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

namespace kiln::cuda {

namespace {
constexpr int kOpN = 0, kOpT = 1;
} // namespace

void *openToolkitLibrary(const std::string &override,
                         const std::vector<std::string> &names,
                         std::string &path) {
  std::vector<std::string> candidates;
  if (!override.empty()) {
    candidates = {override};
  } else {
    const char *home = std::getenv("KILN_CUDA_HOME");
    std::string lib =
        std::string(home && *home ? home : "/usr/local/cuda") + "/lib64/";
    for (const std::string &name : names)
      candidates.push_back(lib + name);
    candidates.insert(candidates.end(), names.begin(), names.end());
  }
  path.clear();
  for (const std::string &candidate : candidates) {
    if (void *library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = candidate;
      return library;
    }
    path += (path.empty() ? "" : ", ") + candidate;
  }
  return nullptr;
}

bool libraryLoads(Library library) {
  bool blas = library == Library::Blas;
  try {
    if (blas)
      loadBlas();
    else
      loadDnn();
    return true;
  } catch (const Error &e) {
    const char *env = std::getenv(blas ? "KILN_CUBLAS" : "KILN_CUDNN");
    if (!env || std::string(env) != "none")
      std::fprintf(stderr,
                   "kiln: %s; its %s run as generated CUDA kernels instead "
                   "(slower)\n",
                   e.what(), blas ? "GEMMs" : "convolutions");
    return false;
  }
}

std::string Blas::describe(int status) const {
  const char *text = statusString ? statusString(status) : nullptr;
  return text ? std::string(text) : "cuBLAS status " + std::to_string(status);
}

const Blas &loadBlas() {
  return loadLibraryOnce<Blas>(
      "KILN_CUBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
      "cuBLAS", "GEMM launches", "set KILN_CUBLAS or KILN_CUDA_HOME",
      [](Blas &b, Symbols &sym) {
        sym(b.create, "cublasCreate_v2");
        sym(b.destroy, "cublasDestroy_v2");
        sym(b.setStream, "cublasSetStream_v2");
        sym(b.sgemm, "cublasSgemmStridedBatched");
        sym(b.dgemm, "cublasDgemmStridedBatched");
        sym(b.statusString, "cublasGetStatusString", /*required=*/false);
      });
}

void Context::gemm(const plan::CudaKernel::Gemm &g,
                   const std::vector<CUdeviceptr> &slots, CUstream stream,
                   const std::string &what) {
  if (!g.batch || !g.m || !g.n)
    return;
  std::lock_guard<std::mutex> lock(blasMutex_);
  if (!blasLibrary_)
    blasLibrary_ = &loadBlas();
  const Blas &blas = *blasLibrary_;
  makeCurrent();
  auto check = [&](int status, const char *call) {
    if (status != 0)
      throw Error(name_ + ": " + what + ": " + call +
                  " failed: " + blas.describe(status));
  };
  if (!blas_)
    check(blas.create(&blas_), "cublasCreate");
  check(blas.setStream(blas_, stream), "cublasSetStream");
  int m = int(g.m), n = int(g.n), k = int(g.k);
  int opA = g.transA ? kOpT : kOpN, opB = g.transB ? kOpT : kOpN;
  int lda = g.transA ? m : k, ldb = g.transB ? k : n;
  if (g.f64) {
    double one = 1, beta = g.beta;
    check(blas.dgemm(blas_, opB, opA, n, m, k, &one,
                     reinterpret_cast<const double *>(slots[g.b]), ldb,
                     (long long)g.strideB,
                     reinterpret_cast<const double *>(slots[g.a]), lda,
                     (long long)g.strideA, &beta,
                     reinterpret_cast<double *>(slots[g.c]), n,
                     (long long)g.strideC, int(g.batch)),
          "cublasDgemmStridedBatched");
  } else {
    float one = 1, beta = float(g.beta);
    check(blas.sgemm(blas_, opB, opA, n, m, k, &one,
                     reinterpret_cast<const float *>(slots[g.b]), ldb,
                     (long long)g.strideB,
                     reinterpret_cast<const float *>(slots[g.a]), lda,
                     (long long)g.strideA, &beta,
                     reinterpret_cast<float *>(slots[g.c]), n,
                     (long long)g.strideC, int(g.batch)),
          "cublasSgemmStridedBatched");
  }
}

} // namespace kiln::cuda
