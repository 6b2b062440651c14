//===- Passes.h - kiln passes and the compile pipeline ------------*- C++
//-*-===//

#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

struct PipelineOptions {
  /// NAME=D0xD1... bindings for inputs with symbolic dims.
  std::vector<std::string> inputShapes;
  /// Devices placement may use; the first is the default.
  std::vector<std::string> devices;
  /// DEVICE=FILE.json device profile overrides.
  std::vector<std::string> profiles;
  /// NAME=D split dims for data parallelism.
  std::vector<std::string> splitDims;
  /// "single" (the default device, pins and fallbacks), "auto", "data:K" or
  /// "pipeline:K" (both need @main_chunk_<size> functions, see
  /// kiln-place-data).
  std::string placement = "single";
  /// Micro-batches for pipeline:K.
  unsigned microbatches = 1;
  /// A pins file (JSON rules), or empty.
  std::string pins;
  /// Where function results are delivered (default: the first device).
  std::string outputDevice;
};

/// The graph-to-kernel pipeline kilnc runs: shape inference, canonicalize and
/// CSE, device placement and copies, elementwise fusion, kernel lowering.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options);

/// The graph-level part of it, up to and including copy insertion: what
/// placement reports and pictures show.
void buildPlacementPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);
/// The rest: fusion and kernel lowering.
void buildKernelPipeline(mlir::OpPassManager &pm);

/// Registers every kiln pass and the `kiln-compile` pipeline.
void registerAllPasses();

} // namespace kiln

#endif // KILN_PASSES_PASSES_H
