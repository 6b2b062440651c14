//===- Losses.cpp - NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----===//
//
// Both losses decompose into kiln ops. With input x [N, C, d1..dk] (float),
// target t [N, d1..dk] (i32 or i64) and an optional weight w [C], the
// per-element loss is computed on [N, 1, d1..dk], the class axis kept as a
// size-1 dim so that gather_elements can pick along it:
//
//   u       = unsqueeze(t, 1)         a reshape to [N, d1..dk, 1] and a
//                                     transpose of that 1 to axis 1
//   ignored = u == ignore_index       (only with ignore_index)
//   index   = where(ignored, 0, u)    so that no gather reads the class of
//                                     an ignored target, which may be any
//                                     number (-1, C, ...)
//   loss    = -gather_elements(x, index, axis 1)
//   applied = gather(w, index, axis 0)  (with a weight)
//   loss    = loss * applied            (with a weight)
//   loss    = where(ignored, 0, loss)
//   applied = where(ignored, 0, applied, or 1 without a weight)
//
// (a where rather than a product with 0, so that an ignored element is 0
// even where x is not finite). Then reduction 'none' drops the size-1 axis
// (a sum over it), 'sum' sums over every axis, and 'mean' divides that sum by
// sum(applied) when a weight or ignore_index is given (all ignored: 0 / 0,
// NaN, as in ONNX) and is the plain mean otherwise.
//
// SoftmaxCrossEntropyLoss is that loss on log_prob = log_softmax(x) over axis
// 1, (x - max) - log(sum(exp(x - max))), which is also its optional second
// output.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include <limits>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

// A loss node's inputs and attributes, checked.
struct LossInputs {
  Value x, target, weight;
  std::string reduction;
  std::optional<int64_t> ignoreIndex;
};

FailureOr<LossInputs> lossInputs(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  LossInputs in;
  in.x = c.inputs[0];
  in.target = c.inputs[1];
  if (c.inputs.size() == 3)
    in.weight = c.inputs[2];
  in.reduction = c.getString("reduction", "mean");
  if (in.reduction != "none" && in.reduction != "sum" && in.reduction != "mean")
    return c.error("reduction '" + in.reduction +
                   "' is not one of 'none', 'sum', 'mean'");
  if (c.attr("ignore_index"))
    in.ignoreIndex = c.getInt("ignore_index", 0);

  RankedTensorType xType = typeOf(in.x), tType = typeOf(in.target);
  if (!isa<FloatType>(xType.getElementType()))
    return c.error("'" + c.node.op_type() + "' needs a floating-point input");
  if (xType.getRank() < 2)
    return c.error("'" + c.node.op_type() + "' needs an input of rank >= 2 " +
                   "(N, C, d1, ..., dk), got rank " + Twine(xType.getRank()));
  Type label = tType.getElementType();
  if (!label.isInteger(32) && !label.isInteger(64))
    return c.error("'" + c.node.op_type() + "' needs int32 or int64 labels");
  // A label type that cannot hold ignore_index has no label to ignore.
  if (in.ignoreIndex && label.isInteger(32) &&
      (*in.ignoreIndex < std::numeric_limits<int32_t>::min() ||
       *in.ignoreIndex > std::numeric_limits<int32_t>::max()))
    in.ignoreIndex.reset();
  if (tType.getRank() != xType.getRank() - 1)
    return c.error("labels of rank " + Twine(tType.getRank()) +
                   " do not fit an input of rank " + Twine(xType.getRank()) +
                   "; they need rank " + Twine(xType.getRank() - 1));
  for (int64_t i = 0; i < tType.getRank(); ++i) {
    int64_t xd = xType.getDimSize(i == 0 ? 0 : i + 1), td = tType.getDimSize(i);
    if (!ShapedType::isDynamic(xd) && !ShapedType::isDynamic(td) && xd != td)
      return c.error("labels dim " + Twine(i) + " is " + Twine(td) +
                     " but the input's matching dim is " + Twine(xd));
  }
  if (in.weight) {
    RankedTensorType wType = typeOf(in.weight);
    int64_t classes = xType.getDimSize(1);
    if (wType.getRank() != 1 ||
        (!wType.isDynamicDim(0) && !ShapedType::isDynamic(classes) &&
         wType.getDimSize(0) != classes))
      return c.error("the weight needs shape [C], C being the input's dim 1");
    if (wType.getElementType() != xType.getElementType())
      return c.error("the weight's element type differs from the input's");
  }
  return in;
}

// A rank-0 constant `value` of the integer element type of `like`.
Value intScalarLike(NodeContext &c, Value like, int64_t value) {
  Type element = typeOf(like).getElementType();
  return c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({}, element, c.device),
      DenseElementsAttr::get(RankedTensorType::get({}, element),
                             c.builder.getIntegerAttr(element, value)));
}

// t [N, d1..dk] as [N, 1, d1..dk]: a reshape appending the 1 (the other dims
// copied, so that they may be symbolic), then a transpose moving it to 1.
FailureOr<Value> unsqueezeClassAxis(NodeContext &c, Value t) {
  int64_t rank = typeOf(t).getRank();
  std::vector<int64_t> spec(rank, 0);
  spec.push_back(1);
  auto appended = reshapeTo(c, t, spec);
  if (failed(appended) || rank == 1)
    return appended;
  std::vector<int64_t> perm = {0, rank};
  for (int64_t i = 1; i < rank; ++i)
    perm.push_back(i);
  return c.create(
      TransposeOp::getOperationName(), *appended,
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
}

// The NegativeLogLikelihoodLoss of `logProb` (the input x) and the checked
// labels and attributes in `in`.
FailureOr<Value> negativeLogLikelihood(NodeContext &c, Value logProb,
                                       const LossInputs &in) {
  Builder &b = c.builder;
  std::string where = WhereOp::getOperationName().str(),
              mul = MulOp::getOperationName().str();
  auto u = unsqueezeClassAxis(c, in.target);
  if (failed(u))
    return failure();
  Value index = *u, ignored;
  if (in.ignoreIndex) {
    auto equal = binaryOp(c, EqualOp::getOperationName(), *u,
                          intScalarLike(c, *u, *in.ignoreIndex));
    if (failed(equal))
      return failure();
    ignored = *equal;
    auto safe =
        c.create(where, ValueRange{ignored, intScalarLike(c, *u, 0), *u});
    if (failed(safe))
      return failure();
    index = *safe;
  }
  auto picked =
      c.create(GatherElementsOp::getOperationName(), ValueRange{logProb, index},
               {b.getNamedAttr("axis", b.getI64IntegerAttr(1))});
  if (failed(picked))
    return failure();
  auto loss = c.create(NegOp::getOperationName(), *picked);
  if (failed(loss))
    return failure();
  // The weight each element's loss is multiplied by: w[target], 0 if ignored.
  Value applied;
  if (in.weight) {
    auto gathered =
        c.create(GatherOp::getOperationName(), ValueRange{in.weight, index},
                 {b.getNamedAttr("axis", b.getI64IntegerAttr(0))});
    if (failed(gathered))
      return failure();
    applied = *gathered;
    loss = binaryOp(c, mul, *loss, applied);
    if (failed(loss))
      return failure();
  }
  if (ignored) {
    Value zero = scalarLike(c, *loss, 0);
    loss = c.create(where, ValueRange{ignored, zero, *loss});
    if (failed(loss))
      return failure();
    auto kept = c.create(
        where,
        ValueRange{ignored, zero, applied ? applied : scalarLike(c, *loss, 1)});
    if (failed(kept))
      return failure();
    applied = *kept;
  }

  int64_t rank = typeOf(*loss).getRank();
  if (in.reduction == "none") // drops the size-1 class axis
    return reduce(c, "sum", {1}, false, *loss);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < rank; ++i)
    all.push_back(i);
  if (in.reduction == "mean" && !applied)
    return reduce(c, "mean", all, false, *loss);
  auto sum = reduce(c, "sum", all, false, *loss);
  if (failed(sum) || in.reduction == "sum")
    return sum;
  auto total = reduce(c, "sum", all, false, applied);
  if (failed(total))
    return failure();
  return binaryOp(c, DivOp::getOperationName(), *sum, *total);
}

} // namespace

FailureOr<Values> convertNegativeLogLikelihoodLoss(NodeContext &c) {
  auto in = lossInputs(c);
  if (failed(in))
    return failure();
  return single(negativeLogLikelihood(c, in->x, *in));
}

FailureOr<Values> convertSoftmaxCrossEntropyLoss(NodeContext &c) {
  auto in = lossInputs(c);
  if (failed(in))
    return failure();
  auto parts = shiftedExpSum(c, in->x, {1});
  if (failed(parts))
    return failure();
  auto log = c.create(LogOp::getOperationName(), parts->sum);
  if (failed(log))
    return failure();
  auto logProb = binaryOp(c, SubOp::getOperationName(), parts->shifted, *log);
  if (failed(logProb))
    return failure();
  auto loss = negativeLogLikelihood(c, *logProb, *in);
  if (failed(loss))
    return failure();
  if (c.node.output_size() > 1 && !c.node.output(1).empty())
    return Values{*loss, *logProb};
  return Values{*loss};
}

void addLossesConverters(ConverterTable &table) {
  addRows(table,
          {
              {"NegativeLogLikelihoodLoss", convertNegativeLogLikelihoodLoss},
              {"SoftmaxCrossEntropyLoss", convertSoftmaxCrossEntropyLoss},
          });
}

} // namespace kiln::onnx_import
