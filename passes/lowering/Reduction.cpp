//===- Reduction.cpp - reduce to linalg.generic ---------------------------===//
//
// One generic over the input's dims in their own order, the reduced ones
// marked `reduction`, accumulating into an init filled with the identity
// (0, 1, -inf, +inf; for integers the type's extremes); mean divides by the
// element count afterwards (floats only).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include <limits>

using namespace mlir;
using namespace kiln;

bool lowering::isReductionFamily(Operation *op) { return isa<ReduceOp>(op); }

Value lowering::fillIdentity(OpBuilder &b, Location loc, Value empty,
                             StringRef kind) {
  Type element = cast<RankedTensorType>(empty.getType()).getElementType();
  if (!isa<FloatType>(element) && (kind == "max" || kind == "min")) {
    // The smallest or largest value of the integer type.
    // (bool: max is "any", from false; min is "all", from true).
    unsigned bits = element.getIntOrFloatBitWidth();
    bool isUnsigned = element.isUnsignedInteger();
    APInt extreme = bits == 1 ? APInt(1, kind == "min")
                    : kind == "max"
                        ? (isUnsigned ? APInt::getMinValue(bits)
                                      : APInt::getSignedMinValue(bits))
                        : (isUnsigned ? APInt::getMaxValue(bits)
                                      : APInt::getSignedMaxValue(bits));
    Value v =
        b.create<arith::ConstantOp>(loc, b.getIntegerAttr(element, extreme));
    return b.create<linalg::FillOp>(loc, v, empty).getResult(0);
  }
  double inf = std::numeric_limits<double>::infinity();
  double identity = kind == "max"    ? -inf
                    : kind == "min"  ? inf
                    : kind == "prod" ? 1.0
                                     : 0.0;
  return fill(b, loc, empty, identity);
}

Value lowering::combine(OpBuilder &nb, Location l, StringRef kind, Value acc,
                        Value x) {
  Type element = x.getType();
  bool floating = isa<FloatType>(element);
  unsigned bits = floating ? 0 : element.getIntOrFloatBitWidth();
  bool isUnsigned = element.isUnsignedInteger();
  if (bits == 1 && kind == "max")
    return nb.create<arith::OrIOp>(l, acc, x);
  if (bits == 1 && kind == "min")
    return nb.create<arith::AndIOp>(l, acc, x);
  if (kind == "max")
    return floating     ? nb.create<arith::MaximumFOp>(l, acc, x).getResult()
           : isUnsigned ? nb.create<arith::MaxUIOp>(l, acc, x).getResult()
                        : nb.create<arith::MaxSIOp>(l, acc, x).getResult();
  if (kind == "min")
    return floating     ? nb.create<arith::MinimumFOp>(l, acc, x).getResult()
           : isUnsigned ? nb.create<arith::MinUIOp>(l, acc, x).getResult()
                        : nb.create<arith::MinSIOp>(l, acc, x).getResult();
  if (kind == "prod")
    return floating ? nb.create<arith::MulFOp>(l, acc, x).getResult()
                    : nb.create<arith::MulIOp>(l, acc, x).getResult();
  return floating ? nb.create<arith::AddFOp>(l, acc, x).getResult()
                  : nb.create<arith::AddIOp>(l, acc, x).getResult();
}

FailureOr<Value> lowering::integerCount(OpBuilder &b, Operation *op,
                                        Type element, int64_t count,
                                        Value dynamicCount) {
  Location loc = op->getLoc();
  Value divisor = scalar(b, loc, element, count);
  if (!dynamicCount)
    return divisor;
  if (element.isUnsignedInteger())
    return op->emitOpError() << "mean of " << element
                             << " over a dynamic dim is not supported yet";
  return b
      .create<arith::MulIOp>(
          loc, divisor,
          b.create<arith::IndexCastOp>(loc, element, dynamicCount))
      .getResult();
}

Value lowering::integerMean(OpBuilder &b, Location loc, Value sum,
                            Value count) {
  // Truncating toward 0, as onnxruntime's integer ReduceMean does (-7 / 2
  // is -3); the sum wraps in the element type, as there.
  if (sum.getType().isUnsignedInteger())
    return b.create<arith::DivUIOp>(loc, sum, count);
  return b.create<arith::DivSIOp>(loc, sum, count);
}

FailureOr<Value> lowering::lowerReduction(OpBuilder &b, Operation *op,
                                          ValueRange operands) {
  auto reduce = cast<ReduceOp>(op);
  Location loc = op->getLoc();
  auto outType = plainResultType(op);
  auto inType = cast<RankedTensorType>(operands[0].getType());
  Type element = inType.getElementType();
  StringRef kind = reduce.getKind();
  bool floating = isa<FloatType>(element);
  // No axes (a rank-0 input): each element is its own sum, mean, max, min
  // and product. A copy, not a generic without loops whose fusion into its
  // consumer gives an op of several results.
  if (reduce.getAxes().empty())
    return buildElementwise(
        b, loc, outType, operands[0],
        [](OpBuilder &, Location, ValueRange a) -> Value { return a[0]; });
  // A mean of half-precision values sums and divides in f32 and rounds once
  // (a sum rounded first can overflow: 4,096 squares of 16 exceed float16's
  // 65,504); other half-precision sums are widened by accumulateInF32.
  // A mean of f32 values sums in f64, as onnxruntime's and PyTorch's norms
  // get their moments exactly for constant rows: the norms subtract the
  // mean, so an f32 sum's rounding (one ulp already for 3 equal values)
  // comes back multiplied by 1 / sqrt(epsilon).
  Type accType = element;
  if (kind == "mean" && (element.isF16() || isNarrowFloat(element)))
    accType = b.getF32Type();
  else if (kind == "mean" && element.isF32())
    accType = b.getF64Type();
  auto accTensor = RankedTensorType::get(outType.getShape(), accType);
  Value init = fillIdentity(
      b, loc,
      emptyTensor(b, loc, accTensor,
                  [&](int64_t i) { return resultDim(b, op, operands, i); }),
      kind);
  int64_t rank = inType.getRank();
  ArrayRef<int64_t> axes = reduce.getAxes();
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iterators;
  int64_t count = 1;
  Value dynamicCount; // the product of the reduced dynamic dims
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = llvm::is_contained(axes, i);
    iterators.push_back(reduced ? utils::IteratorType::reduction
                                : utils::IteratorType::parallel);
    if (reduced && inType.isDynamicDim(i)) {
      Value d = dimOf(b, loc, operands[0], i);
      dynamicCount = dynamicCount
                         ? Value(b.create<arith::MulIOp>(loc, dynamicCount, d))
                         : d;
    } else if (reduced) {
      count *= inType.getDimSize(i);
    }
    if (reduced) {
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
           loc, TypeRange{accTensor}, operands[0], ValueRange{init}, maps,
           iterators,
           [&](OpBuilder &nb, Location l, ValueRange a) {
             Value x = a[0];
             if (x.getType() != accType)
               x = nb.create<arith::ExtFOp>(l, accType, x);
             nb.create<linalg::YieldOp>(l, combine(nb, l, kind, a[1], x));
           })
          .getResult(0);
  if (kind != "mean")
    return result;
  if (!floating) {
    auto divisor = integerCount(b, op, element, count, dynamicCount);
    if (failed(divisor))
      return failure();
    return buildElementwise(b, loc, outType, result,
                            [&](OpBuilder &nb, Location l, ValueRange a) {
                              return integerMean(nb, l, a[0], *divisor);
                            });
  }
  Value divisor = scalar(b, loc, accType, count);
  if (dynamicCount) {
    Value n = b.create<arith::IndexCastOp>(loc, b.getI64Type(), dynamicCount);
    divisor = b.create<arith::MulFOp>(
        loc, divisor, b.create<arith::SIToFPOp>(loc, accType, n));
  }
  return buildElementwise(
      b, loc, outType, result,
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value mean = nb.create<arith::DivFOp>(l, a[0], divisor);
        if (accType == element)
          return mean;
        return nb.create<arith::TruncFOp>(l, element, mean);
      });
}
