//===- Dims.cpp - sizes of dynamic dims at the kernel level ---------------===//
//
// A graph op's result dim that is `?` gets its size at run time from the
// dims of the op's (lowered) operands, by the op's ONNX shape rule:
// broadcasting for elementwise ops (a dynamic dim that is 1 at run time
// broadcasts, see CEmitter::index), m/n/batch
// for contractions, the batch, channel and window-count dims for windows, the
// kept dims for reductions, the permuted dim for transposes, the data and index
// dims for gathers, the sum along a concat's axis. Each size is an index value
// built from `tensor.dim` and arith in the kernel, before the op's loops; a
// tensor.empty takes it, and the emitters read it back from there.
//
// checkDynamicSupport() names the ops whose lowering cannot handle dynamic
// dims yet: those must be bound at compile time (kilnc --input-shape).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

Value lowering::dimOf(OpBuilder &b, Location loc, Value tensor, int64_t i) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(i))
    return b.create<arith::ConstantIndexOp>(loc, type.getDimSize(i));
  return b.create<tensor::DimOp>(loc, tensor, i);
}

Value lowering::emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                            SizeFn size) {
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      sizes.push_back(size(i));
  return b.create<tensor::EmptyOp>(loc, type, sizes);
}

Value lowering::emptyResult(OpBuilder &b, Operation *op, ValueRange operands) {
  return emptyTensor(b, op->getLoc(), plainResultType(op),
                     [&](int64_t i) { return resultDim(b, op, operands, i); });
}

// Numpy's broadcast of the sizes of one dim over `operands` (each aligned
// to `at(type)`, negative where it has no such dim): a static size other
// than 1 is the result (every other is 1 or equal); else the dynamic sizes
// combine as `a == 1 ? b : a`, so that 0 against 1 is 0, which the larger
// of the two is not. Null when no operand is dynamic there.
static Value broadcastSize(OpBuilder &b, Location loc, ValueRange operands,
                           function_ref<int64_t(RankedTensorType)> at) {
  int64_t fixed = 1;
  SmallVector<std::pair<Value, int64_t>> dynamic; // operand, its dim
  for (Value v : operands) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t i = at(type);
    if (i < 0)
      continue;
    if (type.isDynamicDim(i))
      dynamic.emplace_back(v, i);
    else if (type.getDimSize(i) != 1)
      fixed = type.getDimSize(i);
  }
  if (dynamic.empty())
    return Value();
  if (fixed != 1)
    return b.create<arith::ConstantIndexOp>(loc, fixed);
  Value size, one;
  for (auto [v, i] : dynamic) {
    Value dim = b.create<tensor::DimOp>(loc, v, i);
    if (!size) {
      size = dim;
      continue;
    }
    if (!one)
      one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value isOne =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, size, one);
    size = b.create<arith::SelectOp>(loc, isOne, dim, size);
  }
  return size;
}

Value lowering::broadcastDim(OpBuilder &b, Location loc, ValueRange operands,
                             int64_t outRank, int64_t i) {
  return broadcastSize(b, loc, operands, [&](RankedTensorType type) {
    return i - (outRank - type.getRank());
  });
}

namespace {
int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}
} // namespace

Value lowering::resultDim(OpBuilder &b, Operation *op, ValueRange operands,
                          int64_t i) {
  Location loc = op->getLoc();
  int64_t outRank = plainResultType(op).getRank();
  auto dim = [&](Value v, int64_t at) { return dimOf(b, loc, v, at); };
  if (isElementwise(op))
    return broadcastDim(b, loc, operands, outRank, i);
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](MatMulOp) -> Value {
        Value lhs = operands[0], rhs = operands[1];
        bool vecA = rankOf(lhs) == 1, vecB = rankOf(rhs) == 1;
        int64_t batchRank = outRank - (vecA ? 0 : 1) - (vecB ? 0 : 1);
        if (i < batchRank) {
          // The batch dims of both, aligned to the result's batch dims,
          // broadcast.
          return broadcastSize(
              b, loc, {lhs, rhs}, [&](RankedTensorType type) -> int64_t {
                int64_t own = std::max<int64_t>(type.getRank() - 2, 0);
                return i - (batchRank - own);
              });
        }
        if (i == batchRank && !vecA)
          return dim(lhs, rankOf(lhs) - 2);
        return dim(rhs, rankOf(rhs) - 1);
      })
      .Case([&](GemmOp g) -> Value {
        if (i == 0)
          return dim(operands[0], g.getTransA() ? 1 : 0);
        return dim(operands[1], g.getTransB() ? 0 : 1);
      })
      .Case<ConvOp, MaxPoolOp, AvgPoolOp>([&](Operation *) -> Value {
        bool conv = isa<ConvOp>(op);
        if (i < 2) // the batch; the channels (a conv's: the weight's)
          return conv && i == 1 ? dim(operands[1], 0) : dim(operands[0], i);
        // ONNX's window count: span = in + pads - (k - 1) * d - 1, then
        // floor(span / s) + 1 (ceil_mode: rounded up, less a last window
        // that would start in the end padding; a lone window may then
        // overhang the padded input); 0 when no window fits.
        // A conv's kernel size is its weight's.
        auto attr = [&](StringRef name) {
          return cast<DenseI64ArrayAttr>(op->getAttr(name)).asArrayRef();
        };
        ArrayRef<int64_t> strides = attr("strides"), pads = attr("pads"),
                          dilations = attr("dilations");
        bool ceil =
            !conv && cast<BoolAttr>(op->getAttr("ceil_mode")).getValue();
        int64_t r = strides.size(), s = i - 2;
        auto c = [&](int64_t v) {
          return b.create<arith::ConstantIndexOp>(loc, v).getResult();
        };
        Value in = dim(operands[0], i);
        Value kernel = conv ? dim(operands[1], i) : c(attr("kernel_shape")[s]);
        // extent = (k - 1) * d + 1
        Value extent = b.create<arith::AddIOp>(
            loc,
            b.create<arith::MulIOp>(loc,
                                    b.create<arith::SubIOp>(loc, kernel, c(1)),
                                    c(dilations[s])),
            c(1));
        Value span = b.create<arith::SubIOp>(
            loc, b.create<arith::AddIOp>(loc, in, c(pads[s] + pads[r + s])),
            extent);
        Value rounded =
            ceil ? b.create<arith::AddIOp>(loc, span, c(strides[s] - 1))
                       .getResult()
                 : span;
        Value out = b.create<arith::AddIOp>(
            loc, b.create<arith::FloorDivSIOp>(loc, rounded, c(strides[s])),
            c(1));
        if (ceil) {
          Value lastStart = b.create<arith::MulIOp>(
              loc, b.create<arith::SubIOp>(loc, out, c(1)), c(strides[s]));
          Value inPadding = b.create<arith::CmpIOp>(
              loc, arith::CmpIPredicate::sge, lastStart,
              b.create<arith::AddIOp>(loc, in, c(pads[s])));
          out = b.create<arith::SelectOp>(
              loc, inPadding, b.create<arith::SubIOp>(loc, out, c(1)), out);
        }
        return b.create<arith::MaxSIOp>(loc, out, c(0)).getResult();
      })
      .Case([&](ReduceOp r) -> Value {
        int64_t at = 0;
        for (int64_t d = 0; d < rankOf(operands[0]); ++d) {
          bool reduced = llvm::is_contained(r.getAxes(), d);
          if (reduced && !r.getKeepdims())
            continue;
          if (at++ == i)
            return reduced ? nullptr : dim(operands[0], d); // kept: size 1
        }
        return nullptr;
      })
      .Case([&](TransposeOp t) { return dim(operands[0], t.getPerm()[i]); })
      .Case([&](SliceOp s) -> Value {
        // A dynamic size is an untouched dim (start 0, step 1).
        if (s.getStarts()[i] == 0 && s.getSteps()[i] == 1)
          return dim(operands[0], i);
        return nullptr;
      })
      .Case([&](GatherOp g) -> Value {
        int64_t axis = g.getAxis(), idxRank = rankOf(operands[1]);
        if (i < axis)
          return dim(operands[0], i);
        if (i < axis + idxRank)
          return dim(operands[1], i - axis);
        return dim(operands[0], i - idxRank + 1);
      })
      .Case([&](GatherElementsOp) { return dim(operands[1], i); })
      .Case([&](ScatterOp) { return dim(operands[0], i); })
      .Case([&](GridSampleOp) {
        return i < 2 ? dim(operands[0], i) : dim(operands[1], i - 1);
      })
      .Case([&](GatherNDOp g) -> Value {
        int64_t tuples = rankOf(operands[1]) - 1;
        if (i < tuples)
          return dim(operands[1], i);
        return dim(operands[0],
                   g.getBatchDims() + g.getTupleLength() + i - tuples);
      })
      .Case([&](ConcatOp c) -> Value {
        if (i != static_cast<int64_t>(c.getAxis()))
          return broadcastDim(b, loc, operands, outRank, i);
        Value sum;
        for (Value v : operands) {
          Value d = dim(v, i);
          sum = sum ? b.create<arith::AddIOp>(loc, sum, d).getResult() : d;
        }
        return sum;
      })
      .Default([](Operation *) { return nullptr; });
}

LogicalResult lowering::checkDynamicSupport(Operation *op) {
  if (!hasDynamicShape(op))
    return success();
  std::string unsupported =
      llvm::TypeSwitch<Operation *, std::string>(op)
          .Case<MatMulOp, GemmOp, ReduceOp, TransposeOp, SliceOp, ShapeOp>(
              [](Operation *) { return ""; })
          .Case<ConvOp, MaxPoolOp, AvgPoolOp>(
              [&](Operation *) -> std::string { return ""; })
          .Case<GatherOp, GatherElementsOp, ResizeOp, ScatterOp, GatherNDOp,
                GridSampleOp>([](Operation *) -> std::string { return ""; })
          .Case([&](ConcatOp) -> std::string { return ""; })
          .Default([&](Operation *) -> std::string {
            return isElementwiseFamily(op) || isDataShapeFamily(op)
                       ? ""
                       : "a dynamic shape";
          });
  if (unsupported.empty())
    return success();
  return op->emitOpError() << "has " << unsupported
                           << ", which its lowering cannot handle yet; bind "
                              "the symbolic input dims at compile "
                              "time (kilnc --input-shape NAME=D0xD1...)";
}
