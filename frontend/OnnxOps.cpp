//===- OnnxOps.cpp - ONNX node converters ---------------------------------===//
//
// One small function per ONNX op (or one generic one per op family), looked
// up by op type. Converters only build kiln graph ops; shapes come from the
// ops' own inference, so a node whose inputs do not fit is reported at the
// node.
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

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const onnx::GraphProto *NodeContext::graphAttr(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  return a && a->has_g() ? &a->g() : nullptr;
}

std::optional<int64_t> NodeContext::declaredRank(int i) const {
  if (!declaredRanks || i >= node.output_size())
    return std::nullopt;
  auto it = declaredRanks->find(node.output(i));
  if (it == declaredRanks->end())
    return std::nullopt;
  return it->second;
}

int64_t NodeContext::getInt(StringRef name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

float NodeContext::getFloat(StringRef name, float fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeContext::getString(StringRef name, StringRef fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback.str();
}

LogicalResult NodeContext::error(const Twine &message) const {
  return emitError(loc) << message;
}

FailureOr<Value> NodeContext::create(StringRef name, ValueRange operands,
                                     ArrayRef<NamedAttribute> attributes) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attributes);
  state.addTypes(operands.front().getType()); // replaced below
  Operation *op = builder.create(state);
  SmallVector<Type> types;
  if (failed(inferResultTypes(op, types))) {
    op->erase();
    return failure();
  }
  op->getResult(0).setType(types.front());
  return op->getResult(0);
}

namespace {

template <typename OpTy> FailureOr<Values> unary(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  return single(c.create(OpTy::getOperationName(), c.inputs));
}

// OpTy on exactly the node's N inputs.
template <typename OpTy, size_t N = 2>
FailureOr<Values> binary(NodeContext &c) {
  if (failed(arity(c, N, N)))
    return failure();
  return single(c.create(OpTy::getOperationName(), c.inputs));
}

FailureOr<Values> identity(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  return Values{c.inputs[0]};
}

FailureOr<Values> gelu(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  std::string approximate = c.getString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return c.error("Gelu approximate='" + approximate +
                   "' is not one of 'none', 'tanh'");
  return single(c.create(
      GeluOp::getOperationName(), c.inputs,
      {c.builder.getNamedAttr("approximate_tanh",
                              c.builder.getBoolAttr(approximate == "tanh"))}));
}

// SwiGLU(a, b, alpha = 1): a * sigmoid(alpha * a) * b.
FailureOr<Values> swiglu(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value a = c.inputs[0];
  auto scaled = binaryOp(c, MulOp::getOperationName(), a,
                         scalarLike(c, a, c.getFloat("alpha", 1.0f)));
  if (failed(scaled))
    return failure();
  auto gate = c.create(SigmoidOp::getOperationName(), *scaled);
  if (failed(gate))
    return failure();
  auto swish = binaryOp(c, MulOp::getOperationName(), a, *gate);
  if (failed(swish))
    return failure();
  return single(binaryOp(c, MulOp::getOperationName(), *swish, c.inputs[1]));
}

// The node's inputs without the omitted optional ones (trailing here).
SmallVector<Value> presentInputs(NodeContext &c) {
  SmallVector<Value> values;
  for (Value v : c.inputs)
    if (v)
      values.push_back(v);
  return values;
}

FailureOr<Values> gemm(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Builder &b = c.builder;
  SmallVector<Value> operands = presentInputs(c);
  bool transA = c.getInt("transA", 0) != 0, transB = c.getInt("transB", 0) != 0;
  if (operands.size() == 3 && !typeOf(operands[2]).hasStaticShape()) {
    // C broadcasts to [M, N]; with symbolic dims only the run time knows
    // whether it is [1, N], [N], [M, 1] or [M, N], so it is expanded there.
    OpChain g(c);
    Value shape = g.concat({g.reshape(g.dim(operands[0], transA ? 1 : 0), {1}),
                            g.reshape(g.dim(operands[1], transB ? 0 : 1), {1})},
                           0);
    if (g.failed())
      return failure();
    auto expanded =
        c.create(ExpandToOp::getOperationName(), {operands[2], shape});
    if (failed(expanded))
      return failure();
    operands[2] = *expanded;
  }
  return single(c.create(
      GemmOp::getOperationName(), operands,
      {b.getNamedAttr("alpha", b.getF32FloatAttr(c.getFloat("alpha", 1.0f))),
       b.getNamedAttr("beta", b.getF32FloatAttr(c.getFloat("beta", 1.0f))),
       b.getNamedAttr("trans_a", b.getBoolAttr(transA)),
       b.getNamedAttr("trans_b", b.getBoolAttr(transB))}));
}

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

int64_t spatialRank(NodeContext &c) {
  return cast<RankedTensorType>(c.inputs[0].getType()).getRank() - 2;
}

// Explicit begin/end pads from `pads` or `auto_pad`.
FailureOr<std::vector<int64_t>>
windowPads(NodeContext &c, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
           ArrayRef<int64_t> dilations, bool prepadded = false) {
  size_t r = kernel.size();
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  if (prepadded) // padded at run time (padSameAtRunTime)
    return std::vector<int64_t>(2 * r, 0);
  if (autoPad == "NOTSET") {
    std::vector<int64_t> pads = ints(c, "pads", std::vector<int64_t>(2 * r, 0));
    if (pads.size() != 2 * r)
      return c.error("'pads' needs " + Twine(2 * r) + " values");
    return pads;
  }
  if (autoPad == "VALID")
    return std::vector<int64_t>(2 * r, 0);
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return c.error("auto_pad '" + autoPad + "' is not supported");
  auto in = cast<RankedTensorType>(c.inputs[0].getType()).getShape();
  std::vector<int64_t> pads(2 * r);
  for (size_t i = 0; i < r; ++i) {
    if (ShapedType::isDynamic(in[i + 2]))
      return c.error("auto_pad " + autoPad + " needs static spatial dims");
    int64_t out = (in[i + 2] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] +
                                             (kernel[i] - 1) * dilations[i] +
                                             1 - in[i + 2]);
    int64_t small = total / 2;
    pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
    pads[r + i] = total - pads[i];
  }
  return pads;
}

} // namespace

namespace {
FailureOr<Value> padSameAtRunTime(NodeContext &c, Value x, double value,
                                  ArrayRef<int64_t> kernel = {});
} // namespace

FailureOr<Values> kiln::onnx_import::convertConv(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  auto xType = cast<RankedTensorType>(c.inputs[0].getType());
  auto wType = cast<RankedTensorType>(c.inputs[1].getType());
  if (wType.getRank() < 3 || xType.getRank() != wType.getRank())
    return c.error("Conv needs a weight of rank >= 3 and an input of its "
                   "rank");
  size_t r = wType.getRank() - 2;
  // The kernel's size: the weight's, else kernel_shape's (a weight sized
  // only at run time keeps it symbolic; the kernel reads it then).
  std::vector<int64_t> kernel(wType.getShape().begin() + 2,
                              wType.getShape().end());
  std::vector<int64_t> declared = ints(c, "kernel_shape", {});
  for (size_t i = 0; i < r && declared.size() == r; ++i) {
    if (!ShapedType::isDynamic(kernel[i]) && kernel[i] != declared[i])
      return c.error("Conv kernel_shape does not match the weight's shape");
    kernel[i] = declared[i];
  }
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  bool dynamicKernel = llvm::any_of(kernel, ShapedType::isDynamic);
  if (same && dynamicKernel)
    return c.error("Conv with auto_pad " + autoPad +
                   " needs the kernel's size at compile time (a static "
                   "weight shape or kernel_shape)");
  if (c.getInt("group", 1) < 1)
    return c.error("Conv group must be positive");
  SmallVector<Value> operands = presentInputs(c);
  bool prepadded = false;
  if (same &&
      llvm::any_of(xType.getShape().drop_front(2), ShapedType::isDynamic)) {
    auto padded = padSameAtRunTime(c, c.inputs[0], 0, kernel);
    if (failed(padded))
      return failure();
    operands[0] = *padded;
    prepadded = true;
  }
  auto pads = windowPads(c, kernel, strides, dilations, prepadded);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  return single(c.create(
      ConvOp::getOperationName(), operands,
      {b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
       b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
       b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
       b.getNamedAttr("group", b.getI64IntegerAttr(c.getInt("group", 1)))}));
}

namespace {

// A window node's input `x` padded at run time with `value` for auto_pad
// SAME over symbolic spatial dims, whose pads depend on the sizes; null when
// the node needs no such padding (its window then takes the pads).
FailureOr<Value> padSameAtRunTime(NodeContext &c, Value x, double value,
                                  ArrayRef<int64_t> kernelSize) {
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  auto shape = typeOf(x).getShape();
  int64_t r = (int64_t)shape.size() - 2;
  if ((autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") || r < 1 ||
      llvm::none_of(shape.drop_front(2), ShapedType::isDynamic))
    return Value();
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return c.error("auto_pad " + autoPad +
                   " over symbolic spatial dims needs a floating-point input");
  std::vector<int64_t> kernel =
      kernelSize.empty() ? ints(c, "kernel_shape", {}) : kernelSize.vec();
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  if ((int64_t)kernel.size() != r || (int64_t)strides.size() != r ||
      (int64_t)dilations.size() != r)
    return c.error(c.node.op_type() +
                   " needs kernel_shape, strides and "
                   "dilations with " +
                   Twine(r) + " values");
  OpChain g(c);
  auto i64 = [&](int64_t v) { return g.i64Constant({}, {v}, "same"); };
  SmallVector<Value> begins = {g.i64Constant({2}, {0, 0}, "same")};
  SmallVector<Value> ends = begins;
  for (int64_t i = 0; i < r; ++i) {
    // total = max(0, (ceil(in / s) - 1) s + (k - 1) d + 1 - in)
    Value in = g.dim(x, i + 2), s = i64(strides[i]);
    Value out = g.div(g.add(in, i64(strides[i] - 1)), s);
    Value total =
        g.op<MaxOp>({g.sub(g.add(g.mul(g.sub(out, i64(1)), s),
                                 i64((kernel[i] - 1) * dilations[i] + 1)),
                           in),
                     i64(0)});
    Value small = g.div(total, i64(2));
    Value begin = autoPad == "SAME_UPPER" ? small : g.sub(total, small);
    begins.push_back(g.reshape(begin, {1}));
    ends.push_back(g.reshape(g.sub(total, begin), {1}));
  }
  begins.append(ends);
  Value pads = g.concat(begins, 0);
  if (g.failed())
    return failure();
  return padBy(c, x, pads, scalarLike(c, x, value), Value(), "constant");
}

// The window of a pooling node: kernel_shape (required), strides,
// dilations, and explicit pads (from pads or auto_pad), as kiln pool
// attributes, followed by the node's ceil_mode.
FailureOr<SmallVector<NamedAttribute>> poolWindow(NodeContext &c,
                                                  bool prepadded = false) {
  int64_t r = spatialRank(c);
  std::vector<int64_t> kernel = ints(c, "kernel_shape", {});
  if ((int64_t)kernel.size() != r)
    return c.error(c.node.op_type() + " needs kernel_shape with " + Twine(r) +
                   " values");
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  auto pads = windowPads(c, kernel, strides, dilations, prepadded);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  return SmallVector<NamedAttribute>{
      b.getNamedAttr("kernel_shape", b.getDenseI64ArrayAttr(kernel)),
      b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
      b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
      b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
      b.getNamedAttr("ceil_mode",
                     b.getBoolAttr(c.getInt("ceil_mode", 0) != 0))};
}

FailureOr<Values> maxPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto padded = padSameAtRunTime(c, c.inputs[0],
                                 -std::numeric_limits<double>::infinity());
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  auto y = c.create(MaxPoolOp::getOperationName(),
                    *padded ? *padded : c.inputs[0], *window);
  if (failed(y))
    return failure();
  if (c.node.output_size() < 2 || c.node.output(1).empty())
    return Values{*y};
  if (*padded)
    return c.error("MaxPool's Indices output with auto_pad SAME needs static "
                   "spatial dims");
  auto array = [&](StringRef name) {
    for (NamedAttribute a : *window)
      if (a.getName() == name)
        return cast<DenseI64ArrayAttr>(a.getValue()).asArrayRef();
    return ArrayRef<int64_t>();
  };
  auto indices = maxPoolIndices(
      c, c.inputs[0], *y, array("kernel_shape"), array("strides"),
      array("dilations"), array("pads"), c.getInt("storage_order", 0) != 0);
  if (failed(indices))
    return failure();
  return Values{*y, *indices};
}

// GlobalAveragePool / GlobalMaxPool: a mean / max over the spatial dims.
template <const char *Kind> FailureOr<Values> globalPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  return single(reduce(c, Kind, axes, true));
}
constexpr char kGlobalMean[] = "mean", kGlobalMax[] = "max";

// Axes given as a tensor known only at run time (and not empty: an empty
// axes tensor has static length 0), or null.
Value runtimeAxes(NodeContext &c) {
  if (c.inputs.size() < 2 || !c.inputs[1] ||
      constantValues<int64_t>(c.inputs[1]) ||
      typeOf(c.inputs[1]).getNumElements() == 0)
    return nullptr;
  return c.inputs[1];
}

// Axes of a length known only at run time as `rank` of them: element i is
// i when i is reduced, else rank (which matches no dim). With no axes
// (length 0 at run time) every dim is reduced, or none with
// noop_with_empty_axes, as ONNX says:
//   normalized = where(axes < 0, axes + rank, axes)             [L]
//   hits = sum(cast(normalized[L, 1] == iota[1, rank]), axis 0)  [rank]
//   reduced = any(hits) ? hits > 0 : !noop_with_empty_axes
//   fixed = where(reduced, iota, rank)
FailureOr<Value> fixedLengthAxes(NodeContext &c, Value axes, int64_t rank) {
  Builder &b = c.builder;
  Type i64 = b.getI64Type();
  std::vector<int64_t> iotaValues;
  for (int64_t i = 0; i < rank; ++i)
    iotaValues.push_back(i);
  Value iota = int64Constant(c, {rank}, iotaValues);
  auto cast = castTo(c, axes, i64);
  if (failed(cast))
    return failure();
  Value zero = int64Constant(c, {}, {0}), r = int64Constant(c, {}, {rank});
  auto negative = binaryOp(c, LessOp::getOperationName(), (*cast)[0], zero);
  auto shifted = binaryOp(c, AddOp::getOperationName(), (*cast)[0], r);
  if (failed(negative) || failed(shifted))
    return failure();
  auto normalized =
      c.create(WhereOp::getOperationName(), {*negative, *shifted, (*cast)[0]});
  if (failed(normalized))
    return failure();
  auto column = reshapeToDims(c, *normalized, {ShapedType::kDynamic, 1});
  auto row = reshapeToDims(c, iota, {1, rank});
  if (failed(column) || failed(row))
    return failure();
  auto matches = binaryOp(c, EqualOp::getOperationName(), *column, *row);
  if (failed(matches))
    return failure();
  auto counts = castTo(c, *matches, i64);
  if (failed(counts))
    return failure();
  auto hits = reduce(c, "sum", {0}, false, (*counts)[0]);
  if (failed(hits))
    return failure();
  auto reduced = binaryOp(c, GreaterOp::getOperationName(), *hits, zero);
  auto total = reduce(c, "sum", {0}, false, *hits);
  if (failed(reduced) || failed(total))
    return failure();
  auto any = binaryOp(c, GreaterOp::getOperationName(), *total, zero);
  if (failed(any))
    return failure();
  auto none = c.builder.getBoolAttr(!c.getInt("noop_with_empty_axes", 0));
  Value fallback = c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({rank}, b.getI1Type(), c.device),
      DenseElementsAttr::get(RankedTensorType::get({rank}, b.getI1Type()),
                             none.getValue()));
  auto chosen =
      c.create(WhereOp::getOperationName(), {*any, *reduced, fallback});
  if (failed(chosen))
    return failure();
  Value rankSplat = int64Constant(
      c, {rank}, std::vector<int64_t>(static_cast<size_t>(rank), rank));
  return c.create(WhereOp::getOperationName(), {*chosen, iota, rankSplat});
}

// kiln.reduce_by `input` over the axes `axes` holds.
FailureOr<Value> reduceBy(NodeContext &c, StringRef kind, Value axes,
                          bool keepdims, Value input) {
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  if (typeOf(axes).getRank() == 1 && typeOf(axes).isDynamicDim(0) &&
      !keepdims) {
    // The result's rank says how many axes there are: the model's
    // declared one (a reshape checks the count at run time).
    std::optional<int64_t> declared = c.declaredRank(0);
    if (!declared || *declared > rank)
      return c.error("reducing over axes of a length known only at run "
                     "time needs keepdims=1 or a declared rank for the "
                     "result; bind the axes input's length with "
                     "--input-shape");
    auto counted = reshapeToDims(c, axes, {rank - *declared});
    if (failed(counted))
      return failure();
    axes = *counted;
  }
  if (typeOf(axes).getRank() == 1 && typeOf(axes).isDynamicDim(0)) {
    auto fixed = fixedLengthAxes(c, axes, rank);
    if (failed(fixed))
      return failure();
    axes = *fixed;
  }
  return c.create(
      ReduceByOp::getOperationName(), {input, axes},
      {c.builder.getNamedAttr("kind", c.builder.getStringAttr(kind)),
       c.builder.getNamedAttr("keepdims", c.builder.getBoolAttr(keepdims))});
}

template <const char *Kind> FailureOr<Values> reduceNode(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  if (Value axes = runtimeAxes(c))
    return single(
        reduceBy(c, Kind, axes, c.getInt("keepdims", 1) != 0, c.inputs[0]));
  std::vector<int64_t> axes = ints(c, "axes", {});
  if (c.inputs.size() == 2 && c.inputs[1])
    axes = constantValues<int64_t>(c.inputs[1]).value_or(axes);
  if (axes.empty()) {
    if (c.getInt("noop_with_empty_axes", 0))
      return Values{c.inputs[0]};
    int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  return single(reduce(c, Kind, axes, c.getInt("keepdims", 1) != 0));
}
constexpr char kSum[] = "sum", kMean[] = "mean", kMax[] = "max", kMin[] = "min",
               kProd[] = "prod";

// A shape or axes input whose values are known only at run time (not a
// constant, nor a shape computation folded at import), or null.
// A 1-D shape or axes input of symbolic length (a graph input under
// symbolic dims) as one of `length` entries, when the model's declared
// ranks give it: the ops taking it need its length to know their result's
// rank. The reshape checks the length at run time.
Value withLength(NodeContext &c, Value v, std::optional<int64_t> length) {
  auto type = typeOf(v);
  if (!length || *length < 0 || type.getRank() != 1 || !type.isDynamicDim(0))
    return v;
  auto fixed = reshapeToDims(c, v, {*length});
  return succeeded(fixed) ? *fixed : v;
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

// Clip: min then max, each a constant (a kiln.clip attribute; on integers
// a constant tensor) or a scalar computed at run time (kiln.max / kiln.min,
// so min > max gives max, as numpy's clip does).
FailureOr<Values> clip(NodeContext &c) {
  if (failed(arity(c, 1, 3)))
    return failure();
  Builder &b = c.builder;
  Value v = c.inputs[0];
  for (auto [name, index] : {std::pair<StringRef, size_t>{"min", 1},
                             std::pair<StringRef, size_t>{"max", 2}}) {
    std::optional<double> value;
    Value bound;
    if (c.opset < 11) {
      if (c.attr(name))
        value = c.getFloat(name, 0);
    } else if (c.inputs.size() > index && c.inputs[index]) {
      auto values = constantValues<double>(c.inputs[index]);
      // An integer bound stays a tensor: a double holds int64 bounds
      // past 2^53 inexactly.
      if (values && values->size() == 1 &&
          isa<FloatType>(typeOf(v).getElementType()))
        value = values->front();
      else if (typeOf(c.inputs[index]).getNumElements() == 1)
        bound = c.inputs[index];
      else
        return c.error("Clip " + name + " must be a single value");
    }
    FailureOr<Value> next = v;
    if (value)
      next = c.create(ClipOp::getOperationName(), v,
                      {b.getNamedAttr(name, b.getF64FloatAttr(*value))});
    else if (bound)
      next = binaryOp(c,
                      name == "min" ? MaxOp::getOperationName()
                                    : MinOp::getOperationName(),
                      v, bound);
    if (failed(next))
      return failure();
    v = *next;
  }
  return Values{v};
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

FailureOr<Values> gather(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto axis =
      normalizeAxis(c, c.getInt("axis", 0), typeOf(c.inputs[0]).getRank());
  if (failed(axis))
    return failure();
  return single(c.create(
      GatherOp::getOperationName(), c.inputs,
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(*axis))}));
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

// The axes Softmax/LogSoftmax normalize over: `axis`, and before opset 13
// (input coerced to 2-D at `axis`) every dim after it too.
FailureOr<std::vector<int64_t>> softmaxAxes(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int64_t rank = typeOf(c.inputs[0]).getRank();
  auto axis = normalizeAxis(c, c.getInt("axis", c.opset < 13 ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  std::vector<int64_t> axes = {*axis};
  if (c.opset < 13)
    for (int64_t i = *axis + 1; i < rank; ++i)
      axes.push_back(i);
  return axes;
}

// exp(x - max) / sum(exp(x - max))
FailureOr<Values> softmaxNode(NodeContext &c) {
  auto axes = softmaxAxes(c);
  if (failed(axes))
    return failure();
  auto parts = shiftedExpSum(c, c.inputs[0], *axes);
  if (failed(parts))
    return failure();
  return single(binaryOp(c, DivOp::getOperationName(), parts->exp, parts->sum));
}

// (x - max) - log(sum(exp(x - max)))
FailureOr<Values> logSoftmax(NodeContext &c) {
  auto axes = softmaxAxes(c);
  if (failed(axes))
    return failure();
  auto parts = shiftedExpSum(c, c.inputs[0], *axes);
  if (failed(parts))
    return failure();
  auto log = c.create(LogOp::getOperationName(), parts->sum);
  if (failed(log))
    return failure();
  return single(binaryOp(c, SubOp::getOperationName(), parts->shifted, *log));
}

// LpNormalization: x / (sum |x|^p over axis)^(1/p), p 1 or 2; 0 where the
// norm is 0.
FailureOr<Values> lpNormalization(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  int64_t p = c.getInt("p", 2);
  if (p != 1 && p != 2)
    return c.error("LpNormalization's p must be 1 or 2, got " + Twine(p));
  auto axis = normalizeAxis(c, c.getInt("axis", -1), typeOf(x).getRank());
  if (failed(axis))
    return failure();
  auto magnitude = c.create(AbsOp::getOperationName(), x);
  if (failed(magnitude))
    return failure();
  auto powered =
      p == 1 ? magnitude
             : binaryOp(c, MulOp::getOperationName(), *magnitude, *magnitude);
  if (failed(powered))
    return failure();
  auto norm = reduce(c, "sum", {*axis}, true, *powered);
  if (failed(norm))
    return failure();
  if (p == 2)
    norm = c.create(SqrtOp::getOperationName(), *norm);
  if (failed(norm))
    return failure();
  // A zero norm gives zeros, not 0/0 (the reference, and torch's normalize).
  OpChain g(c);
  Value zero = scalarLike(c, x, 0);
  Value y = g.where(g.op<EqualOp>({*norm, zero}), zero, g.div(x, *norm));
  if (g.failed())
    return failure();
  return Values{y};
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

} // namespace

FailureOr<Values> kiln::onnx_import::castTo(NodeContext &c, Value input,
                                            Type to) {
  if (typeOf(input).getElementType() == to)
    return Values{input};
  Builder &b = c.builder;
  SmallVector<NamedAttribute> attrs = {b.getNamedAttr("to", TypeAttr::get(to))};
  if (!c.getInt("saturate", 1))
    attrs.push_back(b.getNamedAttr("saturate", b.getBoolAttr(false)));
  return single(c.create(CastOp::getOperationName(), input, attrs));
}

namespace {

FailureOr<Values> castNode(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int to = c.getInt("to", 0);
  Type type = elementType(c.builder.getContext(), to);
  if (!type)
    return c.error("Cast to type #" + Twine(to) + " is not supported yet");
  return castTo(c, c.inputs[0], type);
}

FailureOr<Values> dropout(NodeContext &c) {
  // Inference: the identity, and a mask of all true (training mode:
  // Random.cpp).
  if (failed(arity(c, 1, 3)))
    return failure();
  if (c.inputs.size() == 3 && c.inputs[2]) {
    Value mode = c.inputs[2];
    auto constant = mode.getDefiningOp<ConstantOp>();
    if (!constant)
      return trainingDropout(c, mode);
    std::vector<char> bytes = getConstantBytes(constant.getValue());
    if (llvm::any_of(bytes, [](char b) { return b != 0; }))
      return trainingDropout(c, Value());
  }
  Values out = {c.inputs[0]};
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) {
    auto type = typeOf(c.inputs[0]);
    auto i1 = c.builder.getI1Type();
    if (!type.hasStaticShape()) { // all true, shaped at run time
      auto shape = shapeOfValue(c, c.inputs[0]);
      if (failed(shape))
        return failure();
      auto mask = c.create(
          ConstantOfShapeOp::getOperationName(), *shape,
          {c.builder.getNamedAttr("value", c.builder.getIntegerAttr(i1, 1))});
      if (failed(mask))
        return failure();
      out.push_back(*mask);
      return out;
    }
    out.push_back(c.builder.create<ConstantOp>(
        c.loc, RankedTensorType::get(type.getShape(), i1, c.device),
        DenseElementsAttr::get(RankedTensorType::get(type.getShape(), i1),
                               true)));
  }
  return out;
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

FailureOr<Values> concat(NodeContext &c) {
  if (c.inputs.empty())
    return c.error("Concat needs inputs");
  auto axis =
      normalizeAxis(c, c.getInt("axis", 0), typeOf(c.inputs[0]).getRank());
  if (failed(axis))
    return failure();
  return single(c.create(
      ConcatOp::getOperationName(), presentInputs(c),
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(*axis))}));
}

// A slice of `input` with ONNX-style per-axis starts/ends/steps (clamped).
FailureOr<Value> sliceOf(NodeContext &c, Value input, ArrayRef<int64_t> axes,
                         ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
                         ArrayRef<int64_t> steps) {
  auto shape = typeOf(input).getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> st(rank, 0), sz(shape.begin(), shape.end()), sp(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(c, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t n = shape[*axis], step = steps[i];
    if (ShapedType::isDynamic(n))
      return c.error("Slice of a symbolic dim is not supported yet");
    if (step == 0)
      return c.error("Slice step 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0)
      b += n;
    if (e < 0)
      e += n;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      // ONNX clamps a backward start into [0, n - 1] (a start before the
      // first element still takes it), the end into [-1, n - 1].
      b = std::max<int64_t>(0, std::min<int64_t>(b, n - 1));
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    int64_t count = n == 0     ? 0
                    : step > 0 ? (e - b + step - 1) / step
                               : (b - e - step - 1) / -step;
    st[*axis] = count > 0 ? b : 0;
    sz[*axis] = std::max<int64_t>(count, 0);
    sp[*axis] = step;
  }
  Builder &bd = c.builder;
  return c.create(SliceOp::getOperationName(), input,
                  {bd.getNamedAttr("starts", bd.getDenseI64ArrayAttr(st)),
                   bd.getNamedAttr("sizes", bd.getDenseI64ArrayAttr(sz)),
                   bd.getNamedAttr("steps", bd.getDenseI64ArrayAttr(sp))});
}

FailureOr<Values> slice(NodeContext &c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = ints(c, "starts", {});
    ends = ints(c, "ends", {});
    axes = ints(c, "axes", {});
  } else {
    if (failed(arity(c, 3, 5)))
      return failure();
    bool runtime = false;
    auto get = [&](size_t i, std::vector<int64_t> &out) {
      if (c.inputs.size() <= i || !c.inputs[i])
        return;
      auto values = constantValues<int64_t>(c.inputs[i]);
      runtime |= !values;
      if (values)
        out = *values;
    };
    get(1, starts);
    get(2, ends);
    get(3, axes);
    get(4, steps);
    // Parameters known only at run time, or a sliced dim that is symbolic:
    // the slice is computed from the data.
    auto in = typeOf(c.inputs[0]);
    for (int64_t a : axes.empty() ? std::vector<int64_t>(starts.size()) : axes)
      runtime |= a >= -in.getRank() && a < in.getRank() &&
                 in.isDynamicDim(a < 0 ? a + in.getRank() : a);
    if (axes.empty() && !runtime)
      for (size_t i = 0; i < starts.size() && i < (size_t)in.getRank(); ++i)
        runtime |= in.isDynamicDim(i);
    if (runtime) {
      SmallVector<Value> operands(c.inputs.begin(), c.inputs.begin() + 3);
      bool hasAxes = c.inputs.size() > 3 && c.inputs[3],
           hasSteps = c.inputs.size() > 4 && c.inputs[4];
      if (hasAxes)
        operands.push_back(c.inputs[3]);
      if (hasSteps)
        operands.push_back(c.inputs[4]);
      return single(
          c.create(SliceByOp::getOperationName(), operands,
                   {c.builder.getNamedAttr(
                       "operandSegmentSizes",
                       c.builder.getDenseI32ArrayAttr(
                           {1, 1, 1, hasAxes ? 1 : 0, hasSteps ? 1 : 0}))}));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return c.error("Slice starts, ends, axes and steps differ in length");
  return single(sliceOf(c, c.inputs[0], axes, starts, ends, steps));
}

// `x` from start to end along `axis`, both rank-0 int64 tensors read at run
// time (kiln.slice_by).
FailureOr<Value> sliceAtRunTime(NodeContext &c, Value x, int64_t axis,
                                Value start, Value end) {
  auto starts = reshapeTo(c, start, {1});
  auto ends = reshapeTo(c, end, {1});
  if (failed(starts) || failed(ends))
    return failure();
  return c.create(SliceByOp::getOperationName(),
                  {x, *starts, *ends, int64Constant(c, {1}, {axis})},
                  {c.builder.getNamedAttr(
                      "operandSegmentSizes",
                      c.builder.getDenseI32ArrayAttr({1, 1, 1, 1, 0}))});
}

} // namespace

// Split along a symbolic dim or by sizes known only at run time: each part
// a kiln.slice_by with its bounds computed at run time (equal parts of
// ceil(n / parts), the last ones shorter; or the sums of the sizes before
// it).
FailureOr<Values> kiln::onnx_import::splitAtRunTime(NodeContext &c,
                                                    int64_t axis,
                                                    int64_t outputs) {
  Value x = c.inputs[0];
  Values out;
  auto binary = [&](StringRef op, Value l, Value r) {
    return binaryOp(c, op, l, r);
  };
  if (c.inputs.size() == 2 && c.inputs[1]) {
    Value sizes = c.inputs[1];
    if (typeOf(sizes).getRank() != 1 ||
        (!typeOf(sizes).isDynamicDim(0) &&
         typeOf(sizes).getDimSize(0) != outputs))
      return c.error("Split has " + Twine(outputs) +
                     " outputs but its split input is not of that length");
    if (typeOf(sizes).isDynamicDim(0)) { // one per output, checked at run time
      auto counted = reshapeTo(c, sizes, {outputs});
      if (failed(counted))
        return failure();
      sizes = *counted;
    }
    Value start = int64Constant(c, {}, {0});
    for (int64_t i = 0; i < outputs; ++i) {
      auto upto = sliceOf(c, sizes, {0}, {0}, {i + 1}, {1});
      if (failed(upto))
        return failure();
      auto end = reduce(c, "sum", {0}, false, *upto);
      if (failed(end))
        return failure();
      auto part = sliceAtRunTime(c, x, axis, start, *end);
      if (failed(part))
        return failure();
      out.push_back(*part);
      start = *end;
    }
    return out;
  }
  int64_t parts = c.attr("num_outputs") ? c.getInt("num_outputs", 1) : outputs;
  if (parts != outputs)
    return c.error("Split has " + Twine(outputs) + " outputs but " +
                   Twine(parts) + " parts");
  auto n = dimValue(c, x, axis);
  if (failed(n))
    return failure();
  auto rounded =
      binary(AddOp::getOperationName(), *n, int64Constant(c, {}, {parts - 1}));
  if (failed(rounded))
    return failure();
  auto chunk = binary(DivOp::getOperationName(), *rounded,
                      int64Constant(c, {}, {parts}));
  if (failed(chunk))
    return failure();
  auto bound = [&](int64_t i) -> FailureOr<Value> {
    auto at =
        binary(MulOp::getOperationName(), *chunk, int64Constant(c, {}, {i}));
    if (failed(at))
      return failure();
    return binary(MinOp::getOperationName(), *at, *n);
  };
  for (int64_t i = 0; i < outputs; ++i) {
    auto start = bound(i), end = bound(i + 1);
    if (failed(start) || failed(end))
      return failure();
    auto part = sliceAtRunTime(c, x, axis, *start, *end);
    if (failed(part))
      return failure();
    out.push_back(*part);
  }
  return out;
}

namespace {

FailureOr<Values> split(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  auto shape = typeOf(c.inputs[0]).getShape();
  auto axis = normalizeAxis(c, c.getInt("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  int64_t n = shape[*axis], outputs = c.node.output_size();
  std::vector<int64_t> sizes = ints(c, "split", {});
  if (c.inputs.size() == 2 && c.inputs[1]) {
    auto values = constantValues<int64_t>(c.inputs[1]);
    if (!values)
      return splitAtRunTime(c, *axis, outputs);
    sizes = *values;
  }
  if (sizes.empty() && ShapedType::isDynamic(n))
    return splitAtRunTime(c, *axis, outputs);
  if (sizes.empty()) {
    int64_t parts =
        c.attr("num_outputs") ? c.getInt("num_outputs", 1) : outputs;
    if (parts < 1)
      return c.error("Split needs at least one output, got num_outputs " +
                     Twine(parts));
    int64_t chunk = (n + parts - 1) / parts;
    for (int64_t left = n; left > 0; left -= chunk)
      sizes.push_back(std::min(chunk, left));
    while ((int64_t)sizes.size() < parts)
      sizes.push_back(0);
  }
  if ((int64_t)sizes.size() != outputs)
    return c.error("Split has " + Twine(outputs) + " outputs but " +
                   Twine(sizes.size()) + " sizes");
  int64_t total = 0;
  for (int64_t size : sizes)
    if (size < 0 || llvm::AddOverflow(total, size, total))
      return c.error("Split sizes must be non-negative and sum to the "
                     "axis's length");
  if (!ShapedType::isDynamic(n) && total != n)
    return c.error("Split sizes sum to " + Twine(total) +
                   ", not the axis's "
                   "length " +
                   Twine(n));
  Values out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    auto part =
        ShapedType::isDynamic(n)
            ? sliceAtRunTime(c, c.inputs[0], *axis,
                             int64Constant(c, {}, {start}),
                             int64Constant(c, {}, {start + size}))
            : sliceOf(c, c.inputs[0], {*axis}, {start}, {start + size}, {1});
    if (failed(part))
      return failure();
    out.push_back(*part);
    start += size;
  }
  return out;
}

FailureOr<Values> averagePool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  bool countPads = c.getInt("count_include_pad", 0) != 0;
  auto padded = padSameAtRunTime(c, x, 0);
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  window->push_back(c.builder.getNamedAttr(
      "count_include_pad", c.builder.getBoolAttr(countPads || *padded)));
  if (!*padded)
    return single(c.create(AvgPoolOp::getOperationName(), x, *window));
  auto sum = c.create(AvgPoolOp::getOperationName(), *padded, *window);
  if (failed(sum) || countPads)
    return single(sum);
  // Pads padded at run time are not counted: divide by the share of real
  // elements in each window.
  auto ones = expandLike(c, scalarLike(c, x, 1), x);
  if (failed(ones))
    return failure();
  auto mask = padSameAtRunTime(c, *ones, 0);
  if (failed(mask))
    return failure();
  auto share = c.create(AvgPoolOp::getOperationName(), *mask, *window);
  if (failed(share))
    return failure();
  return single(binaryOp(c, DivOp::getOperationName(), *sum, *share));
}

// LpPool: (sum over the window of |x|^p)^(1/p), padding counting as 0: an
// average pool that counts the pads, times the window size.
FailureOr<Values> lpPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  if (c.getInt("ceil_mode", 0))
    return c.error("LpPool with ceil_mode is not supported yet");
  Value x = c.inputs[0];
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return c.error("LpPool needs a floating-point input");
  int64_t p = c.getInt("p", 2);
  if (p < 1)
    return c.error("LpPool's p must be at least 1, got " + Twine(p));
  std::string mul = MulOp::getOperationName().str(),
              pow = PowOp::getOperationName().str();
  auto magnitude = c.create(AbsOp::getOperationName(), x);
  if (failed(magnitude))
    return failure();
  auto powered = p == 2 ? binaryOp(c, mul, *magnitude, *magnitude)
                        : binaryOp(c, pow, *magnitude, scalarLike(c, x, p));
  if (failed(powered))
    return failure();
  auto padded = padSameAtRunTime(c, *powered, 0);
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  window->push_back(
      c.builder.getNamedAttr("count_include_pad", c.builder.getBoolAttr(true)));
  auto mean = c.create(AvgPoolOp::getOperationName(),
                       *padded ? *padded : *powered, *window);
  if (failed(mean))
    return failure();
  int64_t size = 1;
  for (int64_t k : ints(c, "kernel_shape", {}))
    size *= k;
  auto sum = binaryOp(c, mul, *mean, scalarLike(c, x, size));
  if (failed(sum))
    return failure();
  if (p == 1)
    return Values{*sum};
  if (p == 2)
    return single(c.create(SqrtOp::getOperationName(), *sum));
  return single(binaryOp(c, pow, *sum, scalarLike(c, x, 1.0 / p)));
}

// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp:
// an elementwise map, a sum, an elementwise finish. With no axes and
// noop_with_empty_axes there is no sum: the map and the finish still apply
// (ReduceSumSquare is then a square, as ONNX says).
FailureOr<Values> reduceComposite(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  StringRef op = c.node.op_type();
  Value x = c.inputs[0];
  Value runtime = runtimeAxes(c);
  std::vector<int64_t> axes = ints(c, "axes", {});
  if (c.inputs.size() == 2 && c.inputs[1])
    axes = constantValues<int64_t>(c.inputs[1]).value_or(axes);
  int64_t rank = typeOf(x).getRank();
  bool noop = false;
  if (axes.empty() && !runtime) {
    noop = c.getInt("noop_with_empty_axes", 0) != 0;
    for (int64_t i = 0; i < rank && !noop; ++i)
      axes.push_back(i);
  }
  bool keep = c.getInt("keepdims", 1) != 0;
  std::string mul = MulOp::getOperationName().str();
  FailureOr<Value> mapped = x;
  if (op == "ReduceSumSquare" || op == "ReduceL2")
    mapped = binaryOp(c, mul, x, x);
  else if (op == "ReduceL1")
    mapped = c.create(AbsOp::getOperationName(), x);
  auto reduceKind = [&](StringRef kind, bool keepDims,
                        Value v) -> FailureOr<Value> {
    if (noop)
      return v;
    return runtime ? reduceBy(c, kind, runtime, keepDims, v)
                   : reduce(c, kind, axes, keepDims, v);
  };
  // LogSumExp shifts by the largest element, log(sum(exp(x - m))) + m, so
  // that exp does not overflow (float32 overflows past 88). An infinite m
  // shifts by 0 instead, as onnxruntime does, so that all -inf gives -inf
  // and a +inf gives +inf rather than NaN.
  FailureOr<Value> shift;
  if (op == "ReduceLogSumExp") {
    auto largest = reduceKind("max", /*keepDims=*/true, x);
    if (failed(largest))
      return failure();
    auto magnitude = c.create(AbsOp::getOperationName(), *largest);
    if (failed(magnitude))
      return failure();
    auto infinite =
        binaryOp(c, EqualOp::getOperationName(), *magnitude,
                 scalarLike(c, x, std::numeric_limits<double>::infinity()));
    if (failed(infinite))
      return failure();
    shift = c.create(WhereOp::getOperationName(),
                     {*infinite, scalarLike(c, x, 0), *largest});
    if (failed(shift))
      return failure();
    auto shifted = binaryOp(c, SubOp::getOperationName(), x, *shift);
    if (failed(shifted))
      return failure();
    mapped = c.create(ExpOp::getOperationName(), *shifted);
  }
  if (failed(mapped))
    return failure();
  auto sum = reduceKind("sum", keep, *mapped);
  if (failed(sum))
    return failure();
  if (op == "ReduceL2")
    return single(c.create(SqrtOp::getOperationName(), *sum));
  if (op == "ReduceLogSum")
    return single(c.create(LogOp::getOperationName(), *sum));
  if (op == "ReduceLogSumExp") {
    auto log = c.create(LogOp::getOperationName(), *sum);
    if (failed(log))
      return failure();
    // The shift has the reduced dims kept; without keepdims they go (a
    // reduction of single elements, which is the shift itself).
    Value kept = *shift;
    if (!keep && !noop) {
      auto squeezed = reduceKind("max", /*keepDims=*/false, kept);
      if (failed(squeezed))
        return failure();
      kept = *squeezed;
    }
    return single(binaryOp(c, AddOp::getOperationName(), *log, kept));
  }
  return Values{*sum};
}

FailureOr<Values> modNode(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  return single(
      c.create(ModOp::getOperationName(), c.inputs,
               {c.builder.getNamedAttr(
                   "fmod", c.builder.getBoolAttr(c.getInt("fmod", 0) != 0))}));
}

// BitShift: kiln.shift_left or kiln.shift_right (arithmetic when signed).
FailureOr<Values> bitShift(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  std::string direction = c.getString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return c.error("BitShift direction must be LEFT or RIGHT, got '" +
                   direction + "'");
  Type element = typeOf(c.inputs[0]).getElementType();
  if (!isa<IntegerType>(element) || element.isInteger(1))
    return c.error("BitShift needs integer operands");
  return single(c.create(direction == "LEFT" ? ShiftLeftOp::getOperationName()
                                             : ShiftRightOp::getOperationName(),
                         c.inputs));
}

// IsNaN: not(x == x). IsInf: x == +inf or x == -inf (as the attributes ask).
FailureOr<Values> isSpecial(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  std::string eq = EqualOp::getOperationName().str();
  if (c.node.op_type() == "IsNaN")
    return single(isNaN(c, x));
  double inf = std::numeric_limits<double>::infinity();
  bool pos = c.getInt("detect_positive", 1),
       neg = c.getInt("detect_negative", 1);
  FailureOr<Value> result = failure();
  if (pos)
    result = binaryOp(c, eq, x, scalarLike(c, x, inf));
  if (neg) {
    auto isNeg = binaryOp(c, eq, x, scalarLike(c, x, -inf));
    if (failed(isNeg))
      return failure();
    result = pos && succeeded(result)
                 ? binaryOp(c, OrOp::getOperationName(), *result, *isNeg)
                 : isNeg;
  }
  if (!pos && !neg) // detects nothing: x < x is false everywhere
    result = binaryOp(c, LessOp::getOperationName(), x, x);
  return single(result);
}

FailureOr<Values> gatherElements(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto axis =
      normalizeAxis(c, c.getInt("axis", 0), typeOf(c.inputs[0]).getRank());
  if (failed(axis))
    return failure();
  return single(c.create(
      GatherElementsOp::getOperationName(), c.inputs,
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(*axis))}));
}

// Pow: ONNX allows an exponent of another type; it is cast to the base's.
FailureOr<Values> pow(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value base = c.inputs[0], exponent = c.inputs[1];
  Type type = typeOf(base).getElementType();
  if (isa<IntegerType>(type)) {
    // An integer base: the power in f64, converted back to the base's type,
    // as numpy's power then astype. Exact while the result fits in 53 bits;
    // beyond that (where numpy's integer power wraps) it is not.
    Type f64 = c.builder.getF64Type();
    auto b = castTo(c, base, f64);
    auto e = castTo(c, exponent, f64);
    if (failed(b) || failed(e))
      return failure();
    auto power = binaryOp(c, PowOp::getOperationName(), (*b)[0], (*e)[0]);
    if (failed(power))
      return failure();
    return castTo(c, *power, type);
  }
  if (!isa<FloatType>(type))
    return c.error("Pow needs a numeric base");
  if (typeOf(exponent).getElementType() != type) {
    auto cast = c.create(CastOp::getOperationName(), exponent,
                         {c.builder.getNamedAttr("to", TypeAttr::get(type))});
    if (failed(cast))
      return failure();
    exponent = *cast;
  }
  return single(binaryOp(c, PowOp::getOperationName(), base, exponent));
}

// Max/Min/Sum/Mean over any number of inputs: a chain of binary ops.
template <typename OpTy, bool Mean = false>
FailureOr<Values> variadic(NodeContext &c) {
  if (c.inputs.empty())
    return c.error("'" + c.node.op_type() + "' needs at least one input");
  Value acc = c.inputs[0];
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    auto next =
        c.create(OpTy::getOperationName(), ValueRange{acc, c.inputs[i]});
    if (failed(next))
      return failure();
    acc = *next;
  }
  if (Mean && c.inputs.size() > 1)
    return single(binaryOp(c, DivOp::getOperationName(), acc,
                           scalarLike(c, acc, double(c.inputs.size()))));
  return Values{acc};
}

// Activations built from kiln ops (one fused kernel after fusion).
FailureOr<Values> activation(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  StringRef op = c.node.op_type();
  Value x = c.inputs[0];
  std::string add = AddOp::getOperationName().str(),
              mul = MulOp::getOperationName().str(),
              sub = SubOp::getOperationName().str(),
              div = DivOp::getOperationName().str(),
              less = LessOp::getOperationName().str(),
              where = WhereOp::getOperationName().str();
  auto k = [&](double v) { return scalarLike(c, x, v); };
  auto bin = [&](StringRef name, Value a, Value b) {
    return binaryOp(c, name, a, b);
  };
  auto un = [&](StringRef name, Value a) { return c.create(name, a); };
  // where(x < 0, negative, positive)
  auto bySign = [&](FailureOr<Value> negative,
                    Value positive) -> FailureOr<Values> {
    auto isNeg = bin(less, x, k(0));
    if (failed(isNeg) || failed(negative))
      return failure();
    return single(c.create(where, ValueRange{*isNeg, *negative, positive}));
  };
  if (op == "Reciprocal")
    return single(bin(div, k(1), x));
  if (op == "Softsign") { // x / (1 + |x|)
    auto a = un(AbsOp::getOperationName(), x);
    if (failed(a))
      return failure();
    auto d = bin(add, k(1), *a);
    if (failed(d))
      return failure();
    return single(bin(div, x, *d));
  }
  if (op == "Swish") { // x * sigmoid(alpha * x)
    auto ax = bin(mul, x, k(c.getFloat("alpha", 1.0f)));
    if (failed(ax))
      return failure();
    auto s = un(SigmoidOp::getOperationName(), *ax);
    if (failed(s))
      return failure();
    return single(bin(mul, x, *s));
  }
  if (op == "ThresholdedRelu") { // x > alpha ? x : 0
    auto above =
        bin(GreaterOp::getOperationName(), x, k(c.getFloat("alpha", 1.0f)));
    if (failed(above))
      return failure();
    return single(c.create(where, ValueRange{*above, x, k(0)}));
  }
  if (op == "Shrink") { // x < -l ? x + b : x > l ? x - b : 0
    double lambd = c.getFloat("lambd", 0.5f), bias = c.getFloat("bias", 0);
    auto low = bin(less, x, k(-lambd));
    auto high = bin(GreaterOp::getOperationName(), x, k(lambd));
    auto up = bin(add, x, k(bias));
    auto down = bin(sub, x, k(bias));
    if (failed(low) || failed(high) || failed(up) || failed(down))
      return failure();
    auto outer = c.create(where, ValueRange{*high, *down, k(0)});
    if (failed(outer))
      return failure();
    return single(c.create(where, ValueRange{*low, *up, *outer}));
  }
  if (op == "Mish") { // x * tanh(log(1 + exp(x)))
    auto e = un(ExpOp::getOperationName(), x);
    if (failed(e))
      return failure();
    auto p = bin(add, *e, k(1));
    if (failed(p))
      return failure();
    auto sp = un(LogOp::getOperationName(), *p);
    if (failed(sp))
      return failure();
    auto t = un(TanhOp::getOperationName(), *sp);
    if (failed(t))
      return failure();
    return single(bin(mul, x, *t));
  }
  if (op == "Softplus") {
    // log(exp(x) + 1) as max(x, 0) + log(1 + exp(-|x|)): exp(x) overflows
    // float16 past x = 11 (and float32 past 88), where softplus is x.
    auto a = un(AbsOp::getOperationName(), x);
    if (failed(a))
      return failure();
    auto na = un(NegOp::getOperationName(), *a);
    if (failed(na))
      return failure();
    auto e = un(ExpOp::getOperationName(), *na);
    if (failed(e))
      return failure();
    auto p = bin(add, *e, k(1));
    if (failed(p))
      return failure();
    auto l = un(LogOp::getOperationName(), *p);
    auto r = bin(MaxOp::getOperationName(), x, k(0));
    if (failed(l) || failed(r))
      return failure();
    return single(bin(add, *r, *l));
  }
  if (op == "LeakyRelu")
    return bySign(bin(mul, x, k(c.getFloat("alpha", 0.01f))), x);
  if (op == "PRelu") {
    if (c.inputs.size() != 2 || !c.inputs[1])
      return c.error("PRelu needs a slope input");
    return bySign(bin(mul, x, c.inputs[1]), x);
  }
  if (op == "Elu" || op == "Selu") {
    double alpha =
        c.getFloat("alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f);
    auto e = un(ExpOp::getOperationName(), x);
    if (failed(e))
      return failure();
    auto em1 = bin(sub, *e, k(1));
    if (failed(em1))
      return failure();
    auto negative = bin(mul, *em1, k(alpha));
    if (op == "Elu")
      return bySign(negative, x);
    double gamma = c.getFloat("gamma", 1.05070102214813232421875f);
    auto inner = bySign(negative, x);
    if (failed(inner))
      return failure();
    return single(bin(mul, inner->front(), k(gamma)));
  }
  if (op == "Celu") { // x < 0 ? alpha * (exp(x / alpha) - 1) : x
    double alpha = c.getFloat("alpha", 1.0f);
    auto scaled = bin(div, x, k(alpha));
    if (failed(scaled))
      return failure();
    auto e = un(ExpOp::getOperationName(), *scaled);
    if (failed(e))
      return failure();
    auto em1 = bin(sub, *e, k(1));
    if (failed(em1))
      return failure();
    return bySign(bin(mul, *em1, k(alpha)), x);
  }
  if (op == "HardSigmoid" || op == "HardSwish") { // max(0, min(1, a*x + b))
    double alpha = op == "HardSwish" ? 1.0 / 6 : c.getFloat("alpha", 0.2f);
    double beta = op == "HardSwish" ? 0.5 : c.getFloat("beta", 0.5f);
    auto ax = bin(mul, x, k(alpha));
    if (failed(ax))
      return failure();
    auto axb = bin(add, *ax, k(beta));
    if (failed(axb))
      return failure();
    Builder &b = c.builder;
    auto hs = c.create(ClipOp::getOperationName(), *axb,
                       {b.getNamedAttr("min", b.getF64FloatAttr(0)),
                        b.getNamedAttr("max", b.getF64FloatAttr(1))});
    if (failed(hs) || op == "HardSigmoid")
      return single(hs);
    return single(bin(mul, x, *hs));
  }
  return c.error("no decomposition for '" + op + "'");
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

// ONNX Pad: pads (and value) as attributes before opset 11, as inputs
// (with optional axes from opset 18) since.
FailureOr<Values> pad(NodeContext &c) {
  if (failed(arity(c, 1, 4)))
    return failure();
  std::string mode = c.getString("mode", "constant");
  if (!llvm::is_contained({"constant", "edge", "reflect", "wrap"}, mode))
    return c.error("Pad mode '" + mode + "' is not supported");
  Value input = c.inputs[0], pads, value, axes;
  if (c.inputs.size() > 1 && c.inputs[1]) {
    pads = c.inputs[1];
    if (c.inputs.size() > 2)
      value = c.inputs[2];
    if (c.inputs.size() > 3)
      axes = c.inputs[3];
    if (!axes) // a begin and an end pad per dim
      pads = withLength(c, pads, 2 * typeOf(input).getRank());
  } else {
    std::vector<int64_t> list = ints(c, "pads", {});
    pads = int64Constant(c, {(int64_t)list.size()}, list, "pads");
    if (c.attr("value") && c.getFloat("value", 0) != 0)
      value = scalarLike(c, input, c.getFloat("value", 0));
  }
  if (value && typeOf(value).getElementType() != typeOf(input).getElementType())
    return c.error("Pad value must have the input's element type");
  return single(padBy(c, input, pads, value, axes, mode));
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

FailureOr<Values> bitCast(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int to = c.getInt("to", 0);
  Type type = elementType(c.builder.getContext(), to);
  if (!type)
    return c.error("BitCast to type #" + Twine(to) + " is not supported");
  if (typeOf(c.inputs[0]).getElementType() == type)
    return Values{c.inputs[0]};
  return single(c.create(BitcastOp::getOperationName(), c.inputs[0],
                         {c.builder.getNamedAttr("to", TypeAttr::get(type))}));
}

FailureOr<Values> castLike(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  return castTo(c, c.inputs[0], typeOf(c.inputs[1]).getElementType());
}

FailureOr<Values> whereNode(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  return single(c.create(WhereOp::getOperationName(), c.inputs));
}

const llvm::StringMap<Converter> &table() {
  static const llvm::StringMap<Converter> converters = {
      {"Add", binary<AddOp>},
      {"Sub", binary<SubOp>},
      {"Mul", binary<MulOp>},
      {"Div", binary<DivOp>},
      {"Pow", pow},
      {"Relu", unary<ReluOp>},
      {"Erf", unary<ErfOp>},
      {"Tanh", unary<TanhOp>},
      {"Sigmoid", unary<SigmoidOp>},
      {"Exp", unary<ExpOp>},
      {"Neg", unary<NegOp>},
      {"Sqrt", unary<SqrtOp>},
      {"Gelu", gelu},
      {"MatMul", binary<MatMulOp>},
      {"Gemm", gemm},
      {"Identity", identity},
      {"Constant", constant},
      {"Conv", convertConv},
      {"MaxPool", maxPool},
      {"GlobalAveragePool", globalPool<kGlobalMean>},
      {"GlobalMaxPool", globalPool<kGlobalMax>},
      {"ReduceSum", reduceNode<kSum>},
      {"ReduceMean", reduceNode<kMean>},
      {"ReduceMax", reduceNode<kMax>},
      {"ReduceMin", reduceNode<kMin>},
      {"Reshape", reshape},
      {"Flatten", flatten},
      {"Clip", clip},
      {"Transpose", transpose},
      {"Gather", gather},
      {"Unsqueeze", unsqueeze},
      {"Squeeze", squeeze},
      {"Softmax", inFloat32<softmaxNode>},
      {"Attention", convertAttention},
      {"If", convertIf},
      {"Scan", convertScan},
      {"NonMaxSuppression", convertNonMaxSuppression},
      {"DeformConv", convertDeformConv},
      {"CausalConvWithState", convertCausalConvWithState},
      {"LinearAttention", convertLinearAttention},
      {"ai.onnx.preview.FlexAttention", convertFlexAttention},
      {"ai.onnx.ml.Binarizer", convertBinarizer},
      {"ai.onnx.ml.ArrayFeatureExtractor", convertArrayFeatureExtractor},
      {"ai.onnx.preview.training.Adagrad", convertAdagrad},
      {"ai.onnx.preview.training.Adam", convertAdam},
      {"ai.onnx.preview.training.Momentum", convertMomentum},
      {"ArgMax", convertArgMax},
      {"ConvTranspose", convertConvTranspose},
      {"LpPool", lpPool},
      {"LpNormalization", inFloat32<lpNormalization>},
      {"ArgMin", convertArgMin},
      {"Trilu", convertTrilu},
      {"Hardmax", convertHardmax},
      {"CumSum", convertCumSum},
      {"CumProd", convertCumProd},
      {"Einsum", convertEinsum},
      {"BitCast", bitCast},
      {"DepthToSpace", convertDepthToSpace},
      {"SpaceToDepth", convertSpaceToDepth},
      {"EyeLike", convertEyeLike},
      {"RMSNormalization", inFloat32<convertRMSNormalization>},
      {"RotaryEmbedding", convertRotaryEmbedding},
      {"NegativeLogLikelihoodLoss", convertNegativeLogLikelihoodLoss},
      {"SoftmaxCrossEntropyLoss", convertSoftmaxCrossEntropyLoss},
      {"LayerNormalization", inFloat32<convertLayerNormalization, 1>},
      {"BatchNormalization", convertBatchNormalization},
      {"InstanceNormalization", inFloat32<convertInstanceNormalization>},
      {"GroupNormalization", inFloat32<convertGroupNormalization>},
      {"MeanVarianceNormalization",
       inFloat32<convertMeanVarianceNormalization>},
      {"LRN", convertLRN},
      {"Shape", shape},
      {"Cast", castNode},
      {"Log", unary<LogOp>},
      {"Abs", unary<AbsOp>},
      {"Floor", unary<FloorOp>},
      {"Ceil", unary<CeilOp>},
      {"Sin", unary<SinOp>},
      {"Cos", unary<CosOp>},
      {"Tan", unary<TanOp>},
      {"Asin", unary<AsinOp>},
      {"Acos", unary<AcosOp>},
      {"Atan", unary<AtanOp>},
      {"Sinh", unary<SinhOp>},
      {"Cosh", unary<CoshOp>},
      {"Asinh", unary<AsinhOp>},
      {"Acosh", unary<AcoshOp>},
      {"Atanh", unary<AtanhOp>},
      {"Not", unary<NotOp>},
      {"And", binary<AndOp>},
      {"Or", binary<OrOp>},
      {"Xor", binary<XorOp>},
      {"BitwiseNot", unary<NotOp>},
      {"BitwiseAnd", binary<AndOp>},
      {"BitwiseOr", binary<OrOp>},
      {"BitwiseXor", binary<XorOp>},
      {"BitShift", bitShift},
      {"Equal", binary<EqualOp>},
      {"Less", binary<LessOp>},
      {"LessOrEqual", binary<LessEqualOp>},
      {"Greater", binary<GreaterOp>},
      {"GreaterOrEqual", binary<GreaterEqualOp>},
      {"Where", whereNode},
      {"Max", variadic<MaxOp>},
      {"Min", variadic<MinOp>},
      {"Sum", variadic<AddOp>},
      {"Mean", variadic<AddOp, true>},
      {"Reciprocal", activation},
      {"Softplus", activation},
      {"Softsign", activation},
      {"Swish", activation},
      {"ThresholdedRelu", activation},
      {"Shrink", activation},
      {"Mish", activation},
      {"LeakyRelu", activation},
      {"PRelu", activation},
      {"Elu", activation},
      {"Selu", activation},
      {"Celu", activation},
      {"HardSigmoid", activation},
      {"HardSwish", activation},
      {"LogSoftmax", inFloat32<logSoftmax>},
      {"Size", size},
      {"ConstantOfShape", constantOfShape},
      {"Pad", pad},
      {"Range", binary<RangeOp, 3>}, // constant inputs fold at import
      {"CastLike", castLike},
      {"QuantizeLinear", convertQuantizeLinear},
      {"Resize", convertResize},
      {"Upsample", convertResize},
      {"DequantizeLinear", convertDequantizeLinear},
      {"DynamicQuantizeLinear", convertDynamicQuantizeLinear},
      {"Sign", unary<SignOp>},
      {"Round", unary<RoundOp>},
      {"Mod", modNode},
      {"IsNaN", isSpecial},
      {"IsInf", isSpecial},
      {"GatherElements", gatherElements},
      {"ScatterElements", convertScatterElements},
      {"Scatter", convertScatterElements},
      {"ScatterND", convertScatterND},
      {"TensorScatter", convertTensorScatter},
      {"GatherND", convertGatherND},
      {"TopK", convertTopK},
      {"NonZero", convertNonZero},
      {"Unique", convertUnique},
      {"Det", convertDet},
      {"MaxUnpool", convertMaxUnpool},
      {"AffineGrid", convertAffineGrid},
      {"DFT", convertDFT},
      {"STFT", convertSTFT},
      {"RNN", convertRecurrent},
      {"GRU", convertRecurrent},
      {"LSTM", convertRecurrent},
      {"GridSample", convertGridSample},
      {"MatMulInteger", convertMatMulInteger},
      {"ConvInteger", convertConvInteger},
      {"QLinearMatMul", convertQLinear},
      {"QLinearConv", convertQLinear},
      {"SwiGLU", swiglu},
      {"Tile", convertTile},
      {"Compress", convertCompress},
      {"CenterCropPad", convertCenterCropPad},
      {"Col2Im", convertCol2Im},
      {"ReverseSequence", convertReverseSequence},
      {"OneHot", convertOneHot},
      {"HannWindow", convertWindow},
      {"HammingWindow", convertWindow},
      {"BlackmanWindow", convertWindow},
      {"Dropout", dropout},
      {"RandomUniform", convertRandomUniform},
      {"RandomUniformLike", convertRandomUniformLike},
      {"RandomNormal", convertRandomNormal},
      {"RandomNormalLike", convertRandomNormalLike},
      {"Bernoulli", convertBernoulli},
      {"Expand", expand},
      {"Concat", concat},
      {"Slice", slice},
      {"Split", split},
      {"AveragePool", averagePool},
      {"ReduceProd", reduceNode<kProd>},
      {"ReduceSumSquare", inFloat32<reduceComposite>},
      {"ReduceL1", inFloat32<reduceComposite>},
      {"ReduceL2", inFloat32<reduceComposite>},
      {"ReduceLogSum", inFloat32<reduceComposite>},
      {"ReduceLogSumExp", inFloat32<reduceComposite>},
  };
  return converters;
}
} // namespace

Converter kiln::onnx_import::findConverter(StringRef opType) {
  auto it = table().find(opType);
  return it == table().end() ? nullptr : it->second;
}
