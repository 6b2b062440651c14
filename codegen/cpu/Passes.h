//===- Passes.h - the C++ kernel backend's transforms -----------*- C++ -*-===//
//
// Kernel-level passes for kernels that run as generated C++ (cpu and sim
// devices), declared in Passes.td; codegen/KernelPipeline.h runs them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPU_PASSES_H
#define KILN_CODEGEN_CPU_PASSES_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

#define GEN_PASS_DECL
#include "codegen/cpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/cpu/Passes.h.inc"

} // namespace kiln

#endif // KILN_CODEGEN_CPU_PASSES_H
