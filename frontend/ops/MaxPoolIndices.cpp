//===- MaxPoolIndices.cpp - MaxPool's second output -----------------------===//
//
// The flat index (over N, C and the spatial dims; storage_order 1 makes the
// spatial part column-major) of each window's maximum, the first in scan
// order on ties, as the reference picks it. Shapes are static: per tap t
// (the kernel's elements in scan order) and output position o, the input
// position is a compile-time constant. The taps are gathered at once into
// [N, C, O, T]; a tap that falls in the padding reads the window's first
// real tap instead (and reports its index), so it never wins a tie it should
// not. The winner is the first tap equal to the window's maximum.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {
constexpr int64_t kMaxEntries = 1 << 22; // O x T constants
} // namespace

FailureOr<Value> kiln::onnx_import::maxPoolIndices(
    NodeContext &c, Value x, Value y, ArrayRef<int64_t> kernel,
    ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
    ArrayRef<int64_t> pads, bool columnMajor) {
  auto xType = typeOf(x), yType = typeOf(y);
  int64_t r = kernel.size();
  if (!xType.hasStaticShape() || !yType.hasStaticShape())
    return c.error("MaxPool's Indices output needs static shapes");
  if (columnMajor && r > 2)
    return c.error("MaxPool storage_order=1 is supported up to 2 spatial dims");
  auto in = xType.getShape().drop_front(2),
       out = yType.getShape().drop_front(2);
  int64_t n = xType.getDimSize(0), ch = xType.getDimSize(1);
  int64_t spatial = 1, outputs = 1, taps = 1;
  for (int64_t i = 0; i < r; ++i) {
    spatial *= in[i];
    outputs *= out[i];
    taps *= kernel[i];
  }
  if (outputs * taps > kMaxEntries)
    return c.error("MaxPool's Indices output over " + Twine(outputs * taps) +
                   " window taps is more than kiln builds");
  // read[o][t]: the row-major input position tap t of window o reads;
  // report[o][t]: the index it reports (storage order).
  std::vector<int64_t> read(outputs * taps), report(outputs * taps);
  SmallVector<int64_t> o(r, 0), k(r, 0), p(r);
  for (int64_t oi = 0; oi < outputs; ++oi) {
    int64_t rem = oi;
    for (int64_t i = r - 1; i >= 0; --i) {
      o[i] = rem % out[i];
      rem /= out[i];
    }
    int64_t firstRead = -1, firstReport = -1;
    for (int64_t ti = 0; ti < taps; ++ti) {
      int64_t trem = ti;
      for (int64_t i = r - 1; i >= 0; --i) {
        k[i] = trem % kernel[i];
        trem /= kernel[i];
      }
      bool valid = true;
      int64_t rowMajor = 0, colMajor = 0, colStride = 1;
      for (int64_t i = 0; i < r; ++i) {
        p[i] = o[i] * strides[i] - pads[i] + k[i] * dilations[i];
        valid &= p[i] >= 0 && p[i] < in[i];
        rowMajor = rowMajor * in[i] + p[i];
      }
      for (int64_t i = 0; i < r; ++i) { // h + w * H
        colMajor += p[i] * colStride;
        colStride *= in[i];
      }
      int64_t at = oi * taps + ti;
      if (valid && firstRead < 0) {
        firstRead = rowMajor;
        firstReport = columnMajor ? colMajor : rowMajor;
      }
      read[at] = valid ? rowMajor : -1;
      report[at] = valid ? (columnMajor ? colMajor : rowMajor) : -1;
    }
    if (firstRead < 0)
      return c.error("MaxPool has a window that lies wholly in the padding");
    for (int64_t ti = 0; ti < taps; ++ti)
      if (read[oi * taps + ti] < 0) {
        read[oi * taps + ti] = firstRead;
        report[oi * taps + ti] = firstReport;
      }
  }
  OpChain g(c);
  Builder &b = c.builder;
  Value values = g.reshape(
      g.op<GatherOp>({g.reshape(x, {n, ch, spatial}),
                      g.i64Constant({outputs * taps}, read, "pool_read")},
                     {b.getNamedAttr("axis", b.getI64IntegerAttr(2))}),
      {n, ch, outputs, taps});
  Value best = g.reshape(y, {n, ch, outputs, 1});
  Value tapIndex = g.i64Constant(
      {taps}, llvm::to_vector(llvm::seq<int64_t>(0, taps)), "pool_taps");
  Value first = g.reduceAxes("min",
                             g.where(g.op<EqualOp>({values, best}), tapIndex,
                                     g.i64Constant({}, {taps}, "pool_none")),
                             {3}); // [N, C, O, 1]
  Value chosen = g.reduceAxes(
      "sum",
      g.where(g.op<EqualOp>({first, tapIndex}),
              g.i64Constant({outputs, taps}, report, "pool_report"),
              g.i64Constant({}, {0}, "pool_zero")),
      {3});
  // Plus (n * C + c) * spatial.
  std::vector<int64_t> planes(n * ch);
  for (int64_t i = 0; i < n * ch; ++i)
    planes[i] = i * spatial;
  Value offset = g.i64Constant({n, ch, 1, 1}, planes, "pool_planes");
  SmallVector<int64_t> outShape(yType.getShape());
  Value indices = g.reshape(g.add(chosen, offset), outShape);
  if (g.failed())
    return failure();
  return indices;
}
