//===- Elementwise.cpp - elementwise ONNX ops -----------------------------===//
//
// Unary and binary ops, activations, casts, Clip, Where, Pow, variadic
// Max/Min/Sum/Mean, Dropout at inference, and bit-level ops.
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
} // namespace

void kiln::onnx_import::addElementwiseConverters(ConverterTable &table) {
  addRows(table, {
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
                     {"Identity", identity},
                     {"Clip", clip},
                     {"BitCast", bitCast},
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
                     {"CastLike", castLike},
                     {"Sign", unary<SignOp>},
                     {"Round", unary<RoundOp>},
                     {"Mod", modNode},
                     {"IsNaN", isSpecial},
                     {"IsInf", isSpecial},
                     {"SwiGLU", swiglu},
                     {"Dropout", dropout},
                 });
}
