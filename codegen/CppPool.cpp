//===- CppPool.cpp - 3x3 max pools through the prelude, in C++ kernels ----===//
//
// A 3x3 max pool (matchMaxPool3x3) whose input is a constant pad of the
// planes calls the prelude's kiln_maxpool3x3, which reads the unpadded input
// (the pad's value outside it) a row of outputs at a time: the max of the
// three input rows, then of each output's three columns. The window's own
// loops, over a plane padded and split by columns per thread, run only if
// it declines (resnet18's max pool after its stem: 89-132 us against
// 151-174 in the model; docs/performance.md, step 44).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// `if (!kiln_maxpool3x3<...>(...)) {` in front of the loops of 3x3 max
/// pool `op` when its input is a whole tensor or a constant pad of its
/// planes alone, its init a constant fill, and no epilogue runs inside its
/// loops. True when emitted.
bool CppEmitter::emitMaxPoolCall(linalg::GenericOp op) {
  std::optional<int64_t> stride = matchMaxPool3x3(op);
  if (!stride || windowEpilogue(op))
    return false;
  // The init: a fill only the pool reads (its loops' prologue, when the
  // taps are innermost).
  Value initial = op.getDpsInits()[0];
  auto fill = initial.hasOneUse() ? initial.getDefiningOp<linalg::FillOp>()
                                  : linalg::FillOp();
  std::string init = fill ? scalarOf(fill.getInputs()[0]) : "";
  if (init.empty())
    return false;
  // The pad's input and value, or the input itself where there is no pad
  // (the windows then lie inside it).
  Value source = op.getDpsInputs()[0];
  std::string value = init;
  int64_t top = 0, left = 0;
  unsigned planes = 0;
  auto producer = source.getDefiningOp<linalg::GenericOp>();
  if (std::optional<PadMatch> pad = planePad(producer)) {
    source = pad->input;
    value = scalarOf(pad->value);
    top = pad->begin[2];
    left = pad->begin[3];
  } else if (producer && matchPad(producer)) {
    return false; // a pad of more than the planes
  } else if (planeProducer(op, planes)) {
    return false; // made plane by plane: no whole tensor to read
  }
  if (value.empty())
    return false;
  for (unsigned d = 0; d < 2; ++d)
    if (dimExpr(source, d) != dimExpr(op.getResult(0), d))
      return false;
  // The planes' sizes are template arguments, as kiln_dwconv3x3's.
  auto inType = cast<RankedTensorType>(source.getType());
  auto outType = cast<RankedTensorType>(op.getResult(0).getType());
  for (unsigned d = 2; d < 4; ++d)
    if (inType.isDynamicDim(d) || outType.isDynamicDim(d))
      return false;
  os << llvm::formatv(
      "  if (!kiln_maxpool3x3<{0}, {1}, {2}, {3}, {4}, {5}, {6}>({7}, {8}, "
      "{9}, {10}, {11}, {12})) {\n",
      *stride, inType.getDimSize(2), inType.getDimSize(3),
      outType.getDimSize(2), outType.getDimSize(3), top, left,
      dimExpr(op.getResult(0), 0), dimExpr(op.getResult(0), 1),
      bufferFor(source), value, init, bufferFor(op.getResult(0)));
  return true;
}
