//===- Pipeline.cpp - the compile pipeline and pass registration ----------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

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
  using Kind = PlacementStrategy::Kind;
  // data:K and pipeline:K use the first K devices.
  auto firstK = [&] {
    return ArrayRef<std::string>(options.devices)
        .take_front(
            std::min<size_t>(options.placement.parts, options.devices.size()));
  };
  if (options.placement.kind == Kind::Data) {
    KilnPlaceDataOptions data; // holds ArrayRefs: keep what they view alive
    data.devices = firstK();
    data.splitDims = options.splitDims;
    data.outputDevice = options.outputDevice;
    pm.addPass(createKilnPlaceData(data));
  } else if (options.placement.kind == Kind::Pipeline) {
    KilnPlacePipelineOptions stages; // holds ArrayRefs, like data's
    stages.devices = firstK();
    stages.profiles = options.profiles;
    stages.microbatches = options.microbatches;
    stages.splitDims = options.splitDims;
    stages.outputDevice = options.outputDevice;
    pm.addPass(createKilnPlacePipeline(stages));
  }
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createKilnPlacePins(pins));
  if (options.placement.kind == Kind::Auto) {
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

void kiln::buildFusionPipeline(OpPassManager &pm) {
  pm.nest<func::FuncOp>().addPass(createKilnFuseElementwise());
}

void kiln::buildLoweringPipeline(OpPassManager &pm) {
  pm.nest<func::FuncOp>().addPass(createKilnLowerKernels());
}

std::string kiln::PlacementStrategy::str() const {
  switch (kind) {
  case Kind::Single:
    return "single";
  case Kind::Auto:
    return "auto";
  case Kind::Data:
    return "data:" + std::to_string(parts);
  case Kind::Pipeline:
    return "pipeline:" + std::to_string(parts);
  }
  llvm_unreachable("unknown placement strategy");
}

std::optional<kiln::PlacementStrategy>
kiln::parsePlacementStrategy(StringRef text) {
  using Kind = PlacementStrategy::Kind;
  if (text == "single")
    return PlacementStrategy{Kind::Single, 0};
  if (text == "auto")
    return PlacementStrategy{Kind::Auto, 0};
  PlacementStrategy strategy;
  if (text.consume_front("data:"))
    strategy.kind = Kind::Data;
  else if (text.consume_front("pipeline:"))
    strategy.kind = Kind::Pipeline;
  else
    return std::nullopt;
  // Digits only: getAsInteger alone would take "0x2" and "+2".
  if (text.empty() || text.size() > 9 || !llvm::all_of(text, llvm::isDigit) ||
      text.getAsInteger(10, strategy.parts))
    return std::nullopt;
  return strategy;
}

void kiln::registerAllPasses() { registerKilnPasses(); }
