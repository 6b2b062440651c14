//===- GridSample.cpp - kiln.grid_sample to one generic over taps ---------===//
//
// As onnx/reference/ops/op_grid_sample.py computes it, in f64. For output
// element (n, c, o...) and spatial axis a (of k), with g the grid value
// grid[n, o..., k - 1 - a] and D the input's size along a:
//
//   x = (g + 1) / 2 * (D - 1)        (align_corners)
//     = ((g + 1) * D - 1) / 2        (otherwise)
//   nearest: x = round_half_even(x)
//   outside [lo, hi] (lo, hi = 0, D - 1 with align_corners, else -0.5,
//   D - 0.5): border clamps x to [0, D - 1], reflection reflects it back
//   (_gs_reflect)
//   taps: nearest 1 at trunc(x); linear 2 at floor(x) + t with weights
//   1 - f, f (f = x - floor(x)); cubic 4 at floor(x) - 1 + t with Keys'
//   coefficients for a = -0.75
//
// The interpolation is separable, so the result is the sum over all tap
// tuples of the product of the per-axis weights times the input there: a
// generic over the output with one reduction dim of taps^k. A tap's index
// outside [0, D) reads 0 with zeros padding, is clamped with border, and is
// reflected (then truncated) with reflection. The sum is f64; a last
// elementwise generic rounds it to the input's type.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace kiln;
using lowering::F64;

bool lowering::isGridSampleFamily(Operation *op) {
  return isa<GridSampleOp>(op);
}

namespace {
using Iter = utils::IteratorType;

// _gs_reflect: x reflected by the near border until it lies in [lo, hi].
Value reflect(F64 &f, Value x, Value lo, Value hi) {
  Value range = f.sub(hi, lo);
  auto side = [&](Value dx, Value near, Value far, bool fromLow) {
    Value n = f.floor(f.div(dx, range)); // dx >= 0: trunc is floor
    Value r = f.sub(dx, f.mul(n, range));
    Value half = f.mul(n, f.c(0.5));
    Value even = f.cmp(arith::CmpFPredicate::OEQ, f.floor(half), half);
    Value towardFar = fromLow ? f.add(near, r) : f.sub(near, r);
    Value towardNear = fromLow ? f.sub(far, r) : f.add(far, r);
    return f.select(even, towardFar, towardNear);
  };
  Value below = f.cmp(arith::CmpFPredicate::OLT, x, lo);
  Value above = f.cmp(arith::CmpFPredicate::OGT, x, hi);
  Value fromLow = side(f.sub(lo, x), lo, hi, true);
  Value fromHigh = side(f.sub(x, hi), hi, lo, false);
  Value out = f.select(below, fromLow, f.select(above, fromHigh, x));
  // A one-element axis (range 0) has nowhere else to go.
  Value empty = f.cmp(arith::CmpFPredicate::OLE, range, f.c(0));
  return f.select(empty, lo, out);
}

// x rounded toward zero (as int() does).
Value truncated(F64 &f, Value x) {
  return f.select(f.cmp(arith::CmpFPredicate::OLT, x, f.c(0)),
                  f.b.create<math::CeilOp>(f.l, x), f.floor(x));
}

// Keys' cubic coefficient of tap t (0..3) for fraction d, a = -0.75.
Value cubicWeight(F64 &f, Value d, int64_t t) {
  const double a = -0.75;
  Value x = t == 0   ? f.add(d, f.c(1))
            : t == 1 ? d
            : t == 2 ? f.sub(f.c(1), d)
                     : f.sub(f.c(2), d);
  if (t == 1 || t == 2) // ((a + 2) x - (a + 3)) x x + 1
    return f.add(f.mul(f.mul(f.sub(f.mul(f.c(a + 2), x), f.c(a + 3)), x), x),
                 f.c(1));
  // ((a x - 5a) x + 8a) x - 4a
  return f.sub(
      f.mul(f.add(f.mul(f.sub(f.mul(f.c(a), x), f.c(5 * a)), x), f.c(8 * a)),
            x),
      f.c(4 * a));
}
} // namespace

FailureOr<Value> lowering::lowerGridSample(OpBuilder &b, Operation *op,
                                           ValueRange operands) {
  auto gs = cast<GridSampleOp>(op);
  Location loc = op->getLoc();
  Value input = operands[0], grid = operands[1];
  auto outType = plainResultType(op);
  int64_t rank = outType.getRank(), k = rank - 2;
  StringRef mode = gs.getMode(), padding = gs.getPaddingMode();
  bool align = gs.getAlignCorners();
  int64_t taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  int64_t tuples = 1;
  for (int64_t a = 0; a < k; ++a)
    tuples *= taps;
  SmallVector<Value> sizes;
  for (int64_t a = 0; a < k; ++a)
    sizes.push_back(dimOf(b, loc, input, 2 + a));
  auto sumType = RankedTensorType::get(outType.getShape(), b.getF64Type());
  // Dynamic dims of the f64 sum follow the result's.
  SmallVector<Value> dynamic;
  for (int64_t i = 0; i < rank; ++i)
    if (sumType.isDynamicDim(i))
      dynamic.push_back(resultDim(b, op, operands, i));
  Value init = fill(b, loc,
                    b.create<tensor::EmptyOp>(loc, sumType.getShape(),
                                              b.getF64Type(), dynamic),
                    0);
  // No taps at all when an input spatial dim is empty (the result is 0).
  Value tapCount = b.create<arith::ConstantIndexOp>(loc, tuples);
  for (Value size : sizes) {
    Value empty =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, size,
                                b.create<arith::ConstantIndexOp>(loc, 0));
    tapCount = b.create<arith::SelectOp>(
        loc, empty, b.create<arith::ConstantIndexOp>(loc, 0), tapCount);
  }
  Value window = b.create<tensor::EmptyOp>(
      loc, RankedTensorType::get({ShapedType::kDynamic}, b.getI8Type()),
      ValueRange{tapCount});
  auto [maps, iterators] = lowering::tapLoop(b, rank);
  Value sum =
      b.create<linalg::GenericOp>(
           loc, TypeRange{sumType}, ValueRange{window}, ValueRange{init}, maps,
           iterators,
           [&](OpBuilder &nb, Location l, ValueRange args) {
             F64 f{nb, l};
             auto index = [&](int64_t d) -> Value {
               return nb.create<linalg::IndexOp>(l, d);
             };
             auto constIndex = [&](int64_t v) -> Value {
               return nb.create<arith::ConstantIndexOp>(l, v);
             };
             Value tuple = index(rank);
             Value weight = f.c(1), valid;
             SmallVector<Value> at{index(0), index(1)};
             int64_t stride = tuples;
             for (int64_t a = 0; a < k; ++a) {
               stride /= taps;
               // This axis's tap: (tuple / stride) % taps.
               Value t = nb.create<arith::RemSIOp>(
                   l, nb.create<arith::DivSIOp>(l, tuple, constIndex(stride)),
                   constIndex(taps));
               SmallVector<Value> g{index(0)};
               for (int64_t o = 0; o < k; ++o)
                 g.push_back(index(2 + o));
               g.push_back(constIndex(k - 1 - a));
               Value gv = nb.create<tensor::ExtractOp>(l, grid, g);
               if (!gv.getType().isF64())
                 gv = nb.create<arith::ExtFOp>(l, f.f64(), gv);
               Value d = f.fromIndex(sizes[a]);
               Value x = align
                             ? f.mul(f.div(f.add(gv, f.c(1)), f.c(2)),
                                     f.sub(d, f.c(1)))
                             : f.div(f.sub(f.mul(f.add(gv, f.c(1)), d), f.c(1)),
                                     f.c(2));
               if (mode == "nearest")
                 x = nb.create<math::RoundEvenOp>(l, x);
               Value lo = align ? f.c(0) : f.c(-0.5);
               Value hi = align ? f.sub(d, f.c(1)) : f.sub(d, f.c(0.5));
               Value last = f.sub(d, f.c(1));
               if (padding == "border")
                 x = f.select(f.cmp(arith::CmpFPredicate::OLT, x, lo),
                              f.max(f.min(x, last), f.c(0)),
                              f.select(f.cmp(arith::CmpFPredicate::OGT, x, hi),
                                       f.max(f.min(x, last), f.c(0)), x));
               else if (padding == "reflection")
                 x = reflect(f, x, lo, hi);
               // The tap's index (as f64, exact) and weight.
               Value i, w;
               if (mode == "nearest") {
                 i = truncated(f, x);
                 w = f.c(1);
               } else {
                 Value x0 = f.floor(x), frac = f.sub(x, x0);
                 Value tf = f.fromIndex(t);
                 if (mode == "linear") {
                   i = f.add(x0, tf);
                   Value first = nb.create<arith::CmpIOp>(
                       l, arith::CmpIPredicate::eq, t, constIndex(0));
                   w = f.select(first, f.sub(f.c(1), frac), frac);
                 } else {
                   i = f.add(f.sub(x0, f.c(1)), tf);
                   w = cubicWeight(f, frac, 3);
                   for (int64_t j = 2; j >= 0; --j)
                     w = f.select(
                         nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq,
                                                  t, constIndex(j)),
                         cubicWeight(f, frac, j), w);
                 }
               }
               if (padding == "zeros") {
                 Value inside = nb.create<arith::AndIOp>(
                     l, f.cmp(arith::CmpFPredicate::OGE, i, f.c(0)),
                     f.cmp(arith::CmpFPredicate::OLE, i, last));
                 valid = valid ? nb.create<arith::AndIOp>(l, valid, inside)
                                     .getResult()
                               : inside;
               } else if (padding == "reflection") {
                 i = truncated(f, reflect(f, i, lo, hi));
               }
               i = f.max(f.min(i, last), f.c(0)); // reads stay in bounds
               at.push_back(f.toIndex(i));
               weight = f.mul(weight, w);
             }
             Value v = nb.create<tensor::ExtractOp>(l, input, at);
             if (!v.getType().isF64())
               v = nb.create<arith::ExtFOp>(l, f.f64(), v);
             Value term = f.mul(weight, v);
             if (valid)
               term = f.select(valid, term, f.c(0));
             nb.create<linalg::YieldOp>(l, f.add(args[1], term));
           })
          .getResult(0);
  Type element = outType.getElementType();
  return buildElementwise(
      b, loc, outType, sum,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        return element.isF64() ? args[0]
                               : nb.create<arith::TruncFOp>(l, element, args[0])
                                     .getResult();
      });
}
