//===- Movement.cpp - index and movement primitives -----------------------===//
//
// Transpose: one generic whose input map is the permutation.
// Gather: one generic over the result, reading the indices through a map
// and the data through tensor.extract at the (wrapped, clamped) index.
// Padding: a generic over the padded shape; each element reads the input at
// its index minus the begin pad, clamped into bounds (so the read is always
// valid), and selects the pad value where the index fell outside.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace kiln;

Value lowering::wrappedIndex(OpBuilder &b, Location l, Value value,
                             Value size) {
  auto index = [&](int64_t v) -> Value {
    return b.create<arith::ConstantIndexOp>(l, v);
  };
  Value i = b.create<arith::IndexCastOp>(l, b.getIndexType(), value);
  Value negative =
      b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, i, index(0));
  i = b.create<arith::SelectOp>(l, negative,
                                b.create<arith::AddIOp>(l, i, size), i);
  Value last = b.create<arith::SubIOp>(l, size, index(1));
  return b.create<arith::MaxSIOp>(l, index(0),
                                  b.create<arith::MinSIOp>(l, i, last));
}

LogicalResult lowering::checkIndexedAxis(OpBuilder &b, Operation *op,
                                         Value size, Value result,
                                         int64_t axis) {
  std::optional<int64_t> known = getConstantIntValue(size);
  if (known && *known != 0)
    return success();
  auto type = cast<RankedTensorType>(result.getType());
  if (llvm::is_contained(type.getShape(), 0))
    return success(); // nothing is read
  std::string message = "gathers along axis " + std::to_string(axis) +
                        ", which is empty, at indices it cannot have";
  if (known && type.hasStaticShape())
    return op->emitOpError() << message;
  Location loc = op->getLoc();
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value ok = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, size, zero);
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      ok = b.create<arith::OrIOp>(
          loc, ok,
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                  lowering::dimOf(b, loc, result, d), zero));
  b.create<cf::AssertOp>(loc, ok, b.getStringAttr(message));
  return success();
}

Value lowering::padTensor(OpBuilder &b, Location loc, Value input,
                          ArrayRef<int64_t> begin, ArrayRef<int64_t> end,
                          double value) {
  if (llvm::all_of(begin, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(end, [](int64_t p) { return p == 0; }))
    return input;
  auto inType = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape;
  for (auto [d, pb, pe] : llvm::zip(inType.getShape(), begin, end))
    shape.push_back(ShapedType::isDynamic(d) ? d : d + pb + pe);
  auto outType = RankedTensorType::get(shape, inType.getElementType());
  int64_t rank = shape.size();
  // Input dims as index values, for the sizes and the clamps.
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < rank; ++i)
    sizes.push_back(dimOf(b, loc, input, i));
  Value init = emptyTensor(b, loc, outType, [&](int64_t i) -> Value {
    Value pads = b.create<arith::ConstantIndexOp>(loc, begin[i] + end[i]);
    return b.create<arith::AddIOp>(loc, sizes[i], pads);
  });
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)}, iterators,
      [&](OpBuilder &nb, Location l, ValueRange) {
        auto index = [&](int64_t v) -> Value {
          return nb.create<arith::ConstantIndexOp>(l, v);
        };
        // The read is guarded (kGuardedRead): the emitters perform it only
        // inside the input, so its indices need no clamping and stay affine
        // in the loop dims (the inner loop vectorizes with masked loads).
        Value inside;
        SmallVector<Value> indices;
        for (int64_t i = 0; i < rank; ++i) {
          Value at = nb.create<linalg::IndexOp>(l, i);
          if (begin[i] == 0 && end[i] == 0) {
            indices.push_back(at);
            continue;
          }
          Value src = nb.create<arith::SubIOp>(l, at, index(begin[i]));
          Value size0 =
              inType.isDynamicDim(i) ? sizes[i] : index(inType.getDimSize(i));
          Value ok = nb.create<arith::AndIOp>(
              l,
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, src,
                                       index(0)),
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, src,
                                       size0));
          inside = inside ? nb.create<arith::AndIOp>(l, inside, ok) : ok;
          indices.push_back(src);
        }
        auto read = nb.create<tensor::ExtractOp>(l, input, indices);
        read->setAttr(kGuardedRead, nb.getUnitAttr());
        Value pad = scalar(nb, l, inType.getElementType(), value);
        nb.create<linalg::YieldOp>(
            l, Value(nb.create<arith::SelectOp>(l, inside, read, pad)));
      });
  return generic.getResult(0);
}

bool lowering::isMovementFamily(Operation *op) {
  return isa<TransposeOp, GatherOp, GatherElementsOp, SliceOp, ConcatOp,
             ShapeOp>(op);
}

namespace {
Value lowerTranspose(OpBuilder &b, TransposeOp op, Value input) {
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank();
  // Result dim i reads input dim perm[i]: the input map sends input dim
  // perm[i] to loop dim i.
  SmallVector<AffineExpr> exprs(rank);
  for (auto [i, p] : llvm::enumerate(op.getPerm()))
    exprs[p] = b.getAffineDimExpr(i);
  Value init = lowering::emptyResult(b, op, ValueRange{input});
  return b
      .create<linalg::GenericOp>(
          op.getLoc(), TypeRange{outType}, input, init,
          SmallVector<AffineMap>{AffineMap::get(rank, 0, exprs, b.getContext()),
                                 b.getMultiDimIdentityMap(rank)},
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [](OpBuilder &nb, Location l, ValueRange a) {
            nb.create<linalg::YieldOp>(l, a[0]);
          })
      .getResult(0);
}

FailureOr<Value> lowerGather(OpBuilder &b, GatherOp op, Value data,
                             Value indices) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto idxType = cast<RankedTensorType>(indices.getType());
  int64_t rank = outType.getRank(), axis = op.getAxis(),
          idxRank = idxType.getRank();
  Value size = lowering::dimOf(b, loc, data, axis); // read before the loop
  SmallVector<AffineExpr> idxExprs;
  for (int64_t i = 0; i < idxRank; ++i)
    idxExprs.push_back(b.getAffineDimExpr(axis + i));
  Value init = lowering::emptyResult(b, op, ValueRange{data, indices});
  if (failed(lowering::checkIndexedAxis(b, op, size, init, axis)))
    return failure();
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, indices, init,
          SmallVector<AffineMap>{
              AffineMap::get(rank, 0, idxExprs, b.getContext()),
              b.getMultiDimIdentityMap(rank)},
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value i = lowering::wrappedIndex(nb, l, a[0], size);
            SmallVector<Value> at;
            for (int64_t d = 0; d < axis; ++d)
              at.push_back(nb.create<linalg::IndexOp>(l, d));
            at.push_back(i);
            for (int64_t d = axis + 1; d < dataType.getRank(); ++d)
              at.push_back(nb.create<linalg::IndexOp>(l, d - 1 + idxRank));
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<tensor::ExtractOp>(l, data, at)));
          })
      .getResult(0);
}
} // namespace

namespace {
// Reads through tensor.extract: linalg would take a pure-dim input map
// (start 0, step 1) as the loop's extent and reject the smaller result.
Value lowerSlice(OpBuilder &b, SliceOp op, Value input) {
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank();
  Value init = lowering::emptyResult(b, op, ValueRange{input});
  return b
      .create<linalg::GenericOp>(
          op.getLoc(), TypeRange{outType}, ValueRange{}, init,
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location l, ValueRange) {
            SmallVector<Value> at;
            for (int64_t d = 0; d < rank; ++d) {
              Value i = nb.create<linalg::IndexOp>(l, d);
              Value scaled = nb.create<arith::MulIOp>(
                  l, i, nb.create<arith::ConstantIndexOp>(l, op.getSteps()[d]));
              at.push_back(nb.create<arith::AddIOp>(
                  l, scaled,
                  nb.create<arith::ConstantIndexOp>(l, op.getStarts()[d])));
            }
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<tensor::ExtractOp>(l, input, at)));
          })
      .getResult(0);
}

// Static lengths along the axis: one copy per input into its slice.
// Otherwise each element picks the input whose range along the axis holds
// its index (a select chain over reads at clamped indices).
Value lowerConcat(OpBuilder &b, ConcatOp op, ValueRange inputs) {
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank(), axis = op.getAxis();
  Location loc = op.getLoc();
  // The other dims must agree at run time too (the verifier checked the
  // static ones): the reads below index every input with the output's
  // sizes. An input empty only along another dim is an error as well, as
  // in the spec and numpy (onnxruntime skips it).
  auto first = cast<RankedTensorType>(inputs[0].getType());
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis)
      continue;
    for (auto [i, input] : llvm::enumerate(inputs.drop_front())) {
      auto type = cast<RankedTensorType>(input.getType());
      if (!first.isDynamicDim(d) && !type.isDynamicDim(d))
        continue;
      Value same = b.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::eq, lowering::dimOf(b, loc, inputs[0], d),
          lowering::dimOf(b, loc, input, d));
      b.create<cf::AssertOp>(loc, same,
                             b.getStringAttr("concat inputs 0 and " +
                                             Twine(i + 1) + " differ in dim " +
                                             Twine(d) + " (only the axis, " +
                                             Twine(axis) + ", may differ)"));
    }
  }
  Value init = lowering::emptyResult(b, op, inputs);
  // With every input's length along the axis known, each input is copied
  // into its slice of the result (tensor.insert_slice: the kernel emitters
  // copy rows of it), where the select chain below reads every input for
  // each element (densenet121's blocks concatenate up to 25 inputs).
  if (llvm::none_of(inputs, [&](Value input) {
        return cast<RankedTensorType>(input.getType()).isDynamicDim(axis);
      })) {
    Value result = init;
    int64_t offset = 0;
    for (Value input : inputs) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getDimSize(axis) == 0)
        continue;
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
          strides(rank, b.getIndexAttr(1));
      offsets[axis] = b.getIndexAttr(offset);
      for (int64_t d = 0; d < rank; ++d)
        sizes.push_back(type.isDynamicDim(d)
                            ? OpFoldResult(lowering::dimOf(b, loc, input, d))
                            : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
      result = b.create<tensor::InsertSliceOp>(loc, input, result, offsets,
                                               sizes, strides);
      offset += type.getDimSize(axis);
    }
    return result;
  }
  // Each input's start along the axis and its last index, read before the
  // loops (dynamic sizes at run time).
  struct Part {
    Value input, start, last;
    bool dynamic;
  };
  SmallVector<Part> parts;
  Value offset = b.create<arith::ConstantIndexOp>(loc, 0);
  for (Value input : inputs) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getDimSize(axis) == 0)
      continue;
    Value size = lowering::dimOf(b, loc, input, axis);
    parts.push_back({input, offset,
                     b.create<arith::SubIOp>(
                         loc, size, b.create<arith::ConstantIndexOp>(loc, 1)),
                     type.isDynamicDim(axis)});
    offset = b.create<arith::AddIOp>(loc, offset, size);
  }
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, ValueRange{}, init,
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location l, ValueRange) {
            SmallVector<Value> at;
            for (int64_t d = 0; d < rank; ++d)
              at.push_back(nb.create<linalg::IndexOp>(l, d));
            SmallVector<Value> reads;
            for (const Part &part : parts) {
              SmallVector<Value> local = at;
              Value shifted = nb.create<arith::SubIOp>(l, at[axis], part.start);
              local[axis] = nb.create<arith::MaxSIOp>(
                  l, nb.create<arith::ConstantIndexOp>(l, 0),
                  nb.create<arith::MinSIOp>(l, shifted, part.last));
              auto read = nb.create<tensor::ExtractOp>(l, part.input, local);
              // An input empty at run time is never picked, and must not be
              // read: its read happens only in the select's branch.
              if (part.dynamic && parts.size() > 1)
                read->setAttr(kGuardedRead, nb.getUnitAttr());
              reads.push_back(read);
            }
            // Last input first: select the latest range that has started.
            Value result = reads.back();
            for (int64_t i = reads.size() - 2; i >= 0; --i) {
              Value inNext = nb.create<arith::CmpIOp>(
                  l, arith::CmpIPredicate::sge, at[axis], parts[i + 1].start);
              result = nb.create<arith::SelectOp>(l, inNext, result, reads[i]);
            }
            nb.create<linalg::YieldOp>(l, result);
          })
      .getResult(0);
}
} // namespace

namespace {
// Over the result's (= the indices') shape: read the index, wrap and clamp
// it, read the data there along the axis.
FailureOr<Value> lowerGatherElements(OpBuilder &b, GatherElementsOp op,
                                     Value data, Value indices) {
  auto outType = lowering::plainResultType(op);
  int64_t rank = outType.getRank(), axis = op.getAxis();
  Location loc = op.getLoc();
  Value size = lowering::dimOf(b, loc, data, axis);
  Value init = lowering::emptyResult(b, op, ValueRange{data, indices});
  if (failed(lowering::checkIndexedAxis(b, op, size, init, axis)))
    return failure();
  // Along the other dims the data is read at the indices' own positions:
  // the indices may not be longer there (as torch.gather requires).
  auto dataType = cast<RankedTensorType>(data.getType());
  auto idxType = cast<RankedTensorType>(indices.getType());
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis || (!dataType.isDynamicDim(d) && !idxType.isDynamicDim(d)))
      continue;
    Value fits = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sle,
                                         lowering::dimOf(b, loc, indices, d),
                                         lowering::dimOf(b, loc, data, d));
    b.create<cf::AssertOp>(
        loc, fits,
        b.getStringAttr("indices are longer than the data along dim " +
                        Twine(d)));
  }
  return b
      .create<linalg::GenericOp>(
          op.getLoc(), TypeRange{outType}, indices, init,
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank),
                                 b.getMultiDimIdentityMap(rank)},
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value i = lowering::wrappedIndex(nb, l, a[0], size);
            SmallVector<Value> at;
            for (int64_t d = 0; d < rank; ++d)
              at.push_back(d == axis ? i
                                     : Value(nb.create<linalg::IndexOp>(l, d)));
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<tensor::ExtractOp>(l, data, at)));
          })
      .getResult(0);
}
} // namespace

namespace {
// Element j is dim start + j of the input, read before the loop: a select
// chain over the loop index.
Value lowerShape(OpBuilder &b, ShapeOp op, Value input) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  SmallVector<Value> dims;
  for (int64_t i = op.getStart(); i < (int64_t)op.getEnd(); ++i)
    dims.push_back(b.create<arith::IndexCastOp>(
        loc, b.getI64Type(), lowering::dimOf(b, loc, input, i)));
  Value init = lowering::emptyResult(b, op, ValueRange{input});
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, ValueRange{}, init,
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(1)},
          SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange) {
            Value at = nb.create<linalg::IndexOp>(l, 0);
            Value result = dims.empty()
                               ? lowering::scalar(nb, l, nb.getI64Type(), 0)
                               : dims.back();
            for (int64_t j = (int64_t)dims.size() - 2; j >= 0; --j) {
              Value is = nb.create<arith::CmpIOp>(
                  l, arith::CmpIPredicate::eq, at,
                  nb.create<arith::ConstantIndexOp>(l, j));
              result = nb.create<arith::SelectOp>(l, is, dims[j], result);
            }
            nb.create<linalg::YieldOp>(l, result);
          })
      .getResult(0);
}
} // namespace

FailureOr<Value> lowering::lowerMovement(OpBuilder &b, Operation *op,
                                         ValueRange operands) {
  if (auto shape = dyn_cast<ShapeOp>(op))
    return lowerShape(b, shape, operands[0]);
  if (auto ge = dyn_cast<GatherElementsOp>(op))
    return lowerGatherElements(b, ge, operands[0], operands[1]);
  if (auto slice = dyn_cast<SliceOp>(op))
    return lowerSlice(b, slice, operands[0]);
  if (auto concat = dyn_cast<ConcatOp>(op))
    return lowerConcat(b, concat, operands);
  if (auto transpose = dyn_cast<TransposeOp>(op))
    return lowerTranspose(b, transpose, operands[0]);
  return lowerGather(b, cast<GatherOp>(op), operands[0], operands[1]);
}
