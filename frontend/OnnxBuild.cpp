//===- OnnxBuild.cpp - building blocks shared by the ONNX converters ------===//
//
// Small helpers every op family uses: arity checks, attribute lists, typed
// scalar constants, reductions, reshapes, axis normalisation and the
// numerically stable exp-sum of the softmax family. Declared in OnnxOps.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

FailureOr<Values> single(FailureOr<Value> v) {
  if (failed(v))
    return failure();
  return Values{*v};
}

LogicalResult arity(NodeContext &c, size_t min, size_t max) {
  size_t n = c.inputs.size();
  if (n < min || n > max)
    return c.error("'" + c.node.op_type() + "' takes " + Twine(min) +
                   (min == max ? "" : ".." + Twine(max)) +
                   " inputs, node has " + Twine(n));
  for (size_t i = 0; i < min; ++i)
    if (!c.inputs[i])
      return c.error("required input #" + Twine(i) + " is missing");
  return success();
}

std::vector<int64_t> ints(NodeContext &c, StringRef name,
                          std::vector<int64_t> fallback) {
  const auto *a = c.attr(name);
  if (!a)
    return fallback;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

FailureOr<Value> reduce(NodeContext &c, StringRef kind,
                        std::vector<int64_t> axes, bool keepdims, Value input) {
  if (!input)
    input = c.inputs[0];
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  for (int64_t &axis : axes) {
    if (axis < -rank || axis >= rank)
      return c.error("axis " + Twine(axis) + " is out of range for rank " +
                     Twine(rank));
    if (axis < 0)
      axis += rank;
  }
  llvm::sort(axes);
  Builder &b = c.builder;
  return c.create(ReduceOp::getOperationName(), input,
                  {b.getNamedAttr("kind", b.getStringAttr(kind)),
                   b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes)),
                   b.getNamedAttr("keepdims", b.getBoolAttr(keepdims))});
}

// kiln.reshape to `shape`, in its own terms (a size, -1, kReshapeCopy).
static FailureOr<Value> reshapeExactly(NodeContext &c, Value input,
                                       ArrayRef<int64_t> shape) {
  return c.create(
      ReshapeOp::getOperationName(), input,
      {c.builder.getNamedAttr("shape", c.builder.getDenseI64ArrayAttr(shape))});
}

FailureOr<Value> reshapeTo(NodeContext &c, Value input,
                           ArrayRef<int64_t> spec) {
  SmallVector<int64_t> shape(spec);
  for (int64_t &d : shape)
    if (d == 0)
      d = kReshapeCopy;
  return reshapeExactly(c, input, shape);
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

// A rank-0 constant of `v`'s element type on the node's device.
Value scalarLike(NodeContext &c, Value v, double value) {
  Type element = typeOf(v).getElementType();
  auto plain = RankedTensorType::get({}, element);
  Attribute attr = isa<FloatType>(element)
                       ? Attribute(c.builder.getFloatAttr(element, value))
                       : Attribute(c.builder.getIntegerAttr(element, value));
  return c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({}, element, c.device),
      DenseElementsAttr::get(plain, attr));
}

FailureOr<Value> binaryOp(NodeContext &c, StringRef name, Value l, Value r) {
  return c.create(name, ValueRange{l, r});
}

FailureOr<int64_t> normalizeAxis(NodeContext &c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return c.error("axis " + Twine(axis) + " is out of range for rank " +
                   Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

// Unsqueeze/Squeeze: a reshape to a shape known at compile time up to at
// most one symbolic dim (which becomes -1).
FailureOr<Value> reshapeToDims(NodeContext &c, Value input,
                               ArrayRef<int64_t> dims) {
  std::vector<int64_t> spec;
  int dynamic = 0;
  for (int64_t d : dims) {
    dynamic += ShapedType::isDynamic(d);
    spec.push_back(ShapedType::isDynamic(d) ? -1 : d);
  }
  if (dynamic > 1)
    return c.error("reshaping a tensor with more than one symbolic "
                   "dim is not supported yet");
  return reshapeExactly(c, input, spec); // a 0 is a dim of size 0
}

FailureOr<Value> reshapeBySpec(NodeContext &c, Value x, Value spec,
                               StringRef mode) {
  return c.create(
      ReshapeToOp::getOperationName(), {x, spec},
      {c.builder.getNamedAttr("mode", c.builder.getStringAttr(mode))});
}

FailureOr<Value> unsqueezeAt(NodeContext &c, Value x, int64_t axis) {
  SmallVector<int64_t> spread(typeOf(x).getShape());
  spread.insert(spread.begin() + axis, 1);
  if (llvm::count_if(spread, ShapedType::isDynamic) <= 1)
    return reshapeToDims(c, x, spread);
  return reshapeBySpec(c, x, int64Constant(c, {1}, {axis}), "unsqueeze");
}

FailureOr<Value> padBy(NodeContext &c, Value x, Value pads, Value value,
                       Value axes, StringRef mode) {
  SmallVector<Value> operands = {x, pads};
  if (value)
    operands.push_back(value);
  if (axes)
    operands.push_back(axes);
  Builder &b = c.builder;
  return c.create(PadOp::getOperationName(), operands,
                  {b.getNamedAttr("mode", b.getStringAttr(mode)),
                   b.getNamedAttr("operandSegmentSizes",
                                  b.getDenseI32ArrayAttr(
                                      {1, 1, value ? 1 : 0, axes ? 1 : 0}))});
}

FailureOr<Value> concatOf(NodeContext &c, ValueRange parts, int64_t axis) {
  return c.create(
      ConcatOp::getOperationName(), parts,
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(axis))});
}

FailureOr<Value> stackAt(NodeContext &c, ArrayRef<Value> pieces, int64_t axis) {
  SmallVector<Value> parts;
  for (Value piece : pieces) {
    auto part = unsqueezeAt(c, piece, axis);
    if (failed(part))
      return failure();
    parts.push_back(*part);
  }
  return concatOf(c, parts, axis);
}

FailureOr<std::vector<int64_t>>
normalizedAxes(NodeContext &c, std::vector<int64_t> fallback, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t a : ints(c, "axes", std::move(fallback))) {
    auto axis = normalizeAxis(c, a, rank);
    if (failed(axis))
      return failure();
    axes.push_back(*axis);
  }
  return axes;
}

FailureOr<Value> shapeOfValue(NodeContext &c, Value x) {
  Builder &b = c.builder;
  return c.create(
      ShapeOp::getOperationName(), x,
      {b.getNamedAttr("start", b.getI64IntegerAttr(0)),
       b.getNamedAttr("end", b.getI64IntegerAttr(typeOf(x).getRank()))});
}

FailureOr<Value> expandLike(NodeContext &c, Value v, Value like) {
  auto type = typeOf(like);
  if (typeOf(v).getShape() == type.getShape())
    return v;
  if (type.hasStaticShape())
    return c.create(
        ExpandOp::getOperationName(), v,
        {c.builder.getNamedAttr(
            "shape", c.builder.getDenseI64ArrayAttr(type.getShape()))});
  auto shape = shapeOfValue(c, like);
  if (failed(shape))
    return failure();
  return c.create(ExpandToOp::getOperationName(), {v, *shape});
}

// shifted = x - max(x), and sum(exp(shifted)), over `axes`.
FailureOr<Shifted> shiftedExpSum(NodeContext &c, Value x,
                                 ArrayRef<int64_t> axes) {
  std::vector<int64_t> list(axes.begin(), axes.end());
  auto max = reduce(c, "max", list, true, x);
  if (failed(max))
    return failure();
  auto shifted = binaryOp(c, SubOp::getOperationName(), x, *max);
  if (failed(shifted))
    return failure();
  auto e = c.create(ExpOp::getOperationName(), *shifted);
  if (failed(e))
    return failure();
  auto sum = reduce(c, "sum", list, true, *e);
  if (failed(sum))
    return failure();
  return Shifted{*shifted, *e, *sum};
}

FailureOr<Value> isNaN(NodeContext &c, Value x) {
  auto same = binaryOp(c, EqualOp::getOperationName(), x, x);
  if (failed(same))
    return failure();
  return c.create(NotOp::getOperationName(), *same);
}

FailureOr<Value> dimValue(NodeContext &c, Value x, int64_t axis) {
  RankedTensorType type = typeOf(x);
  if (!type.isDynamicDim(axis))
    return int64Constant(c, {}, {type.getDimSize(axis)});
  Builder &b = c.builder;
  auto dim = c.create(ShapeOp::getOperationName(), x,
                      {b.getNamedAttr("start", b.getI64IntegerAttr(axis)),
                       b.getNamedAttr("end", b.getI64IntegerAttr(axis + 1))});
  if (failed(dim))
    return failure();
  return reshapeTo(c, *dim, {});
}

FailureOr<Value> iotaAlong(NodeContext &c, Value x, int64_t axis, int64_t rank,
                           int64_t at) {
  SmallVector<int64_t> shape(rank, 1);
  RankedTensorType type = typeOf(x);
  // A constant where it is small (folding sees through it); a kiln.range
  // over a long axis, whose constant would take 8 bytes an element in the
  // compiler's memory and the artifact (a model can declare 2^28).
  constexpr int64_t kConstantIotaLimit = int64_t(1) << 20;
  if (!type.isDynamicDim(axis) && type.getDimSize(axis) <= kConstantIotaLimit) {
    int64_t n = type.getDimSize(axis);
    shape[at] = n;
    std::vector<int64_t> values;
    for (int64_t i = 0; i < n; ++i)
      values.push_back(i);
    return int64Constant(c, shape, values, "iota");
  }
  auto n = dimValue(c, x, axis);
  if (failed(n))
    return failure();
  auto range =
      c.create(RangeOp::getOperationName(),
               {int64Constant(c, {}, {0}), *n, int64Constant(c, {}, {1})});
  if (failed(range))
    return failure();
  shape[at] = ShapedType::kDynamic;
  return reshapeToDims(c, *range, shape);
}

Value int64Constant(NodeContext &c, ArrayRef<int64_t> shape,
                    ArrayRef<int64_t> values, StringRef name) {
  auto type = RankedTensorType::get(shape, c.builder.getI64Type());
  ArrayRef<char> bytes(reinterpret_cast<const char *>(values.data()),
                       values.size() * sizeof(int64_t));
  return c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get(shape, type.getElementType(), c.device),
      makeConstantAttr(type, bytes, name));
}

} // namespace kiln::onnx_import

SmallVector<Value> kiln::onnx_import::presentInputs(NodeContext &c) {
  SmallVector<Value> values;
  for (Value v : c.inputs)
    if (v)
      values.push_back(v);
  return values;
}

Value kiln::onnx_import::withLength(NodeContext &c, Value v,
                                    std::optional<int64_t> length) {
  auto type = typeOf(v);
  if (!length || *length < 0 || type.getRank() != 1 || !type.isDynamicDim(0))
    return v;
  auto fixed = reshapeToDims(c, v, {*length});
  return succeeded(fixed) ? *fixed : v;
}
