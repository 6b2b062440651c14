//===- Slicing.cpp - slicing and joining ----------------------------------===//
//
// Gather, GatherElements, Concat, Slice, Split and Pad.
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
// Gather and GatherElements: OpTy on (data, indices) along `axis`.
template <typename OpTy> FailureOr<Values> gatherOnAxis(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  auto axis =
      normalizeAxis(c, c.getInt("axis", 0), typeOf(c.inputs[0]).getRank());
  if (failed(axis))
    return failure();
  return single(c.create(
      OpTy::getOperationName(), c.inputs,
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(*axis))}));
}

FailureOr<Values> concat(NodeContext &c) {
  if (c.inputs.empty())
    return c.error("Concat needs inputs");
  auto axis =
      normalizeAxis(c, c.getInt("axis", 0), typeOf(c.inputs[0]).getRank());
  if (failed(axis))
    return failure();
  return single(c.create(
      ConcatOp::getOperationName(), presentInputs(c),
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(*axis))}));
}

// A slice of `input` with ONNX-style per-axis starts/ends/steps (clamped).
FailureOr<Value> sliceOf(NodeContext &c, Value input, ArrayRef<int64_t> axes,
                         ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
                         ArrayRef<int64_t> steps) {
  auto shape = typeOf(input).getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> st(rank, 0), sz(shape.begin(), shape.end()), sp(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(c, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t n = shape[*axis], step = steps[i];
    if (ShapedType::isDynamic(n))
      return c.error("Slice of a symbolic dim is not supported yet");
    if (step == 0)
      return c.error("Slice step 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0)
      b += n;
    if (e < 0)
      e += n;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      // ONNX clamps a backward start into [0, n - 1] (a start before the
      // first element still takes it), the end into [-1, n - 1].
      b = std::max<int64_t>(0, std::min<int64_t>(b, n - 1));
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    int64_t count = n == 0     ? 0
                    : step > 0 ? (e - b + step - 1) / step
                               : (b - e - step - 1) / -step;
    st[*axis] = count > 0 ? b : 0;
    sz[*axis] = std::max<int64_t>(count, 0);
    sp[*axis] = step;
  }
  Builder &bd = c.builder;
  return c.create(SliceOp::getOperationName(), input,
                  {bd.getNamedAttr("starts", bd.getDenseI64ArrayAttr(st)),
                   bd.getNamedAttr("sizes", bd.getDenseI64ArrayAttr(sz)),
                   bd.getNamedAttr("steps", bd.getDenseI64ArrayAttr(sp))});
}

FailureOr<Values> slice(NodeContext &c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = ints(c, "starts", {});
    ends = ints(c, "ends", {});
    axes = ints(c, "axes", {});
  } else {
    if (failed(arity(c, 3, 5)))
      return failure();
    bool runtime = false;
    auto get = [&](size_t i, std::vector<int64_t> &out) {
      if (c.inputs.size() <= i || !c.inputs[i])
        return;
      auto values = constantValues<int64_t>(c.inputs[i]);
      runtime |= !values;
      if (values)
        out = *values;
    };
    get(1, starts);
    get(2, ends);
    get(3, axes);
    get(4, steps);
    // Parameters known only at run time, or a sliced dim that is symbolic:
    // the slice is computed from the data.
    auto in = typeOf(c.inputs[0]);
    for (int64_t a : axes.empty() ? std::vector<int64_t>(starts.size()) : axes)
      runtime |= a >= -in.getRank() && a < in.getRank() &&
                 in.isDynamicDim(a < 0 ? a + in.getRank() : a);
    if (axes.empty() && !runtime)
      for (size_t i = 0; i < starts.size() && i < (size_t)in.getRank(); ++i)
        runtime |= in.isDynamicDim(i);
    if (runtime) {
      SmallVector<Value> operands(c.inputs.begin(), c.inputs.begin() + 3);
      bool hasAxes = c.inputs.size() > 3 && c.inputs[3],
           hasSteps = c.inputs.size() > 4 && c.inputs[4];
      if (hasAxes)
        operands.push_back(c.inputs[3]);
      if (hasSteps)
        operands.push_back(c.inputs[4]);
      return single(
          c.create(SliceByOp::getOperationName(), operands,
                   {c.builder.getNamedAttr(
                       "operandSegmentSizes",
                       c.builder.getDenseI32ArrayAttr(
                           {1, 1, 1, hasAxes ? 1 : 0, hasSteps ? 1 : 0}))}));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return c.error("Slice starts, ends, axes and steps differ in length");
  return single(sliceOf(c, c.inputs[0], axes, starts, ends, steps));
}

// `x` from start to end along `axis`, both rank-0 int64 tensors read at run
// time (kiln.slice_by).
FailureOr<Value> sliceAtRunTime(NodeContext &c, Value x, int64_t axis,
                                Value start, Value end) {
  auto starts = reshapeTo(c, start, {1});
  auto ends = reshapeTo(c, end, {1});
  if (failed(starts) || failed(ends))
    return failure();
  return c.create(SliceByOp::getOperationName(),
                  {x, *starts, *ends, int64Constant(c, {1}, {axis})},
                  {c.builder.getNamedAttr(
                      "operandSegmentSizes",
                      c.builder.getDenseI32ArrayAttr({1, 1, 1, 1, 0}))});
}
} // namespace

// Split along a symbolic dim or by sizes known only at run time: each part
// a kiln.slice_by with its bounds computed at run time (equal parts of
// ceil(n / parts), the last ones shorter; or the sums of the sizes before
// it).
FailureOr<Values> kiln::onnx_import::splitAtRunTime(NodeContext &c,
                                                    int64_t axis,
                                                    int64_t outputs) {
  Value x = c.inputs[0];
  Values out;
  auto binary = [&](StringRef op, Value l, Value r) {
    return binaryOp(c, op, l, r);
  };
  if (c.inputs.size() == 2 && c.inputs[1]) {
    Value sizes = c.inputs[1];
    if (typeOf(sizes).getRank() != 1 ||
        (!typeOf(sizes).isDynamicDim(0) &&
         typeOf(sizes).getDimSize(0) != outputs))
      return c.error("Split has " + Twine(outputs) +
                     " outputs but its split input is not of that length");
    if (typeOf(sizes).isDynamicDim(0)) { // one per output, checked at run time
      auto counted = reshapeTo(c, sizes, {outputs});
      if (failed(counted))
        return failure();
      sizes = *counted;
    }
    Value start = int64Constant(c, {}, {0});
    for (int64_t i = 0; i < outputs; ++i) {
      auto upto = sliceOf(c, sizes, {0}, {0}, {i + 1}, {1});
      if (failed(upto))
        return failure();
      auto end = reduce(c, "sum", {0}, false, *upto);
      if (failed(end))
        return failure();
      auto part = sliceAtRunTime(c, x, axis, start, *end);
      if (failed(part))
        return failure();
      out.push_back(*part);
      start = *end;
    }
    return out;
  }
  int64_t parts = c.attr("num_outputs") ? c.getInt("num_outputs", 1) : outputs;
  if (parts != outputs)
    return c.error("Split has " + Twine(outputs) + " outputs but " +
                   Twine(parts) + " parts");
  auto n = dimValue(c, x, axis);
  if (failed(n))
    return failure();
  auto rounded =
      binary(AddOp::getOperationName(), *n, int64Constant(c, {}, {parts - 1}));
  if (failed(rounded))
    return failure();
  auto chunk = binary(DivOp::getOperationName(), *rounded,
                      int64Constant(c, {}, {parts}));
  if (failed(chunk))
    return failure();
  auto bound = [&](int64_t i) -> FailureOr<Value> {
    auto at =
        binary(MulOp::getOperationName(), *chunk, int64Constant(c, {}, {i}));
    if (failed(at))
      return failure();
    return binary(MinOp::getOperationName(), *at, *n);
  };
  for (int64_t i = 0; i < outputs; ++i) {
    auto start = bound(i), end = bound(i + 1);
    if (failed(start) || failed(end))
      return failure();
    auto part = sliceAtRunTime(c, x, axis, *start, *end);
    if (failed(part))
      return failure();
    out.push_back(*part);
  }
  return out;
}

namespace {
FailureOr<Values> split(NodeContext &c) {
  if (failed(arity(c, 1, 2)))
    return failure();
  auto shape = typeOf(c.inputs[0]).getShape();
  auto axis = normalizeAxis(c, c.getInt("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  int64_t n = shape[*axis], outputs = c.node.output_size();
  std::vector<int64_t> sizes = ints(c, "split", {});
  if (c.inputs.size() == 2 && c.inputs[1]) {
    auto values = constantValues<int64_t>(c.inputs[1]);
    if (!values)
      return splitAtRunTime(c, *axis, outputs);
    sizes = *values;
  }
  if (sizes.empty() && ShapedType::isDynamic(n))
    return splitAtRunTime(c, *axis, outputs);
  if (sizes.empty()) {
    int64_t parts =
        c.attr("num_outputs") ? c.getInt("num_outputs", 1) : outputs;
    if (parts < 1)
      return c.error("Split needs at least one output, got num_outputs " +
                     Twine(parts));
    int64_t chunk = (n + parts - 1) / parts;
    for (int64_t left = n; left > 0; left -= chunk)
      sizes.push_back(std::min(chunk, left));
    while ((int64_t)sizes.size() < parts)
      sizes.push_back(0);
  }
  if ((int64_t)sizes.size() != outputs)
    return c.error("Split has " + Twine(outputs) + " outputs but " +
                   Twine(sizes.size()) + " sizes");
  int64_t total = 0;
  for (int64_t size : sizes)
    if (size < 0 || llvm::AddOverflow(total, size, total))
      return c.error("Split sizes must be non-negative and sum to the "
                     "axis's length");
  if (!ShapedType::isDynamic(n) && total != n)
    return c.error("Split sizes sum to " + Twine(total) +
                   ", not the axis's "
                   "length " +
                   Twine(n));
  Values out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    auto part =
        ShapedType::isDynamic(n)
            ? sliceAtRunTime(c, c.inputs[0], *axis,
                             int64Constant(c, {}, {start}),
                             int64Constant(c, {}, {start + size}))
            : sliceOf(c, c.inputs[0], {*axis}, {start}, {start + size}, {1});
    if (failed(part))
      return failure();
    out.push_back(*part);
    start += size;
  }
  return out;
}

// ONNX Pad: pads (and value) as attributes before opset 11, as inputs
// (with optional axes from opset 18) since.
FailureOr<Values> pad(NodeContext &c) {
  if (failed(arity(c, 1, 4)))
    return failure();
  std::string mode = c.getString("mode", "constant");
  if (!llvm::is_contained({"constant", "edge", "reflect", "wrap"}, mode))
    return c.error("Pad mode '" + mode + "' is not supported");
  Value input = c.inputs[0], pads, value, axes;
  if (c.inputs.size() > 1 && c.inputs[1]) {
    pads = c.inputs[1];
    if (c.inputs.size() > 2)
      value = c.inputs[2];
    if (c.inputs.size() > 3)
      axes = c.inputs[3];
    if (!axes) // a begin and an end pad per dim
      pads = withLength(c, pads, 2 * typeOf(input).getRank());
  } else {
    std::vector<int64_t> list = ints(c, "pads", {});
    pads = int64Constant(c, {(int64_t)list.size()}, list, "pads");
    if (c.attr("value") && c.getFloat("value", 0) != 0)
      value = scalarLike(c, input, c.getFloat("value", 0));
  }
  if (value && typeOf(value).getElementType() != typeOf(input).getElementType())
    return c.error("Pad value must have the input's element type");
  return single(padBy(c, input, pads, value, axes, mode));
}
} // namespace

void kiln::onnx_import::addSlicingConverters(ConverterTable &table) {
  addRows(table, {
                     {"Gather", gatherOnAxis<GatherOp>},
                     {"Pad", pad},
                     {"GatherElements", gatherOnAxis<GatherElementsOp>},
                     {"Concat", concat},
                     {"Slice", slice},
                     {"Split", split},
                 });
}
