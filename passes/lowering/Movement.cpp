//===- Movement.cpp - index and movement primitives -----------------------===//
//
// Padding as a generic over the padded shape: each element reads the input
// at its index minus the begin pad, clamped into bounds (so the read is
// always valid), and selects the pad value where the index fell outside.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace kiln;

Value lowering::padTensor(OpBuilder &b, Location loc, Value input,
                          ArrayRef<int64_t> begin, ArrayRef<int64_t> end,
                          double value) {
  if (llvm::all_of(begin, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(end, [](int64_t p) { return p == 0; }))
    return input;
  auto inType = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape;
  for (auto [d, pb, pe] : llvm::zip(inType.getShape(), begin, end))
    shape.push_back(d + pb + pe);
  auto outType = RankedTensorType::get(shape, inType.getElementType());
  Value init = b.create<tensor::EmptyOp>(loc, shape, inType.getElementType());
  int64_t rank = shape.size();
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)}, iterators,
      [&](OpBuilder &nb, Location l, ValueRange) {
        auto index = [&](int64_t v) -> Value {
          return nb.create<arith::ConstantIndexOp>(l, v);
        };
        Value inside;
        SmallVector<Value> indices;
        for (int64_t i = 0; i < rank; ++i) {
          Value at = nb.create<linalg::IndexOp>(l, i);
          Value src = nb.create<arith::SubIOp>(l, at, index(begin[i]));
          int64_t size = inType.getDimSize(i);
          Value ok = nb.create<arith::AndIOp>(
              l,
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, src,
                                       index(0)),
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, src,
                                       index(size)));
          inside = inside ? nb.create<arith::AndIOp>(l, inside, ok) : ok;
          Value clamped = nb.create<arith::MaxSIOp>(
              l, index(0), nb.create<arith::MinSIOp>(l, src, index(size - 1)));
          indices.push_back(clamped);
        }
        Value read = nb.create<tensor::ExtractOp>(l, input, indices);
        Value pad = scalar(nb, l, inType.getElementType(), value);
        nb.create<linalg::YieldOp>(
            l, Value(nb.create<arith::SelectOp>(l, inside, read, pad)));
      });
  return generic.getResult(0);
}
