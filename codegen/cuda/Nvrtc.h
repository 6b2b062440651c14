//===- Nvrtc.h - CUDA C++ to PTX through NVRTC, loaded at run time -*- C++
//-*-===//
//
// libnvrtc comes from the CUDA toolkit and is dlopen'ed on first use, so
// kilnc builds and runs where no toolkit is installed; only compiling for a
// cuda device needs it. The toolkit is $KILN_CUDA_HOME, else /usr/local/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_NVRTC_H
#define KILN_CODEGEN_NVRTC_H

#include "llvm/Support/Error.h"

#include <string>

namespace kiln {

struct CudaOptions {
  /// The GPU generation the PTX targets ("sm_80"); it JIT-compiles forward
  /// to newer GPUs.
  std::string arch = "sm_80";
  /// Give a reduction with few outputs a warp per output (see
  /// emitKernelCuda).
  bool warpReductions = true;
  /// Run contractions through cuBLAS (GEMM launches).
  bool gemmLibrary = true;
  /// Run direct 2-D convs through cuDNN (conv launches).
  bool convLibrary = true;
  /// Let such a conv's cuDNN call add its bias (and a residual) and apply
  /// a ReLU after it (cudnnConvolutionBiasActivationForward).
  bool convFusion = true;
  /// Give each GEMM and conv launch a generated stand-in, which the runtime
  /// runs where cuBLAS or cuDNN does not load (codegen/cuda/CudaFallback.h).
  bool libraryFallbacks = true;
  /// Where to write the CUDA C++ NVRTC compiles, besides the artifact
  /// (none when empty).
  std::string saveSource;
  /// Where compiled PTX is cached (see codeCacheDirectory); "none": off.
  std::string cacheDir;
};

/// $KILN_CUDA_HOME, else /usr/local/cuda.
std::string cudaHome();

/// Compiles one translation unit to PTX. Errors carry NVRTC's log, or say
/// why NVRTC could not be loaded. `half`: the source includes cuda_fp16.h
/// (from the toolkit's include folder).
llvm::Expected<std::string> compilePtx(const std::string &source,
                                       const CudaOptions &options, bool half);

/// Whether `arch` is spelled sm_NN (NN >= 50).
bool isCudaArch(const std::string &arch);

} // namespace kiln

#endif // KILN_CODEGEN_NVRTC_H
