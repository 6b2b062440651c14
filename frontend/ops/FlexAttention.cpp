//===- FlexAttention.cpp - ai.onnx.preview.FlexAttention ------------------===//
//
// Y = prob_mod(softmax(score_mod((Q s) (K s)^T))) V with s = sqrt(scale)
// (default scale 1/sqrt(head size)), as the reference orders it: the scaled
// product in the inputs' type (float16 accumulated in float32), then the
// softmax and the product with V in softmax_precision (float32 for 16-bit
// inputs unless given). score_mod and prob_mod are subgraphs built in place
// on the [B, Hq, L, S] scores and probabilities. Grouped KV heads are
// repeated to the query heads (head h reads KV head h / (Hq / Hkv)); with
// head counts known only at run time, gathered by that index. Any dim may
// be symbolic.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// Subgraph `name` applied to `x`: one input, one output of x's type.
FailureOr<Value> applyMod(NodeContext &c, StringRef name, Value x) {
  const onnx::GraphProto *mod = c.graphAttr(name);
  if (!mod)
    return x;
  auto outputs = c.subgraph(*mod, x);
  if (failed(outputs))
    return failure();
  if (outputs->size() != 1 ||
      typeOf(outputs->front()).getElementType() != typeOf(x).getElementType() ||
      typeOf(outputs->front()).getRank() != 4)
    return c.error("FlexAttention " + name +
                   " must give one rank-4 output of its input's type");
  return outputs->front();
}

} // namespace

FailureOr<Values> kiln::onnx_import::convertFlexAttention(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  Value q = c.inputs[0], k = c.inputs[1], v = c.inputs[2];
  for (Value x : {q, k, v})
    if (typeOf(x).getRank() != 4)
      return c.error("FlexAttention needs rank-4 Q, K and V");
  int64_t hq = typeOf(q).getDimSize(1), hkv = typeOf(k).getDimSize(1),
          hv = typeOf(v).getDimSize(1);
  bool staticHeads = !ShapedType::isDynamic(hq) &&
                     !ShapedType::isDynamic(hkv) && !ShapedType::isDynamic(hv);
  if (staticHeads && (hv != hkv || hkv <= 0 || hq % hkv))
    return c.error("FlexAttention needs head counts with the query's a "
                   "multiple of the key's and value's");
  Type type = typeOf(q).getElementType();
  Type compute = type.isF64() ? type : c.builder.getF32Type();
  if (const onnx::AttributeProto *p = c.attr("softmax_precision")) {
    compute = elementType(c.builder.getContext(), p->i());
    if (!compute || !isa<FloatType>(compute) ||
        compute.getIntOrFloatBitWidth() < 16)
      return c.error("FlexAttention softmax_precision " + Twine(p->i()) +
                     " is not float, float16, bfloat16 or double");
  }
  OpChain g(c);
  Value sqrtScale;
  if (const onnx::AttributeProto *s = c.attr("scale")) {
    sqrtScale = g.scalar(type, std::sqrt((float)s->f()));
  } else if (int64_t e = typeOf(q).getDimSize(3); !ShapedType::isDynamic(e)) {
    sqrtScale = g.scalar(type, std::sqrt((float)(1.0 / std::sqrt((double)e))));
  } else {
    Type f32 = c.builder.getF32Type();
    Value size = g.cast(g.dim(q, 3), f32);
    Value root = g.unary(
        SqrtOp::getOperationName(),
        g.div(g.scalar(f32, 1), g.unary(SqrtOp::getOperationName(), size)));
    sqrtScale = g.cast(root, type);
  }
  Value keys, values;
  if (staticHeads) {
    keys = g.repeatHeads(k, hq / hkv);
    values = g.repeatHeads(v, hq / hkv);
  } else {
    // Head counts known only at run time: query head h gathers KV head
    // h / (Hq / Hkv).
    auto heads = iotaAlong(c, q, 1, 1, 0);
    if (failed(heads))
      return failure();
    Value ratio = g.op<MaxOp>(
        {g.div(g.dim(q, 1), g.dim(k, 1)), g.i64Constant({}, {1}, "one")});
    Value kvHead = g.div(*heads, ratio);
    auto axis1 = c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(1));
    keys = g.op<GatherOp>({k, kvHead}, {axis1});
    values = g.op<GatherOp>({v, kvHead}, {axis1});
  }
  Value scores =
      g.cast(g.wideMatmul(g.mul(q, sqrtScale),
                          g.transpose(g.mul(keys, sqrtScale), {0, 1, 3, 2})),
             compute);
  if (g.failed())
    return failure();
  auto modified = applyMod(c, "score_mod", scores);
  if (failed(modified))
    return failure();
  auto softmax = shiftedExpSum(c, *modified, {3});
  if (failed(softmax))
    return failure();
  Value normalized = g.div(softmax->exp, softmax->sum);
  if (g.failed())
    return failure();
  auto probs = applyMod(c, "prob_mod", normalized);
  if (failed(probs))
    return failure();
  Value y = g.cast(g.matmul(*probs, g.cast(values, compute)),
                   typeOf(v).getElementType());
  if (g.failed())
    return failure();
  return Values{y};
}

void kiln::onnx_import::addFlexAttentionConverters(ConverterTable &table) {
  addRows(table, {
                     {"ai.onnx.preview.FlexAttention", convertFlexAttention},
                 });
}
