//===- Lowering.h - graph ops to kernel-level primitives ----------*- C++
//-*-===//
//
// The kernel level is linalg.generic/linalg.fill/tensor.empty with arith and
// math scalar bodies, on plain (encoding-free) tensors. Each op family has
// one file that lowers its ops into those; codegen never sees graph ops.
// A dynamic (`?`) dim gets its size at run time: every tensor.empty takes the
// size of each of its dynamic dims as an index value computed in the kernel
// from `tensor.dim` of the kernel's inputs (Dims.cpp says how per op), so the
// kernel's output shapes follow from its input shapes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_LOWERING_LOWERING_H
#define KILN_PASSES_LOWERING_LOWERING_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

namespace kiln::lowering {

using ScalarBody = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// The size of dim `i` of a tensor, as an index value.
using SizeFn = llvm::function_ref<mlir::Value(int64_t i)>;

/// Dim `i` of `tensor` as an index value (a constant when static).
mlir::Value dimOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value tensor,
                  int64_t i);

/// tensor.empty of `type`, dynamic dim i of size `size(i)`.
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type, SizeFn size = nullptr);

/// tensor.empty of `op`'s plain result type, sized from its lowered
/// `operands` by the op's shape rule (see resultDim).
mlir::Value emptyResult(mlir::OpBuilder &b, mlir::Operation *op,
                        mlir::ValueRange operands);

/// The size of dim `i` of `op`'s result, from its lowered `operands`, by the
/// op's ONNX shape rule; null when the rule for `op` does not cover a
/// dynamic dim there.
mlir::Value resultDim(mlir::OpBuilder &b, mlir::Operation *op,
                      mlir::ValueRange operands, int64_t i);

/// Dim `i` of a result of rank `outRank` broadcast from `operands` (numpy
/// rules, trailing alignment): a static size other than 1 there, else the
/// dynamic sizes combined as `a == 1 ? b : a` (0 against 1 is 0); null when
/// none is dynamic there.
mlir::Value broadcastDim(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::ValueRange operands, int64_t outRank, int64_t i);

/// Fails at `op` when it has a dynamic dim that its lowering cannot size or
/// index yet.
mlir::LogicalResult checkDynamicSupport(mlir::Operation *op);

/// Rebuilds each reduction generic in `body` that accumulates float16,
/// bfloat16 or float8 sums or products to accumulate in f32, its results
/// rounded once after it (Accumulate.cpp).
void accumulateInF32(mlir::Block &body);

/// The element count of an integer mean as a scalar of `element`: `count`
/// times `dynamicCount` (an index; may be null). Fails at `op` for an
/// unsigned type with a dynamic count.
mlir::FailureOr<mlir::Value> integerCount(mlir::OpBuilder &b,
                                          mlir::Operation *op,
                                          mlir::Type element, int64_t count,
                                          mlir::Value dynamicCount);

/// `sum / count` of an integer mean, truncated toward 0 (onnxruntime's).
mlir::Value integerMean(mlir::OpBuilder &b, mlir::Location loc, mlir::Value sum,
                        mlir::Value count);

/// A scalar constant of element type `type`.
mlir::Value scalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                   double value);

/// An all-parallel linalg.generic producing `type` from `inputs`, each
/// broadcast to it by numpy rules (trailing alignment, size-1 dims repeat;
/// a dynamic dim is taken to match, which the kernel checks at run time).
/// A dynamic result dim takes its size from an input dynamic there, else
/// from `size`.
mlir::Value buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType type,
                             mlir::ValueRange inputs, ScalarBody body,
                             SizeFn size = nullptr);

/// `input` padded by `begin`/`end` elements per dim with `value` (a generic
/// that reads the input through clamped indices); `input` itself when all
/// pads are zero.
mlir::Value padTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input,
                      llvm::ArrayRef<int64_t> begin,
                      llvm::ArrayRef<int64_t> end, double value);

/// A tensor of `type` filled with `value` (dynamic dims sized by `size`).
mlir::Value filled(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::RankedTensorType type, double value,
                   SizeFn size = nullptr);

/// `empty` (a tensor.empty) filled with `value`.
mlir::Value fill(mlir::OpBuilder &b, mlir::Location loc, mlir::Value empty,
                 double value);

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

/// `empty` filled with the identity of reduction `kind` (sum, mean, max,
/// min, prod) for its element type.
mlir::Value fillIdentity(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value empty, llvm::StringRef kind);
/// `acc` combined with `x` by reduction `kind`.
mlir::Value combine(mlir::OpBuilder &nb, mlir::Location l, llvm::StringRef kind,
                    mlir::Value acc, mlir::Value x);

/// Data-shape family: expand_to, constant_of_shape, reshape_to, reduce_by
/// (shapes or axes given as tensors, read at run time).
bool isDataShapeFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerDataShape(mlir::OpBuilder &b,
                                            mlir::Operation *op,
                                            mlir::ValueRange operands);

/// Resize family: resize (interpolation with computed weights).
bool isResizeFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value>
lowerResize(mlir::OpBuilder &b, mlir::Operation *op, mlir::ValueRange operands);
/// An ONNX index value (i32/i64, negative counts from the end) as an index
/// clamped into [0, size): reads stay in bounds whatever the data holds.
mlir::Value wrappedIndex(mlir::OpBuilder &b, mlir::Location l,
                         mlir::Value value, mlir::Value size);
/// A gather along an axis of `size` 0 has no index in range, and the
/// clamped read would leave the tensor: an error when `result` (the
/// gather's init) has elements. Checked at run time (a cf.assert, which the
/// kernel's dims function tests) unless the sizes are static; fails with an
/// op error when they are.
mlir::LogicalResult checkIndexedAxis(mlir::OpBuilder &b, mlir::Operation *op,
                                     mlir::Value size, mlir::Value result,
                                     int64_t axis);

/// Indexed family: scatter, gather_nd (index tuples read in the body).
bool isIndexedFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerIndexed(mlir::OpBuilder &b,
                                          mlir::Operation *op,
                                          mlir::ValueRange operands);

/// f64 and index arithmetic in a scalar body (coordinate maps, weights).
struct F64 {
  mlir::OpBuilder &b;
  mlir::Location l;
  mlir::Type f64() { return b.getF64Type(); }
  mlir::Value c(double v) {
    return b.create<mlir::arith::ConstantOp>(l, b.getF64FloatAttr(v));
  }
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::AddFOp>(l, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::SubFOp>(l, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::MulFOp>(l, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::DivFOp>(l, x, y);
  }
  mlir::Value floor(mlir::Value x) {
    return b.create<mlir::math::FloorOp>(l, x);
  }
  mlir::Value abs(mlir::Value x) { return b.create<mlir::math::AbsFOp>(l, x); }
  mlir::Value cmp(mlir::arith::CmpFPredicate p, mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::CmpFOp>(l, p, x, y);
  }
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::SelectOp>(l, cond, x, y);
  }
  mlir::Value min(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::MinimumFOp>(l, x, y);
  }
  mlir::Value max(mlir::Value x, mlir::Value y) {
    return b.create<mlir::arith::MaximumFOp>(l, x, y);
  }
  // An index value as f64, and back (truncating).
  mlir::Value fromIndex(mlir::Value i) {
    return b.create<mlir::arith::SIToFPOp>(
        l, f64(), b.create<mlir::arith::IndexCastOp>(l, b.getI64Type(), i));
  }
  mlir::Value toIndex(mlir::Value x) {
    return b.create<mlir::arith::IndexCastOp>(
        l, b.getIndexType(),
        b.create<mlir::arith::FPToSIOp>(l, b.getI64Type(), x));
  }
  // Element `i` of a 1-D float or integer tensor, as f64.
  mlir::Value element(mlir::Value t, int64_t i) {
    mlir::Value e = b.create<mlir::tensor::ExtractOp>(
        l, t, mlir::ValueRange{b.create<mlir::arith::ConstantIndexOp>(l, i)});
    if (mlir::isa<mlir::FloatType>(e.getType()))
      return e.getType().isF64() ? e
                                 : b.create<mlir::arith::ExtFOp>(l, f64(), e);
    return b.create<mlir::arith::SIToFPOp>(l, f64(), e);
  }
};

/// The indexing maps and iterators of a generic over a result of rank
/// `rank` with one reduction loop after it (the taps of an interpolation):
/// the loop sized by a 1-D window operand, then the result.
struct TapLoop {
  llvm::SmallVector<mlir::AffineMap> maps;
  llvm::SmallVector<mlir::utils::IteratorType> iterators;
};
TapLoop tapLoop(mlir::OpBuilder &b, int64_t rank);

/// Interpolation family: grid_sample (taps with computed weights).
bool isGridSampleFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerGridSample(mlir::OpBuilder &b,
                                             mlir::Operation *op,
                                             mlir::ValueRange operands);

/// Movement family: transpose, gather.
bool isMovementFamily(mlir::Operation *op);
mlir::FailureOr<mlir::Value> lowerMovement(mlir::OpBuilder &b,
                                           mlir::Operation *op,
                                           mlir::ValueRange operands);

} // namespace kiln::lowering

#endif // KILN_PASSES_LOWERING_LOWERING_H
