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

namespace kiln {

/// The C++ spelling of a scalar element type, or "" when unsupported.
std::string cppType(mlir::Type element);

/// What every translation unit of kernels starts with (includes, helpers).
std::string kernelPrelude();

/// The C++ function for `kernel` (to follow kernelPrelude() in a
/// translation unit); fails with a diagnostic at the op that cannot be
/// emitted.
mlir::FailureOr<std::string> emitKernelCpp(KernelOp kernel,
                                           llvm::StringRef symbol);

} // namespace kiln

#endif // KILN_CODEGEN_CPPEMITTER_H
