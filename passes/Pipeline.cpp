//===- Pipeline.cpp - the compile pipeline and pass registration ----------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildPlacementPipeline(OpPassManager &pm,
                                  const PipelineOptions &options) {
  KilnInferShapesOptions shapes;
  shapes.inputShapes = options.inputShapes;
  KilnPlacePinsOptions pins;
  pins.rules = options.pins;
  KilnPlaceFallbackOptions fallback;
  fallback.devices = options.devices;
  fallback.profiles = options.profiles;
  KilnInsertCopiesOptions copies;
  copies.outputDevice = options.outputDevice;
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createKilnInferShapes(shapes));
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
  fn.addPass(createKilnPlacePins(pins));
  if (options.placement == "auto") {
    KilnPlaceAutoOptions automatic;
    automatic.devices = options.devices;
    automatic.profiles = options.profiles;
    automatic.outputDevice = options.outputDevice;
    fn.addPass(createKilnPlaceAuto(automatic));
  }
  fn.addPass(createKilnPlaceFallback(fallback));
  fn.addPass(createKilnInsertCopies(copies));
  fn.addPass(createCanonicalizerPass());
}

void kiln::buildKernelPipeline(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createKilnFuseElementwise());
  fn.addPass(createKilnLowerKernels());
  fn.addPass(createCanonicalizerPass());
}

void kiln::buildCompilePipeline(OpPassManager &pm,
                                const PipelineOptions &options) {
  buildPlacementPipeline(pm, options);
  buildKernelPipeline(pm);
}

void kiln::registerAllPasses() {
  registerKilnPasses();
  PassPipelineRegistration<>(
      "kiln-compile", "the graph-to-kernel pipeline kilnc runs",
      [](OpPassManager &pm) { buildCompilePipeline(pm, {}); });
}
