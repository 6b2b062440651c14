//===- Normalization.cpp - Layer, Batch, Instance, Group normalization, LRN,
//                         MeanVarianceNormalization ----------------------===//
//
// All share moments(): mean and (population) variance over some axes, kept
// as size-1 dims, then y = (x - mean) / sqrt(var + epsilon):
//  - LayerNormalization: over axis.. rank-1; then * scale (+ B). Optional
//    outputs Mean and InvStdDev.
//  - BatchNormalization: with the given running mean and var (inference),
//    or, with training_mode = 1, the batch's over every axis but 1; then
//    * scale + B per channel. Training also outputs the updated running
//    stats: running * momentum + batch * (1 - momentum).
//  - InstanceNormalization: over the spatial axes 2..; * scale + B per
//    channel.
//  - GroupNormalization (opset 21): x as [N, G, C/G, ...] over axes 2..;
//    then * scale + bias per channel (per group with opset 18's [G] ones).
//  - MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes
//    (default 0, 2, 3), as ONNX's function body.
//  - LRN(size, alpha, beta, bias): y = x / (bias + alpha / size * s)^beta,
//    s the sum of x^2 over channels c - floor((size-1)/2) ..
//    c + ceil((size-1)/2): a [C, C] band mask from two iotas and a reduce
//    (O(C^2) per pixel).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

struct Moments {
  Value mean, centered, var;
};

FailureOr<Moments> moments(NodeContext &c, Value x,
                           const std::vector<int64_t> &axes) {
  auto mean = reduce(c, "mean", axes, true, x);
  if (failed(mean))
    return failure();
  auto centered = binaryOp(c, SubOp::getOperationName(), x, *mean);
  if (failed(centered))
    return failure();
  auto squared = binaryOp(c, MulOp::getOperationName(), *centered, *centered);
  if (failed(squared))
    return failure();
  auto var = reduce(c, "mean", axes, true, *squared);
  if (failed(var))
    return failure();
  return Moments{*mean, *centered, *var};
}

// sqrt(var + epsilon).
FailureOr<Value> stdDev(NodeContext &c, Value var, double epsilon) {
  auto shifted =
      binaryOp(c, AddOp::getOperationName(), var, scalarLike(c, var, epsilon));
  if (failed(shifted))
    return failure();
  return c.create(SqrtOp::getOperationName(), *shifted);
}

// A per-channel [C] tensor shaped to broadcast along axis 1 of rank `rank`.
FailureOr<Value> perChannel(NodeContext &c, Value v, int64_t rank) {
  auto type = typeOf(v);
  if (type.getRank() != 1)
    return c.error("'" + c.node.op_type() +
                   "' needs 1-D per-channel parameters");
  SmallVector<int64_t> dims(rank - 1, 1);
  dims[0] = type.getDimSize(0);
  return reshapeToDims(c, v, dims);
}

// (x - mean) / std * scale + bias, scale and bias already broadcastable
// (either may be null).
FailureOr<Value> affine(NodeContext &c, Value centered, Value std, Value scale,
                        Value bias) {
  auto y = binaryOp(c, DivOp::getOperationName(), centered, std);
  if (failed(y))
    return failure();
  if (scale)
    y = binaryOp(c, MulOp::getOperationName(), *y, scale);
  if (succeeded(y) && bias)
    y = binaryOp(c, AddOp::getOperationName(), *y, bias);
  return y;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i)
    out.push_back(i);
  return out;
}

} // namespace

FailureOr<Values> convertLayerNormalization(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  if (c.getInt("stash_type", 1) != 1)
    return c.error("LayerNormalization stash_type other than 1 is not "
                   "supported");
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  auto axis = normalizeAxis(c, c.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  auto m = moments(c, x, range(*axis, rank));
  if (failed(m))
    return failure();
  auto std = stdDev(c, m->var, c.getFloat("epsilon", 1e-5f));
  if (failed(std))
    return failure();
  Value bias = c.inputs.size() == 3 ? c.inputs[2] : Value();
  auto y = affine(c, m->centered, *std, c.inputs[1], bias);
  if (failed(y))
    return failure();
  Values results{*y};
  // The optional Mean and InvStdDev outputs (reduced dims kept as 1).
  if (c.node.output_size() > 1)
    results.push_back(m->mean);
  if (c.node.output_size() > 2) {
    auto inv =
        binaryOp(c, DivOp::getOperationName(), scalarLike(c, x, 1.0), *std);
    if (failed(inv))
      return failure();
    results.push_back(*inv);
  }
  return results;
}

FailureOr<Values> convertBatchNormalization(NodeContext &c) {
  if (failed(arity(c, 5, 5)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  if (rank < 2)
    return c.error("BatchNormalization needs an input of rank >= 2");
  double epsilon = c.getFloat("epsilon", 1e-5f);
  bool training = c.getInt("training_mode", 0) != 0;
  if (c.opset < 14 && c.node.output_size() > 1)
    return c.error("BatchNormalization's training outputs before opset 14 "
                   "are not supported");
  Values params;
  for (int i = 1; i < 5; ++i) {
    auto p = perChannel(c, c.inputs[i], rank);
    if (failed(p))
      return failure();
    params.push_back(*p);
  }
  Value scale = params[0], bias = params[1];
  if (!training) {
    auto centered = binaryOp(c, SubOp::getOperationName(), x, params[2]);
    auto std = stdDev(c, params[3], epsilon);
    if (failed(centered) || failed(std))
      return failure();
    return single(affine(c, *centered, *std, scale, bias));
  }
  std::vector<int64_t> axes = range(0, rank);
  axes.erase(axes.begin() + 1);
  auto m = moments(c, x, axes);
  if (failed(m))
    return failure();
  auto std = stdDev(c, m->var, epsilon);
  if (failed(std))
    return failure();
  auto y = affine(c, m->centered, *std, scale, bias);
  if (failed(y))
    return failure();
  Values results{*y};
  // running * momentum + batch * (1 - momentum), as [C].
  double momentum = c.getFloat("momentum", 0.9f);
  for (auto [running, batch] :
       {std::pair{c.inputs[3], m->mean}, std::pair{c.inputs[4], m->var}}) {
    if ((int64_t)results.size() >= c.node.output_size())
      break;
    auto flat = reshapeToDims(c, batch, {typeOf(running).getDimSize(0)});
    if (failed(flat))
      return failure();
    auto kept = binaryOp(c, MulOp::getOperationName(), running,
                         scalarLike(c, running, momentum));
    auto added = binaryOp(c, MulOp::getOperationName(), *flat,
                          scalarLike(c, *flat, 1 - momentum));
    if (failed(kept) || failed(added))
      return failure();
    auto updated = binaryOp(c, AddOp::getOperationName(), *kept, *added);
    if (failed(updated))
      return failure();
    results.push_back(*updated);
  }
  return results;
}

FailureOr<Values> convertInstanceNormalization(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  if (rank < 3)
    return c.error("InstanceNormalization needs an input of rank >= 3");
  auto m = moments(c, x, range(2, rank));
  auto scale = perChannel(c, c.inputs[1], rank);
  auto bias = perChannel(c, c.inputs[2], rank);
  if (failed(m) || failed(scale) || failed(bias))
    return failure();
  auto std = stdDev(c, m->var, c.getFloat("epsilon", 1e-5f));
  if (failed(std))
    return failure();
  return single(affine(c, m->centered, *std, *scale, *bias));
}

FailureOr<Values> convertGroupNormalization(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank(), groups = c.getInt("num_groups", 0);
  if (rank < 3)
    return c.error("GroupNormalization needs an input of rank >= 3");
  int64_t channels = type.getDimSize(1);
  if (groups < 1 || (!type.isDynamicDim(1) && channels % groups))
    return c.error("GroupNormalization num_groups " + Twine(groups) +
                   " does not divide " + Twine(channels) + " channels");
  if (c.getInt("stash_type", 1) != 1)
    return c.error("GroupNormalization stash_type other than 1 is not "
                   "supported");
  // x as [N, G, C/G, spatial...] when that keeps at most one symbolic dim,
  // else as [N, G, -1] read at run time.
  SmallVector<int64_t> grouped{type.getDimSize(0), groups,
                               type.isDynamicDim(1) ? ShapedType::kDynamic
                                                    : channels / groups};
  grouped.append(type.getShape().begin() + 2, type.getShape().end());
  bool fixed = llvm::count_if(grouped, ShapedType::isDynamic) <= 1;
  auto xg = fixed ? reshapeToDims(c, x, grouped)
                  : reshapeBySpec(c, x, int64Constant(c, {3}, {0, groups, -1}),
                                  "reshape");
  if (failed(xg))
    return failure();
  auto m = moments(c, *xg, range(2, typeOf(*xg).getRank()));
  if (failed(m))
    return failure();
  auto std = stdDev(c, m->var, c.getFloat("epsilon", 1e-5f));
  if (failed(std))
    return failure();
  auto normed = binaryOp(c, DivOp::getOperationName(), m->centered, *std);
  if (failed(normed))
    return failure();
  FailureOr<Value> back = failure();
  if (fixed) {
    back = reshapeToDims(c, *normed, type.getShape());
  } else {
    auto shape = c.create(
        ShapeOp::getOperationName(), x,
        {c.builder.getNamedAttr("start", c.builder.getI64IntegerAttr(0)),
         c.builder.getNamedAttr("end", c.builder.getI64IntegerAttr(rank))});
    if (failed(shape))
      return failure();
    back = reshapeBySpec(c, *normed, *shape, "reshape_allowzero"); // sizes
  }
  if (failed(back))
    return failure();
  // Opset 18 gave scale and bias per group: repeat them per channel.
  Values params;
  for (Value p : {c.inputs[1], c.inputs[2]}) {
    auto pt = typeOf(p);
    if (pt.getRank() == 1 && pt.getDimSize(0) == groups && groups != channels) {
      if (type.isDynamicDim(1))
        return c.error("GroupNormalization with per-group scale and bias "
                       "needs a static channel dim");
      auto column = reshapeToDims(c, p, {groups, 1});
      if (failed(column))
        return failure();
      auto wide = c.create(
          ExpandOp::getOperationName(), *column,
          {c.builder.getNamedAttr("shape", c.builder.getDenseI64ArrayAttr(
                                               {groups, channels / groups}))});
      if (failed(wide))
        return failure();
      auto flat = reshapeToDims(c, *wide, {channels});
      if (failed(flat))
        return failure();
      p = *flat;
    }
    auto shaped = perChannel(c, p, rank);
    if (failed(shaped))
      return failure();
    params.push_back(*shaped);
  }
  auto scaled = binaryOp(c, MulOp::getOperationName(), *back, params[0]);
  if (failed(scaled))
    return failure();
  return single(binaryOp(c, AddOp::getOperationName(), *scaled, params[1]));
}

FailureOr<Values> convertMeanVarianceNormalization(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  auto axes = normalizedAxes(c, {0, 2, 3}, rank);
  if (failed(axes))
    return failure();
  auto m = moments(c, x, *axes);
  if (failed(m))
    return failure();
  auto std = c.create(SqrtOp::getOperationName(), m->var);
  if (failed(std))
    return failure();
  auto padded =
      binaryOp(c, AddOp::getOperationName(), *std, scalarLike(c, x, 1e-9));
  if (failed(padded))
    return failure();
  return single(binaryOp(c, DivOp::getOperationName(), m->centered, *padded));
}

FailureOr<Values> convertLRN(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank(), size = c.getInt("size", 0);
  if (rank < 3)
    return c.error("LRN needs an input of rank >= 3");
  if (size < 1)
    return c.error("LRN size must be positive");
  double alpha = c.getFloat("alpha", 1e-4f), beta = c.getFloat("beta", 0.75f),
         bias = c.getFloat("bias", 1.0f);
  int64_t below = (size - 1) / 2, above = size / 2; // ceil((size - 1) / 2)
  auto squared = binaryOp(c, MulOp::getOperationName(), x, x);
  if (failed(squared))
    return failure();
  // s[n, c] = sum over k of where(c - below <= k <= c + above, x^2[n, k]):
  // x^2 as [N, 1 (c), C (k), ...] against the mask [C (c), C (k)].
  auto spread = unsqueezeAt(c, *squared, 1);
  auto ci = iotaAlong(c, x, 1, rank + 1, 1);
  auto ki = iotaAlong(c, x, 1, rank + 1, 2);
  if (failed(spread) || failed(ci) || failed(ki))
    return failure();
  auto offset = binaryOp(c, SubOp::getOperationName(), *ki, *ci);
  if (failed(offset))
    return failure();
  auto low = binaryOp(c, GreaterEqualOp::getOperationName(), *offset,
                      int64Constant(c, {}, {-below}));
  auto high = binaryOp(c, LessEqualOp::getOperationName(), *offset,
                       int64Constant(c, {}, {above}));
  if (failed(low) || failed(high))
    return failure();
  auto band = binaryOp(c, AndOp::getOperationName(), *low, *high);
  if (failed(band))
    return failure();
  auto kept = c.create(WhereOp::getOperationName(),
                       ValueRange{*band, *spread, scalarLike(c, x, 0)});
  if (failed(kept))
    return failure();
  auto sum = reduce(c, "sum", {2}, false, *kept);
  if (failed(sum))
    return failure();
  auto scaled = binaryOp(c, MulOp::getOperationName(), *sum,
                         scalarLike(c, x, alpha / size));
  if (failed(scaled))
    return failure();
  auto base =
      binaryOp(c, AddOp::getOperationName(), *scaled, scalarLike(c, x, bias));
  if (failed(base))
    return failure();
  auto denominator =
      binaryOp(c, PowOp::getOperationName(), *base, scalarLike(c, x, beta));
  if (failed(denominator))
    return failure();
  return single(binaryOp(c, DivOp::getOperationName(), x, *denominator));
}

void addNormalizationConverters(ConverterTable &table) {
  addRows(
      table,
      {
          {"LayerNormalization", inFloat32<convertLayerNormalization, 1>},
          {"BatchNormalization", convertBatchNormalization},
          {"InstanceNormalization", inFloat32<convertInstanceNormalization>},
          {"GroupNormalization", inFloat32<convertGroupNormalization>},
          {"MeanVarianceNormalization",
           inFloat32<convertMeanVarianceNormalization>},
          {"LRN", convertLRN},
      });
}

} // namespace kiln::onnx_import
