//===- Passes.td - the C++ kernel backend's transforms ----*- tablegen -*-===//
//
// Kernel-level transforms for kernels that run as generated C++ (cpu and
// sim devices), after kiln-lower-kernels: they serve the C++ emitter's
// kernels and nothing else, so they live with it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPU_PASSES
#define KILN_CODEGEN_CPU_PASSES

include "mlir/Pass/PassBase.td"

def KilnChainImages : Pass<"kiln-chain-images", "mlir::func::FuncOp"> {
  let summary = "merge CPU kernels that run image by image into chains";
  let description = [{
    After kernel lowering: a cpu (or sim) kernel whose results only one
    other kernel uses merges into it when both work on each image (index of
    the leading dynamic dim) on their own (kiln::separableImageBytes) and
    neither runs row by row (kiln::runsRowByRow). The merged kernel runs
    both bodies image by image once the batch outgrows the cache, so an
    image's intermediates stay in cache between them.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPackWeights : Pass<"kiln-pack-weights", "mlir::func::FuncOp"> {
  let summary = "give CPU GEMMs with a constant B and a small M a packed copy of B";
  let description = [{
    After kernel lowering: for each linalg.generic in a cpu (or sim) kernel
    that is an f32 GEMM (codegen/Gemm.h) reading a constant B [K, N] (K and
    N at least 64; M dynamic or at most kiln::kPackedRows, codegen/cpu/
    Tuning.h), adds a constant holding B as
    [ceil(N/16)][K][16] panels, zero-padded, as one more kernel input, and
    names it in the generic's kiln.packed_b attribute (the input's number).
    The C++ kernel streams the panels for small M at run time and keeps
    oneDNN on B for larger M.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

#endif // KILN_CODEGEN_CPU_PASSES
