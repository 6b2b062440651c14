//===- Stateful.cpp - sequence mixers that carry a state ------------------===//
//
// The building blocks of Gated DeltaNet / Mamba style models (opset 27):
//
//   CausalConvWithState  the past state (zeros when absent) concatenated in
//                        front of the input along the length, a depthwise
//                        Conv (group = channels, or depthwise group 0 when
//                        they are counted at run time; valid padding), bias and
//                        an optional SiLU (in float32); the present state is
//                        the last k - 1 positions of the concatenation.
//   LinearAttention      the recurrence S_t = exp(g_t) S_{t-1} + k_t (x)
//                        beta_t (v_t - exp(g_t) S_{t-1}^T k_t) (the decay and
//                        the delta correction per update_rule), o_t = scale
//                        q_t^T S_t, unrolled over the static sequence length
//                        in float32 as the reference computes it. Heads are
//                        unpacked from [B, T, H*D]; grouped query heads read
//                        their KV head's state.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

FailureOr<Values>
kiln::onnx_import::convertCausalConvWithState(NodeContext &c) {
  if (failed(arity(c, 2, 4)))
    return failure();
  std::string activation = c.getString("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish")
    return c.error("CausalConvWithState activation '" + activation +
                   "' is not one of none, silu, swish");
  Value x = c.inputs[0], weight = c.inputs[1];
  Value bias = c.inputs.size() > 2 ? c.inputs[2] : Value();
  Value past = c.inputs.size() > 3 ? c.inputs[3] : Value();
  auto wType = typeOf(weight);
  if (typeOf(x).getRank() != 3 || wType.getRank() != 3 ||
      (!wType.isDynamicDim(1) && wType.getDimSize(1) != 1))
    return c.error("CausalConvWithState needs a rank-3 input and a weight of "
                   "shape (channels, 1, k)");
  int64_t channels = wType.getDimSize(0), k = wType.getDimSize(2);
  Builder &b = c.builder;
  OpChain g(c);
  // k - 1, the state's length (read from the weight at run time when k is
  // symbolic).
  Value history = ShapedType::isDynamic(k)
                      ? g.sub(g.dim(weight, 2), g.i64Constant({}, {1}, "one"))
                      : g.i64Constant({}, {k - 1}, "k");
  Value padded;
  if (past) {
    padded = g.concat({past, x}, 2);
  } else {
    Value pads = ShapedType::isDynamic(k)
                     ? g.concat({g.i64Constant({2}, {0, 0}, "pads"),
                                 g.reshape(history, {1}),
                                 g.i64Constant({3}, {0, 0, 0}, "pads")},
                                0)
                     : g.i64Constant({6}, {0, 0, k - 1, 0, 0, 0}, "pads");
    padded = g.padConstant(x, pads, g.scalar(typeOf(x).getElementType(), 0),
                           g.i64Constant({3}, {0, 1, 2}, "axes"));
  }
  if (g.failed())
    return failure();
  SmallVector<Value> operands = {padded, weight};
  if (bias)
    operands.push_back(bias);
  auto conv = c.create(
      ConvOp::getOperationName(), operands,
      {b.getNamedAttr("strides", b.getDenseI64ArrayAttr({1})),
       b.getNamedAttr("pads", b.getDenseI64ArrayAttr({0, 0})),
       b.getNamedAttr("dilations", b.getDenseI64ArrayAttr({1})),
       // 0: depthwise over channels counted at run time
       b.getNamedAttr("group",
                      b.getI64IntegerAttr(
                          ShapedType::isDynamic(channels) ? 0 : channels))});
  if (failed(conv))
    return failure();
  Value out = *conv;
  if (activation != "none") {
    Type t = typeOf(out).getElementType();
    Value wide = g.cast(out, b.getF32Type());
    out = g.cast(g.mul(wide, g.unary(SigmoidOp::getOperationName(), wide)), t);
  }
  int64_t length = typeOf(padded).getDimSize(2);
  Value present = ShapedType::isDynamic(length) || ShapedType::isDynamic(k)
                      ? g.sliceBy(padded, 2, g.sub(g.dim(padded, 2), history),
                                  g.dim(padded, 2))
                      : g.slice(padded, 2, length - (k - 1), k - 1);
  if (g.failed())
    return failure();
  return Values{out, present};
}

FailureOr<Values> kiln::onnx_import::convertLinearAttention(NodeContext &c) {
  if (failed(arity(c, 3, 6)))
    return failure();
  std::string rule = c.getString("update_rule", "gated_delta");
  if (!llvm::is_contained({"linear", "gated", "delta", "gated_delta"}, rule))
    return c.error("LinearAttention update_rule '" + rule +
                   "' is not one of linear, gated, delta, gated_delta");
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  auto input = [&](size_t i) {
    return i < c.inputs.size() ? c.inputs[i] : Value();
  };
  Value query = input(0), key = input(1), value = input(2);
  Value past = input(3), decay = input(4), beta = input(5);
  if (gating != (bool)decay)
    return c.error("LinearAttention update_rule '" + rule + "' " +
                   (gating ? "needs" : "forbids") + " the decay input");
  if (delta != (bool)beta)
    return c.error("LinearAttention update_rule '" + rule + "' " +
                   (delta ? "needs" : "forbids") + " the beta input");
  int64_t hq = c.getInt("q_num_heads", 0), hkv = c.getInt("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv)
    return c.error("LinearAttention needs q_num_heads a positive multiple of "
                   "kv_num_heads");
  for (Value v : {query, key, value, decay, beta})
    if (v && (typeOf(v).getRank() != 3 || !typeOf(v).hasStaticShape()))
      return c.error("LinearAttention needs rank-3 inputs of static shape "
                     "(the sequence is unrolled)");
  auto qShape = typeOf(query).getShape();
  int64_t batch = qShape[0], steps = qShape[1];
  int64_t dk = qShape[2] / hq, dv = typeOf(value).getDimSize(2) / hkv;
  if (qShape[2] % hq || typeOf(value).getDimSize(2) % hkv ||
      typeOf(key).getDimSize(2) != hkv * dk)
    return c.error("LinearAttention's query, key and value widths do not fit "
                   "their head counts");
  if (steps < 1)
    return c.error("LinearAttention needs a sequence length of at least 1");
  int64_t group = hq / hkv;
  Type f32 = c.builder.getF32Type();
  Type outType = typeOf(query).getElementType();
  Type stateType = past ? typeOf(past).getElementType() : outType;
  OpChain g(c);
  // [B, T, H*D] -> [B, H, T, D] in float32.
  auto unpack = [&](Value v, int64_t heads) {
    int64_t d = typeOf(v).getDimSize(2) / heads;
    return g.cast(
        g.transpose(g.reshape(v, {batch, steps, heads, d}), {0, 2, 1, 3}), f32);
  };
  Value q4 = unpack(query, hq), k4 = unpack(key, hkv), v4 = unpack(value, hkv);
  Value decay4, beta4;
  if (decay) {
    int64_t last = typeOf(decay).getDimSize(2);
    if (last != hkv && last != hkv * dk)
      return c.error("LinearAttention decay's last dim must be kv_num_heads "
                     "or kv_num_heads * d_k");
    decay4 = unpack(decay, hkv); // [B, H, T, 1 or d_k]
  }
  if (beta) {
    int64_t last = typeOf(beta).getDimSize(2);
    if (last != hkv && last != 1)
      return c.error("LinearAttention beta's last dim must be kv_num_heads "
                     "or 1");
    beta4 = g.cast(
        g.transpose(g.reshape(beta, {batch, steps, last, 1}), {0, 2, 1, 3}),
        f32); // [B, H or 1, T, 1]
  }
  Value state =
      past ? g.cast(past, f32) : g.splat({batch, hkv, dk, dv}, f32, 0);
  if (past && typeOf(past).getShape() != ArrayRef<int64_t>{batch, hkv, dk, dv})
    return c.error("LinearAttention past_state must have shape (batch, "
                   "kv_num_heads, d_k, d_v)");
  float scaleAttr = c.getFloat("scale", 0);
  double scale = scaleAttr == 0 ? 1.0 / std::sqrt((double)dk) : scaleAttr;
  SmallVector<Value> outputs;
  for (int64_t t = 0; t < steps; ++t) {
    Value qt = g.slice(q4, 2, t, 1); // [B, Hq, 1, dk]
    Value kt = g.slice(k4, 2, t, 1); // [B, Hkv, 1, dk]
    Value vt = g.slice(v4, 2, t, 1); // [B, Hkv, 1, dv]
    if (gating) // state * exp(g_t) over d_k (or all of it), per d_v
      state = g.mul(state, g.transpose(g.unary(ExpOp::getOperationName(),
                                               g.slice(decay4, 2, t, 1)),
                                       {0, 1, 3, 2}));
    if (delta)
      vt = g.mul(g.slice(beta4, 2, t, 1), g.sub(vt, g.matmul(kt, state)));
    state = g.add(state, g.mul(g.transpose(kt, {0, 1, 3, 2}), vt));
    Value read = g.repeatHeads(state, group);
    outputs.push_back(g.mul(g.matmul(qt, read), g.scalar(f32, scale)));
  }
  Value stacked = steps == 1 ? outputs.front() : g.concat(outputs, 2);
  Value out = g.cast(
      g.reshape(g.transpose(stacked, {0, 2, 1, 3}), {batch, steps, hq * dv}),
      outType);
  Value present = g.cast(state, stateType);
  if (g.failed())
    return failure();
  return Values{out, present};
}

void kiln::onnx_import::addStatefulConverters(ConverterTable &table) {
  addRows(table, {
                     {"CausalConvWithState", convertCausalConvWithState},
                     {"LinearAttention", convertLinearAttention},
                 });
}
