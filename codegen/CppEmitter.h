//===- CppEmitter.h - kernel-level IR to readable C++ -------------*- C++
//-*-===//
//
// Emits one kiln.kernel (lowered to linalg/tensor/arith/math on static
// tensors) as one C++ function exporting
//   extern "C" void SYMBOL(void **buffers)   // inputs, then outputs
// The CPU backend compiles it with the system C++ compiler. The emitter
// knows only the kernel-level primitives, never graph ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPPEMITTER_H
#define KILN_CODEGEN_CPPEMITTER_H

#include "ir/KilnDialect.h"

#include <string>
#include <vector>

namespace kiln {

/// The C++ spelling of a scalar element type, or "" when unsupported.
std::string cppType(mlir::Type element);

/// What every translation unit of kernels starts with (includes, helpers).
std::string kernelPrelude();

/// The C++ of one kernel: `comment`, a line naming it and its nodes;
/// `code`, the function `symbol` (and its helpers, named after it); `dims`,
/// its dims function `symbol`_dims where it needs one, whose messages name
/// nodes as {node:K}, K an index into `dimsNodes` (the runtime puts the
/// names in, from the step's "dims_nodes").
struct KernelCpp {
  std::string comment, code, dims;
  std::vector<std::string> dimsNodes;
};
mlir::FailureOr<KernelCpp> emitKernelCppParts(KernelOp kernel,
                                              llvm::StringRef symbol);

/// What makes two kernels' code (or dims functions) the same function: the
/// text with `symbol` made neutral.
std::string kernelCodeKey(llvm::StringRef code, llvm::StringRef symbol);

/// The C++ functions for `kernel` (to follow kernelPrelude() in a
/// translation unit): both parts above; fails with a diagnostic at the op
/// that cannot be emitted.
mlir::FailureOr<std::string> emitKernelCpp(KernelOp kernel,
                                           llvm::StringRef symbol);

/// Whether `kernel` runs as C++ row by row, one loop over the rows of its
/// reductions over the last dim and the elementwise ops around them
/// (softmax, layer norm; codegen/CppRows.cpp).
bool runsRowByRow(KernelOp kernel);

/// The bytes of one image of the largest batched tensor (its leading dim
/// dynamic) `kernel` reads or makes, when every pass of it works on each
/// image (index of that dim) on its own, and one image's loops are still
/// big enough to share out among threads; else 0. A kernel of several
/// such passes runs them image by image (codegen/CppImages.cpp).
int64_t separableImageBytes(KernelOp kernel);

} // namespace kiln

#endif // KILN_CODEGEN_CPPEMITTER_H
