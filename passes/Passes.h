//===- Passes.h - kiln passes and the compile pipeline ------------*- C++
//-*-===//

#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <optional>
#include <string>

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// How placement spreads a model over its devices (kilnc --placement),
/// parsed once from its text by parsePlacementStrategy.
struct PlacementStrategy {
  enum class Kind {
    /// The default device, plus pins and fallbacks.
    Single,
    /// Cost-based: each op where the device profiles say it runs cheapest.
    Auto,
    /// data:K, the batch split over the first K devices.
    Data,
    /// pipeline:K, the layers split into K stages.
    Pipeline
  };
  Kind kind = Kind::Single;
  /// K of data:K and pipeline:K; 0 for the others.
  unsigned parts = 0;

  /// The text parsePlacementStrategy reads back ("data:2").
  std::string str() const;
  bool operator==(const PlacementStrategy &other) const {
    return kind == other.kind && parts == other.parts;
  }
};

/// Parses "single", "auto", "data:K" or "pipeline:K" (K decimal digits; a
/// compile checks 1 <= K <= its devices); nullopt for anything else.
std::optional<PlacementStrategy> parsePlacementStrategy(llvm::StringRef text);

struct PipelineOptions {
  /// NAME=D0xD1... bindings for inputs with symbolic dims.
  std::vector<std::string> inputShapes;
  /// Devices placement may use; the first is the default.
  std::vector<std::string> devices;
  /// DEVICE=FILE.json device profile overrides.
  std::vector<std::string> profiles;
  /// NAME=D split dims for data parallelism.
  std::vector<std::string> splitDims;
  /// data:K and pipeline:K need @main_chunk_<size> functions (see
  /// kiln-place-data).
  PlacementStrategy placement;
  /// Micro-batches for pipeline:K.
  unsigned microbatches = 1;
  /// A pins file (JSON rules), or empty.
  std::string pins;
  /// Where function results are delivered (default: the first device).
  std::string outputDevice;
};

/// The graph-level pipeline, up to and including copy insertion: what
/// placement reports and pictures show.
void buildPlacementPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);
/// Elementwise fusion of the placed graph.
void buildFusionPipeline(mlir::OpPassManager &pm);
/// Kernel lowering of the fused graph (codegen/KernelPipeline.h runs the
/// kernel-level passes after it).
void buildLoweringPipeline(mlir::OpPassManager &pm);

/// Registers every pass of passes/.
void registerAllPasses();

} // namespace kiln

#endif // KILN_PASSES_PASSES_H
