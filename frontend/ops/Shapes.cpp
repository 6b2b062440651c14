//===- Shapes.cpp - shape ops ---------------------------------------------===//
//
// Constant, Reshape, Flatten, Transpose, Squeeze/Unsqueeze, Shape, Size,
// Expand and ConstantOfShape, with shapes and axes known at compile time or
// only at run time.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {
FailureOr<Values> constant(NodeContext &c) {
  const auto *value = c.attr("value");
  Builder &b = c.builder;
  auto make = [&](Type element, ArrayRef<int64_t> shape, Attribute splatOrNull,
                  ArrayRef<Attribute> values) {
    auto plain = RankedTensorType::get(shape, element);
    return Values{c.builder.create<ConstantOp>(
        c.loc, RankedTensorType::get(shape, element, c.device),
        splatOrNull ? DenseElementsAttr::get(plain, splatOrNull)
                    : DenseElementsAttr::get(plain, values))};
  };
  if (const auto *a = c.attr("value_float"))
    return make(b.getF32Type(), {}, b.getF32FloatAttr(a->f()), {});
  if (const auto *a = c.attr("value_int"))
    return make(b.getI64Type(), {}, b.getI64IntegerAttr(a->i()), {});
  if (const auto *a = c.attr("value_floats")) {
    SmallVector<Attribute> values;
    for (float f : a->floats())
      values.push_back(b.getF32FloatAttr(f));
    return make(b.getF32Type(), {(int64_t)values.size()}, {}, values);
  }
  if (const auto *a = c.attr("value_ints")) {
    SmallVector<Attribute> values;
    for (int64_t i : a->ints())
      values.push_back(b.getI64IntegerAttr(i));
    return make(b.getI64Type(), {(int64_t)values.size()}, {}, values);
  }
  if (!value || !value->has_t())
    return c.error("Constant with a sparse or string value is not supported");
  std::string blob = c.node.output(0);
  auto converted = convertTensor(value->t(), c.device, c.loc, blob, c.modelDir);
  if (failed(converted))
    return failure();
  return Values{
      c.builder.create<ConstantOp>(c.loc, converted->first, converted->second)};
}

// Input `i` when it is a spec known only at run time, made `length` long
// (see withLength); null when it is a constant or a symbolic shape.
Value runtimeSpec(NodeContext &c, size_t i,
                  std::optional<int64_t> length = std::nullopt) {
  if (c.inputs.size() <= i || !c.inputs[i] ||
      constantValues<int64_t>(c.inputs[i]) || symbolicInts(c, c.inputs[i]))
    return nullptr;
  return withLength(c, c.inputs[i], length);
}

// The declared rank of output 0 plus `delta`, if declared.
std::optional<int64_t> declaredPlus(NodeContext &c, int64_t delta) {
  if (auto rank = c.declaredRank(0))
    return *rank + delta;
  return std::nullopt;
}

// kiln.reshape_to `input` by `spec` in `mode` (reshape/unsqueeze/squeeze).
FailureOr<Values> reshapeByData(NodeContext &c, Value spec, StringRef mode) {
  return single(reshapeBySpec(c, c.inputs[0], spec, mode));
}

// The ONNX reshape spec of a shape input holding symbolic dims: a symbolic
// entry is 0 when it is the input's own dim there, or else -1 (inferred) if
// it is the only one; failure (no diagnostic) otherwise.
FailureOr<std::vector<int64_t>> symbolicSpec(NodeContext &c, Value input,
                                             const SymbolicInts &shape) {
  std::vector<int64_t> spec;
  int inferred = 0;
  for (auto [i, e] : llvm::enumerate(shape.data)) {
    if (auto k = dyn_cast<AffineConstantExpr>(e)) {
      inferred += k.getValue() == -1;
      spec.push_back(k.getValue());
    } else if (i < (size_t)typeOf(input).getRank() &&
               c.shapes->dimOf(input, i) == e) {
      spec.push_back(0);
    } else {
      spec.push_back(-1);
      ++inferred;
    }
  }
  if (inferred > 1) // not expressible as a view: reshape by the data
    return failure();
  return spec;
}

FailureOr<Values> reshape(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto spec = constantValues<int64_t>(c.inputs[1]);
  if (!spec)
    if (const SymbolicInts *symbolic = symbolicInts(c, c.inputs[1])) {
      auto resolved = symbolicSpec(c, c.inputs[0], *symbolic);
      if (succeeded(resolved))
        spec = *resolved;
    }
  bool allowZero = c.getInt("allowzero", 0) != 0;
  if (!spec)
    return reshapeByData(c, withLength(c, c.inputs[1], declaredPlus(c, 0)),
                         allowZero ? "reshape_allowzero" : "reshape");
  if (allowZero && llvm::is_contained(*spec, 0)) {
    // 0 is a dim of size 0, not a copy of the input's.
    if (llvm::is_contained(*spec, -1))
      return c.error("Reshape allowzero=1 cannot infer a -1 dim next to a 0");
    return single(reshapeToDims(c, c.inputs[0], *spec));
  }
  return single(reshapeTo(c, c.inputs[0], *spec));
}

FailureOr<Values> flatten(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto shape = cast<RankedTensorType>(c.inputs[0].getType()).getShape();
  int64_t rank = shape.size(), axis = c.getInt("axis", 1);
  if (axis < -rank || axis > rank)
    return c.error("Flatten axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += rank;
  auto product = [&](int64_t from, int64_t to) -> int64_t {
    int64_t p = 1;
    for (int64_t i = from; i < to; ++i) {
      if (ShapedType::isDynamic(shape[i]))
        return -1;
      p *= shape[i];
    }
    return p;
  };
  int64_t left = product(0, axis), right = product(axis, rank);
  if (left == -1 && right == -1) // sized from the dims at run time
    return reshapeByData(c, int64Constant(c, {1}, {axis}, "axis"), "flatten");
  if (left == -1 && axis == 1) // copy the (symbolic) batch dim
    return single(reshapeTo(c, c.inputs[0], {0, right}));
  // Sizes (0 a size: a tensor with an empty dim), one of them inferred.
  return single(reshapeToDims(c, c.inputs[0],
                              {left == -1 ? ShapedType::kDynamic : left,
                               right == -1 ? ShapedType::kDynamic : right}));
}

FailureOr<Values> transpose(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int64_t rank = typeOf(c.inputs[0]).getRank();
  std::vector<int64_t> reversed;
  for (int64_t i = rank - 1; i >= 0; --i)
    reversed.push_back(i);
  std::vector<int64_t> perm = ints(c, "perm", reversed);
  return single(c.create(
      TransposeOp::getOperationName(), c.inputs[0],
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))}));
}

FailureOr<std::vector<int64_t>> axesOf(NodeContext &c) {
  if (c.inputs.size() > 1 && c.inputs[1]) {
    auto values = constantValues<int64_t>(c.inputs[1]);
    if (!values)
      return c.error("axes computed at run time are not supported");
    return *values;
  }
  return ints(c, "axes", {});
}

FailureOr<Values> unsqueeze(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  int64_t rank = typeOf(c.inputs[0]).getRank();
  if (Value spec = runtimeSpec(c, 1, declaredPlus(c, -rank)))
    return reshapeByData(c, spec, "unsqueeze");
  auto axes = axesOf(c);
  if (failed(axes))
    return failure();
  auto in = typeOf(c.inputs[0]).getShape();
  rank = in.size() + axes->size();
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    auto a = normalizeAxis(c, axis, rank);
    if (failed(a))
      return failure();
    if (inserted[*a])
      return c.error("Unsqueeze repeats axis " + Twine(axis));
    inserted[*a] = true;
  }
  SmallVector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(inserted[i] ? 1 : in[next++]);
  if (llvm::count_if(dims, ShapedType::isDynamic) > 1) // not a view spec
    return reshapeByData(c, int64Constant(c, {(int64_t)axes->size()}, *axes),
                         "unsqueeze");
  return single(reshapeToDims(c, c.inputs[0], dims));
}

FailureOr<Values> squeeze(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  if (auto rank = c.declaredRank(0)) {
    if (Value spec = runtimeSpec(c, 1, typeOf(c.inputs[0]).getRank() - *rank))
      return reshapeByData(c, spec, "squeeze");
  } else if (Value spec = runtimeSpec(c, 1)) {
    return reshapeByData(c, spec, "squeeze");
  }
  auto axes = axesOf(c);
  if (failed(axes))
    return failure();
  auto in = typeOf(c.inputs[0]).getShape();
  std::vector<bool> dropped(in.size(), false);
  for (int64_t axis : *axes) {
    auto a = normalizeAxis(c, axis, in.size());
    if (failed(a))
      return failure();
    if (ShapedType::isDynamic(in[*a])) // 1 at run time, presumably
      return reshapeByData(c, int64Constant(c, {(int64_t)axes->size()}, *axes),
                           "squeeze");
    if (in[*a] != 1)
      return c.error("Squeeze axis " + Twine(axis) + " has size " +
                     (ShapedType::isDynamic(in[*a]) ? std::string("?")
                                                    : std::to_string(in[*a])) +
                     ", not 1");
    dropped[*a] = true;
  }
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i) {
    if (axes->empty() && in[i] == 1)
      continue;
    if (!dropped[i])
      dims.push_back(in[i]);
  }
  if (axes->empty() && llvm::any_of(in, ShapedType::isDynamic))
    return c.error("Squeeze without axes needs static dims");
  if (llvm::count_if(dims, ShapedType::isDynamic) > 1) // not a view spec
    return reshapeByData(c, int64Constant(c, {(int64_t)axes->size()}, *axes),
                         "squeeze");
  return single(reshapeToDims(c, c.inputs[0], dims));
}

// A constant once the input's shape is static (bound at import).
FailureOr<Values> shape(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto type = typeOf(c.inputs[0]);
  int64_t rank = type.getRank();
  int64_t start = c.getInt("start", 0), end = c.getInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  // Symbolic dims are read at run time (kiln.shape); the shape table
  // records them as symbols (see OnnxFold.cpp).
  end = std::max(start, end);
  SymbolicInts dims{{end - start}, {}, c.builder.getI64Type()};
  bool symbolic = false;
  for (int64_t i = start; i < end; ++i) {
    dims.data.push_back(c.shapes->dimOf(c.inputs[0], i));
    symbolic |= type.isDynamicDim(i);
  }
  if (!symbolic)
    return Values{makeInts(c, dims)};
  auto real = c.create(
      ShapeOp::getOperationName(), c.inputs[0],
      {c.builder.getNamedAttr("start", c.builder.getI64IntegerAttr(start)),
       c.builder.getNamedAttr("end", c.builder.getI64IntegerAttr(end))});
  if (failed(real))
    return failure();
  c.shapes->values[*real] = dims;
  return Values{*real};
}

FailureOr<Values> expand(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  if (Value spec = runtimeSpec(c, 1)) {
    // A shape of symbolic length may be shorter than the declared result
    // rank (it broadcasts from the right): left-padded with 1s up to it.
    auto rank = c.declaredRank(0);
    auto type = typeOf(spec);
    if (rank && type.getRank() == 1 && type.isDynamicDim(0)) {
      auto length = dimValue(c, spec, 0);
      if (failed(length))
        return failure();
      auto missing = binaryOp(c, SubOp::getOperationName(),
                              int64Constant(c, {}, {*rank}), *length);
      if (failed(missing))
        return failure();
      auto begin = reshapeTo(c, *missing, {1});
      if (failed(begin))
        return failure();
      auto pads = concatOf(c, {*begin, int64Constant(c, {1}, {0})}, 0);
      if (failed(pads))
        return failure();
      auto padded =
          padBy(c, spec, *pads, int64Constant(c, {}, {1}), Value(), "constant");
      if (failed(padded))
        return failure();
      spec = withLength(c, *padded, *rank);
    }
    return single(
        c.create(ExpandToOp::getOperationName(), {c.inputs[0], spec}));
  }
  auto shape = constantValues<int64_t>(c.inputs[1]);
  if (const SymbolicInts *symbolic = symbolicInts(c, c.inputs[1])) {
    // A symbolic entry that is the input's own dim there keeps it (entry
    // 1); any other (2 * that dim, another value's dim) is a size only the
    // run knows, and the input's dim may be 1 and broadcast to it.
    auto in = typeOf(c.inputs[0]);
    int64_t offset = (int64_t)symbolic->data.size() - in.getRank();
    shape.emplace();
    for (auto [i, e] : llvm::enumerate(symbolic->data)) {
      if (auto k = dyn_cast<AffineConstantExpr>(e)) {
        shape->push_back(k.getValue());
        continue;
      }
      int64_t at = (int64_t)i - offset;
      if (at < 0 || !in.isDynamicDim(at) ||
          c.shapes->dimOf(c.inputs[0], at) != e)
        return single(c.create(ExpandToOp::getOperationName(),
                               {c.inputs[0], c.inputs[1]}));
      shape->push_back(1);
    }
  }
  if (!shape)
    return c.error("Expand needs a shape known at compile time");
  return single(
      c.create(ExpandOp::getOperationName(), c.inputs[0],
               {c.builder.getNamedAttr(
                   "shape", c.builder.getDenseI64ArrayAttr(*shape))}));
}

FailureOr<Values> size(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto type = typeOf(c.inputs[0]);
  if (!type.hasStaticShape()) { // the product of the dims, at run time
    auto shape = shapeOfValue(c, c.inputs[0]);
    if (failed(shape))
      return failure();
    return single(reduce(c, "prod", {0}, false, *shape));
  }
  auto i64 = c.builder.getI64Type();
  auto plain = RankedTensorType::get({}, i64);
  return Values{c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({}, i64, c.device),
      DenseElementsAttr::get(plain, type.getNumElements()))};
}

FailureOr<Values> constantOfShape(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto dims = constantValues<int64_t>(c.inputs[0]);
  OpBuilder &b = c.builder;
  Type element = b.getF32Type();
  Attribute value = b.getF32FloatAttr(0);
  if (const auto *a = c.attr("value")) {
    auto converted =
        convertTensor(a->t(), c.device, c.loc, "value", c.modelDir);
    if (failed(converted))
      return failure();
    auto dense = dyn_cast<DenseElementsAttr>(converted->second);
    if (!dense || dense.getNumElements() != 1)
      return c.error("ConstantOfShape value must hold one element");
    element = dense.getElementType();
    value = dense.getValues<Attribute>()[0];
  }
  if (!dims) // a shape known at run time
    return single(c.create(ConstantOfShapeOp::getOperationName(),
                           withLength(c, c.inputs[0], declaredPlus(c, 0)),
                           {b.getNamedAttr("value", value)}));
  for (int64_t d : *dims)
    if (d < 0)
      return c.error("ConstantOfShape has a negative dim");
  auto plain = RankedTensorType::get(*dims, element);
  return Values{b.create<ConstantOp>(
      c.loc, RankedTensorType::get(*dims, element, c.device),
      DenseElementsAttr::get(plain, value))};
}
} // namespace

void kiln::onnx_import::addShapesConverters(ConverterTable &table) {
  addRows(table, {
                     {"Constant", constant},
                     {"Reshape", reshape},
                     {"Flatten", flatten},
                     {"Transpose", transpose},
                     {"Unsqueeze", unsqueeze},
                     {"Squeeze", squeeze},
                     {"Shape", shape},
                     {"Size", size},
                     {"ConstantOfShape", constantOfShape},
                     {"Expand", expand},
                 });
}
