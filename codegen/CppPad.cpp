//===- CppPad.cpp - constant pads, one plane at a time, in C++ kernels ----===//
//
// A constant pad (lowering::padTensor's generic: a guarded read of the input
// at the index less the pad before, or the pad value outside it) that makes
// a window's plane (CppWindow.cpp) is written row by row: rows wholly in the
// pad are filled, the others filled at both ends and copied in the middle.
// Element by element, the generic's select vectorizes only as masked loads
// and blends (mobilenet_v2's 3x3 depthwise kernel at 14x14, 576 channels:
// 67-73 us with the pad element by element, 55-64 us by rows).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// The conditions of an and-tree of i1 values, in `leaves`; false if any is
/// not an arith.cmpi.
static bool collectLeaves(Value cond, SmallVectorImpl<arith::CmpIOp> &leaves) {
  if (auto both = cond.getDefiningOp<arith::AndIOp>())
    return collectLeaves(both.getLhs(), leaves) &&
           collectLeaves(both.getRhs(), leaves);
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  leaves.push_back(cmp);
  return true;
}

/// The constant value of an index `v`, if it is one.
static std::optional<int64_t> constantIndex(Value v) {
  if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
    return c.value();
  return std::nullopt;
}

std::optional<PadMatch> cpp::matchPad(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 0 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto select =
      body.getTerminator()->getOperand(0).getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  auto read = select.getTrueValue().getDefiningOp<tensor::ExtractOp>();
  Value value = select.getFalseValue();
  if (!read || !read->hasAttr(kGuardedRead) ||
      op.getRegion().isAncestor(value.getParentRegion()))
    return std::nullopt;
  auto inType = cast<RankedTensorType>(read.getTensor().getType());
  auto outType = cast<RankedTensorType>(op.getResult(0).getType());
  int64_t rank = inType.getRank();
  if (outType.getRank() != rank)
    return std::nullopt;
  // Each index is loop dim i, less the pad before it.
  PadMatch pad{read.getTensor(), SmallVector<int64_t>(rank, 0), value};
  for (auto [i, at] : llvm::enumerate(read.getIndices())) {
    Value dim = at;
    if (auto sub = at.getDefiningOp<arith::SubIOp>()) {
      std::optional<int64_t> before = constantIndex(sub.getRhs());
      if (!before || *before < 0)
        return std::nullopt;
      pad.begin[i] = *before;
      dim = sub.getLhs();
    }
    auto index = dim.getDefiningOp<linalg::IndexOp>();
    if (!index || index.getDim() != i)
      return std::nullopt;
  }
  // The condition: each padded index at least 0 and below the input's
  // static size, and nothing else.
  SmallVector<arith::CmpIOp> leaves;
  if (!collectLeaves(select.getCondition(), leaves))
    return std::nullopt;
  SmallVector<bool> low(rank, false), high(rank, false);
  for (arith::CmpIOp cmp : leaves) {
    auto it = llvm::find(read.getIndices(), cmp.getLhs());
    std::optional<int64_t> bound = constantIndex(cmp.getRhs());
    if (it == read.getIndices().end() || !bound)
      return std::nullopt;
    size_t i = it - read.getIndices().begin();
    if (cmp.getPredicate() == arith::CmpIPredicate::sge && *bound == 0)
      low[i] = true;
    else if (cmp.getPredicate() == arith::CmpIPredicate::slt &&
             !inType.isDynamicDim(i) && *bound == inType.getDimSize(i))
      high[i] = true;
    else
      return std::nullopt;
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (!low[i] && !high[i]) {
      // Unpadded: read at the loop index, over the input's extent.
      if (pad.begin[i] != 0 || (inType.getDimSize(i) != outType.getDimSize(i)))
        return std::nullopt;
      continue;
    }
    if (!high[i] || (pad.begin[i] > 0 && !low[i]) || outType.isDynamicDim(i) ||
        outType.getDimSize(i) < inType.getDimSize(i) + pad.begin[i])
      return std::nullopt;
  }
  return pad;
}

/// The plane of `producer` (a pad, `pad`) after its first `planes` loops,
/// which the caller has opened, into its buffer `name`, by rows; false
/// (nothing written) when the plane is not 2-d or its value not emitted.
/// The middle of a row is a memcpy, not a loop: with a loop, GCC 12.2 at
/// -O3 with AVX2 vectorizes the row loop and gets some planes wrong (14 of
/// 216 plane shapes tried, e.g. 5x9 padded at the top only; none with the
/// memcpy).
bool CppEmitter::emitPadPlane(linalg::GenericOp producer, const PadMatch &pad,
                              unsigned planes, const std::string &name,
                              const std::string &indent) {
  auto inType = cast<RankedTensorType>(pad.input.getType());
  auto outType = cast<RankedTensorType>(producer.getResult(0).getType());
  std::string fill = scalarOf(pad.value);
  if (inType.getRank() != planes + 2 || fill.empty())
    return false;
  for (unsigned i = 0; i < planes; ++i)
    if (pad.begin[i] != 0 || inType.getDimSize(i) != outType.getDimSize(i))
      return false;
  int64_t h = inType.getDimSize(planes), w = inType.getDimSize(planes + 1);
  int64_t hp = outType.getDimSize(planes), wp = outType.getDimSize(planes + 1);
  int64_t top = pad.begin[planes], left = pad.begin[planes + 1];
  // The input's plane at the producer's leading loops.
  MLIRContext *ctx = producer.getContext();
  SmallVector<AffineExpr> at;
  for (unsigned i = 0; i < planes + 2; ++i)
    at.push_back(i < planes ? getAffineDimExpr(i, ctx)
                            : getAffineConstantExpr(0, ctx));
  std::string base =
      bufferFor(pad.input) + " + " +
      index(pad.input, AffineMap::get(producer.getNumLoops(), 0, at, ctx));
  std::string type = typeName(inType.getElementType());
  os << llvm::formatv("{0}// a pad, by rows\n"
                      "{0}for (int64_t r = 0; r < {1}; ++r) {{\n"
                      "{0}  {2} *row = {3} + r * {4};\n"
                      "{0}  const int64_t s = r - {5};\n"
                      "{0}  if (s < 0 || s >= {6}) {{\n"
                      "{0}    for (int64_t c = 0; c < {4}; ++c)\n"
                      "{0}      row[c] = {7};\n"
                      "{0}    continue;\n"
                      "{0}  }\n"
                      "{0}  const {2} *src = {8} + s * {9};\n"
                      "{0}  for (int64_t c = 0; c < {10}; ++c)\n"
                      "{0}    row[c] = {7};\n"
                      "{0}  std::memcpy(row + {10}, src, sizeof({2}) * {9});\n"
                      "{0}  for (int64_t c = {11}; c < {4}; ++c)\n"
                      "{0}    row[c] = {7};\n"
                      "{0}}\n",
                      indent, hp, type, name, wp, top, h, fill, base, w, left,
                      left + w);
  return true;
}
