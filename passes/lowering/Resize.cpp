//===- Resize.cpp - kiln.resize to gathers with computed weights ----------===//
//
// Resize is separable: one pass per resized axis, in the order of `axes`,
// each as onnx/reference/ops/op_resize.py's _interpolate_1d_along_axis
// computes it, in f64 (the order changes only the rounding). Along axis a,
// output position y reads n neighbours of its source coordinate x:
//
//   x      = the coordinate mode's map of y (half_pixel: (y + 0.5) / s - 0.5)
//   ratio  = x - floor(x), or 1 where x is a whole number
//   p      = floor(x + n/2), start = p - n/2 - n/2 + (x + n/2 == p ? 0 : 1)
//   out[y] = sum over t < n of w_t * in[clamp(start + t, 0, in - 1)]
//
// with the mode's coefficients w_t(ratio) (nearest: one-hot pairs, linear:
// 1 - ratio and ratio, cubic: Keys' kernel with cubic_coeff_a; antialias
// widens linear and cubic to a footprint of n = 2 - 2 * floor(-r / s') taps,
// s' = min(s, 1), r = 1 or 2). exclude_outside zeroes the taps outside the
// input; antialias and exclude_outside divide by the sum of the weights (a
// second, 1-D generic). tf_crop_and_resize outputs whose x falls outside
// the input are extrapolation_value. Scales, sizes and roi are read from
// the kernel's inputs; each pass is a generic over its output with the taps
// as a reduction loop, reading its input through tensor.extract.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kiln;

bool lowering::isResizeFamily(Operation *op) { return isa<ResizeOp>(op); }

lowering::TapLoop lowering::tapLoop(OpBuilder &b, int64_t rank) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> outExprs;
  for (int64_t j = 0; j < rank; ++j)
    outExprs.push_back(b.getAffineDimExpr(j));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return {{AffineMap::get(rank + 1, 0, {b.getAffineDimExpr(rank)}, ctx),
           AffineMap::get(rank + 1, 0, outExprs, ctx)},
          iterators};
}

namespace {
using Iter = utils::IteratorType;
using lowering::F64;

// What one pass along an axis needs, computed before its loops.
struct Axis {
  int64_t axis = 0, position = 0;
  Value in, out;          // sizes, index
  Value inF, outF, scale; // f64
  Value roiStart, roiEnd; // f64, tf_crop_and_resize
  Value taps;             // index
  Value footprintStart;   // f64: antialias's first tap offset
  Value antialiasScale;   // f64: min(scale, 1)
};

class Lowerer {
public:
  Lowerer(OpBuilder &b, ResizeOp op) : b(b), op(op), l(op.getLoc()) {}

  FailureOr<Value> run(Value input, Value spec, Value roi);

private:
  // x (the source coordinate) and whether it lies outside the input
  // (tf_crop_and_resize only).
  std::pair<Value, Value> source(F64 &f, const Axis &a, Value y);
  // The weight of tap `t` for output position `y` (before normalizing), and
  // the input index it reads (clamped).
  std::pair<Value, Value> tap(OpBuilder &nb, Location nl, const Axis &a,
                              Value y, Value t);
  // One pass along `a` from `current` (element type f64 after the first).
  Value pass(const Axis &a, Value current, RankedTensorType outType);

  OpBuilder &b;
  ResizeOp op;
  Location l;
};

std::pair<Value, Value> Lowerer::source(F64 &f, const Axis &a, Value y) {
  StringRef mode = op.getCoordinateMode();
  Value half = f.c(0.5), one = f.c(1);
  Value outside;
  Value x;
  if (mode == "asymmetric") {
    x = f.div(y, a.scale);
  } else if (mode == "align_corners") {
    Value single = f.cmp(arith::CmpFPredicate::OEQ, a.outF, one);
    x = f.select(single, f.c(0),
                 f.div(f.mul(y, f.sub(a.inF, one)), f.sub(a.outF, one)));
  } else if (mode == "pytorch_half_pixel") {
    Value single = f.cmp(arith::CmpFPredicate::OEQ, a.outF, one);
    x = f.select(single, f.c(-0.5),
                 f.sub(f.div(f.add(y, half), a.scale), half));
  } else if (mode == "half_pixel_symmetric") {
    // adjustment = out / (scale * in), offset = in / 2 * (1 - adjustment)
    Value exact = f.mul(a.scale, a.inF);
    Value adjustment = f.div(f.fromIndex(a.out), exact);
    Value offset = f.mul(f.div(a.inF, f.c(2)), f.sub(one, adjustment));
    x = f.add(offset, f.sub(f.div(f.add(y, half), a.scale), half));
  } else if (mode == "tf_crop_and_resize") {
    Value last = f.sub(a.inF, one);
    Value span = f.mul(f.sub(a.roiEnd, a.roiStart), last);
    Value single = f.cmp(arith::CmpFPredicate::OEQ, a.outF, one);
    x = f.select(single, f.div(span, f.c(2)),
                 f.div(f.mul(y, span), f.sub(a.outF, one)));
    x = f.add(x, f.mul(a.roiStart, last));
    outside = f.b.create<arith::OrIOp>(
        f.l, f.cmp(arith::CmpFPredicate::OLT, x, f.c(0)),
        f.cmp(arith::CmpFPredicate::OGT, x, last));
  } else { // half_pixel
    x = f.sub(f.div(f.add(y, half), a.scale), half);
  }
  return {x, outside};
}

std::pair<Value, Value> Lowerer::tap(OpBuilder &nb, Location nl, const Axis &a,
                                     Value y, Value t) {
  F64 f{nb, nl};
  Value x = source(f, a, y).first;
  Value xFloor = f.floor(x);
  Value whole = f.cmp(arith::CmpFPredicate::OEQ, x, xFloor);
  Value one = f.c(1), zero = f.c(0);
  Value ratio = f.select(whole, one, f.sub(x, xFloor));
  Value tf = f.fromIndex(t);
  auto isTap = [&](double k) {
    return f.cmp(arith::CmpFPredicate::OEQ, tf, f.c(k));
  };
  StringRef mode = op.getMode();
  double A = op.getCubicCoeffA().convertToDouble();
  Value w;
  if (op.getAntialias()) {
    // Taps at offsets start + t from the coordinate, weights of the widened
    // kernel at (offset - ratio) * s'.
    Value arg = f.abs(
        f.mul(f.sub(f.add(a.footprintStart, tf), ratio), a.antialiasScale));
    if (mode == "linear") {
      w = f.max(f.min(f.sub(one, arg), one), zero);
    } else {
      Value x2 = f.mul(arg, arg), x3 = f.mul(x2, arg);
      Value inner =
          f.add(f.sub(f.mul(f.c(A + 2), x3), f.mul(f.c(A + 3), x2)), one);
      Value outer = f.sub(f.add(f.sub(f.mul(f.c(A), x3), f.mul(f.c(5 * A), x2)),
                                f.mul(f.c(8 * A), arg)),
                          f.c(4 * A));
      w = f.select(
          f.cmp(arith::CmpFPredicate::OLE, arg, one), inner,
          f.select(f.cmp(arith::CmpFPredicate::OLT, arg, f.c(2)), outer, zero));
    }
  } else if (mode == "nearest") {
    StringRef nearest = op.getNearestMode();
    // [first, second] by the rounding rule; a whole coordinate takes the
    // second (ratio 1 reads neighbour x itself).
    Value second;
    if (nearest == "floor")
      second = f.cmp(arith::CmpFPredicate::OEQ, ratio, one);
    else if (nearest == "ceil")
      second = nb.create<arith::ConstantIntOp>(nl, 1, 1);
    else if (nearest == "round_prefer_ceil")
      second = f.cmp(arith::CmpFPredicate::OGE, ratio, f.c(0.5));
    else // round_prefer_floor
      second = f.cmp(arith::CmpFPredicate::OGT, ratio, f.c(0.5));
    Value secondW = f.select(second, one, zero);
    w = f.select(isTap(0), f.sub(one, secondW), secondW);
  } else if (mode == "linear") {
    w = f.select(isTap(0), f.sub(one, ratio), ratio);
  } else { // cubic, Keys with A; onnx's four closed forms
    Value r1 = f.add(ratio, one), q = f.sub(one, ratio), q1 = f.add(q, one);
    auto far = [&](Value v) { // ((A v - 5A) v + 8A) v - 4A
      return f.sub(f.mul(f.add(f.mul(f.sub(f.mul(f.c(A), v), f.c(5 * A)), v),
                               f.c(8 * A)),
                         v),
                   f.c(4 * A));
    };
    auto near = [&](Value v) { // ((A + 2) v - (A + 3)) v v + 1
      return f.add(f.mul(f.mul(f.sub(f.mul(f.c(A + 2), v), f.c(A + 3)), v), v),
                   one);
    };
    w = f.select(
        isTap(0), far(r1),
        f.select(isTap(1), near(ratio), f.select(isTap(2), near(q), far(q1))));
  }
  // The neighbours: n consecutive indices around x (n is even), in the
  // reference's edge-padded coordinates.
  Value n = f.fromIndex(a.taps);
  Value pad = f.floor(f.div(f.add(n, one), f.c(2)));
  Value padded = f.add(x, pad);
  Value p = f.floor(padded);
  Value halfN = f.div(n, f.c(2));
  Value offset = f.select(f.cmp(arith::CmpFPredicate::OEQ, padded, p),
                          f.sub(zero, halfN), f.add(f.sub(zero, halfN), one));
  Value index = f.sub(f.add(f.add(p, offset), tf), pad);
  if (op.getExcludeOutside()) {
    Value inside = nb.create<arith::AndIOp>(
        nl, f.cmp(arith::CmpFPredicate::OGE, index, zero),
        f.cmp(arith::CmpFPredicate::OLT, index, a.inF));
    w = f.select(inside, w, zero);
  }
  Value clamped = f.max(f.min(index, f.sub(a.inF, one)), zero);
  return {w, f.toIndex(clamped)};
}

Value Lowerer::pass(const Axis &a, Value current, RankedTensorType outType) {
  auto curType = cast<RankedTensorType>(current.getType());
  int64_t rank = curType.getRank();
  Type f64 = b.getF64Type();
  bool normalize = op.getAntialias() || op.getExcludeOutside();
  auto sizeOf = [&](Value of, RankedTensorType type) {
    return [&, of, type](int64_t i) {
      return i == a.axis ? a.out : lowering::dimOf(b, l, of, i);
    };
  };
  Value init = lowering::fill(
      b, l, lowering::emptyTensor(b, l, outType, sizeOf(current, outType)), 0);
  // The taps loop takes its size from a window operand.
  Value window = b.create<tensor::EmptyOp>(
      l, RankedTensorType::get({ShapedType::kDynamic}, f64),
      ValueRange{a.taps});
  auto [maps, iterators] = lowering::tapLoop(b, rank);
  MLIRContext *ctx = b.getContext();
  double extrapolation = op.getExtrapolationValue().convertToDouble();
  bool crop = op.getCoordinateMode() == "tf_crop_and_resize";
  Type inElement = curType.getElementType();
  Value sum =
      b.create<linalg::GenericOp>(
           l, TypeRange{outType}, ValueRange{window}, ValueRange{init}, maps,
           iterators,
           [&](OpBuilder &nb, Location nl, ValueRange args) {
             F64 f{nb, nl};
             Value y = f.fromIndex(nb.create<linalg::IndexOp>(nl, a.axis));
             Value t = nb.create<linalg::IndexOp>(nl, rank);
             auto [w, index] = tap(nb, nl, a, y, t);
             SmallVector<Value> at;
             for (int64_t j = 0; j < rank; ++j)
               at.push_back(j == a.axis
                                ? index
                                : Value(nb.create<linalg::IndexOp>(nl, j)));
             Value v = nb.create<tensor::ExtractOp>(nl, current, at);
             if (inElement.isUnsignedInteger())
               v = nb.create<arith::UIToFPOp>(nl, f64, v);
             else if (isa<IntegerType>(inElement))
               v = nb.create<arith::SIToFPOp>(nl, f64, v);
             else if (!inElement.isF64())
               v = nb.create<arith::ExtFOp>(nl, f64, v);
             Value term = f.mul(w, v);
             if (crop) {
               // Extrapolated outputs sum to the value (from tap 0 alone).
               Value outside = source(f, a, y).second;
               Value first = nb.create<arith::CmpIOp>(
                   nl, arith::CmpIPredicate::eq, t,
                   nb.create<arith::ConstantIndexOp>(nl, 0));
               term = f.select(
                   outside, f.select(first, f.c(extrapolation), f.c(0)), term);
             }
             nb.create<linalg::YieldOp>(nl, f.add(args[1], term));
           })
          .getResult(0);
  if (!normalize)
    return sum;
  // The weights' sums along the axis, then sum / weights (1 where 0).
  auto lineType = RankedTensorType::get({outType.getDimSize(a.axis)}, f64);
  Value lineInit = lowering::fill(
      b, l,
      lowering::emptyTensor(b, l, lineType, [&](int64_t) { return a.out; }), 0);
  Value weights =
      b.create<linalg::GenericOp>(
           l, TypeRange{lineType}, ValueRange{window}, ValueRange{lineInit},
           SmallVector<AffineMap>{
               AffineMap::get(2, 0, {b.getAffineDimExpr(1)}, ctx),
               AffineMap::get(2, 0, {b.getAffineDimExpr(0)}, ctx)},
           SmallVector<Iter>{Iter::parallel, Iter::reduction},
           [&](OpBuilder &nb, Location nl, ValueRange args) {
             F64 f{nb, nl};
             Value y = f.fromIndex(nb.create<linalg::IndexOp>(nl, 0));
             Value t = nb.create<linalg::IndexOp>(nl, 1);
             nb.create<linalg::YieldOp>(
                 nl, f.add(args[1], tap(nb, nl, a, y, t).first));
           })
          .getResult(0);
  SmallVector<AffineMap> divMaps = {
      b.getMultiDimIdentityMap(rank),
      AffineMap::get(rank, 0, {b.getAffineDimExpr(a.axis)}, ctx),
      b.getMultiDimIdentityMap(rank)};
  Value out = lowering::emptyTensor(b, l, outType, sizeOf(current, outType));
  return b
      .create<linalg::GenericOp>(
          l, TypeRange{outType}, ValueRange{sum, weights}, ValueRange{out},
          divMaps, SmallVector<Iter>(rank, Iter::parallel),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            F64 f{nb, nl};
            Value zero = f.cmp(arith::CmpFPredicate::OEQ, args[1], f.c(0));
            Value divided = f.div(args[0], f.select(zero, f.c(1), args[1]));
            if (crop) {
              Value y = f.fromIndex(nb.create<linalg::IndexOp>(nl, a.axis));
              divided = f.select(source(f, a, y).second, args[0], divided);
            }
            nb.create<linalg::YieldOp>(nl, divided);
          })
      .getResult(0);
}

FailureOr<Value> Lowerer::run(Value input, Value spec, Value roi) {
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = lowering::plainResultType(op);
  int64_t rank = inType.getRank();
  ArrayRef<int64_t> axes = op.getAxes();
  int64_t k = axes.size();
  F64 f{b, l};
  // Sizes and scales first (the kernel's dims function computes them too).
  SmallVector<Axis> plan(k);
  SmallVector<Value> raw(k);
  for (int64_t p = 0; p < k; ++p) {
    Axis &a = plan[p];
    a.axis = axes[p];
    a.position = p;
    a.in = lowering::dimOf(b, l, input, a.axis);
    a.inF = f.fromIndex(a.in);
    raw[p] = f.element(spec, p);
  }
  StringRef policy = op.getAspectPolicy();
  Value common;
  if (op.getSizes() && policy != "stretch")
    for (int64_t p = 0; p < k; ++p) {
      Value s = f.div(raw[p], plan[p].inF);
      common = !common                  ? s
               : policy == "not_larger" ? f.min(common, s)
                                        : f.max(common, s);
    }
  for (int64_t p = 0; p < k; ++p) {
    Axis &a = plan[p];
    if (!op.getSizes()) {
      a.scale = raw[p];
      a.out = f.toIndex(f.mul(a.scale, a.inF));
    } else if (common) {
      a.scale = common;
      a.out = f.toIndex(f.add(f.mul(common, a.inF), f.c(0.5)));
    } else {
      a.out = f.toIndex(raw[p]);
      a.scale = f.div(raw[p], a.inF);
    }
    a.outF = f.mul(a.scale, a.inF); // the reference's output_width
    if (roi) {
      a.roiStart = f.element(roi, p);
      a.roiEnd = f.element(roi, k + p);
    }
    StringRef mode = op.getMode();
    if (op.getAntialias()) {
      // footprint start = floor(-r / s') + 1, taps = 2 - 2 * start
      a.antialiasScale = f.min(a.scale, f.c(1));
      double r = mode == "linear" ? 1 : 2;
      a.footprintStart =
          f.add(f.floor(f.div(f.c(-r), a.antialiasScale)), f.c(1));
      a.taps = f.toIndex(f.sub(f.c(2), f.mul(f.c(2), a.footprintStart)));
    } else {
      a.taps = b.create<arith::ConstantIndexOp>(l, mode == "cubic" ? 4 : 2);
    }
  }
  Value current = input;
  SmallVector<int64_t> shape(inType.getShape());
  for (const Axis &a : plan) {
    shape[a.axis] = outType.getDimSize(a.axis);
    current = pass(a, current, RankedTensorType::get(shape, b.getF64Type()));
  }
  (void)rank;
  // Back to the input's type: floats round, integers saturate and truncate
  // (numpy's astype after onnx's clip).
  Type element = outType.getElementType();
  return lowering::buildElementwise(
      b, l, outType, current,
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        Value v = args[0];
        if (isa<FloatType>(element))
          return element.isF64()
                     ? v
                     : nb.create<arith::TruncFOp>(nl, element, v).getResult();
        F64 g{nb, nl};
        unsigned bits = element.getIntOrFloatBitWidth();
        bool isUnsigned = element.isUnsignedInteger();
        double lo = isUnsigned ? 0 : -std::ldexp(1.0, bits - 1);
        double hi = std::ldexp(1.0, isUnsigned ? bits : bits - 1) - 1;
        Value clipped = g.max(g.min(v, g.c(hi)), g.c(lo));
        return isUnsigned ? nb.create<arith::FPToUIOp>(nl, element, clipped)
                                .getResult()
                          : nb.create<arith::FPToSIOp>(nl, element, clipped)
                                .getResult();
      },
      [&](int64_t i) {
        for (const Axis &a : plan)
          if (a.axis == i)
            return a.out;
        return lowering::dimOf(b, l, input, i);
      });
}
} // namespace

FailureOr<Value> lowering::lowerResize(OpBuilder &b, Operation *op,
                                       ValueRange operands) {
  auto resize = cast<ResizeOp>(op);
  if (!isa<FloatType>(resize.getInput().getType().getElementType()) &&
      !isa<IntegerType>(resize.getInput().getType().getElementType()))
    return op->emitOpError() << "needs a numeric input";
  return Lowerer(b, resize).run(operands[0], operands[1],
                                operands.size() > 2 ? operands[2] : Value());
}
