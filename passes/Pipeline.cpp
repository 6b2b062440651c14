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
  OpPassManager &graph = pm.nest<func::FuncOp>();
  graph.addPass(createKilnInferShapes(shapes));
  graph.addPass(createCanonicalizerPass());
  graph.addPass(createCSEPass());
  StringRef placement = options.placement;
  if (placement.consume_front("data:")) {
    unsigned k = 0;
    placement.getAsInteger(10, k);
    KilnPlaceDataOptions data; // holds ArrayRefs: keep what they view alive
    data.devices = ArrayRef<std::string>(options.devices)
                       .take_front(std::min<size_t>(k, options.devices.size()));
    data.splitDims = options.splitDims;
    data.outputDevice = options.outputDevice;
    pm.addPass(createKilnPlaceData(data));
  } else if (placement.consume_front("pipeline:")) {
    unsigned k = 0;
    placement.getAsInteger(10, k);
    KilnPlacePipelineOptions stages; // holds ArrayRefs, like data's
    stages.devices =
        ArrayRef<std::string>(options.devices)
            .take_front(std::min<size_t>(k, options.devices.size()));
    stages.profiles = options.profiles;
    stages.microbatches = options.microbatches;
    stages.splitDims = options.splitDims;
    stages.outputDevice = options.outputDevice;
    pm.addPass(createKilnPlacePipeline(stages));
  }
  OpPassManager &fn = pm.nest<func::FuncOp>();
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
