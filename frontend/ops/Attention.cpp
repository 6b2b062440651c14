//===- Attention.cpp - Attention, RMSNormalization, RotaryEmbedding -------===//
//
// Decompositions into kiln graph ops. Symbolic dims are handled by shape
// computations at run time (reshape_to, slice_by, dims read as data).
//
// Attention (opsets 23-25), after onnx/reference/ops/op_attention.py and the
// op's function body:
//   * 3-D Q/K/V [B, S, heads * D] are reshaped to [B, S, heads, D] and
//     transposed to [B, heads, S, D] (q_num_heads/kv_num_heads give the head
//     counts); 4-D inputs are used as they are.
//   * past_key/past_value are concatenated before K/V on the sequence axis;
//     the results are the present_key/present_value outputs.
//   * scores = (Q * sqrt(scale)) @ (K^T * sqrt(scale)), scale defaulting to
//     1/sqrt(head_size). Grouped-query attention (q heads a multiple r of the
//     kv heads, query head h reading kv head h / r) reshapes Q to
//     [B, kv_heads, r * Sq, D] so that the matmul broadcasts K without
//     repeating it, and reshapes the scores back to [B, q_heads, Sq, Skv].
//   * softcap > 0: scores = softcap * tanh(scores / softcap).
//   * The additive bias: a float attn_mask (cast to Q's type) or a bool one
//     (where(mask, 0, -inf)), padded with -inf up to the total key count;
//     plus where(allowed, 0, -inf) for the structural masks: is_causal
//     (key j <= query i + offset), left/right_window_size (offset + i - j
//     <= left, j - offset - i <= right) and nonpad_kv_seqlen (key j <
//     nonpad[b]). offset is past_sequence_length with past_key,
//     nonpad_kv_seqlen[b] - Sq with nonpad_kv_seqlen (computed at run time
//     with compare ops), else 0; with a compile-time offset `allowed` is a
//     bool constant.
//   * Softmax over the keys, in softmax_precision when given (cast there and
//     back), as the reference computes it: exp(x - m) / s with m replaced by
//     0 when it is -inf and s by 1 when it is 0; then rows whose bias is -inf
//     everywhere (fully masked) are set to 0.
//   * Y = probabilities @ V (grouped as for the scores), transposed and
//     reshaped back to [B, Sq, q_heads * Dv] for 3-D inputs.
//   * qk_matmul_output (4th output) by qk_matmul_output_mode: 0 the raw
//     scores (as the spec and the function body say; the Python reference
//     returns the softcapped ones), 1 after softcap, 2 after the bias, 3 the
//     guarded probabilities in Q's type.
//   * With float16 inputs the two matmuls and the softmax sum widen their
//     operands to float32 and round the result back once, accumulating in
//     float32 as numpy (the reference) and common runtimes do.
//
// RMSNormalization: in the stash_type precision (x cast there),
// Y = cast(x / sqrt(mean(x * x over axis..rank-1) + epsilon)) * scale.
//
// RotaryEmbedding: cos/sin = cache[position_ids] (Gather) or the caches as
// given ([B, S, rotary_dim / 2]), broadcast to the input's layout ([B, H, S, D]
// for 4-D input; 3-D [B, S, H * D] is reshaped to [B, S, H, D]). The first
// rotary_dim features split into x1/x2 (halves, or even/odd features when
// interleaved); real = cos * x1 - sin * x2, imag = sin * x1 + cos * x2 are
// concatenated (interleaved: stacked on a new last axis and flattened) and
// followed by the features that are not rotated.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Value inputOr(NodeContext &c, size_t i) {
  return i < c.inputs.size() ? c.inputs[i] : Value();
}

bool wantsOutput(NodeContext &c, int i) {
  return c.node.output_size() > i && !c.node.output(i).empty();
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s.empty() ? "scalar" : s;
}

/// The floating-point element type ONNX data type `code` names, for the
/// precision attributes (softmax_precision, stash_type); null if kiln does not
/// support it or it is not a floating-point type.
Type floatTypeOf(NodeContext &c, int64_t code) {
  Type type = elementType(c.builder.getContext(), code);
  return type && isa<FloatType>(type) ? type : Type();
}

} // namespace

FailureOr<Values> convertAttention(NodeContext &c) {
  if (failed(arity(c, 3, 7)))
    return failure();
  Value q = c.inputs[0], k = c.inputs[1], v = c.inputs[2];
  Value mask = inputOr(c, 3), pastKey = inputOr(c, 4),
        pastValue = inputOr(c, 5), nonpad = inputOr(c, 6);
  int64_t rank = typeOf(q).getRank();
  if (rank != 3 && rank != 4)
    return c.error("Attention needs 3-D or 4-D Q, K and V, got Q of rank " +
                   Twine(rank));
  if (typeOf(k).getRank() != rank || typeOf(v).getRank() != rank)
    return c.error("Attention needs Q, K and V of the same rank");
  Type t1 = typeOf(q).getElementType();
  if (!isa<FloatType>(t1))
    return c.error("Attention needs floating-point Q, K and V");
  if (typeOf(k).getElementType() != t1 || typeOf(v).getElementType() != t1)
    return c.error("Attention with K or V of another element type than Q is "
                   "not supported");
  if (!pastKey != !pastValue)
    return c.error("Attention needs past_key and past_value together");
  if (nonpad && pastKey)
    return c.error("Attention nonpad_kv_seqlen cannot be combined with "
                   "past_key and past_value");
  if (c.node.output_size() > 4)
    return c.error("Attention has at most 4 outputs, node has " +
                   Twine(c.node.output_size()));

  // Attributes.
  bool causal = c.getInt("is_causal", 0) != 0;
  int64_t mode = c.getInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return c.error("Attention qk_matmul_output_mode " + Twine(mode) +
                   " is not one of 0, 1, 2, 3");
  double softcap = c.getFloat("softcap", 0.0f);
  if (softcap < 0)
    return c.error("Attention softcap must not be negative");
  int64_t left = c.getInt("left_window_size", -1),
          right = c.getInt("right_window_size", -1);
  if (left < -1 || right < -1)
    return c.error("Attention left_window_size and right_window_size must be "
                   "-1 or non-negative");
  Type softmaxType = t1;
  if (c.attr("softmax_precision")) {
    int64_t code = c.getInt("softmax_precision", 0);
    softmaxType = floatTypeOf(c, code);
    if (!softmaxType)
      return c.error("Attention softmax_precision " + Twine(code) +
                     " is not a supported floating-point type");
  }

  OpChain g(c);
  auto shapeOf = [](Value x) { return typeOf(x).getShape(); };
  auto dynamic = [](int64_t d) { return ShapedType::isDynamic(d); };
  int64_t batch = shapeOf(q)[0];

  // Q/K/V as [B, heads, S, D].
  int64_t qHeads, kvHeads;
  if (rank == 3) {
    if (!c.attr("q_num_heads") || !c.attr("kv_num_heads"))
      return c.error("Attention with 3-D inputs needs the q_num_heads and "
                     "kv_num_heads attributes");
    qHeads = c.getInt("q_num_heads", 0);
    kvHeads = c.getInt("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      return c.error("Attention q_num_heads and kv_num_heads must be positive");
    auto split = [&](Value x, int64_t heads, StringRef name) -> Value {
      auto shape = shapeOf(x);
      if (!dynamic(shape[2]) && shape[2] % heads != 0) {
        (void)c.error("Attention " + name + " hidden size " + Twine(shape[2]) +
                      " is not a multiple of its head count " + Twine(heads));
        return {};
      }
      Value heads4 =
          llvm::count_if(shape, dynamic) <= 1 && !dynamic(shape[2])
              ? g.reshape(x, {shape[0], shape[1], heads, shape[2] / heads})
              : g.reshapeBy(x, g.i64Constant({4}, {0, 0, heads, -1}, "split"));
      return g.transpose(heads4, {0, 2, 1, 3});
    };
    q = split(q, qHeads, "Q");
    k = q ? split(k, kvHeads, "K") : Value();
    v = k ? split(v, kvHeads, "V") : Value();
    if (!v || g.failed())
      return failure();
  } else {
    // Head counts from the dims, else from the attributes (dynamic: -1).
    qHeads = shapeOf(q)[1];
    kvHeads = shapeOf(k)[1];
    if (dynamic(qHeads) && c.attr("q_num_heads"))
      qHeads = c.getInt("q_num_heads", 0);
    if (dynamic(kvHeads) && c.attr("kv_num_heads"))
      kvHeads = c.getInt("kv_num_heads", 0);
    if (!dynamic(shapeOf(v)[1]) && !dynamic(kvHeads) &&
        shapeOf(v)[1] != kvHeads)
      return c.error("Attention K and V have different head counts");
    if ((c.attr("q_num_heads") && !dynamic(shapeOf(q)[1]) &&
         c.getInt("q_num_heads", 0) != qHeads) ||
        (c.attr("kv_num_heads") && !dynamic(shapeOf(k)[1]) &&
         c.getInt("kv_num_heads", 0) != kvHeads))
      return c.error("Attention q_num_heads or kv_num_heads does not match "
                     "the head dims of 4-D Q, K and V");
  }
  int64_t headSize = shapeOf(q)[3];
  if (!dynamic(headSize) && !dynamic(shapeOf(k)[3]) &&
      shapeOf(k)[3] != headSize)
    return c.error("Attention Q and K have different head sizes (" +
                   Twine(headSize) + ", " + Twine(shapeOf(k)[3]) + ")");
  bool headsKnown = !dynamic(qHeads) && !dynamic(kvHeads);
  if (headsKnown && qHeads % kvHeads != 0)
    return c.error("Attention q_num_heads " + Twine(qHeads) +
                   " is not a multiple of kv_num_heads " + Twine(kvHeads));
  // 0: the group count is known only at run time.
  int64_t groups = headsKnown ? qHeads / kvHeads : 0;

  // The KV cache.
  // The past length as a rank-0 int64 (a constant when static).
  Value pastLength = g.i64Constant({}, {0}, "past");
  if (pastKey) {
    if (typeOf(pastKey).getRank() != 4 || typeOf(pastValue).getRank() != 4)
      return c.error("Attention past_key and past_value must be 4-D");
    pastLength = g.dim(pastKey, 2);
    k = g.concat({pastKey, k}, 2);
    v = g.concat({pastValue, v}, 2);
    if (g.failed())
      return failure();
  }
  Value presentKey = k, presentValue = v;
  int64_t qLength = shapeOf(q)[2], kvLength = shapeOf(k)[2];

  // Scores, with grouped heads folded into the query axis.
  Value sqrtScale;
  if (c.attr("scale") || !dynamic(headSize)) {
    double scale = c.attr("scale") ? c.getFloat("scale", 0.0f)
                                   : 1.0 / std::sqrt((double)headSize);
    if (scale < 0)
      return c.error("Attention scale must not be negative");
    sqrtScale = g.scalar(t1, std::sqrt(scale));
  } else { // head_size^(-1/4), from the dim at run time
    Type f64 = c.builder.getF64Type();
    sqrtScale = g.cast(
        g.op<PowOp>({g.cast(g.dim(q, 3), f64), g.scalar(f64, -0.25)}), t1);
  }
  // A reshape with at most one dynamic dim is a view; else the shape is
  // computed at run time from the dims of `x` ([B, ?, ?, N]) and the two
  // middle dims given.
  auto regroup = [&](Value x, Value heads, Value length) {
    Value spec = g.concat({g.reshape(g.dim(x, 0), {1}), g.reshape(heads, {1}),
                           g.reshape(length, {1}), g.reshape(g.dim(x, 3), {1})},
                          0);
    return g.reshapeBy(x, spec);
  };
  // [B, q_heads, S, N] -> [B, kv, r * S, N]
  auto grouped = [&](Value x) {
    if (groups == 1 || !x)
      return x;
    auto s = shapeOf(x);
    if (groups > 1 && llvm::count_if(s, dynamic) <= 1)
      return g.reshape(
          x, {s[0], kvHeads, dynamic(s[2]) ? s[2] : groups * s[2], s[3]});
    return regroup(x, g.dim(k, 1),
                   g.mul(g.div(g.dim(x, 1), g.dim(k, 1)), g.dim(x, 2)));
  };
  // [B, kv, r * S, N] -> [B, q_heads, S, N]
  auto ungrouped = [&](Value x) {
    if (groups == 1 || !x)
      return x;
    auto s = shapeOf(x);
    if (groups > 1 && llvm::count_if(s, dynamic) <= 1 && !dynamic(qLength))
      return g.reshape(x, {s[0], qHeads, qLength, s[3]});
    return regroup(x, g.dim(q, 1), g.dim(q, 2));
  };
  Value scaledQ = g.mul(q, sqrtScale);
  Value scaledKT = g.mul(g.transpose(k, {0, 1, 3, 2}), sqrtScale);
  Value raw = ungrouped(g.wideMatmul(grouped(scaledQ), scaledKT));
  Value capped = raw;
  if (softcap > 0) {
    Value cap = g.scalar(t1, softcap);
    capped = g.mul(g.unary(TanhOp::getOperationName(), g.div(raw, cap)), cap);
  }
  if (g.failed())
    return failure();

  // The additive bias from attn_mask.
  Value zero = g.scalar(t1, 0), negInf = g.scalar(t1, -kInf);
  Value maskBias;
  if (mask) {
    auto maskType = typeOf(mask);
    if (maskType.getRank() == 0)
      return c.error("Attention attn_mask must have rank 1 or more");
    Type element = maskType.getElementType();
    if (element.isInteger(1))
      maskBias = g.where(mask, zero, negInf);
    else if (isa<FloatType>(element))
      maskBias = g.cast(mask, t1);
    else
      return c.error("Attention attn_mask must be bool or floating-point");
    int64_t keys = maskType.getShape().back();
    if (!dynamic(keys) && !dynamic(kvLength) && keys > kvLength)
      return c.error("Attention attn_mask has " + Twine(keys) +
                     " keys, more than the total sequence length " +
                     Twine(kvLength));
    if (!dynamic(keys) && !dynamic(kvLength) && keys < kvLength &&
        maskType.hasStaticShape()) {
      SmallVector<int64_t> padShape(maskType.getShape());
      padShape.back() = kvLength - keys;
      maskBias = g.concat({maskBias, g.splat(padShape, t1, -kInf)},
                          maskType.getRank() - 1);
    } else if (dynamic(keys) || dynamic(kvLength) || keys < kvLength) {
      // Padded with -inf up to the key count, at run time (maybe by 0).
      Value missing = g.reshape(g.sub(g.dim(k, 2), g.dim(mask, -1)), {1});
      Value pads = g.concat({g.i64Constant({1}, {0}, "pad"), missing}, 0);
      maskBias =
          g.padConstant(maskBias, pads, negInf,
                        g.i64Constant({1}, {maskType.getRank() - 1}, "axis"));
    }
  }

  // The structural masks (is_causal, window, nonpad_kv_seqlen) as `allowed`.
  bool window = left >= 0 || right >= 0;
  Value allowed;
  if (!nonpad && (causal || window) &&
      (dynamic(qLength) || dynamic(kvLength) ||
       !pastLength.getDefiningOp<ConstantOp>())) {
    // diff = past + i - j from iotas over the queries and keys.
    auto qi = iotaAlong(c, q, 2, 2, 0), kj = iotaAlong(c, k, 2, 2, 1);
    if (failed(qi) || failed(kj))
      return failure();
    Value diff = g.sub(g.add(*qi, pastLength), *kj);
    Type i64 = c.builder.getI64Type();
    Value ok =
        causal ? g.op<GreaterEqualOp>({diff, g.scalar(i64, 0)}) : Value();
    auto both = [&](Value a, Value b) { return a ? g.op<AndOp>({a, b}) : b; };
    if (left >= 0)
      ok = both(ok, g.op<LessEqualOp>({diff, g.scalar(i64, left)}));
    if (right >= 0)
      ok = both(ok, g.op<GreaterEqualOp>({diff, g.scalar(i64, -right)}));
    allowed = ok;
  } else if (!nonpad && (causal || window)) {
    int64_t past = *constantValues<int64_t>(pastLength)->begin();
    std::vector<char> bits(qLength * kvLength);
    for (int64_t i = 0; i < qLength; ++i)
      for (int64_t j = 0; j < kvLength; ++j) {
        int64_t diff = past + i - j; // query position - key position
        bits[i * kvLength + j] = (!causal || diff >= 0) &&
                                 (left < 0 || diff <= left) &&
                                 (right < 0 || -diff <= right);
      }
    allowed =
        g.constant({qLength, kvLength}, c.builder.getI1Type(), bits, "allowed");
  } else if (nonpad) {
    auto type = typeOf(nonpad);
    if (type.getRank() != 1 ||
        (!dynamic(batch) && !type.isDynamicDim(0) &&
         type.getDimSize(0) != batch) ||
        !type.getElementType().isInteger(64))
      return c.error("Attention nonpad_kv_seqlen must be int64 of shape (" +
                     Twine(batch) + "), got " + shapeString(type.getShape()));
    Value valid = g.reshape(
        nonpad, {dynamic(batch) ? type.getDimSize(0) : batch, 1, 1, 1});
    auto qi = iotaAlong(c, q, 2, 2, 0), kj = iotaAlong(c, k, 2, 2, 1);
    auto keys = iotaAlong(c, k, 2, 1, 0);
    if (failed(qi) || failed(kj) || failed(keys))
      return failure();
    allowed = g.op<LessOp>( // padding: key j < nonpad_kv_seqlen[b]
        {*keys, valid});
    if (causal || window) {
      Type i64 = c.builder.getI64Type();
      Value d = g.sub(*kj, *qi); // key - query
      Value offset = g.sub(valid, g.dim(q, 2));
      // With diff = offset + i - j: causal diff >= 0, left diff <= left,
      // right -diff <= right.
      if (causal)
        allowed = g.op<AndOp>({allowed, g.op<LessEqualOp>({d, offset})});
      if (left >= 0)
        allowed = g.op<AndOp>(
            {allowed,
             g.op<GreaterEqualOp>({d, g.sub(offset, g.scalar(i64, left))})});
      if (right >= 0)
        allowed = g.op<AndOp>(
            {allowed,
             g.op<LessEqualOp>({d, g.add(offset, g.scalar(i64, right))})});
    }
  }
  Value bias = maskBias;
  if (allowed) {
    Value structural = g.where(allowed, zero, negInf);
    bias = bias ? g.add(bias, structural) : structural;
  }
  Value scores = bias ? g.add(capped, bias) : capped;
  if (g.failed())
    return failure();

  // Softmax over the keys, fully masked rows zeroed.
  Value x = g.cast(scores, softmaxType);
  Value xMax = g.reduceLast("max", x);
  Value sNegInf = g.scalar(softmaxType, -kInf),
        sZero = g.scalar(softmaxType, 0);
  Value safeMax = g.where(g.op<EqualOp>({xMax, sNegInf}), sZero, xMax);
  Value e = g.unary(ExpOp::getOperationName(), g.sub(x, safeMax));
  Value sum = g.wideSumLast(e);
  sum = g.where(g.op<EqualOp>({sum, sZero}), g.scalar(softmaxType, 1), sum);
  Value probs = g.div(e, sum);
  if (bias) {
    Value masked = g.op<EqualOp>({g.reduceLast("max", bias), negInf});
    probs = g.where(masked, sZero, probs);
  }
  probs = g.cast(probs, t1);

  // Y.
  Value y = ungrouped(g.wideMatmul(grouped(probs), v));
  if (rank == 3 && !g.failed()) {
    int64_t valueSize = shapeOf(y)[3];
    Value t = g.transpose(y, {0, 2, 1, 3});
    y = dynamic(valueSize) || dynamic(qLength) || dynamic(shapeOf(y)[0])
            ? g.reshapeBy(t, g.i64Constant({3}, {0, 0, -1}, "merge"))
            : g.reshape(t, {shapeOf(y)[0], qLength, qHeads * valueSize});
  }

  Values out(std::max(1, c.node.output_size()));
  out[0] = y;
  if (wantsOutput(c, 1))
    out[1] = presentKey;
  if (wantsOutput(c, 2))
    out[2] = presentValue;
  if (wantsOutput(c, 3)) {
    Value modes[] = {raw, capped, scores, probs};
    out[3] = modes[mode];
  }
  if (g.failed())
    return failure();
  return out;
}

FailureOr<Values> convertRMSNormalization(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0], scale = c.inputs[1];
  Type element = typeOf(x).getElementType(),
       scaleElement = typeOf(scale).getElementType();
  if (!isa<FloatType>(element) || !isa<FloatType>(scaleElement))
    return c.error("RMSNormalization needs floating-point X and scale");
  int64_t rank = typeOf(x).getRank();
  auto axis = normalizeAxis(c, c.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t stash = c.getInt("stash_type", 1);
  Type stashType = floatTypeOf(c, stash);
  if (!stashType)
    return c.error("RMSNormalization stash_type " + Twine(stash) +
                   " is not a supported floating-point type");
  std::vector<int64_t> axes;
  for (int64_t i = *axis; i < rank; ++i)
    axes.push_back(i);
  OpChain g(c);
  Value xs = g.cast(x, stashType);
  Value meanSquare = g.reduceAxes("mean", g.mul(xs, xs), axes);
  Value rms = g.unary(
      SqrtOp::getOperationName(),
      g.add(meanSquare, g.scalar(stashType, c.getFloat("epsilon", 1e-5f))));
  Value normalized = g.cast(g.div(xs, rms), scaleElement);
  Value y = g.mul(normalized, scale);
  if (g.failed())
    return failure();
  return Values{y};
}

FailureOr<Values> convertRotaryEmbedding(NodeContext &c) {
  if (failed(arity(c, 3, 4)))
    return failure();
  Value x = c.inputs[0], cosCache = c.inputs[1], sinCache = c.inputs[2],
        positions = inputOr(c, 3);
  auto inType = typeOf(x);
  Type element = inType.getElementType();
  if (!isa<FloatType>(element) ||
      typeOf(cosCache).getElementType() != element ||
      typeOf(sinCache).getElementType() != element)
    return c.error("RotaryEmbedding needs floating-point input, cos_cache and "
                   "sin_cache of one type");
  if (typeOf(cosCache).getRank() != typeOf(sinCache).getRank())
    return c.error("RotaryEmbedding cos_cache and sin_cache differ in rank");
  int64_t rank = inType.getRank();
  auto in = inType.getShape();
  auto dynamic = [](int64_t d) { return ShapedType::isDynamic(d); };
  OpChain g(c);
  // Work in [B, H, S, D] (4-D input) or [B, S, H, D] (3-D input).
  Value work = x;
  int64_t headSize;
  if (rank == 4) {
    headSize = in[3];
  } else if (rank == 3) {
    int64_t heads = c.getInt("num_heads", 0);
    if (heads <= 0)
      return c.error("RotaryEmbedding with 3-D input needs a positive "
                     "num_heads attribute");
    if (!dynamic(in[2]) && in[2] % heads != 0)
      return c.error("RotaryEmbedding hidden size " + Twine(in[2]) +
                     " is not a multiple of num_heads " + Twine(heads));
    headSize = dynamic(in[2]) ? in[2] : in[2] / heads;
    work = llvm::count_if(in, dynamic) <= 1 && !dynamic(in[2])
               ? g.reshape(x, {in[0], in[1], heads, headSize})
               : g.reshapeBy(x, g.i64Constant({4}, {0, 0, heads, -1}, "split"));
  } else {
    return c.error("RotaryEmbedding needs a 3-D or 4-D input, got rank " +
                   Twine(rank));
  }
  int64_t rotaryDim = c.getInt("rotary_embedding_dim", 0);
  if (rotaryDim == 0)
    rotaryDim = headSize;
  if (!dynamic(rotaryDim) &&
      (rotaryDim < 0 || (!dynamic(headSize) && rotaryDim > headSize) ||
       rotaryDim % 2 != 0))
    return c.error("RotaryEmbedding rotary_embedding_dim " + Twine(rotaryDim) +
                   " must be even and at most the head size " +
                   Twine(headSize));
  int64_t half = dynamic(rotaryDim) ? rotaryDim : rotaryDim / 2;

  // cos/sin as [B, S, half], then broadcastable to the working layout.
  Value cos = cosCache, sin = sinCache;
  if (positions) {
    if (typeOf(cosCache).getRank() != 2)
      return c.error("RotaryEmbedding with position_ids needs 2-D caches");
    Builder &b = c.builder;
    auto axis0 = b.getNamedAttr("axis", b.getI64IntegerAttr(0));
    cos = g.op<GatherOp>({cosCache, positions}, {axis0});
    sin = g.op<GatherOp>({sinCache, positions}, {axis0});
    if (g.failed())
      return failure();
  }
  auto cs = typeOf(cos).getShape();
  if (cs.size() != 3 || (!dynamic(cs[2]) && !dynamic(half) && cs[2] != half))
    return c.error("RotaryEmbedding cos/sin values have shape " +
                   shapeString(cs) + ", expected (batch, sequence, " +
                   Twine(half) + ")");
  auto spread = [&](Value v) -> Value {
    auto r = unsqueezeAt(c, v, rank == 4 ? 1 : 2);
    return failed(r) ? Value() : *r;
  };
  cos = spread(cos);
  sin = spread(sin);
  if (!cos || !sin)
    return failure();

  bool interleaved = c.getInt("interleaved", 0) != 0;
  Value rotated, rest, real, imag;
  if (!dynamic(half) && !dynamic(headSize)) {
    Value rotate =
        rotaryDim == headSize ? work : g.sliceLast(work, 0, rotaryDim);
    Value x1 = interleaved ? g.sliceLast(rotate, 0, half, 2)
                           : g.sliceLast(rotate, 0, half);
    Value x2 = interleaved ? g.sliceLast(rotate, 1, half, 2)
                           : g.sliceLast(rotate, half, half);
    real = g.sub(g.mul(cos, x1), g.mul(sin, x2));
    imag = g.add(g.mul(sin, x1), g.mul(cos, x2));
    if (rotaryDim < headSize)
      rest = g.sliceLast(work, rotaryDim, headSize - rotaryDim);
  } else {
    // Bounds from the caches' last dim (half) at run time.
    Value h =
        dynamic(half) ? g.dim(cos, -1) : g.i64Constant({}, {half}, "half");
    Value full = g.add(h, h), zero = g.i64Constant({}, {0}, "zero"),
          one = g.i64Constant({}, {1}, "one");
    Value x1 = interleaved ? g.sliceBy(work, 3, zero, full, 2)
                           : g.sliceBy(work, 3, zero, h);
    Value x2 = interleaved ? g.sliceBy(work, 3, one, full, 2)
                           : g.sliceBy(work, 3, h, full);
    real = g.sub(g.mul(cos, x1), g.mul(sin, x2));
    imag = g.add(g.mul(sin, x1), g.mul(cos, x2));
    rest = g.sliceBy(work, 3, full, g.dim(work, 3));
  }
  if (g.failed())
    return failure();
  if (interleaved) {
    auto r = unsqueezeAt(c, real, 4), i = unsqueezeAt(c, imag, 4);
    if (failed(r) || failed(i))
      return failure();
    Value pairs = g.concat({*r, *i}, 4);
    SmallVector<int64_t> flatShape(typeOf(real).getShape());
    flatShape.back() =
        dynamic(flatShape.back()) ? flatShape.back() : 2 * flatShape.back();
    rotated =
        llvm::count_if(flatShape, dynamic) <= 1
            ? g.reshape(pairs, flatShape)
            : g.reshapeBy(pairs, g.i64Constant({4}, {0, 0, 0, -1}, "merge"));
  } else {
    rotated = g.concat({real, imag}, 3);
  }
  Value out = rest ? g.concat({rotated, rest}, 3) : rotated;
  if (rank == 3)
    out =
        inType.hasStaticShape()
            ? g.reshape(out, in)
            : g.reshapeBy(
                  out, g.op<ShapeOp>(
                           {x}, {c.builder.getNamedAttr(
                                     "start", c.builder.getI64IntegerAttr(0)),
                                 c.builder.getNamedAttr(
                                     "end", c.builder.getI64IntegerAttr(3))}));
  if (g.failed())
    return failure();
  return Values{out};
}

void addAttentionConverters(ConverterTable &table) {
  addRows(table, {
                     {"Attention", convertAttention},
                     {"RMSNormalization", inFloat32<convertRMSNormalization>},
                     {"RotaryEmbedding", convertRotaryEmbedding},
                 });
}

} // namespace kiln::onnx_import
