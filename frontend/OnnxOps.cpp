//===- OnnxOps.cpp - ONNX node converters ---------------------------------===//
//
// One small function per ONNX op (or one generic one per op family), looked
// up by op type. Converters only build kiln graph ops; shapes come from the
// ops' own inference, so a node whose inputs do not fit is reported at the
// node.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
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
using Values = SmallVector<Value>;

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

template <typename OpTy> FailureOr<Values> unary(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  return single(c.create(OpTy::getOperationName(), c.inputs));
}

template <typename OpTy> FailureOr<Values> binary(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
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

FailureOr<Values> gemm(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Builder &b = c.builder;
  SmallVector<Value> operands = {c.inputs[0], c.inputs[1]};
  if (c.inputs.size() == 3 && c.inputs[2])
    operands.push_back(c.inputs[2]);
  return single(c.create(
      GemmOp::getOperationName(), operands,
      {b.getNamedAttr("alpha", b.getF32FloatAttr(c.getFloat("alpha", 1.0f))),
       b.getNamedAttr("beta", b.getF32FloatAttr(c.getFloat("beta", 1.0f))),
       b.getNamedAttr("trans_a", b.getBoolAttr(c.getInt("transA", 0) != 0)),
       b.getNamedAttr("trans_b", b.getBoolAttr(c.getInt("transB", 0) != 0))}));
}

FailureOr<Values> constant(NodeContext &c) {
  const auto *value = c.attr("value");
  if (!value || !value->has_t())
    return c.error("Constant is supported with a 'value' tensor attribute "
                   "only");
  std::string blob = c.node.output(0);
  auto converted = convertTensor(value->t(), c.device, c.loc, blob, c.modelDir);
  if (failed(converted))
    return failure();
  return Values{
      c.builder.create<ConstantOp>(c.loc, converted->first, converted->second)};
}

std::vector<int64_t> ints(NodeContext &c, StringRef name,
                          std::vector<int64_t> fallback) {
  const auto *a = c.attr(name);
  if (!a)
    return fallback;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// The values of a constant integer or float tensor (any width), or nothing
// when `v` is not a kiln.constant.
template <typename T> std::optional<std::vector<T>> constantValues(Value v) {
  auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!constant)
    return std::nullopt;
  Type element = constant.getType().getElementType();
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  std::vector<T> out;
  auto read = [&](auto tag) {
    using E = decltype(tag);
    for (size_t i = 0; i + sizeof(E) <= bytes.size(); i += sizeof(E)) {
      E e;
      std::memcpy(&e, bytes.data() + i, sizeof(E));
      out.push_back(static_cast<T>(e));
    }
  };
  if (element.isF32())
    read(float());
  else if (element.isF64())
    read(double());
  else if (element.isInteger(64))
    read(int64_t());
  else if (element.isInteger(32))
    read(int32_t());
  else
    return std::nullopt;
  return out;
}

int64_t spatialRank(NodeContext &c) {
  return cast<RankedTensorType>(c.inputs[0].getType()).getRank() - 2;
}

// Explicit begin/end pads from `pads` or `auto_pad`.
FailureOr<std::vector<int64_t>> windowPads(NodeContext &c,
                                           ArrayRef<int64_t> kernel,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> dilations) {
  size_t r = kernel.size();
  std::string autoPad = c.getString("auto_pad", "NOTSET");
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

FailureOr<Values> conv(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  auto wType = cast<RankedTensorType>(c.inputs[1].getType());
  if (wType.getRank() < 3 || !wType.hasStaticShape())
    return c.error("Conv weight must have a static shape of rank >= 3");
  size_t r = wType.getRank() - 2;
  std::vector<int64_t> kernel(wType.getShape().begin() + 2,
                              wType.getShape().end());
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  auto pads = windowPads(c, kernel, strides, dilations);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  SmallVector<Value> operands = {c.inputs[0], c.inputs[1]};
  if (c.inputs.size() == 3 && c.inputs[2])
    operands.push_back(c.inputs[2]);
  return single(c.create(
      ConvOp::getOperationName(), operands,
      {b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
       b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
       b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
       b.getNamedAttr("group", b.getI64IntegerAttr(c.getInt("group", 1)))}));
}

FailureOr<Values> maxPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  if (c.node.output_size() > 1 && !c.node.output(1).empty())
    return c.error("MaxPool's Indices output is not supported");
  if (c.getInt("storage_order", 0) != 0)
    return c.error("MaxPool storage_order=1 is not supported");
  int64_t r = spatialRank(c);
  std::vector<int64_t> kernel = ints(c, "kernel_shape", {});
  if ((int64_t)kernel.size() != r)
    return c.error("MaxPool needs kernel_shape with " + Twine(r) + " values");
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  auto pads = windowPads(c, kernel, strides, dilations);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  return single(
      c.create(MaxPoolOp::getOperationName(), c.inputs,
               {b.getNamedAttr("kernel_shape", b.getDenseI64ArrayAttr(kernel)),
                b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
                b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
                b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
                b.getNamedAttr("ceil_mode",
                               b.getBoolAttr(c.getInt("ceil_mode", 0) != 0))}));
}

FailureOr<Value> reduce(NodeContext &c, StringRef kind,
                        std::vector<int64_t> axes, bool keepdims) {
  int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
  for (int64_t &axis : axes) {
    if (axis < -rank || axis >= rank)
      return c.error("axis " + Twine(axis) + " is out of range for rank " +
                     Twine(rank));
    if (axis < 0)
      axis += rank;
  }
  llvm::sort(axes);
  Builder &b = c.builder;
  return c.create(ReduceOp::getOperationName(), c.inputs[0],
                  {b.getNamedAttr("kind", b.getStringAttr(kind)),
                   b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes)),
                   b.getNamedAttr("keepdims", b.getBoolAttr(keepdims))});
}

FailureOr<Values> globalAveragePool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  return single(reduce(c, "mean", axes, true));
}

template <const char *Kind> FailureOr<Values> reduceNode(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  std::vector<int64_t> axes = ints(c, "axes", {});
  if (c.inputs.size() == 2 && c.inputs[1]) {
    auto values = constantValues<int64_t>(c.inputs[1]);
    if (!values)
      return c.error("axes computed at run time are not supported");
    axes = *values;
  }
  if (axes.empty()) {
    if (c.getInt("noop_with_empty_axes", 0))
      return Values{c.inputs[0]};
    int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  return single(reduce(c, Kind, axes, c.getInt("keepdims", 1) != 0));
}
constexpr char kSum[] = "sum", kMean[] = "mean", kMax[] = "max", kMin[] = "min";

FailureOr<Value> reshapeTo(NodeContext &c, Value input,
                           ArrayRef<int64_t> spec) {
  return c.create(
      ReshapeOp::getOperationName(), input,
      {c.builder.getNamedAttr("shape", c.builder.getDenseI64ArrayAttr(spec))});
}

FailureOr<Values> reshape(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto spec = constantValues<int64_t>(c.inputs[1]);
  if (!spec)
    return c.error("a shape computed at run time is not supported yet");
  if (c.getInt("allowzero", 0) && llvm::is_contained(*spec, 0))
    return c.error("Reshape allowzero=1 with a zero dim is not supported");
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
  if (left == -1 && right == -1)
    return c.error("Flatten with dynamic dims on both sides of the axis is "
                   "not supported");
  if (left == -1 && axis == 1)
    left = 0; // copy the (symbolic) batch dim
  return single(reshapeTo(c, c.inputs[0], {left, right}));
}

FailureOr<Values> clip(NodeContext &c) {
  if (failed(arity(c, 1, 3)))
    return failure();
  Builder &b = c.builder;
  SmallVector<NamedAttribute> attrs;
  auto bound = [&](StringRef name, size_t index) -> LogicalResult {
    std::optional<double> value;
    if (c.opset < 11) {
      if (c.attr(name))
        value = c.getFloat(name, 0);
    } else if (c.inputs.size() > index && c.inputs[index]) {
      auto values = constantValues<double>(c.inputs[index]);
      if (!values || values->size() != 1)
        return c.error("Clip " + name +
                       " computed at run time is not "
                       "supported");
      value = values->front();
    }
    if (value)
      attrs.push_back(b.getNamedAttr(name, b.getF64FloatAttr(*value)));
    return success();
  };
  if (failed(bound("min", 1)) || failed(bound("max", 2)))
    return failure();
  return single(c.create(ClipOp::getOperationName(), c.inputs[0], attrs));
}

const llvm::StringMap<Converter> &table() {
  static const llvm::StringMap<Converter> converters = {
      {"Add", binary<AddOp>},
      {"Sub", binary<SubOp>},
      {"Mul", binary<MulOp>},
      {"Div", binary<DivOp>},
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
      {"Conv", conv},
      {"MaxPool", maxPool},
      {"GlobalAveragePool", globalAveragePool},
      {"ReduceSum", reduceNode<kSum>},
      {"ReduceMean", reduceNode<kMean>},
      {"ReduceMax", reduceNode<kMax>},
      {"ReduceMin", reduceNode<kMin>},
      {"Reshape", reshape},
      {"Flatten", flatten},
      {"Clip", clip},
  };
  return converters;
}
} // namespace

Converter kiln::onnx_import::findConverter(StringRef opType) {
  auto it = table().find(opType);
  return it == table().end() ? nullptr : it->second;
}
