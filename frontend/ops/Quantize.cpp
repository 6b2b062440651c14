//===- Quantize.cpp - (Dynamic)QuantizeLinear, DequantizeLinear -----------===//
//
// Both decompose into kiln ops, computed in f32 as ONNX's reference does:
//
//   DequantizeLinear: y = cast((f32(x) - f32(zero_point)) * scale)
//                     to the scale's type (or output_dtype)
//   QuantizeLinear, integer y: y = cast(clip(round_even(x / scale) +
//                                  zero_point, lo, hi)), where [lo, hi] is
//                              the range of y's type
//   QuantizeLinear, float8 y:  y = cast(x / scale), saturating unless
//                              saturate = 0 (no zero point)
//   DynamicQuantizeLinear:     QuantizeLinear to uint8 with scale and zero
//                              point from x's range (including 0)
//   MatMulInteger, ConvInteger: int32 (a - a_zero_point) @ (b - b_zero_point)
//                              (a per-row a_zero_point, a per-column or per
//                              output channel b one); the matmul in int32,
//                              the conv in f64 (exact for these products)
//   QLinearMatMul, QLinearConv: that integer result (plus the int32 bias) in
//                              f64 times a_scale * b_scale / y_scale (in the
//                              scales' type, per output channel for a vector
//                              w_scale), plus y_zero_point, rounded half to
//                              even and clipped to y's type
//
// y's type is the zero point's, else output_dtype, else uint8. A scale (and
// zero point) is a scalar, one value per slice along `axis` (a vector), or
// with block_size, one value per block_size elements along `axis` (a tensor
// of x's rank): a vector is reshaped to broadcast along `axis`; a blocked one
// is repeated block_size times along it (reshape, expand, reshape) and
// sliced to x's size.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

// `v` (a scale or zero point) broadcastable against x's shape.
FailureOr<Value> alongAxis(NodeContext &c, Value v, ArrayRef<int64_t> shape,
                           int64_t axis, int64_t blockSize) {
  RankedTensorType type = typeOf(v);
  if (type.getRank() == 0 ||
      (type.hasStaticShape() && type.getNumElements() == 1))
    return reshapeToDims(c, v, {});
  int64_t rank = shape.size();
  if (!blockSize) {
    // A vector along the axis; one of a length known only at run time
    // broadcasts there (1 value or one per slice), checked at run time.
    if (type.getRank() != 1)
      return c.error("a per-axis scale or zero point must be a vector");
    if (!type.isDynamicDim(0) && !ShapedType::isDynamic(shape[axis]) &&
        type.getDimSize(0) != shape[axis])
      return c.error("a per-axis scale or zero point has " +
                     Twine(type.getDimSize(0)) + " values for an axis of " +
                     Twine(shape[axis]));
    SmallVector<int64_t> dims(rank, 1);
    dims[axis] = type.getDimSize(0);
    return reshapeToDims(c, v, dims);
  }
  if (type.getRank() != rank || !type.hasStaticShape() ||
      ShapedType::isDynamic(shape[axis]))
    return c.error("a blocked scale or zero point must have the input's "
                   "rank and a static shape, and the input a static dim "
                   "along the axis");
  int64_t blocks = type.getDimSize(axis);
  if (blocks * blockSize < shape[axis] ||
      (blocks - 1) * blockSize >= shape[axis])
    return c.error("a blocked scale or zero point has " + Twine(blocks) +
                   " blocks of " + Twine(blockSize) + " for an axis of " +
                   Twine(shape[axis]));
  // [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, B, ..] ->
  // [.., blocks * B, ..] -> [.., shape[axis], ..]
  SmallVector<int64_t> split(type.getShape());
  split.insert(split.begin() + axis + 1, 1);
  auto r = reshapeToDims(c, v, split);
  if (failed(r))
    return failure();
  split[axis + 1] = blockSize;
  Builder &b = c.builder;
  auto e = c.create(ExpandOp::getOperationName(), *r,
                    {b.getNamedAttr("shape", b.getDenseI64ArrayAttr(split))});
  if (failed(e))
    return failure();
  SmallVector<int64_t> joined(type.getShape());
  joined[axis] = blocks * blockSize;
  auto j = reshapeToDims(c, *e, joined);
  if (failed(j) || joined[axis] == shape[axis])
    return j;
  SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
  joined[axis] = shape[axis];
  return c.create(SliceOp::getOperationName(), *j,
                  {b.getNamedAttr("starts", b.getDenseI64ArrayAttr(starts)),
                   b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(joined)),
                   b.getNamedAttr("steps", b.getDenseI64ArrayAttr(steps))});
}

// The checked common inputs: x's static shape, the axis and block size.
struct QuantInputs {
  SmallVector<int64_t> shape;
  int64_t axis = 1, blockSize = 0;
};

FailureOr<QuantInputs> quantInputs(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  RankedTensorType x = typeOf(c.inputs[0]);
  QuantInputs in;
  in.shape.assign(x.getShape().begin(), x.getShape().end());
  in.blockSize = c.getInt("block_size", 0);
  if (in.blockSize < 0)
    return c.error("block_size must not be negative");
  // The axis matters (and must be valid) only for a scale of many values.
  RankedTensorType scale = typeOf(c.inputs[1]);
  if (scale.getRank() == 0 ||
      (scale.hasStaticShape() && scale.getNumElements() == 1)) {
    in.axis = 0;
    return in;
  }
  auto axis = normalizeAxis(c, c.getInt("axis", 1), x.getRank());
  if (failed(axis))
    return failure();
  in.axis = *axis;
  return in;
}

bool isFloat8(Type t) { return isNarrowFloat(t) && !isa<BFloat16Type>(t); }

FailureOr<Values> dequantizeLinear(NodeContext &c) {
  auto in = quantInputs(c);
  if (failed(in))
    return failure();
  Type f32 = c.builder.getF32Type();
  Type out = typeOf(c.inputs[1]).getElementType();
  if (int dtype = c.getInt("output_dtype", 0)) {
    out = elementType(c.builder.getContext(), dtype);
    if (!out)
      return c.error("output_dtype " + Twine(dtype) + " is not supported");
  }
  auto x = castTo(c, c.inputs[0], f32);
  if (failed(x))
    return failure();
  Value dx = (*x)[0];
  // A float8 zero point must be 0 and is ignored, as ONNX's reference does.
  Type xType = typeOf(c.inputs[0]).getElementType();
  if (c.inputs.size() == 3 && c.inputs[2] && !isFloat8(xType)) {
    auto zp = castTo(c, c.inputs[2], f32);
    if (failed(zp))
      return failure();
    auto z = alongAxis(c, (*zp)[0], in->shape, in->axis, in->blockSize);
    if (failed(z))
      return failure();
    auto d = binaryOp(c, SubOp::getOperationName(), dx, *z);
    if (failed(d))
      return failure();
    dx = *d;
  }
  auto s = castTo(c, c.inputs[1], f32);
  if (failed(s))
    return failure();
  auto scale = alongAxis(c, (*s)[0], in->shape, in->axis, in->blockSize);
  if (failed(scale))
    return failure();
  auto y = binaryOp(c, MulOp::getOperationName(), dx, *scale);
  if (failed(y))
    return failure();
  return castTo(c, *y, out);
}

FailureOr<Values> quantizeLinear(NodeContext &c) {
  auto in = quantInputs(c);
  if (failed(in))
    return failure();
  MLIRContext *ctx = c.builder.getContext();
  Type out = c.builder.getIntegerType(8, /*isSigned=*/false);
  if (int dtype = c.getInt("output_dtype", 0)) {
    out = elementType(ctx, dtype);
    if (!out)
      return c.error("output_dtype " + Twine(dtype) + " is not supported");
  }
  Value zeroPoint = c.inputs.size() == 3 ? c.inputs[2] : Value();
  if (zeroPoint)
    out = typeOf(zeroPoint).getElementType();
  bool integer = isa<IntegerType>(out) && !out.isInteger(1) &&
                 out.getIntOrFloatBitWidth() <= 16;
  if (!integer && !isFloat8(out))
    return c.error("quantizing to this type is not supported");
  // x / scale in x's type (numpy's promotion for f16 x and f32 scale: f32).
  Type xType = typeOf(c.inputs[0]).getElementType();
  Type sType = typeOf(c.inputs[1]).getElementType();
  Type compute = xType.getIntOrFloatBitWidth() >= sType.getIntOrFloatBitWidth()
                     ? xType
                     : sType;
  if (isNarrowFloat(compute) || !isa<FloatType>(compute)) // int32 x: in f32
    compute = c.builder.getF32Type();
  auto x = castTo(c, c.inputs[0], compute);
  auto s = castTo(c, c.inputs[1], compute);
  if (failed(x) || failed(s))
    return failure();
  auto scale = alongAxis(c, (*s)[0], in->shape, in->axis, in->blockSize);
  if (failed(scale))
    return failure();
  auto q = binaryOp(c, DivOp::getOperationName(), (*x)[0], *scale);
  if (failed(q))
    return failure();
  if (!integer)
    return castTo(c, *q, out);
  auto rounded = c.create(RoundOp::getOperationName(), *q);
  if (failed(rounded))
    return failure();
  Type f32 = c.builder.getF32Type();
  auto y = castTo(c, *rounded, f32);
  if (failed(y))
    return failure();
  Value sum = (*y)[0];
  if (zeroPoint) {
    auto zp = castTo(c, zeroPoint, f32);
    if (failed(zp))
      return failure();
    auto z = alongAxis(c, (*zp)[0], in->shape, in->axis, in->blockSize);
    if (failed(z))
      return failure();
    auto added = binaryOp(c, AddOp::getOperationName(), sum, *z);
    if (failed(added))
      return failure();
    sum = *added;
  }
  unsigned bits = out.getIntOrFloatBitWidth();
  bool isUnsigned = out.isUnsignedInteger();
  double lo = isUnsigned ? 0 : -std::ldexp(1.0, bits - 1);
  double hi = std::ldexp(1.0, isUnsigned ? bits : bits - 1) - 1;
  Builder &b = c.builder;
  auto clipped = c.create(ClipOp::getOperationName(), sum,
                          {b.getNamedAttr("min", b.getF64FloatAttr(lo)),
                           b.getNamedAttr("max", b.getF64FloatAttr(hi))});
  if (failed(clipped))
    return failure();
  return castTo(c, *clipped, out);
}

// DynamicQuantizeLinear: uint8 y, with scale = (max(x, 0) - min(x, 0)) /
// 255 over all of x (1 / 255 when that range is 0), and zero point =
// clip(round(-min(x, 0) / scale)).
FailureOr<Values> dynamicQuantizeLinear(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  std::vector<int64_t> all;
  for (int64_t i = 0; i < rank; ++i)
    all.push_back(i);
  Value zero = scalarLike(c, x, 0);
  auto hi = reduce(c, "max", all, false, x);
  auto lo = reduce(c, "min", all, false, x);
  if (failed(hi) || failed(lo))
    return failure();
  auto hi0 = binaryOp(c, MaxOp::getOperationName(), *hi, zero);
  auto lo0 = binaryOp(c, MinOp::getOperationName(), *lo, zero);
  if (failed(hi0) || failed(lo0))
    return failure();
  auto range = binaryOp(c, SubOp::getOperationName(), *hi0, *lo0);
  if (failed(range))
    return failure();
  // A constant x (range 0) gets the scale 1 / 255, as ONNX's reference has.
  auto flat = binaryOp(c, EqualOp::getOperationName(), *range, zero);
  if (failed(flat))
    return failure();
  auto span = c.create(WhereOp::getOperationName(),
                       ValueRange{*flat, scalarLike(c, x, 1), *range});
  if (failed(span))
    return failure();
  auto scale =
      binaryOp(c, DivOp::getOperationName(), *span, scalarLike(c, x, 255));
  if (failed(scale))
    return failure();
  auto shifted = binaryOp(c, SubOp::getOperationName(), zero, *lo0);
  if (failed(shifted))
    return failure();
  auto ratio = binaryOp(c, DivOp::getOperationName(), *shifted, *scale);
  if (failed(ratio))
    return failure();
  auto rounded = c.create(RoundOp::getOperationName(), *ratio);
  if (failed(rounded))
    return failure();
  Builder &b = c.builder;
  auto clipped = c.create(ClipOp::getOperationName(), *rounded,
                          {b.getNamedAttr("min", b.getF64FloatAttr(0)),
                           b.getNamedAttr("max", b.getF64FloatAttr(255))});
  if (failed(clipped))
    return failure();
  auto zeroPoint = castTo(c, *clipped, b.getIntegerType(8, false));
  if (failed(zeroPoint))
    return failure();
  // y = QuantizeLinear(x, scale, zero point).
  c.inputs = {x, *scale, (*zeroPoint)[0]};
  auto y = quantizeLinear(c);
  if (failed(y))
    return failure();
  return Values{(*y)[0], *scale, (*zeroPoint)[0]};
}

} // namespace

FailureOr<Values> convertDynamicQuantizeLinear(NodeContext &c) {
  return dynamicQuantizeLinear(c);
}
FailureOr<Values> convertQuantizeLinear(NodeContext &c) {
  return quantizeLinear(c);
}
FailureOr<Values> convertDequantizeLinear(NodeContext &c) {
  return dequantizeLinear(c);
}

namespace {
// `v` minus its zero point `zp` (absent: v), both widened to `to`; `rowAxis`
// >= 0 puts a vector zero point along that axis of v (per row or output
// channel), else it broadcasts along the last axis.
FailureOr<Value> lessZeroPoint(NodeContext &c, Value v, Value zp, Type to,
                               int64_t rowAxis) {
  auto wide = castTo(c, v, to);
  if (failed(wide))
    return failure();
  if (!zp)
    return (*wide)[0];
  auto z = castTo(c, zp, to);
  if (failed(z))
    return failure();
  Value point = (*z)[0];
  if (rowAxis >= 0 && typeOf(point).getRank() == 1) {
    auto shaped = alongAxis(c, point, typeOf(v).getShape(), rowAxis, 0);
    if (failed(shaped))
      return failure();
    point = *shaped;
  }
  return binaryOp(c, SubOp::getOperationName(), (*wide)[0], point);
}

// The integer product of the two operands (inputs aIndex, bIndex with zero
// points at aZp, bZp; -1: none) as int32 (matmul) or f64 (conv).
FailureOr<Value> integerProduct(NodeContext &c, bool isConv, int aIndex,
                                int aZp, int bIndex, int bZp) {
  auto input = [&](int i) -> Value {
    return i >= 0 && i < (int)c.inputs.size() ? c.inputs[i] : Value();
  };
  Type wide =
      isConv ? Type(c.builder.getF64Type()) : Type(c.builder.getI32Type());
  Value a = input(aIndex), b = input(bIndex);
  int64_t aRank = typeOf(a).getRank();
  auto left = lessZeroPoint(c, a, input(aZp), wide, isConv ? -1 : aRank - 2);
  auto right = lessZeroPoint(c, b, input(bZp), wide, isConv ? 0 : -1);
  if (failed(left) || failed(right))
    return failure();
  if (!isConv)
    return binaryOp(c, MatMulOp::getOperationName(), *left, *right);
  NodeContext inner = c;
  inner.inputs = {*left, *right};
  auto y = convertConv(inner);
  if (failed(y))
    return failure();
  return (*y)[0];
}

// round_even(x * scale + zero_point) clipped to y's type, from x in f64.
FailureOr<Values> requantize(NodeContext &c, Value x, Value scale, Value zp,
                             Type yType) {
  Type f64 = c.builder.getF64Type();
  auto s = castTo(c, scale, f64);
  if (failed(s))
    return failure();
  auto y = binaryOp(c, MulOp::getOperationName(), x, (*s)[0]);
  if (failed(y))
    return failure();
  if (zp) {
    auto z = castTo(c, zp, f64);
    if (failed(z))
      return failure();
    y = binaryOp(c, AddOp::getOperationName(), *y, (*z)[0]);
    if (failed(y))
      return failure();
  }
  auto rounded = c.create(RoundOp::getOperationName(), *y);
  if (failed(rounded))
    return failure();
  unsigned bits = yType.getIntOrFloatBitWidth();
  bool isUnsigned = yType.isUnsignedInteger();
  double lo = isUnsigned ? 0 : -std::ldexp(1.0, bits - 1),
         hi = isUnsigned ? std::ldexp(1.0, bits) - 1
                         : std::ldexp(1.0, bits - 1) - 1;
  auto low = binaryOp(c, MaxOp::getOperationName(), *rounded,
                      scalarLike(c, *rounded, lo));
  if (failed(low))
    return failure();
  auto clipped =
      binaryOp(c, MinOp::getOperationName(), *low, scalarLike(c, *low, hi));
  if (failed(clipped))
    return failure();
  return castTo(c, *clipped, yType);
}
} // namespace

FailureOr<Values> convertMatMulInteger(NodeContext &c) {
  if (failed(arity(c, 2, 4)))
    return failure();
  return single(integerProduct(c, false, 0, 2, 1, 3));
}

FailureOr<Values> convertConvInteger(NodeContext &c) {
  if (failed(arity(c, 2, 4)))
    return failure();
  auto y = integerProduct(c, true, 0, 2, 1, 3);
  if (failed(y))
    return failure();
  return castTo(c, *y, c.builder.getI32Type());
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp);
// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B).
FailureOr<Values> convertQLinear(NodeContext &c) {
  bool isConv = c.node.op_type() == "QLinearConv";
  if (failed(arity(c, 8, isConv ? 9 : 8)))
    return failure();
  auto product = integerProduct(c, isConv, 0, 2, 3, 5);
  if (failed(product))
    return failure();
  Type f64 = c.builder.getF64Type();
  auto x = castTo(c, *product, f64);
  if (failed(x))
    return failure();
  Value acc = (*x)[0];
  int64_t rank = typeOf(acc).getRank();
  // A vector along `axis` of the result (per output channel or per row).
  auto along = [&](Value v, int64_t axis) -> FailureOr<Value> {
    if (!v || typeOf(v).getRank() != 1)
      return v;
    return alongAxis(c, v, typeOf(acc).getShape(), axis, 0);
  };
  if (isConv && c.inputs.size() > 8 && c.inputs[8]) {
    auto bias = castTo(c, c.inputs[8], f64);
    if (failed(bias))
      return failure();
    auto shaped = along((*bias)[0], 1);
    if (failed(shaped))
      return failure();
    auto sum = binaryOp(c, AddOp::getOperationName(), acc, *shaped);
    if (failed(sum))
      return failure();
    acc = *sum;
  }
  // a_scale * b_scale / y_scale in the scales' type; a vector w_scale is
  // per output channel.
  FailureOr<Value> bScale =
      isConv ? along(c.inputs[4], 1) : FailureOr<Value>(c.inputs[4]);
  // QLinearMatMul: a vector a_scale, y_scale or y_zero_point is per row of
  // a (and y).
  auto perRow = [&](Value v) -> FailureOr<Value> {
    return isConv ? FailureOr<Value>(v) : along(v, rank - 2);
  };
  auto aScale = perRow(c.inputs[1]), yScale = perRow(c.inputs[6]),
       yZero = perRow(c.inputs[7]);
  if (failed(bScale) || failed(aScale) || failed(yScale) || failed(yZero))
    return failure();
  auto both = binaryOp(c, MulOp::getOperationName(), *aScale, *bScale);
  if (failed(both))
    return failure();
  auto scale = binaryOp(c, DivOp::getOperationName(), *both, *yScale);
  if (failed(scale))
    return failure();
  Value yZp = *yZero;
  Type yType =
      yZp ? typeOf(yZp).getElementType() : typeOf(c.inputs[0]).getElementType();
  if (!isa<IntegerType>(yType) || yType.getIntOrFloatBitWidth() > 32)
    return c.error("'" + c.node.op_type() +
                   "' needs an 8-bit or 16-bit integer result type");
  return requantize(c, acc, *scale, yZp, yType);
}

void addQuantizeConverters(ConverterTable &table) {
  addRows(table, {
                     {"QuantizeLinear", convertQuantizeLinear},
                     {"DequantizeLinear", convertDequantizeLinear},
                     {"DynamicQuantizeLinear", convertDynamicQuantizeLinear},
                     {"MatMulInteger", convertMatMulInteger},
                     {"ConvInteger", convertConvInteger},
                     {"QLinearMatMul", convertQLinear},
                     {"QLinearConv", convertQLinear},
                 });
}

} // namespace kiln::onnx_import
