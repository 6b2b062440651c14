//===- Reductions.cpp - reductions, softmax -------------------------------===//
//
// The Reduce* ops (axes as attribute, input or known only at run time),
// Softmax, LogSoftmax and LpNormalization.
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
} // namespace

void kiln::onnx_import::addReductionsConverters(ConverterTable &table) {
  addRows(table, {
                     {"ReduceSum", reduceNode<kSum>},
                     {"ReduceMean", reduceNode<kMean>},
                     {"ReduceMax", reduceNode<kMax>},
                     {"ReduceMin", reduceNode<kMin>},
                     {"Softmax", inFloat32<softmaxNode>},
                     {"LpNormalization", inFloat32<lpNormalization>},
                     {"LogSoftmax", inFloat32<logSoftmax>},
                     {"ReduceProd", reduceNode<kProd>},
                     {"ReduceSumSquare", inFloat32<reduceComposite>},
                     {"ReduceL1", inFloat32<reduceComposite>},
                     {"ReduceL2", inFloat32<reduceComposite>},
                     {"ReduceLogSum", inFloat32<reduceComposite>},
                     {"ReduceLogSumExp", inFloat32<reduceComposite>},
                 });
}
