//===- CppTranspose.cpp - transposes of the last two dims in C++ kernels --===//
//
// A generic that only copies its input with the last two dims swapped (an
// attention's keys turned for QK^T) gets the prelude's kiln_transpose2d in
// front of its loops, which run only if a dim of the input is not the one
// the loops expect (a dim of 1 broadcasting). The loops would read the
// input with a stride of a row per output element.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// Whether `op` is out[..., r, c] = in[..., c, r] over f32 and nothing else.
static bool isLastTwoTranspose(linalg::GenericOp op) {
  unsigned n = op.getNumLoops();
  if (n < 2 || op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != n || !op.hasPureTensorSemantics())
    return false;
  Type element = getElementTypeOrSelf(op.getResult(0).getType());
  if (!element.isF32() ||
      getElementTypeOrSelf(op.getDpsInputs()[0].getType()) != element)
    return false;
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> swapped;
  for (unsigned d = 0; d < n; ++d)
    swapped.push_back(getAffineDimExpr(d, ctx));
  std::swap(swapped[n - 2], swapped[n - 1]);
  if (!op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity() ||
      op.getMatchingIndexingMap(op.getDpsInputOperand(0)) !=
          AffineMap::get(n, 0, swapped, ctx))
    return false;
  Block &body = op.getRegion().front();
  return body.getOperations().size() == 1 &&
         body.getTerminator()->getOperand(0) == body.getArgument(0);
}

bool CppEmitter::emitTransposeCall(linalg::GenericOp op) {
  if (!isLastTwoTranspose(op))
    return false;
  unsigned n = op.getNumLoops();
  Value in = op.getDpsInputs()[0], out = op.getResult(0);
  std::string batch = "int64_t(1)", check;
  for (unsigned d = 0; d < n; ++d) {
    std::string range = loopRange(op, d), dim = dimExpr(in, d);
    if (range.empty() || dim.empty())
      return false;
    if (d + 2 < n)
      batch += " * " + range;
    // The input's last two dims are the loops' last two, swapped.
    std::string want =
        d + 2 < n ? range : loopRange(op, d == n - 2 ? n - 1 : n - 2);
    if (dim != want)
      check += dim + " == " + want + " && ";
  }
  check += "static_cast<const void *>(" + bufferFor(out) +
           ") != static_cast<const void *>(" + bufferFor(in) + ") && ";
  os << "  if (!(" << check << "kiln_transpose2d(" << batch << ", "
     << loopRange(op, n - 2) << ", " << loopRange(op, n - 1) << ", "
     << bufferFor(in) << ", " << bufferFor(out) << "))) {\n";
  return true;
}
