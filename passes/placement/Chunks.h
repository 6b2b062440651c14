//===- Chunks.h - run a model as chunks of its batch, on many devices -*- C++
//-*-===//

#ifndef KILN_PASSES_PLACEMENT_CHUNKS_H
#define KILN_PASSES_PLACEMENT_CHUNKS_H

#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

namespace kiln {

/// How torch.chunk cuts `n` into `parts`: ceil(n / parts) each, the last
/// smaller (5 into 2: 3, 2; 5 into 4: 2, 2, 1, fewer chunks than parts).
std::vector<int64_t> chunkSizes(int64_t n, int64_t parts);
/// The split dim of each input of `main` (default 0; NAME=D entries; -1
/// replicates) and the batch they agree on. Diagnoses bad entries and
/// symbolic or disagreeing batches.
mlir::FailureOr<std::pair<llvm::SmallVector<int64_t>, int64_t>>
splitDimsOf(mlir::func::FuncOp main, llvm::ArrayRef<std::string> entries);

/// Device names parsed; diagnoses the first bad one at `loc`.
mlir::FailureOr<llvm::SmallVector<DeviceAttr>>
parseDevices(mlir::Location loc, llvm::ArrayRef<std::string> names);

/// Chooses the device of `op`, an op of `replica` (the model specialised for
/// chunk number `chunk`).
using PlaceInChunk = llvm::function_ref<DeviceAttr(
    size_t chunk, mlir::func::FuncOp replica, mlir::Operation *op)>;

/// Rewrites @main as: slices of every split input (dims[i] >= 0) into chunks
/// of `sizes` (all slices first), then per chunk a clone of
/// @main_chunk_<size> with each op's kiln.place chosen by `place`, then the
/// outputs concatenated along the first split dim with kiln.place = `output`.
/// Equal constants are shared; the chunk functions are erased.
mlir::LogicalResult rewriteAsChunks(mlir::ModuleOp module,
                                    mlir::func::FuncOp main,
                                    llvm::ArrayRef<int64_t> dims, int64_t batch,
                                    llvm::ArrayRef<int64_t> sizes,
                                    PlaceInChunk place, DeviceAttr output);

} // namespace kiln

#endif // KILN_PASSES_PLACEMENT_CHUNKS_H
