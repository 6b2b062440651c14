//===- CudaFallback.h - stand-ins for library launches ----------*- C++ -*-===//
//
// A cuda kernel's GEMMs and convs run through cuBLAS and cuDNN. Each such
// launch also carries a generated kernel computing the same thing, which
// the runtime runs where the library does not load (a machine with the
// driver but without the toolkit's libraries, or KILN_CUBLAS=none /
// KILN_CUDNN=none). Both are written from the launch's description, so they
// cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDAFALLBACK_H
#define KILN_CODEGEN_CUDAFALLBACK_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace kiln {

/// The body of a grid-stride loop over `threads` threads (flat index `i`,
/// slots `s.p[...]`), a multiple of kCudaBlockSize where the body
/// synchronises its block.
struct CudaFallback {
  int64_t threads = 0;
  std::string text;
};

/// What a "gemm" launch description computes: 64x64 tiles of C per block,
/// 4x4 outputs per thread, K in steps of 16 through shared memory.
CudaFallback gemmFallback(const nlohmann::json &gemm);

/// What a "conv" launch description computes, its fused bias, residual and
/// ReLU included: one thread per output.
CudaFallback convFallback(const nlohmann::json &conv);

} // namespace kiln

#endif // KILN_CODEGEN_CUDAFALLBACK_H
