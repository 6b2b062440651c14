//===- Pipeline.cpp - the compile pipeline and pass registration ----------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildCompilePipeline(OpPassManager &pm,
                                const PipelineOptions &options) {
  KilnInferShapesOptions shapes;
  shapes.inputShapes = options.inputShapes;
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createKilnInferShapes(shapes));
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
  fn.addPass(createKilnFuseElementwise());
  fn.addPass(createKilnLowerKernels());
  fn.addPass(createCanonicalizerPass());
}

void kiln::registerAllPasses() {
  registerKilnPasses();
  PassPipelineRegistration<>(
      "kiln-compile", "the graph-to-kernel pipeline kilnc runs",
      [](OpPassManager &pm) { buildCompilePipeline(pm, {}); });
}
