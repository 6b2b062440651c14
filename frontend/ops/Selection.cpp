//===- Selection.cpp - ArgMax, ArgMin, Trilu, CumSum, TopK, Unique --------===//
//
// Ops that pick elements by their position, built from comparisons against
// iotas (constants, or kiln.range along a symbolic dim):
//  - ArgMax/ArgMin(x, axis, keepdims, select_last_index):
//      m = reduce max|min over axis (kept);  hit = x == m, or both NaN
//      first: reduce min of where(hit, iota, n);  last: reduce max of
//      where(hit, iota, -1)   (int64 indices along the axis)
//  - Hardmax(x, axis): the one-hot of ArgMax (first index), as x's type.
//  - Trilu(x, k = 0, upper = 1): with d[i, j] = j - i over the last two dims,
//      keep x where d >= k (upper) or d <= k (lower), else 0. k may be a run
//      time scalar: only the comparison uses it.
//  - CumSum / CumProd(x, axis, exclusive, reverse): along the axis,
//      y[i] = sum (product) over k of where(M[i, k], x[k], 0 (1)), M the
//      (strictly, when exclusive) lower (upper, when reverse) triangle
//      k <= i of two iotas: an n x n mask, so O(n^2) work per line. The axis
//      is a run-time input in ONNX; a constant one picks one axis, otherwise
//      every axis is computed and the result chosen with where on the axis
//      value.
//  - TopK(x, k, axis, largest, sorted): along the axis, the rank of x[i] is
//      the count of j that beat it (greater, or smaller when !largest; ties
//      go to the lower index, as ONNX says), an n x n comparison. Output
//      position p takes the i whose rank is p (sum over i of where(rank ==
//      p, i, 0)), then the values are a GatherElements of x at those
//      indices. The result is always sorted (sorted = 0 allows any order).
//      k may be a run-time input (the result dim is then dynamic). O(n^2)
//      per line: fine for the usual small k over small n, slow over a vocab.
//  - Unique(x) without axis, over x flattened ([n]): from the n x n
//      equality matrix, first[i] = no equal element before i, and key[i] =
//      the number of distinct values below x[i] (sorted) or first seen
//      before x[i]'s first occurrence (sorted = 0). Output p (of the run-time
//      count of firsts) takes the first i with key p: indices; Y gathers x
//      there; inverse_indices = key; counts[p] = #{i : key[i] = p}.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

namespace {

// The first (or, with `last`, the last) index of the max/min along `axis`,
// kept as a size-1 dim unless `keep` is false; and the iota it was taken
// from.
struct ArgIndex {
  Value index, iota;
};
FailureOr<ArgIndex> argIndex(NodeContext &c, Value x, int64_t axis,
                             StringRef kind, bool last, bool keep = true) {
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  auto extreme = reduce(c, kind, {axis}, true, x);
  if (failed(extreme))
    return failure();
  auto hit = binaryOp(c, EqualOp::getOperationName(), x, *extreme);
  if (failed(hit))
    return failure();
  if (isa<FloatType>(type.getElementType())) {
    // The max and min propagate NaN, which equals nothing: a NaN extreme
    // is hit by the NaNs (numpy's and torch's answer), else no element
    // would be and the index would be the axis's length.
    auto nanX = isNaN(c, x), nanM = isNaN(c, *extreme);
    if (failed(nanX) || failed(nanM))
      return failure();
    auto both = binaryOp(c, AndOp::getOperationName(), *nanX, *nanM);
    if (failed(both))
      return failure();
    hit = binaryOp(c, OrOp::getOperationName(), *hit, *both);
    if (failed(hit))
      return failure();
  }
  auto indices = iotaAlong(c, x, axis, rank, axis);
  auto n = dimValue(c, x, axis);
  if (failed(indices) || failed(n))
    return failure();
  Value miss = last ? int64Constant(c, {}, {-1}) : *n;
  auto picked =
      c.create(WhereOp::getOperationName(), ValueRange{*hit, *indices, miss});
  if (failed(picked))
    return failure();
  auto index = reduce(c, last ? "max" : "min", {axis}, keep, *picked);
  if (failed(index))
    return failure();
  return ArgIndex{*index, *indices};
}

FailureOr<Values> argReduce(NodeContext &c, StringRef kind) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  auto axis = normalizeAxis(c, c.getInt("axis", 0), std::max<int64_t>(rank, 1));
  if (failed(axis))
    return failure();
  if (rank == 0)
    return c.error("'" + c.node.op_type() + "' of a scalar");
  bool keepdims = c.getInt("keepdims", 1) != 0;
  bool last = c.getInt("select_last_index", 0) != 0;
  auto found = argIndex(c, x, *axis, kind, last, keepdims);
  if (failed(found))
    return failure();
  if (type.getDimSize(*axis) > 0)
    return Values{found->index};
  // Over an axis that is (or may be) empty there is no index to give;
  // numpy, torch and ONNX's reference raise. Reading the index back from
  // the axis's iota (the identity otherwise) makes that a run-time error:
  // a gather along an empty axis with something to read.
  auto iota = iotaAlong(c, x, *axis, 1, 0);
  if (failed(iota))
    return failure();
  auto checked = c.create(
      GatherOp::getOperationName(), {*iota, found->index},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0))});
  if (failed(checked))
    return failure();
  return Values{*checked};
}

// min over j of where(mask[i, j], j, n): the first j where mask holds.
Value reduceMin(NodeContext &c, OpChain &g, Value mask, Value j, int64_t n) {
  Value none = ShapedType::isDynamic(n) ? g.dim(mask, 1)
                                        : g.i64Constant({}, {n}, "none");
  auto least = reduce(c, "min", {1}, true, g.where(mask, j, none));
  return failed(least) ? Value() : *least;
}

} // namespace

FailureOr<Values> convertArgMax(NodeContext &c) { return argReduce(c, "max"); }

FailureOr<Values> convertArgMin(NodeContext &c) { return argReduce(c, "min"); }

FailureOr<Values> convertHardmax(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  if (c.opset < 13)
    return c.error("Hardmax before opset 13 (2-D coercion) is not supported");
  auto axis = normalizeAxis(c, c.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  auto found = argIndex(c, x, *axis, "max", false);
  if (failed(found))
    return failure();
  auto hot =
      binaryOp(c, EqualOp::getOperationName(), found->iota, found->index);
  if (failed(hot))
    return failure();
  return single(
      c.create(CastOp::getOperationName(), *hot,
               {c.builder.getNamedAttr(
                   "to", TypeAttr::get(typeOf(x).getElementType()))}));
}

// CumSum and CumProd: `kind` is "sum" or "prod".
static FailureOr<Values> cumulative(NodeContext &c, StringRef kind) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0], axisValue = c.inputs[1];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  if (rank == 0)
    return c.error("'" + c.node.op_type() + "' needs a tensor of rank >= 1");
  if (!typeOf(axisValue).hasStaticShape() ||
      typeOf(axisValue).getNumElements() != 1)
    return c.error("the axis of '" + c.node.op_type() +
                   "' must be a single value");
  bool exclusive = c.getInt("exclusive", 0), reverse = c.getInt("reverse", 0);
  double identity = kind == "sum" ? 0 : 1;
  auto along = [&](int64_t axis) -> FailureOr<Value> {
    // x as [.., 1 (i), n (k), ..] against the mask [.., n (i), n (k), ..],
    // from iotas i and k.
    FailureOr<Value> xk = unsqueezeAt(c, x, axis);
    auto i = iotaAlong(c, x, axis, rank + 1, axis);
    auto k = iotaAlong(c, x, axis, rank + 1, axis + 1);
    if (failed(xk) || failed(i) || failed(k))
      return failure();
    StringRef compare = reverse
                            ? (exclusive ? GreaterOp::getOperationName()
                                         : GreaterEqualOp::getOperationName())
                            : (exclusive ? LessOp::getOperationName()
                                         : LessEqualOp::getOperationName());
    auto m = binaryOp(c, compare, *k, *i);
    if (failed(m))
      return failure();
    auto kept = c.create(WhereOp::getOperationName(),
                         ValueRange{*m, *xk, scalarLike(c, x, identity)});
    if (failed(kept))
      return failure();
    return reduce(c, kind, {axis + 1}, false, *kept);
  };
  if (auto constant = constantValues<int64_t>(axisValue)) {
    auto axis = normalizeAxis(c, constant->front(), rank);
    if (failed(axis))
      return failure();
    return single(along(*axis));
  }
  // A run-time axis: every candidate, then chosen by value (a negative
  // axis counts from the end). Out-of-range axes give the last candidate.
  Value axis = axisValue;
  if (!typeOf(axis).getElementType().isInteger(64)) {
    auto wide = c.create(
        CastOp::getOperationName(), axis,
        {c.builder.getNamedAttr("to", TypeAttr::get(c.builder.getI64Type()))});
    if (failed(wide))
      return failure();
    axis = *wide;
  }
  if (typeOf(axis).getRank() != 0) {
    auto scalar = reshapeTo(c, axis, {});
    if (failed(scalar))
      return failure();
    axis = *scalar;
  }
  auto result = along(rank - 1);
  if (failed(result))
    return failure();
  for (int64_t a = rank - 2; a >= 0; --a) {
    auto candidate = along(a);
    if (failed(candidate))
      return failure();
    auto pos = binaryOp(c, EqualOp::getOperationName(), axis,
                        int64Constant(c, {}, {a}));
    auto neg = binaryOp(c, EqualOp::getOperationName(), axis,
                        int64Constant(c, {}, {a - rank}));
    if (failed(pos) || failed(neg))
      return failure();
    auto either = binaryOp(c, OrOp::getOperationName(), *pos, *neg);
    if (failed(either))
      return failure();
    result = c.create(WhereOp::getOperationName(),
                      ValueRange{*either, *candidate, *result});
    if (failed(result))
      return failure();
  }
  return Values{*result};
}

FailureOr<Values> convertTrilu(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  if (type.getRank() < 2)
    return c.error("Trilu needs a tensor of rank 2 or more");
  // d[i, j] = j - i over the last two dims.
  int64_t rank = type.getRank();
  auto rows = iotaAlong(c, x, rank - 2, 2, 0);
  auto cols = iotaAlong(c, x, rank - 1, 2, 1);
  if (failed(rows) || failed(cols))
    return failure();
  auto d = binaryOp(c, SubOp::getOperationName(), *cols, *rows);
  if (failed(d))
    return failure();
  Value k = c.inputs.size() == 2 && c.inputs[1] ? c.inputs[1]
                                                : int64Constant(c, {}, {0});
  if (!typeOf(k).hasStaticShape() || typeOf(k).getNumElements() != 1 ||
      !typeOf(k).getElementType().isInteger(64))
    return c.error("Trilu's k must be one int64");
  if (typeOf(k).getRank() != 0) {
    auto scalar = reshapeTo(c, k, {});
    if (failed(scalar))
      return failure();
    k = *scalar;
  }
  bool upper = c.getInt("upper", 1) != 0;
  auto keep = binaryOp(c,
                       upper ? GreaterEqualOp::getOperationName()
                             : LessEqualOp::getOperationName(),
                       *d, k);
  if (failed(keep))
    return failure();
  return single(c.create(WhereOp::getOperationName(),
                         ValueRange{*keep, x, scalarLike(c, x, 0)}));
}

FailureOr<Values> convertCumSum(NodeContext &c) { return cumulative(c, "sum"); }

FailureOr<Values> convertCumProd(NodeContext &c) {
  return cumulative(c, "prod");
}

FailureOr<Values> convertTopK(NodeContext &c) {
  if (c.opset < 10) { // k is an attribute
    if (failed(arity(c, 1, 1)))
      return failure();
    c.inputs.push_back(int64Constant(c, {1}, {c.getInt("k", 0)}));
  }
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0], kValue = c.inputs[1];
  int64_t rank = typeOf(x).getRank();
  if (rank == 0)
    return c.error("TopK needs a tensor of rank >= 1");
  auto axis = normalizeAxis(c, c.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t a = *axis;
  auto kType = typeOf(kValue);
  if (kType.getRank() > 1 || !kType.getElementType().isInteger(64) ||
      (kType.hasStaticShape() && kType.getNumElements() != 1))
    return c.error("TopK's k must be one int64");
  bool largest = c.getInt("largest", 1) != 0;
  // beats[.., i, j, ..] = x[j] beats x[i].
  auto xi = unsqueezeAt(c, x, a + 1);
  auto xj = unsqueezeAt(c, x, a);
  auto ii = iotaAlong(c, x, a, rank + 1, a);
  auto jj = iotaAlong(c, x, a, rank + 1, a + 1);
  if (failed(xi) || failed(xj) || failed(ii) || failed(jj))
    return failure();
  auto better = binaryOp(
      c, largest ? GreaterOp::getOperationName() : LessOp::getOperationName(),
      *xj, *xi);
  auto same = binaryOp(c, EqualOp::getOperationName(), *xj, *xi);
  auto before = binaryOp(c, LessOp::getOperationName(), *jj, *ii);
  if (failed(better) || failed(same) || failed(before))
    return failure();
  auto tie = binaryOp(c, AndOp::getOperationName(), *same, *before);
  if (failed(tie))
    return failure();
  auto beats = binaryOp(c, OrOp::getOperationName(), *better, *tie);
  if (failed(beats))
    return failure();
  auto counted = castTo(c, *beats, c.builder.getI64Type());
  if (failed(counted))
    return failure();
  auto ranks = reduce(c, "sum", {a + 1}, false, (*counted)[0]);
  if (failed(ranks))
    return failure();
  // positions [.., 1, k, ..] against ranks [.., n, 1, ..].
  Value positions;
  SmallVector<int64_t> shape(rank + 1, 1);
  if (auto fixed = constantValues<int64_t>(kValue)) {
    if (fixed->front() < 0)
      return c.error("TopK's k is negative");
    std::vector<int64_t> values;
    for (int64_t p = 0; p < fixed->front(); ++p)
      values.push_back(p);
    shape[a + 1] = fixed->front();
    positions = int64Constant(c, shape, values, "iota");
  } else {
    Value k = kValue;
    if (typeOf(k).getRank() != 0) {
      auto scalar = reshapeTo(c, k, {});
      if (failed(scalar))
        return failure();
      k = *scalar;
    }
    auto range =
        c.create(RangeOp::getOperationName(),
                 {int64Constant(c, {}, {0}), k, int64Constant(c, {}, {1})});
    if (failed(range))
      return failure();
    shape[a + 1] = ShapedType::kDynamic;
    auto spread = reshapeToDims(c, *range, shape);
    if (failed(spread))
      return failure();
    positions = *spread;
  }
  auto ranked = unsqueezeAt(c, *ranks, a + 1);
  if (failed(ranked))
    return failure();
  auto hit = binaryOp(c, EqualOp::getOperationName(), *ranked, positions);
  if (failed(hit))
    return failure();
  auto picked = c.create(WhereOp::getOperationName(),
                         ValueRange{*hit, *ii, int64Constant(c, {}, {0})});
  if (failed(picked))
    return failure();
  auto indices = reduce(c, "sum", {a}, false, *picked);
  if (failed(indices))
    return failure();
  auto values = c.create(
      GatherElementsOp::getOperationName(), {x, *indices},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(a))});
  if (failed(values))
    return failure();
  return Values{*values, *indices};
}

FailureOr<Values> convertUnique(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  OpChain g(c);
  Type i64 = c.builder.getI64Type();
  // Along an axis, the elements compared are the slices along it: rows of
  // [n, m] compared whole (equal) or lexicographically (less).
  std::optional<int64_t> axis;
  int64_t rowSize = 1;
  Value flat;
  if (const onnx::AttributeProto *a = c.attr("axis")) {
    auto normalized = normalizeAxis(c, a->i(), typeOf(x).getRank());
    if (failed(normalized))
      return failure();
    axis = *normalized;
    if (!typeOf(x).hasStaticShape() || typeOf(x).getNumElements() == 0)
      return c.error("Unique along an axis needs a non-empty input of static "
                     "shape");
    SmallVector<int64_t> perm = {*axis};
    for (int64_t i = 0; i < typeOf(x).getRank(); ++i)
      if (i != *axis)
        perm.push_back(i);
    int64_t n = typeOf(x).getDimSize(*axis);
    rowSize = typeOf(x).getNumElements() / n;
    flat = g.reshape(g.transpose(x, perm), {n, rowSize});
  } else {
    flat = typeOf(x).getRank() == 1 ? x
           : typeOf(x).hasStaticShape()
               ? g.reshape(x, {typeOf(x).getNumElements()})
               : g.reshapeBy(x, g.i64Constant({1}, {-1}, "flat"));
  }
  if (g.failed())
    return failure();
  auto xi = unsqueezeAt(c, flat, 1), xj = unsqueezeAt(c, flat, 0);
  auto ii = iotaAlong(c, flat, 0, 2, 0), jj = iotaAlong(c, flat, 0, 2, 1);
  if (failed(xi) || failed(xj) || failed(ii) || failed(jj))
    return failure();
  auto count = [&](Value v, int64_t axis) { // sum of a bool over `axis`
    auto sum = reduce(c, "sum", {axis}, false, g.cast(v, i64));
    return failed(sum) ? Value() : *sum;
  };
  Value same, xjLess; // [i, j]: x[i] == x[j], x[j] < x[i]
  if (!axis) {
    same = g.op<EqualOp>({*xi, *xj});
    xjLess = g.op<LessOp>({*xj, *xi});
  } else {
    // [i, j, k]; the rows first differ at d[i, j] (rowSize when equal).
    Value equal = g.op<EqualOp>({*xi, *xj});
    Value k = g.i64Constant(
        {1, 1, rowSize}, llvm::to_vector(llvm::seq<int64_t>(0, rowSize)), "k");
    Value differ =
        g.reduceAxes("min", g.where(equal, g.scalar(i64, rowSize), k), {2});
    same = g.reshape(g.op<EqualOp>({differ, g.scalar(i64, rowSize)}),
                     {typeOf(flat).getDimSize(0), typeOf(flat).getDimSize(0)});
    Value lessAt =
        g.op<AndOp>({g.op<EqualOp>({k, differ}), g.op<LessOp>({*xj, *xi})});
    xjLess = g.op<GreaterOp>({count(lessAt, 2), g.scalar(i64, 0)});
  }
  Value before = g.op<LessOp>({*jj, *ii});               // j < i
  Value seen = count(g.op<AndOp>({same, before}), 1);    // [n]
  Value first = g.op<EqualOp>({seen, g.scalar(i64, 0)}); // [n]
  Value firstRow = g.reshape(first, {1, typeOf(flat).getDimSize(0)});
  if (!firstRow) // a dynamic length: unsqueeze at run time
    return failure();
  Value key;
  if (c.getInt("sorted", 1)) {
    key = count(g.op<AndOp>({xjLess, firstRow}), 1);
  } else {
    // The first occurrence of x[i]'s value, then firsts before it.
    Value firstAt = reduceMin(c, g, same, *jj, typeOf(flat).getDimSize(0));
    Value earlier = g.op<LessOp>({*jj, firstAt});
    key = count(g.op<AndOp>({earlier, firstRow}), 1);
  }
  Value total = count(first, 0);
  Value positions = g.op<RangeOp>(
      {g.i64Constant({}, {0}, "zero"), total, g.i64Constant({}, {1}, "one")});
  if (g.failed() || !key || !total)
    return failure();
  auto keyColumn = unsqueezeAt(c, key, 1);         // [n, 1]
  auto firstColumn = unsqueezeAt(c, first, 1);     // [n, 1]
  auto positionRow = unsqueezeAt(c, positions, 0); // [1, U]
  if (failed(keyColumn) || failed(firstColumn) || failed(positionRow))
    return failure();
  Value hit = g.op<EqualOp>({*keyColumn, *positionRow}); // [n, U]
  Value pick = g.where(g.op<AndOp>({hit, *firstColumn}), *ii, g.scalar(i64, 0));
  auto indices = reduce(c, "sum", {0}, false, pick);
  if (failed(indices))
    return failure();
  Value y = g.op<GatherOp>(
      {axis ? x : flat, *indices},
      {c.builder.getNamedAttr("axis",
                              c.builder.getI64IntegerAttr(axis ? *axis : 0))});
  Value counts = count(hit, 0);
  if (g.failed() || !counts)
    return failure();
  Values out{y, *indices, key, counts};
  out.resize(std::max(1, c.node.output_size()));
  return out;
}

void addSelectionConverters(ConverterTable &table) {
  addRows(table, {
                     {"ArgMax", convertArgMax},
                     {"ArgMin", convertArgMin},
                     {"Trilu", convertTrilu},
                     {"Hardmax", convertHardmax},
                     {"CumSum", convertCumSum},
                     {"CumProd", convertCumProd},
                     {"TopK", convertTopK},
                     {"Unique", convertUnique},
                 });
}

} // namespace kiln::onnx_import
