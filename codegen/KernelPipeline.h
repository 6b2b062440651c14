//===- KernelPipeline.h - kernel-level passes before emission ---*- C++ -*-===//
//
// What runs between kiln-lower-kernels and the emitters: the C++ backend's
// transforms (codegen/cpu/Passes.td) and a canonicalizer that keeps the
// kernels' broadcasting dims as the emitters read them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELPIPELINE_H
#define KILN_CODEGEN_KERNELPIPELINE_H

#include "mlir/Pass/PassManager.h"

namespace kiln {

/// Adds the kernel-level passes to `pm` (a module pass manager).
void buildKernelPipeline(mlir::OpPassManager &pm);

/// Registers the passes of codegen/ (kiln-opt).
void registerCodegenPasses();

} // namespace kiln

#endif // KILN_CODEGEN_KERNELPIPELINE_H
