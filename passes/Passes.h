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
  /// "single" (the default device, pins and fallbacks), "auto" or "data:K"
  /// (needs @main_chunk_<size> functions, see kiln-place-data).
  std::string placement = "single";
  /// A pins file (JSON rules), or empty.
  std::string pins;
  /// Where function results are delivered (default: the first device).
  std::string outputDevice;
};

/// The graph-to-kernel pipeline kilnc runs: shape inference, canonicalize and
/// CSE, device placement and copies, elementwise fusion, kernel lowering.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options);

/// How torch.chunk cuts `n` into `parts`: ceil(n / parts) each, the last
/// smaller (5 into 2: 3, 2; 5 into 4: 2, 2, 1, fewer chunks than parts).
std::vector<int64_t> chunkSizes(int64_t n, int64_t parts);
/// The split dim of each input of `main` (default 0; NAME=D entries; -1
/// replicates) and the batch they agree on. Diagnoses bad entries and
/// symbolic or disagreeing batches.
mlir::FailureOr<std::pair<llvm::SmallVector<int64_t>, int64_t>>
splitDimsOf(mlir::func::FuncOp main, llvm::ArrayRef<std::string> entries);

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
