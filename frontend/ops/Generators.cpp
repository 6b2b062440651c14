//===- Generators.cpp - OneHot, Hann/Hamming/BlackmanWindow, AffineGrid ---===//
//
// Ops whose result is made from an iota whose length is an input (read at
// run time unless it is a constant):
//  - OneHot(indices, depth, values = [off, on], axis = -1): the indices
//    (any numeric type; negative ones in [-depth, 0) wrap) compared with an
//    iota of length depth inserted at `axis`; where(hit, on, off).
//  - HannWindow, HammingWindow, BlackmanWindow(size, output_datatype,
//    periodic = 1): with n = 0 .. size - 1 and N = size (periodic) or
//    size - 1, computed in f64 as the ONNX reference does:
//      hann      sin(pi n / N)^2
//      hamming   25/46 - (21/46) cos(2 pi n / N)
//      blackman  0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
//  - AffineGrid(theta [N, k, k + 1], size [N, C, D..]): grid[n, d.., r] =
//    sum over c < k of theta[n, r, c] * coordinate_c + theta[n, r, k], where
//    coordinate c runs along spatial dim k - 1 - c (x along the last):
//    -1 + 2 i / (n - 1) with align_corners, else (2 i + 1) / n - 1; all by
//    broadcasting, the sizes read at run time unless constant.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

// A one-element input (rank 0 or 1) as a rank-0 int64 (truncating floats).
FailureOr<Value> scalarInt(NodeContext &c, Value v, StringRef what) {
  auto type = typeOf(v);
  if (type.getRank() > 1 ||
      (type.hasStaticShape() && type.getNumElements() != 1))
    return c.error("'" + c.node.op_type() + "' needs one value as its " + what);
  auto cast = castTo(c, v, c.builder.getI64Type());
  if (failed(cast))
    return failure();
  Value out = (*cast)[0];
  if (type.getRank() == 0)
    return out;
  return reshapeTo(c, out, {});
}

// 0 .. n - 1 (n a rank-0 int64) as a 1-D int64 tensor, static when n is a
// constant.
FailureOr<Value> iotaOf(NodeContext &c, Value n) {
  if (auto fixed = constantValues<int64_t>(n)) {
    int64_t length = std::max<int64_t>(fixed->front(), 0);
    std::vector<int64_t> values;
    for (int64_t i = 0; i < length; ++i)
      values.push_back(i);
    return int64Constant(c, {length}, values, "iota");
  }
  return c.create(RangeOp::getOperationName(),
                  {int64Constant(c, {}, {0}), n, int64Constant(c, {}, {1})});
}

Value f64Constant(NodeContext &c, double value) {
  Type f64 = c.builder.getF64Type();
  return c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({}, f64, c.device),
      DenseElementsAttr::get(RankedTensorType::get({}, f64),
                             c.builder.getF64FloatAttr(value)));
}

} // namespace

FailureOr<Values> convertOneHot(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  Value indices = c.inputs[0], values = c.inputs[2];
  int64_t rank = typeOf(indices).getRank();
  auto axis = normalizeAxis(c, c.getInt("axis", -1), rank + 1);
  auto depth = scalarInt(c, c.inputs[1], "depth");
  if (failed(axis) || failed(depth))
    return failure();
  auto valuesType = typeOf(values);
  if (valuesType.getRank() != 1 ||
      (!valuesType.isDynamicDim(0) && valuesType.getDimSize(0) != 2))
    return c.error("OneHot's values must be [off, on]");
  // Compare in int64; float indices truncate as numpy's astype would not,
  // so they compare as floats instead.
  Type element = typeOf(indices).getElementType();
  bool floating = isa<FloatType>(element);
  Type compareType =
      floating ? Type(c.builder.getF64Type()) : Type(c.builder.getI64Type());
  auto wide = castTo(c, indices, compareType);
  if (failed(wide))
    return failure();
  Value idx = (*wide)[0];
  auto depthAs = castTo(c, *depth, compareType);
  if (failed(depthAs))
    return failure();
  auto negative =
      binaryOp(c, LessOp::getOperationName(), idx, scalarLike(c, idx, 0));
  auto shifted = binaryOp(c, AddOp::getOperationName(), idx, (*depthAs)[0]);
  if (failed(negative) || failed(shifted))
    return failure();
  auto wrapped = c.create(WhereOp::getOperationName(),
                          ValueRange{*negative, *shifted, idx});
  if (failed(wrapped))
    return failure();
  auto spread = unsqueezeAt(c, *wrapped, *axis);
  auto iota = iotaOf(c, *depth);
  if (failed(spread) || failed(iota))
    return failure();
  SmallVector<int64_t> shape(rank + 1, 1);
  shape[*axis] = typeOf(*iota).getDimSize(0);
  auto placed = reshapeToDims(c, *iota, shape);
  if (failed(placed))
    return failure();
  auto targets = castTo(c, *placed, compareType);
  if (failed(targets))
    return failure();
  auto hit = binaryOp(c, EqualOp::getOperationName(), *spread, (*targets)[0]);
  if (failed(hit))
    return failure();
  // off and on as scalars.
  auto pick = [&](int64_t i) -> FailureOr<Value> {
    auto one = c.create(
        GatherOp::getOperationName(), {values, int64Constant(c, {}, {i})},
        {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0))});
    return one;
  };
  auto off = pick(0), on = pick(1);
  if (failed(off) || failed(on))
    return failure();
  return single(
      c.create(WhereOp::getOperationName(), ValueRange{*hit, *on, *off}));
}

FailureOr<Values> convertWindow(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  StringRef op = c.node.op_type();
  Type type =
      elementType(c.builder.getContext(), c.getInt("output_datatype", 1));
  if (!type || !(isa<FloatType>(type) || isa<IntegerType>(type)))
    return c.error("'" + op + "' output_datatype " +
                   Twine(c.getInt("output_datatype", 1)) + " is not supported");
  auto size = scalarInt(c, c.inputs[0], "size");
  if (failed(size))
    return failure();
  auto iota = iotaOf(c, *size);
  if (failed(iota))
    return failure();
  Type f64 = c.builder.getF64Type();
  auto n = castTo(c, *iota, f64);
  auto length = castTo(c, *size, f64);
  if (failed(n) || failed(length))
    return failure();
  Value denominator = (*length)[0];
  if (c.getInt("periodic", 1) == 0) {
    auto less =
        binaryOp(c, SubOp::getOperationName(), denominator, f64Constant(c, 1));
    if (failed(less))
      return failure();
    denominator = *less;
  }
  // phase = k pi n / N
  auto phase = [&](double k) -> FailureOr<Value> {
    auto scaled = binaryOp(c, MulOp::getOperationName(), (*n)[0],
                           f64Constant(c, k * M_PI));
    if (failed(scaled))
      return failure();
    return binaryOp(c, DivOp::getOperationName(), *scaled, denominator);
  };
  auto cosine = [&](double k, double weight) -> FailureOr<Value> {
    auto p = phase(k);
    if (failed(p))
      return failure();
    auto cos = c.create(CosOp::getOperationName(), *p);
    if (failed(cos))
      return failure();
    return binaryOp(c, MulOp::getOperationName(), *cos, f64Constant(c, weight));
  };
  FailureOr<Value> window = failure();
  if (op == "HannWindow") {
    auto p = phase(1);
    if (failed(p))
      return failure();
    auto sin = c.create(SinOp::getOperationName(), *p);
    if (failed(sin))
      return failure();
    window = binaryOp(c, MulOp::getOperationName(), *sin, *sin);
  } else if (op == "HammingWindow") {
    auto term = cosine(2, -(1 - 25.0 / 46.0));
    if (failed(term))
      return failure();
    window = binaryOp(c, AddOp::getOperationName(), *term,
                      f64Constant(c, 25.0 / 46.0));
  } else {
    auto first = cosine(2, -0.5), second = cosine(4, 0.08);
    if (failed(first) || failed(second))
      return failure();
    auto sum = binaryOp(c, AddOp::getOperationName(), *first, *second);
    if (failed(sum))
      return failure();
    window = binaryOp(c, AddOp::getOperationName(), *sum, f64Constant(c, 0.42));
  }
  if (failed(window))
    return failure();
  return castTo(c, *window, type);
}

FailureOr<Values> convertAffineGrid(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value theta = c.inputs[0], size = c.inputs[1];
  auto type = typeOf(theta);
  Type element = type.getElementType();
  // k from theta, else from the result's declared rank (k + 2).
  int64_t k = type.getRank() == 3 ? type.getDimSize(1) : ShapedType::kDynamic;
  if (ShapedType::isDynamic(k) && c.declaredRank(0))
    k = *c.declaredRank(0) - 2;
  if (type.getRank() != 3 || ShapedType::isDynamic(k) ||
      !isa<FloatType>(element))
    return c.error("AffineGrid needs a floating-point theta [N, k, k + 1] "
                   "with k known at compile time");
  if (k != 2 && k != 3)
    return c.error("AffineGrid supports 2-D and 3-D grids, got k = " +
                   Twine(k));
  bool align = c.getInt("align_corners", 0) != 0;
  int64_t rank = k + 2; // [N, spatial..., k]
  auto &b = c.builder;
  auto axis0 = b.getNamedAttr("axis", b.getI64IntegerAttr(0));
  auto constant = [&](double v) { return scalarLike(c, theta, v); };
  // theta[:, r, column] as [N, 1.., k] broadcasting along the grid.
  auto column = [&](int64_t col) -> FailureOr<Value> {
    auto picked = c.create(
        GatherOp::getOperationName(), {theta, int64Constant(c, {}, {col})},
        {b.getNamedAttr("axis", b.getI64IntegerAttr(2))}); // [N, k]
    if (failed(picked))
      return failure();
    SmallVector<int64_t> dims(rank, 1);
    dims[0] = type.getDimSize(0);
    dims[rank - 1] = k;
    return reshapeToDims(c, *picked, dims);
  };
  auto grid = column(k); // the translation
  if (failed(grid))
    return failure();
  for (int64_t col = 0; col < k; ++col) {
    int64_t spatial = k - 1 - col; // 0 is the outermost spatial dim
    auto n = c.create(GatherOp::getOperationName(),
                      {size, int64Constant(c, {}, {2 + spatial})}, {axis0});
    if (failed(n))
      return failure();
    auto iota = iotaOf(c, *n);
    if (failed(iota))
      return failure();
    auto i = castTo(c, *iota, element);
    auto length = castTo(c, *n, element);
    if (failed(i) || failed(length))
      return failure();
    // align: -1 + 2 i / (n - 1); else (2 i + 1) / n - 1
    auto twice = binaryOp(c, MulOp::getOperationName(), (*i)[0], constant(2));
    if (failed(twice))
      return failure();
    FailureOr<Value> coordinate = failure();
    if (align) {
      auto less =
          binaryOp(c, SubOp::getOperationName(), (*length)[0], constant(1));
      if (failed(less))
        return failure();
      auto ratio = binaryOp(c, DivOp::getOperationName(), *twice, *less);
      if (failed(ratio))
        return failure();
      auto shifted =
          binaryOp(c, SubOp::getOperationName(), *ratio, constant(1));
      auto single =
          binaryOp(c, EqualOp::getOperationName(), (*length)[0], constant(1));
      if (failed(shifted) || failed(single))
        return failure();
      // One point sits at 0 (as torch puts it), not at 0 / 0.
      coordinate = c.create(WhereOp::getOperationName(),
                            ValueRange{*single, constant(0), *shifted});
    } else {
      auto odd = binaryOp(c, AddOp::getOperationName(), *twice, constant(1));
      if (failed(odd))
        return failure();
      auto ratio = binaryOp(c, DivOp::getOperationName(), *odd, (*length)[0]);
      if (failed(ratio))
        return failure();
      coordinate = binaryOp(c, SubOp::getOperationName(), *ratio, constant(1));
    }
    if (failed(coordinate))
      return failure();
    SmallVector<int64_t> dims(rank, 1);
    dims[1 + spatial] = typeOf(*coordinate).getDimSize(0);
    auto placed = reshapeToDims(c, *coordinate, dims);
    auto weight = column(col);
    if (failed(placed) || failed(weight))
      return failure();
    auto term = binaryOp(c, MulOp::getOperationName(), *weight, *placed);
    if (failed(term))
      return failure();
    grid = binaryOp(c, AddOp::getOperationName(), *grid, *term);
    if (failed(grid))
      return failure();
  }
  return Values{*grid};
}

void addGeneratorsConverters(ConverterTable &table) {
  addRows(table,
          {
              {"AffineGrid", convertAffineGrid},
              {"OneHot", convertOneHot},
              {"HannWindow", convertWindow},
              {"HammingWindow", convertWindow},
              {"BlackmanWindow", convertWindow},
              {"Range", binary<RangeOp, 3>}, // constant inputs fold at import
          });
}

} // namespace kiln::onnx_import
