//===- Indexed.cpp - scatters, GatherND, MaxUnpool ------------------------===//
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
//  - MaxUnpool(x, indices, output_shape): x's values scattered (mode nd,
//    K = 1) at their flat indices into zeros of the pooling input's
//    inferred shape ((in - 1) * stride - pads + kernel), then padded with
//    zeros at the end up to output_shape when given (read at run time).
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

FailureOr<Values> convertMaxUnpool(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Value x = c.inputs[0], indices = c.inputs[1];
  auto type = typeOf(x);
  int64_t rank = type.getRank(), spatial = rank - 2;
  if (rank < 3 || !type.hasStaticShape() ||
      typeOf(indices).getShape() != type.getShape())
    return c.error("MaxUnpool needs an input of static shape and indices of "
                   "the same shape");
  std::vector<int64_t> kernel = ints(c, "kernel_shape", {});
  std::vector<int64_t> strides =
      ints(c, "strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads =
      ints(c, "pads", std::vector<int64_t>(2 * spatial, 0));
  if ((int64_t)kernel.size() != spatial || (int64_t)strides.size() != spatial ||
      (int64_t)pads.size() != 2 * spatial)
    return c.error("MaxUnpool needs kernel_shape, strides and pads for each "
                   "spatial dim");
  SmallVector<int64_t> inferred{type.getDimSize(0), type.getDimSize(1)};
  int64_t total = inferred[0] * inferred[1];
  for (int64_t d = 0; d < spatial; ++d) {
    inferred.push_back((type.getDimSize(2 + d) - 1) * strides[d] -
                       (pads[d] + pads[spatial + d]) + kernel[d]);
    total *= inferred.back();
  }
  if (total < 0)
    return c.error("MaxUnpool's inferred output shape is negative");
  Type element = type.getElementType();
  auto zerosType = RankedTensorType::get({total}, element);
  Attribute zero = isa<FloatType>(element)
                       ? Attribute(c.builder.getFloatAttr(element, 0))
                       : Attribute(c.builder.getIntegerAttr(element, 0));
  Value zeros = c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get({total}, element, c.device),
      DenseElementsAttr::get(zerosType, zero));
  int64_t count = type.getNumElements();
  auto flatIndices = reshapeTo(c, indices, {count, 1});
  auto flatValues = reshapeTo(c, x, {count});
  if (failed(flatIndices) || failed(flatValues))
    return failure();
  auto scattered =
      scatterOp(c, zeros, *flatIndices, *flatValues, "nd", 0, "none");
  if (failed(scattered))
    return failure();
  auto y = reshapeTo(c, *scattered, inferred);
  if (failed(y) || c.inputs.size() < 3 || !c.inputs[2])
    return single(y);
  // Zeros after, up to output_shape.
  auto wanted = castTo(c, c.inputs[2], c.builder.getI64Type());
  if (failed(wanted))
    return failure();
  auto extra = binaryOp(c, SubOp::getOperationName(), (*wanted)[0],
                        int64Constant(c, {rank}, inferred));
  if (failed(extra))
    return failure();
  auto padSpec = concatOf(
      c, {int64Constant(c, {rank}, std::vector<int64_t>(rank, 0)), *extra}, 0);
  if (failed(padSpec))
    return failure();
  return single(padBy(c, *y, *padSpec, Value(), Value(), "constant"));
}

void addIndexedConverters(ConverterTable &table) {
  addRows(table, {
                     {"ScatterElements", convertScatterElements},
                     {"Scatter", convertScatterElements},
                     {"ScatterND", convertScatterND},
                     {"TensorScatter", convertTensorScatter},
                     {"GatherND", convertGatherND},
                     {"MaxUnpool", convertMaxUnpool},
                 });
}

} // namespace kiln::onnx_import
