//===- KernelPipeline.cpp - kernel-level passes before emission -----------===//

#include "codegen/KernelPipeline.h"

#include "codegen/cpu/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildKernelPipeline(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createKilnChainImages());
  // Without two linalg patterns that rely on every operand a loop dim
  // indexes having that dim's size: InferStaticShapeOfOperands casts a `?`
  // operand to the static size of another one, and EraseIdentityLinalgOp
  // replaces a copy from a `?` operand by that operand (cast to the result's
  // type). In a kernel a `?` dim that is 1 at run time broadcasts instead
  // (CEmitter::index): the cast would make the loops read past its end, and
  // the erased copy would lose the broadcast (Expand of a [?, 17] to
  // [7, 17]).
  fn.addPass(createCanonicalizerPass(
      GreedyRewriteConfig(),
      {"(anonymous namespace)::InferStaticShapeOfOperands",
       "(anonymous namespace)::EraseIdentityLinalgOp<mlir::linalg::"
       "GenericOp>"}));
  // After the canonicalizer: the packed input is named by an attribute, not
  // read by any op of the kernel body.
  fn.addPass(createKilnPackWeights());
}

void kiln::registerCodegenPasses() { registerKilnCpuPasses(); }
