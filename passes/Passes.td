//===- Passes.td - kiln passes -------------------------------*- tablegen -*-===//

#ifndef KILN_PASSES
#define KILN_PASSES

include "mlir/Pass/PassBase.td"

def KilnInferShapes : Pass<"kiln-infer-shapes", "mlir::func::FuncOp"> {
  let summary = "refine result types from operand types, optionally binding input shapes";
  let description = [{
    Walks the function in order and replaces each compute op's result type
    with the one inferred from its operands where that is more precise
    (dynamic `?` dims become static), then updates the function signature.
    `input-shapes=name=64x784` first binds arguments (by their `kiln.name`)
    to concrete shapes, which is how a model with a symbolic batch size is
    specialized for ahead-of-time code generation.
  }];
  let options = [
    ListOption<"inputShapes", "input-shapes", "std::string",
               "NAME=D0xD1x... bindings for function arguments">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "group compute ops into kiln.kernel regions, fusing elementwise chains";
  let description = [{
    Every compute op ends up in exactly one kiln.kernel. Producer->consumer
    chains of elementwise ops share one kernel when the kernel can sit at the
    position of its last member without breaking dominance; other compute ops
    (matmul, gemm) get a kernel each. Splat constants used by an elementwise
    group are cloned into it instead of being passed in as inputs.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnLowerKernels : Pass<"kiln-lower-kernels", "mlir::func::FuncOp"> {
  let summary = "lower kernel bodies to linalg.generic on plain tensors and fuse them";
  let description = [{
    Rewrites the graph ops inside each kiln.kernel into the kernel-level
    primitives codegen understands (linalg.generic/fill, tensor.empty,
    arith/math scalars), one lowering per op family, then fuses the
    elementwise generics of a kernel into one loop nest.
  }];
  let dependentDialects = ["kiln::KilnDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect"];
}

#endif // KILN_PASSES
