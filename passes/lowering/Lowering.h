//===- Lowering.h - graph ops to kernel-level primitives ----------*- C++
//-*-===//
//
// The kernel level is linalg.generic/linalg.fill/tensor.empty with arith and
// math scalar bodies, on plain (encoding-free) static tensors. Each op family
// has one file that lowers its ops into those; codegen never sees graph ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_LOWERING_LOWERING_H
#define KILN_PASSES_LOWERING_LOWERING_H

#include "ir/KilnDialect.h"

namespace kiln::lowering {

using ScalarBody = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// A scalar constant of element type `type`.
mlir::Value scalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                   double value);

/// An all-parallel linalg.generic producing `type` from `inputs`, each
/// broadcast to it by numpy rules (trailing alignment, size-1 dims repeat).
mlir::Value buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType type,
                             mlir::ValueRange inputs, ScalarBody body);

/// `input` padded by `begin`/`end` elements per dim with `value` (a generic
/// that reads the input through clamped indices); `input` itself when all
/// pads are zero.
mlir::Value padTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input,
                      llvm::ArrayRef<int64_t> begin,
                      llvm::ArrayRef<int64_t> end, double value);

/// A tensor of `type` filled with `value`.
mlir::Value filled(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::RankedTensorType type, double value);

/// The plain (encoding-free) type of `op`'s first result.
mlir::RankedTensorType plainResultType(mlir::Operation *op);

/// Elementwise family: unary/binary math, activations, splat constants.
bool isElementwiseFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerElementwise(mlir::OpBuilder &b,
                                              mlir::Operation *op,
                                              mlir::ValueRange operands);

/// Contraction family: matmul, gemm.
bool isContractionFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerContraction(mlir::OpBuilder &b,
                                              mlir::Operation *op,
                                              mlir::ValueRange operands);

/// Window family: conv, max_pool.
bool isWindowFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value>
lowerWindow(mlir::OpBuilder &b, mlir::Operation *op, mlir::ValueRange operands);

/// Reduction family: reduce (sum, mean, max, min).
bool isReductionFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerReduction(mlir::OpBuilder &b,
                                            mlir::Operation *op,
                                            mlir::ValueRange operands);

/// Movement family: transpose, gather.
bool isMovementFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerMovement(mlir::OpBuilder &b,
                                           mlir::Operation *op,
                                           mlir::ValueRange operands);

} // namespace kiln::lowering

#endif // KILN_PASSES_LOWERING_LOWERING_H
