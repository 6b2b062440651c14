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
  auto converted =
      convertTensor(value->t(), c.device, c.loc, blob, c.modelDir);
  if (failed(converted))
    return failure();
  return Values{
      c.builder.create<ConstantOp>(c.loc, converted->first, converted->second)};
}

const llvm::StringMap<Converter> &table() {
  static const llvm::StringMap<Converter> converters = {
      {"Add", binary<AddOp>},       {"Sub", binary<SubOp>},
      {"Mul", binary<MulOp>},       {"Div", binary<DivOp>},
      {"Relu", unary<ReluOp>},      {"Erf", unary<ErfOp>},
      {"Tanh", unary<TanhOp>},      {"Sigmoid", unary<SigmoidOp>},
      {"Exp", unary<ExpOp>},        {"Neg", unary<NegOp>},
      {"Sqrt", unary<SqrtOp>},      {"Gelu", gelu},
      {"MatMul", binary<MatMulOp>}, {"Gemm", gemm},
      {"Identity", identity},       {"Constant", constant},
  };
  return converters;
}
} // namespace

Converter kiln::onnx_import::findConverter(StringRef opType) {
  auto it = table().find(opType);
  return it == table().end() ? nullptr : it->second;
}
