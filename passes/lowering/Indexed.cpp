//===- Indexed.cpp - scatter and gather_nd --------------------------------===//
//
// Both read index tuples inside the loop body with tensor.extract; every
// read goes through clamped indices, so it stays in bounds whatever the
// indices hold.
//
// Scatter is a reduction over the updates, one generic whose init is the
// data: output element q visits each update u that could land on it, in
// index order, and takes acc = match ? combine(acc, update) : acc (with
// reduction none, combine is "take the update", so the last one wins, as in
// the ONNX reference). For mode elements the candidates of q are the
// updates along the axis at q's other coordinates (one reduction dim of
// updates.shape[axis]); for mode nd they are all index tuples (one
// reduction dim per index dim). The cost is output size times candidates,
// fine for the small scatters of exported models (KV cache writes, masks),
// quadratic for a scatter of a whole tensor.
//
// GatherND is an all-parallel generic over the result reading data at
// (batch coordinates, the K indices of the tuple, the trailing coordinates).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace kiln;

bool lowering::isIndexedFamily(Operation *op) {
  return isa<ScatterOp, GatherNDOp>(op);
}

namespace {
using Iter = utils::IteratorType;

Value constIndex(OpBuilder &b, Location l, int64_t v) {
  return b.create<arith::ConstantIndexOp>(l, v);
}

// An index read from an ONNX indices tensor, negative counting from the
// end of a dim of `size`; no clamping (a scatter compares it).
Value normalized(OpBuilder &b, Location l, Value value, Value size) {
  Value i = b.create<arith::IndexCastOp>(l, b.getIndexType(), value);
  Value negative = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, i,
                                           constIndex(b, l, 0));
  return b.create<arith::SelectOp>(l, negative,
                                   b.create<arith::AddIOp>(l, i, size), i);
}

// min(i, size - 1), at least 0.
Value clampTo(OpBuilder &b, Location l, Value i, Value size) {
  Value last = b.create<arith::SubIOp>(l, size, constIndex(b, l, 1));
  return b.create<arith::MaxSIOp>(l, constIndex(b, l, 0),
                                  b.create<arith::MinSIOp>(l, i, last));
}

Value scatter(OpBuilder &b, ScatterOp op, Value data, Value indices,
              Value updates) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank();
  auto idxType = cast<RankedTensorType>(indices.getType());
  bool elements = op.getMode() == "elements";
  int64_t axis = op.getAxis();
  // Sizes read before the loop.
  SmallVector<Value> dataDims, idxDims, updDims;
  for (int64_t i = 0; i < rank; ++i)
    dataDims.push_back(lowering::dimOf(b, loc, data, i));
  for (int64_t i = 0; i < idxType.getRank(); ++i)
    idxDims.push_back(lowering::dimOf(b, loc, indices, i));
  for (int64_t i = 0; i < cast<RankedTensorType>(updates.getType()).getRank();
       ++i)
    updDims.push_back(lowering::dimOf(b, loc, updates, i));
  // The reduction dims and their sizes: along the axis for elements (none
  // at all when the updates are empty), the index dims for nd (one of size
  // 1 when indices are a single tuple).
  SmallVector<Value> loops;
  if (elements) {
    // Indices and updates have one shape (checked when static); each read
    // is also clamped to its own tensor, so a mismatch at run time cannot
    // read out of bounds.
    Value count = updDims[0];
    for (int64_t i = 1; i < rank; ++i)
      count = b.create<arith::MulIOp>(loc, count, updDims[i]);
    for (int64_t i = 0; i < rank; ++i)
      count = b.create<arith::MulIOp>(loc, count, idxDims[i]);
    Value empty = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, count,
                                          constIndex(b, loc, 0));
    loops.push_back(b.create<arith::SelectOp>(loc, empty, constIndex(b, loc, 0),
                                              updDims[axis]));
  } else {
    loops.assign(idxDims.begin(), idxDims.end() - 1);
    if (loops.empty())
      loops.push_back(constIndex(b, loc, 1));
  }
  int64_t n = loops.size();
  SmallVector<int64_t> windowShape(n, ShapedType::kDynamic);
  Value window = b.create<tensor::EmptyOp>(
      loc, RankedTensorType::get(windowShape, b.getI8Type()), loops);
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> windowExprs, outExprs;
  for (int64_t j = 0; j < n; ++j)
    windowExprs.push_back(b.getAffineDimExpr(rank + j));
  for (int64_t j = 0; j < rank; ++j)
    outExprs.push_back(b.getAffineDimExpr(j));
  SmallVector<Iter> iterators(rank, Iter::parallel);
  iterators.append(n, Iter::reduction);
  auto maps =
      SmallVector<AffineMap>{AffineMap::get(rank + n, 0, windowExprs, ctx),
                             AffineMap::get(rank + n, 0, outExprs, ctx)};
  StringRef reduction = op.getReduction();
  std::string kind = reduction == "add"   ? "sum"
                     : reduction == "mul" ? "prod"
                                          : reduction.str();
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, ValueRange{window}, ValueRange{data}, maps,
          iterators,
          [&](OpBuilder &nb, Location l, ValueRange args) {
            auto index = [&](int64_t d) -> Value {
              return nb.create<linalg::IndexOp>(l, d);
            };
            auto both = [&](Value a, Value c) -> Value {
              return a ? nb.create<arith::AndIOp>(l, a, c).getResult() : c;
            };
            auto eq = [&](Value a, Value c) -> Value {
              return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, a,
                                              c);
            };
            Value match;
            SmallVector<Value> updAt;
            if (elements) {
              // Update (q with q[axis] = j), present where q is inside the
              // updates' shape.
              SmallVector<Value> idxAt;
              for (int64_t d = 0; d < rank; ++d) {
                Value q = d == axis ? index(rank) : index(d);
                if (d != axis)
                  match = both(
                      match, nb.create<arith::CmpIOp>(
                                 l, arith::CmpIPredicate::slt, q, updDims[d]));
                match = both(match,
                             nb.create<arith::CmpIOp>(
                                 l, arith::CmpIPredicate::slt, q, idxDims[d]));
                updAt.push_back(clampTo(nb, l, q, updDims[d]));
                idxAt.push_back(clampTo(nb, l, q, idxDims[d]));
              }
              Value i = normalized(
                  nb, l, nb.create<tensor::ExtractOp>(l, indices, idxAt),
                  dataDims[axis]);
              match = both(match, eq(i, index(axis)));
            } else {
              // Tuple t (the reduction dims) names the first K coordinates.
              int64_t k = idxType.getRank() - 1 + rank -
                          cast<RankedTensorType>(updates.getType()).getRank();
              SmallVector<Value> tuple;
              for (int64_t j = 0; j < idxType.getRank() - 1; ++j)
                tuple.push_back(index(rank + j));
              for (int64_t c = 0; c < k; ++c) {
                SmallVector<Value> at = tuple;
                at.push_back(constIndex(nb, l, c));
                Value i = normalized(
                    nb, l, nb.create<tensor::ExtractOp>(l, indices, at),
                    dataDims[c]);
                match = both(match, eq(i, index(c)));
              }
              updAt = tuple;
              for (int64_t d = k; d < rank; ++d)
                updAt.push_back(index(d));
              if (!match) // K = 0: every tuple writes the whole data
                match = nb.create<arith::ConstantIntOp>(l, 1, 1);
            }
            Value update = nb.create<tensor::ExtractOp>(l, updates, updAt);
            Value acc = args[1];
            Value next = reduction == "none"
                             ? update
                             : lowering::combine(nb, l, kind, acc, update);
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<arith::SelectOp>(l, match, next, acc)));
          })
      .getResult(0);
}

FailureOr<Value> gatherND(OpBuilder &b, GatherNDOp op, Value data,
                          Value indices) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank(), batch = op.getBatchDims();
  auto idxType = cast<RankedTensorType>(indices.getType());
  int64_t tuples = idxType.getRank() - 1, k = op.getTupleLength();
  int64_t dataRank = cast<RankedTensorType>(data.getType()).getRank();
  SmallVector<Value> dataDims;
  for (int64_t i = 0; i < dataRank; ++i)
    dataDims.push_back(lowering::dimOf(b, loc, data, i));
  Value init = lowering::emptyResult(b, op, ValueRange{data, indices});
  for (int64_t c = 0; c < k; ++c)
    if (failed(lowering::checkIndexedAxis(b, op, dataDims[batch + c], init,
                                          batch + c)))
      return failure();
  // The batch dims index data and indices alike: they must agree.
  for (int64_t j = 0; j < batch; ++j)
    if (!getConstantIntValue(dataDims[j]) || idxType.isDynamicDim(j))
      b.create<cf::AssertOp>(
          loc,
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, dataDims[j],
                                  lowering::dimOf(b, loc, indices, j)),
          b.getStringAttr("data and indices differ in batch dim " + Twine(j)));
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, ValueRange{}, init,
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
          SmallVector<Iter>(rank, Iter::parallel),
          [&](OpBuilder &nb, Location l, ValueRange) {
            auto index = [&](int64_t d) -> Value {
              return nb.create<linalg::IndexOp>(l, d);
            };
            SmallVector<Value> tuple, at;
            for (int64_t j = 0; j < tuples; ++j)
              tuple.push_back(index(j));
            for (int64_t j = 0; j < batch; ++j)
              at.push_back(index(j));
            for (int64_t c = 0; c < k; ++c) {
              SmallVector<Value> where = tuple;
              where.push_back(constIndex(nb, l, c));
              at.push_back(lowering::wrappedIndex(
                  nb, l, nb.create<tensor::ExtractOp>(l, indices, where),
                  dataDims[batch + c]));
            }
            for (int64_t d = tuples; d < rank; ++d)
              at.push_back(index(d));
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<tensor::ExtractOp>(l, data, at)));
          })
      .getResult(0);
}
} // namespace

FailureOr<Value> lowering::lowerIndexed(OpBuilder &b, Operation *op,
                                        ValueRange operands) {
  if (auto s = dyn_cast<ScatterOp>(op))
    return scatter(b, s, operands[0], operands[1], operands[2]);
  return gatherND(b, cast<GatherNDOp>(op), operands[0], operands[1]);
}
