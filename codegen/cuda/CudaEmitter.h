//===- CudaEmitter.h - kernel-level IR to CUDA C++ ----------------*- C++
//-*-===//
//
// A kernel placed on a cuda device becomes one __global__ function per
// linalg op of its body ("phases", launched in order on one stream), all
// taking the kernel's slots by value:
//   struct SYMBOL_slots { void *p[K]; };  // inputs, outputs, then scratch
//   extern "C" __global__ void SYMBOL_p<i>(SYMBOL_slots s)
// Each phase is a grid-stride loop over its parallel iterations: one thread
// per output element, reduction loops inside it with the accumulator in a
// register. Local tensors of the kernel become scratch slots the runtime
// allocates per run. docs/devices.md describes the manifest side.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDAEMITTER_H
#define KILN_CODEGEN_CUDAEMITTER_H

#include "codegen/cuda/Nvrtc.h"
#include "ir/KilnDialect.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct CudaKernel {
  std::string source;
  /// Inputs + outputs + scratch.
  size_t slots = 0;
  /// Bytes of each scratch slot.
  std::vector<int64_t> scratch;
  /// In launch order: {"entry", "threads"} (an entry point over that many
  /// threads), {"gemm": {...}} (cuBLAS) or {"conv": {...}} (cuDNN;
  /// docs/devices.md), the last two with the "entry" and "threads" of their
  /// generated stand-in, if any.
  std::vector<nlohmann::json> launches;
  /// Whether the source needs cuda_fp16.h.
  bool usesHalf = false;
};

/// What a translation unit of CUDA kernels starts with.
std::string cudaPrelude(bool half);

/// The CUDA source of `kernel`; fails with a diagnostic at the op that
/// cannot be emitted. With `options.warpReductions`, a reduction with few
/// outputs and a long, associative fold gets a warp per output (shuffles
/// combine the lanes), or a block per output when it is longer still (the
/// warps' results meet in shared memory), instead of a thread. With
/// `gemmLibrary`, contractions cuBLAS can do become GEMM launches; with
/// `convLibrary`, direct 2-D convs cuDNN can do become conv launches, which
/// with `convFusion` also do a bias + ReLU (+ residual) after them
/// (matchConvEpilogue). With `libraryFallbacks`, each such launch also
/// names a generated entry computing the same (codegen/cuda/CudaFallback.h).
mlir::FailureOr<CudaKernel> emitKernelCuda(KernelOp kernel,
                                           llvm::StringRef symbol,
                                           const CudaOptions &options = {});

/// The threads per block every launch uses (the entries' launch bounds).
inline constexpr int kCudaBlockSize = 256;

} // namespace kiln

#endif // KILN_CODEGEN_CUDAEMITTER_H
