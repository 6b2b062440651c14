//===- Reduction.cpp - reduce to linalg.generic ---------------------------===//
//
// One generic over the input's dims in their own order, the reduced ones
// marked `reduction`, accumulating into an init filled with the identity
// (0, -inf, +inf); mean divides by the element count afterwards.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include <limits>

using namespace mlir;
using namespace kiln;

bool lowering::isReductionFamily(Operation *op) { return isa<ReduceOp>(op); }

FailureOr<Value> lowering::lowerReduction(OpBuilder &b, Operation *op,
                                          ValueRange operands) {
  auto reduce = cast<ReduceOp>(op);
  Location loc = op->getLoc();
  auto outType = plainResultType(op);
  auto inType = cast<RankedTensorType>(operands[0].getType());
  Type element = inType.getElementType();
  if (!isa<FloatType>(element))
    return op->emitOpError()
           << "needs a floating-point element type, got " << element;
  StringRef kind = reduce.getKind();
  double inf = std::numeric_limits<double>::infinity();
  double identity = kind == "max"    ? -inf
                    : kind == "min"  ? inf
                    : kind == "prod" ? 1.0
                                     : 0.0;
  int64_t rank = inType.getRank();
  ArrayRef<int64_t> axes = reduce.getAxes();
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iterators;
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = llvm::is_contained(axes, i);
    iterators.push_back(reduced ? utils::IteratorType::reduction
                                : utils::IteratorType::parallel);
    if (reduced) {
      count *= inType.getDimSize(i);
      if (reduce.getKeepdims())
        outExprs.push_back(b.getAffineConstantExpr(0));
    } else {
      outExprs.push_back(b.getAffineDimExpr(i));
    }
  }
  SmallVector<AffineMap> maps = {
      b.getMultiDimIdentityMap(rank),
      AffineMap::get(rank, 0, outExprs, b.getContext())};
  Value result =
      b.create<linalg::GenericOp>(
           loc, TypeRange{outType}, operands[0],
           ValueRange{filled(b, loc, outType, identity)}, maps, iterators,
           [&](OpBuilder &nb, Location l, ValueRange a) {
             Value v;
             if (kind == "max")
               v = nb.create<arith::MaximumFOp>(l, a[1], a[0]);
             else if (kind == "min")
               v = nb.create<arith::MinimumFOp>(l, a[1], a[0]);
             else if (kind == "prod")
               v = nb.create<arith::MulFOp>(l, a[1], a[0]);
             else
               v = nb.create<arith::AddFOp>(l, a[1], a[0]);
             nb.create<linalg::YieldOp>(l, v);
           })
          .getResult(0);
  if (kind != "mean")
    return result;
  return buildElementwise(
      b, loc, outType, result,
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return nb.create<arith::DivFOp>(l, a[0], scalar(nb, l, element, count));
      });
}
