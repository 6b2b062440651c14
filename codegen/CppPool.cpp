//===- CppPool.cpp - plane windows through the prelude, in C++ kernels ----===//
//
// Windows over 4-D planes read a whole tensor, or the input of a constant
// pad of its planes, through the prelude (planeSource), the pad's value
// outside it; their own loops run only if the prelude declines. Depthwise
// 3x3 convs (kiln_dwconv3x3) are emitted with the GEMM-like calls
// (CppGemm.cpp) for their epilogue tiles. A 3x3 max pool (matchMaxPool3x3,
// kiln_maxpool3x3) takes a row of outputs at a time: the max of its three
// input rows, then of each output's three columns (resnet18's pool after
// its stem: 89-132 us against 151-174 in the model; docs/performance-log.md,
// step 44).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// The unpadded input of plane window `op` at `stride`: the input itself, or
/// that of a pad of its planes alone; none when the input is another pad
/// or made plane by plane (no whole tensor to read), when its batch and
/// channels are not the output's, or when a plane's size is dynamic (the
/// sizes are template arguments: loops of known trip counts; 960 depthwise
/// planes of 7x7 took 40 us with them as arguments, 20 so).
std::optional<PlaneSource> CppEmitter::planeSource(linalg::GenericOp op,
                                                   int64_t stride) {
  PlaneSource s;
  s.input = op.getDpsInputs()[0];
  unsigned planes = 0;
  auto producer = s.input.getDefiningOp<linalg::GenericOp>();
  if (std::optional<PadMatch> pad = planePad(producer)) {
    s.input = pad->input;
    s.padValue = pad->value;
    s.top = pad->begin[2];
    s.left = pad->begin[3];
  } else if (producer && matchPad(producer)) {
    return std::nullopt; // a pad of more than the planes
  } else if (planeProducer(op, planes)) {
    return std::nullopt;
  }
  for (unsigned d = 0; d < 2; ++d)
    if (dimExpr(s.input, d) != dimExpr(op.getResult(0), d))
      return std::nullopt;
  auto in = cast<RankedTensorType>(s.input.getType());
  auto out = cast<RankedTensorType>(op.getResult(0).getType());
  for (unsigned d = 2; d < 4; ++d)
    if (in.isDynamicDim(d) || out.isDynamicDim(d))
      return std::nullopt;
  s.sizes = llvm::formatv("<{0}, {1}, {2}, {3}, {4}, {5}, {6}>", stride,
                          in.getDimSize(2), in.getDimSize(3), out.getDimSize(2),
                          out.getDimSize(3), s.top, s.left);
  return s;
}

/// `if (!kiln_maxpool3x3<...>(...)) {` in front of the loops of 3x3 max
/// pool `op` when its input is a whole tensor or a constant pad of its
/// planes alone (planeSource), its init a constant fill, and no epilogue
/// runs inside its loops. True when emitted.
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
  std::optional<PlaneSource> source = planeSource(op, *stride);
  if (init.empty() || !source)
    return false;
  // Without a pad the windows lie inside the input: its value is unread.
  std::string value = source->padValue ? scalarOf(source->padValue) : init;
  if (value.empty())
    return false;
  os << "  if (!kiln_maxpool3x3" << source->sizes << "("
     << dimExpr(op.getResult(0), 0) << ", " << dimExpr(op.getResult(0), 1)
     << ", " << bufferFor(source->input) << ", " << value << ", " << init
     << ", " << bufferFor(op.getResult(0)) << ")) {\n";
  return true;
}
