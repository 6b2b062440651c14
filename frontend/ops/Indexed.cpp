//===- Indexed.cpp - ScatterElements, Scatter, ScatterND, TensorScatter,
//                   GatherND -----------------------------------------===//
//
//  - ScatterElements and its deprecated twin Scatter (opset 9-10) become
//    kiln.scatter mode "elements"; ScatterND mode "nd"; both keep ONNX's
//    reduction attribute (none, add, mul, max, min).
//  - TensorScatter(past_cache, update, write_indices, axis, mode) writes the
//    update into the cache along `axis` from write_indices[b] for batch b
//    (0 when absent), wrapping around the cache length with mode circular:
//    a kiln.scatter "elements" whose indices are write_indices[b] + s for
//    update position s along the axis.
//  - GatherND becomes kiln.gather_nd.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

FailureOr<Value> scatterOp(NodeContext &c, Value data, Value indices,
                           Value updates, StringRef mode, int64_t axis,
                           StringRef reduction) {
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return c.error("'" + c.node.op_type() + "' reduction '" + reduction +
                   "' is not one of none, add, mul, max, min");
  auto &b = c.builder;
  return c.create(ScatterOp::getOperationName(), {data, indices, updates},
                  {b.getNamedAttr("mode", b.getStringAttr(mode)),
                   b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
                   b.getNamedAttr("reduction", b.getStringAttr(reduction))});
}

} // namespace

FailureOr<Values> convertScatterElements(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  int64_t rank = typeOf(c.inputs[0]).getRank();
  if (typeOf(c.inputs[1]).getRank() != rank ||
      typeOf(c.inputs[2]).getRank() != rank)
    return c.error("'" + c.node.op_type() +
                   "' needs indices and updates of the data's rank");
  auto axis = normalizeAxis(c, c.getInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  return single(scatterOp(c, c.inputs[0], c.inputs[1], c.inputs[2], "elements",
                          *axis, c.getString("reduction", "none")));
}

FailureOr<Values> convertScatterND(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  // K follows from the ranks, so the indices' last dim may be symbolic.
  auto idx = typeOf(c.inputs[1]);
  int64_t rank = typeOf(c.inputs[0]).getRank();
  int64_t k = idx.getRank() - 1 + rank - typeOf(c.inputs[2]).getRank();
  if (idx.getRank() < 1 || k < 0 || k > rank ||
      (!idx.isDynamicDim(idx.getRank() - 1) &&
       idx.getDimSize(idx.getRank() - 1) != k))
    return c.error("ScatterND indices " + Twine(idx.getRank()) + "-D, data " +
                   Twine(rank) + "-D and updates " +
                   Twine(typeOf(c.inputs[2]).getRank()) +
                   "-D do not fit (updates rank = indices rank - 1 + data "
                   "rank - index tuple length)");
  return single(scatterOp(c, c.inputs[0], c.inputs[1], c.inputs[2], "nd", 0,
                          c.getString("reduction", "none")));
}

FailureOr<Values> convertTensorScatter(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Value cache = c.inputs[0], update = c.inputs[1];
  int64_t rank = typeOf(cache).getRank();
  if (typeOf(update).getRank() != rank || rank < 2)
    return c.error("TensorScatter needs a cache and an update of one rank, "
                   "at least 2");
  auto axis = normalizeAxis(c, c.getInt("axis", -2), rank);
  if (failed(axis))
    return failure();
  if (*axis == 0)
    return c.error("TensorScatter's axis must not be the batch axis");
  std::string mode = c.getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return c.error("TensorScatter mode '" + mode +
                   "' is not one of linear, circular");
  // index = write_indices[b] + s along the axis (mod the cache length).
  auto index = iotaAlong(c, update, *axis, rank, *axis);
  if (failed(index))
    return failure();
  Value offsets = c.inputs.size() > 2 ? c.inputs[2] : Value();
  if (offsets) {
    auto cast = castTo(c, offsets, c.builder.getI64Type());
    if (failed(cast))
      return failure();
    std::vector<int64_t> dims(rank, 1);
    dims[0] = -1;
    auto batch = reshapeTo(c, (*cast)[0], dims);
    if (failed(batch))
      return failure();
    index = binaryOp(c, AddOp::getOperationName(), *index, *batch);
    if (failed(index))
      return failure();
  }
  if (mode == "circular") {
    auto length = dimValue(c, cache, *axis);
    if (failed(length))
      return failure();
    index = c.create(
        ModOp::getOperationName(), {*index, *length},
        {c.builder.getNamedAttr("fmod", c.builder.getBoolAttr(false))});
    if (failed(index))
      return failure();
  }
  // The scatter's indices have the update's shape.
  auto full = expandLike(c, *index, update);
  if (failed(full))
    return failure();
  return single(scatterOp(c, cache, *full, update, "elements", *axis, "none"));
}

// The tuple length K is the indices' last dim; when it is symbolic, the
// model's declared result rank gives it (rank = indices rank - 1 + data rank
// - batch_dims - K).
FailureOr<Values> convertGatherND(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto idx = typeOf(c.inputs[1]);
  int64_t batch = c.getInt("batch_dims", 0),
          rank = typeOf(c.inputs[0]).getRank();
  if (idx.getRank() < 1 || batch < 0 || batch >= idx.getRank())
    return c.error("GatherND batch_dims " + Twine(batch) +
                   " does not fit indices of rank " + Twine(idx.getRank()));
  int64_t k = idx.getShape().back();
  if (ShapedType::isDynamic(k)) {
    std::optional<int64_t> outRank = c.declaredRank(0);
    if (!outRank)
      return c.error("GatherND needs the indices' last dim at compile time, "
                     "or the result's rank declared in the model");
    k = idx.getRank() - 1 + rank - batch - *outRank;
  }
  if (k < 1 || batch + k > rank)
    return c.error("GatherND index tuples of length " + Twine(k) +
                   " do not fit data of rank " + Twine(rank) + " after " +
                   Twine(batch) + " batch dims");
  auto &b = c.builder;
  return single(
      c.create(GatherNDOp::getOperationName(), c.inputs,
               {b.getNamedAttr("batch_dims", b.getI64IntegerAttr(batch)),
                b.getNamedAttr("tuple_length", b.getI64IntegerAttr(k))}));
}

} // namespace kiln::onnx_import
