//===- Windows.cpp - Conv and pools ---------------------------------------===//
//
// Conv, MaxPool (values), AveragePool, LpPool and the global pools:
// windows, their pads (auto_pad included) and padding computed at run time.
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
FailureOr<Value> padSameAtRunTime(NodeContext &c, Value x, double value,
                                  ArrayRef<int64_t> kernel = {});

int64_t spatialRank(NodeContext &c) {
  return cast<RankedTensorType>(c.inputs[0].getType()).getRank() - 2;
}

// Explicit begin/end pads from `pads` or `auto_pad`.
FailureOr<std::vector<int64_t>>
windowPads(NodeContext &c, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
           ArrayRef<int64_t> dilations, bool prepadded = false) {
  size_t r = kernel.size();
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  if (prepadded) // padded at run time (padSameAtRunTime)
    return std::vector<int64_t>(2 * r, 0);
  if (autoPad == "NOTSET") {
    std::vector<int64_t> pads = ints(c, "pads", std::vector<int64_t>(2 * r, 0));
    if (pads.size() != 2 * r)
      return c.error("'pads' needs " + Twine(2 * r) + " values");
    return pads;
  }
  if (autoPad == "VALID")
    return std::vector<int64_t>(2 * r, 0);
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return c.error("auto_pad '" + autoPad + "' is not supported");
  auto in = cast<RankedTensorType>(c.inputs[0].getType()).getShape();
  std::vector<int64_t> pads(2 * r);
  for (size_t i = 0; i < r; ++i) {
    if (ShapedType::isDynamic(in[i + 2]))
      return c.error("auto_pad " + autoPad + " needs static spatial dims");
    int64_t out = (in[i + 2] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] +
                                             (kernel[i] - 1) * dilations[i] +
                                             1 - in[i + 2]);
    int64_t small = total / 2;
    pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
    pads[r + i] = total - pads[i];
  }
  return pads;
}
} // namespace

FailureOr<Values> kiln::onnx_import::convertConv(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  auto xType = cast<RankedTensorType>(c.inputs[0].getType());
  auto wType = cast<RankedTensorType>(c.inputs[1].getType());
  if (wType.getRank() < 3 || xType.getRank() != wType.getRank())
    return c.error("Conv needs a weight of rank >= 3 and an input of its "
                   "rank");
  size_t r = wType.getRank() - 2;
  // The kernel's size: the weight's, else kernel_shape's (a weight sized
  // only at run time keeps it symbolic; the kernel reads it then).
  std::vector<int64_t> kernel(wType.getShape().begin() + 2,
                              wType.getShape().end());
  std::vector<int64_t> declared = ints(c, "kernel_shape", {});
  for (size_t i = 0; i < r && declared.size() == r; ++i) {
    if (!ShapedType::isDynamic(kernel[i]) && kernel[i] != declared[i])
      return c.error("Conv kernel_shape does not match the weight's shape");
    kernel[i] = declared[i];
  }
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  bool dynamicKernel = llvm::any_of(kernel, ShapedType::isDynamic);
  if (same && dynamicKernel)
    return c.error("Conv with auto_pad " + autoPad +
                   " needs the kernel's size at compile time (a static "
                   "weight shape or kernel_shape)");
  if (c.getInt("group", 1) < 1)
    return c.error("Conv group must be positive");
  SmallVector<Value> operands = presentInputs(c);
  bool prepadded = false;
  if (same &&
      llvm::any_of(xType.getShape().drop_front(2), ShapedType::isDynamic)) {
    auto padded = padSameAtRunTime(c, c.inputs[0], 0, kernel);
    if (failed(padded))
      return failure();
    operands[0] = *padded;
    prepadded = true;
  }
  auto pads = windowPads(c, kernel, strides, dilations, prepadded);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  return single(c.create(
      ConvOp::getOperationName(), operands,
      {b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
       b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
       b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
       b.getNamedAttr("group", b.getI64IntegerAttr(c.getInt("group", 1)))}));
}

namespace {
// A window node's input `x` padded at run time with `value` for auto_pad
// SAME over symbolic spatial dims, whose pads depend on the sizes; null when
// the node needs no such padding (its window then takes the pads).
FailureOr<Value> padSameAtRunTime(NodeContext &c, Value x, double value,
                                  ArrayRef<int64_t> kernelSize) {
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  auto shape = typeOf(x).getShape();
  int64_t r = (int64_t)shape.size() - 2;
  if ((autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") || r < 1 ||
      llvm::none_of(shape.drop_front(2), ShapedType::isDynamic))
    return Value();
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return c.error("auto_pad " + autoPad +
                   " over symbolic spatial dims needs a floating-point input");
  std::vector<int64_t> kernel =
      kernelSize.empty() ? ints(c, "kernel_shape", {}) : kernelSize.vec();
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  if ((int64_t)kernel.size() != r || (int64_t)strides.size() != r ||
      (int64_t)dilations.size() != r)
    return c.error(c.node.op_type() +
                   " needs kernel_shape, strides and "
                   "dilations with " +
                   Twine(r) + " values");
  OpChain g(c);
  auto i64 = [&](int64_t v) { return g.i64Constant({}, {v}, "same"); };
  SmallVector<Value> begins = {g.i64Constant({2}, {0, 0}, "same")};
  SmallVector<Value> ends = begins;
  for (int64_t i = 0; i < r; ++i) {
    // total = max(0, (ceil(in / s) - 1) s + (k - 1) d + 1 - in)
    Value in = g.dim(x, i + 2), s = i64(strides[i]);
    Value out = g.div(g.add(in, i64(strides[i] - 1)), s);
    Value total =
        g.op<MaxOp>({g.sub(g.add(g.mul(g.sub(out, i64(1)), s),
                                 i64((kernel[i] - 1) * dilations[i] + 1)),
                           in),
                     i64(0)});
    Value small = g.div(total, i64(2));
    Value begin = autoPad == "SAME_UPPER" ? small : g.sub(total, small);
    begins.push_back(g.reshape(begin, {1}));
    ends.push_back(g.reshape(g.sub(total, begin), {1}));
  }
  begins.append(ends);
  Value pads = g.concat(begins, 0);
  if (g.failed())
    return failure();
  return padBy(c, x, pads, scalarLike(c, x, value), Value(), "constant");
}

// The window of a pooling node: kernel_shape (required), strides,
// dilations, and explicit pads (from pads or auto_pad), as kiln pool
// attributes, followed by the node's ceil_mode.
FailureOr<SmallVector<NamedAttribute>> poolWindow(NodeContext &c,
                                                  bool prepadded = false) {
  int64_t r = spatialRank(c);
  std::vector<int64_t> kernel = ints(c, "kernel_shape", {});
  if ((int64_t)kernel.size() != r)
    return c.error(c.node.op_type() + " needs kernel_shape with " + Twine(r) +
                   " values");
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  auto pads = windowPads(c, kernel, strides, dilations, prepadded);
  if (failed(pads))
    return failure();
  Builder &b = c.builder;
  return SmallVector<NamedAttribute>{
      b.getNamedAttr("kernel_shape", b.getDenseI64ArrayAttr(kernel)),
      b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)),
      b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
      b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
      b.getNamedAttr("ceil_mode",
                     b.getBoolAttr(c.getInt("ceil_mode", 0) != 0))};
}

FailureOr<Values> maxPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  auto padded = padSameAtRunTime(c, c.inputs[0],
                                 -std::numeric_limits<double>::infinity());
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  auto y = c.create(MaxPoolOp::getOperationName(),
                    *padded ? *padded : c.inputs[0], *window);
  if (failed(y))
    return failure();
  if (c.node.output_size() < 2 || c.node.output(1).empty())
    return Values{*y};
  if (*padded)
    return c.error("MaxPool's Indices output with auto_pad SAME needs static "
                   "spatial dims");
  auto array = [&](StringRef name) {
    for (NamedAttribute a : *window)
      if (a.getName() == name)
        return cast<DenseI64ArrayAttr>(a.getValue()).asArrayRef();
    return ArrayRef<int64_t>();
  };
  auto indices = maxPoolIndices(
      c, c.inputs[0], *y, array("kernel_shape"), array("strides"),
      array("dilations"), array("pads"), c.getInt("storage_order", 0) != 0);
  if (failed(indices))
    return failure();
  return Values{*y, *indices};
}

// GlobalAveragePool / GlobalMaxPool: a mean / max over the spatial dims.
template <const char *Kind> FailureOr<Values> globalPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  int64_t rank = cast<RankedTensorType>(c.inputs[0].getType()).getRank();
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  return single(reduce(c, Kind, axes, true));
}
constexpr char kGlobalMean[] = "mean", kGlobalMax[] = "max";

FailureOr<Values> averagePool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  bool countPads = c.getInt("count_include_pad", 0) != 0;
  auto padded = padSameAtRunTime(c, x, 0);
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  window->push_back(c.builder.getNamedAttr(
      "count_include_pad", c.builder.getBoolAttr(countPads || *padded)));
  if (!*padded)
    return single(c.create(AvgPoolOp::getOperationName(), x, *window));
  auto sum = c.create(AvgPoolOp::getOperationName(), *padded, *window);
  if (failed(sum) || countPads)
    return single(sum);
  // Pads padded at run time are not counted: divide by the share of real
  // elements in each window.
  auto ones = expandLike(c, scalarLike(c, x, 1), x);
  if (failed(ones))
    return failure();
  auto mask = padSameAtRunTime(c, *ones, 0);
  if (failed(mask))
    return failure();
  auto share = c.create(AvgPoolOp::getOperationName(), *mask, *window);
  if (failed(share))
    return failure();
  return single(binaryOp(c, DivOp::getOperationName(), *sum, *share));
}

// LpPool: (sum over the window of |x|^p)^(1/p), padding counting as 0: an
// average pool that counts the pads, times the window size.
FailureOr<Values> lpPool(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  if (c.getInt("ceil_mode", 0))
    return c.error("LpPool with ceil_mode is not supported yet");
  Value x = c.inputs[0];
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return c.error("LpPool needs a floating-point input");
  int64_t p = c.getInt("p", 2);
  if (p < 1)
    return c.error("LpPool's p must be at least 1, got " + Twine(p));
  std::string mul = MulOp::getOperationName().str(),
              pow = PowOp::getOperationName().str();
  auto magnitude = c.create(AbsOp::getOperationName(), x);
  if (failed(magnitude))
    return failure();
  auto powered = p == 2 ? binaryOp(c, mul, *magnitude, *magnitude)
                        : binaryOp(c, pow, *magnitude, scalarLike(c, x, p));
  if (failed(powered))
    return failure();
  auto padded = padSameAtRunTime(c, *powered, 0);
  if (failed(padded))
    return failure();
  auto window = poolWindow(c, (bool)*padded);
  if (failed(window))
    return failure();
  window->push_back(
      c.builder.getNamedAttr("count_include_pad", c.builder.getBoolAttr(true)));
  auto mean = c.create(AvgPoolOp::getOperationName(),
                       *padded ? *padded : *powered, *window);
  if (failed(mean))
    return failure();
  int64_t size = 1;
  for (int64_t k : ints(c, "kernel_shape", {}))
    size *= k;
  auto sum = binaryOp(c, mul, *mean, scalarLike(c, x, size));
  if (failed(sum))
    return failure();
  if (p == 1)
    return Values{*sum};
  if (p == 2)
    return single(c.create(SqrtOp::getOperationName(), *sum));
  return single(binaryOp(c, pow, *sum, scalarLike(c, x, 1.0 / p)));
}
} // namespace

void kiln::onnx_import::addWindowsConverters(ConverterTable &table) {
  addRows(table, {
                     {"Conv", convertConv},
                     {"MaxPool", maxPool},
                     {"GlobalAveragePool", globalPool<kGlobalMean>},
                     {"GlobalMaxPool", globalPool<kGlobalMax>},
                     {"LpPool", lpPool},
                     {"AveragePool", averagePool},
                 });
}
