//===- Selection.cpp - ArgMax, ArgMin, Trilu ------------------------------===//
//
// Ops that pick elements by their position, built from comparisons against
// index constants (iotas made at compile time):
//  - ArgMax/ArgMin(x, axis, keepdims, select_last_index):
//      m = reduce max|min over axis (kept);  hit = x == m
//      first: reduce min of where(hit, iota, n);  last: reduce max of
//      where(hit, iota, -1)   (int64 indices along the axis)
//  - Trilu(x, k = 0, upper = 1): with d[i, j] = j - i over the last two dims,
//      keep x where d >= k (upper) or d <= k (lower), else 0. k may be a run
//      time scalar: only the comparison uses it.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

namespace {

// An i64 constant of `shape` on the node's device holding `values`.
Value int64Constant(NodeContext &c, ArrayRef<int64_t> shape,
                    ArrayRef<int64_t> values) {
  Type i64 = c.builder.getI64Type();
  std::vector<char> bytes(values.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get(shape, i64, c.device),
      makeConstantAttr(RankedTensorType::get(shape, i64), bytes, "iota"));
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
  int64_t n = type.getDimSize(*axis);
  if (ShapedType::isDynamic(n))
    return c.error("'" + c.node.op_type() + "' along a symbolic dim");
  bool keepdims = c.getInt("keepdims", 1) != 0;
  bool last = c.getInt("select_last_index", 0) != 0;
  auto extreme = reduce(c, kind, {*axis}, true, x);
  if (failed(extreme))
    return failure();
  auto hit = binaryOp(c, EqualOp::getOperationName(), x, *extreme);
  if (failed(hit))
    return failure();
  SmallVector<int64_t> shape(rank, 1), iota;
  shape[*axis] = n;
  for (int64_t i = 0; i < n; ++i)
    iota.push_back(i);
  Value indices = int64Constant(c, shape, iota);
  Value miss = int64Constant(c, {}, {last ? -1 : n});
  auto picked =
      c.create(WhereOp::getOperationName(), ValueRange{*hit, indices, miss});
  if (failed(picked))
    return failure();
  return single(reduce(c, last ? "max" : "min", {*axis}, keepdims, *picked));
}

} // namespace

FailureOr<Values> convertArgMax(NodeContext &c) { return argReduce(c, "max"); }

FailureOr<Values> convertArgMin(NodeContext &c) { return argReduce(c, "min"); }

FailureOr<Values> convertTrilu(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  if (type.getRank() < 2)
    return c.error("Trilu needs a tensor of rank 2 or more");
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getDimSize(type.getRank() - 1);
  if (ShapedType::isDynamic(rows) || ShapedType::isDynamic(cols))
    return c.error("Trilu of symbolic dims");
  std::vector<int64_t> diagonal;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      diagonal.push_back(j - i);
  Value d = int64Constant(c, {rows, cols}, diagonal);
  Value k = c.inputs.size() == 2 && c.inputs[1] ? c.inputs[1]
                                                : int64Constant(c, {}, {0});
  if (typeOf(k).getNumElements() != 1 ||
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
                       d, k);
  if (failed(keep))
    return failure();
  return single(c.create(WhereOp::getOperationName(),
                         ValueRange{*keep, x, scalarLike(c, x, 0)}));
}

} // namespace kiln::onnx_import
