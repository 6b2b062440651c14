//===- Contraction.cpp - matmul and gemm to linalg.generic ----------------===//
//
// A contraction is one linalg.generic with a reduction dim whose body is
// `acc + a * b` (times alpha for gemm), accumulating into an init tensor:
// zeros from linalg.fill, or beta * C broadcast for gemm. The iteration order
// is [batch..., m, k, n]: with n innermost, both B and the output are read
// with unit stride, which the C++ backend's loops vectorize well.
// Transposes (gemm transA/transB) are just permuted indexing maps.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace kiln;

bool lowering::isContractionFamily(Operation *op) {
  return isa<MatMulOp, GemmOp>(op);
}

namespace {
Value contract(OpBuilder &b, Location loc, RankedTensorType outType, Value lhs,
               Value rhs, Value init, ArrayRef<AffineMap> maps,
               ArrayRef<utils::IteratorType> iterators, double alpha) {
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, ValueRange{lhs, rhs}, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value prod;
        if (isa<FloatType>(args[0].getType()))
          prod = nb.create<arith::MulFOp>(l, args[0], args[1]);
        else
          prod = nb.create<arith::MulIOp>(l, args[0], args[1]);
        if (alpha != 1.0)
          prod = nb.create<arith::MulFOp>(
              l, prod, lowering::scalar(nb, l, prod.getType(), alpha));
        Value sum;
        if (isa<FloatType>(prod.getType()))
          sum = nb.create<arith::AddFOp>(l, args[2], prod);
        else
          sum = nb.create<arith::AddIOp>(l, args[2], prod);
        nb.create<linalg::YieldOp>(l, sum);
      });
  return generic.getResult(0);
}

// The op's result, zero-filled.
Value zeros(OpBuilder &b, Operation *op, ValueRange operands) {
  return lowering::fill(b, op->getLoc(), lowering::emptyResult(b, op, operands),
                        0);
}

RankedTensorType plainResult(Operation *op) {
  return lowering::plainResultType(op);
}

Value lowerMatMul(OpBuilder &b, MatMulOp op, Value lhs, Value rhs) {
  Value init = zeros(b, op, ValueRange{lhs, rhs});
  auto outType = plainResult(op);
  auto aType = cast<RankedTensorType>(lhs.getType());
  auto bType = cast<RankedTensorType>(rhs.getType());
  bool vecA = aType.getRank() == 1, vecB = bType.getRank() == 1;
  int64_t batchRank = outType.getRank() - (vecA ? 0 : 1) - (vecB ? 0 : 1);
  // Dims: batch [0, batchRank), then m (unless vecA), k, n (unless vecB).
  int64_t dim = batchRank;
  int64_t m = vecA ? -1 : dim++;
  int64_t k = dim++;
  int64_t n = vecB ? -1 : dim++;
  int64_t numDims = dim;
  auto d = [&](int64_t i) { return b.getAffineDimExpr(i); };
  auto batchExprs = [&](RankedTensorType t, int64_t own) {
    SmallVector<AffineExpr> exprs;
    int64_t offset = batchRank - own;
    for (int64_t i = 0; i < own; ++i) {
      bool repeat = t.getDimSize(i) == 1 && outType.getDimSize(offset + i) != 1;
      exprs.push_back(repeat ? b.getAffineConstantExpr(0) : d(offset + i));
    }
    return exprs;
  };
  SmallVector<AffineExpr> aExprs =
      batchExprs(aType, std::max<int64_t>(aType.getRank() - 2, 0));
  if (!vecA)
    aExprs.push_back(d(m));
  aExprs.push_back(d(k));
  SmallVector<AffineExpr> bExprs =
      batchExprs(bType, std::max<int64_t>(bType.getRank() - 2, 0));
  bExprs.push_back(d(k));
  if (!vecB)
    bExprs.push_back(d(n));
  SmallVector<AffineExpr> outExprs;
  for (int64_t i = 0; i < batchRank; ++i)
    outExprs.push_back(d(i));
  if (!vecA)
    outExprs.push_back(d(m));
  if (!vecB)
    outExprs.push_back(d(n));
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps = {AffineMap::get(numDims, 0, aExprs, ctx),
                                 AffineMap::get(numDims, 0, bExprs, ctx),
                                 AffineMap::get(numDims, 0, outExprs, ctx)};
  SmallVector<utils::IteratorType> iterators(numDims,
                                             utils::IteratorType::parallel);
  iterators[k] = utils::IteratorType::reduction;
  return contract(b, op.getLoc(), outType, lhs, rhs, init, maps, iterators,
                  1.0);
}

Value lowerGemm(OpBuilder &b, GemmOp op, ValueRange operands) {
  Location loc = op.getLoc();
  auto outType = plainResult(op);
  Value init;
  double beta = op.getBeta().convertToDouble();
  if (operands.size() == 3 && beta != 0.0) {
    init = lowering::buildElementwise(
        b, loc, outType, operands[2],
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          if (beta == 1.0)
            return a[0];
          return nb.create<arith::MulFOp>(
              l, a[0], lowering::scalar(nb, l, a[0].getType(), beta));
        },
        [&](int64_t i) { return lowering::resultDim(b, op, operands, i); });
  } else {
    init = zeros(b, op, operands);
  }
  auto d = [&](int64_t i) { return b.getAffineDimExpr(i); };
  // Dims: m = 0, k = 1, n = 2.
  SmallVector<AffineExpr> aExprs = {d(0), d(1)}, bExprs = {d(1), d(2)};
  if (op.getTransA())
    std::swap(aExprs[0], aExprs[1]);
  if (op.getTransB())
    std::swap(bExprs[0], bExprs[1]);
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps = {AffineMap::get(3, 0, aExprs, ctx),
                                 AffineMap::get(3, 0, bExprs, ctx),
                                 AffineMap::get(3, 0, {d(0), d(2)}, ctx)};
  SmallVector<utils::IteratorType> iterators = {utils::IteratorType::parallel,
                                                utils::IteratorType::reduction,
                                                utils::IteratorType::parallel};
  return contract(b, loc, outType, operands[0], operands[1], init, maps,
                  iterators, op.getAlpha().convertToDouble());
}
} // namespace

FailureOr<Value> lowering::lowerContraction(OpBuilder &b, Operation *op,
                                            ValueRange operands) {
  if (auto matmul = dyn_cast<MatMulOp>(op))
    return lowerMatMul(b, matmul, operands[0], operands[1]);
  if (auto gemm = dyn_cast<GemmOp>(op))
    return lowerGemm(b, gemm, operands);
  return op->emitOpError() << "has no contraction lowering";
}
