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
/// With `split` S > 0 the rows are written split by S ([rows][S][ceil(W /
/// S)], as planeSplit wants), so that no second pass splits them: column c
/// of a row goes to (c mod S, c / S), each of the S parts a strided copy
/// between fills (mobilenet_v2's 3x3 stride-2 depthwise kernel at 112x112,
/// 96 channels, batch 8: 6.4-7.3 ms with a split pass after the pad,
/// 5.0-6.0 ms split while padding).
/// The middle of an unsplit row is a memcpy, not a loop: with a loop, GCC
/// 12.2 at -O3 with AVX2 vectorizes the row loop and gets some planes wrong
/// (14 of 216 plane shapes tried, e.g. 5x9 padded at the top only; none
/// with the memcpy).
bool CppEmitter::emitPadPlane(linalg::GenericOp producer, const PadMatch &pad,
                              unsigned planes, const std::string &name,
                              int64_t split, const std::string &indent) {
  auto inType = cast<RankedTensorType>(pad.input.getType());
  auto outType = cast<RankedTensorType>(producer.getResult(0).getType());
  std::string fill = scalarOf(pad.value);
  if (inType.getRank() != planes + 2 || fill.empty())
    return false;
  for (unsigned i = 0; i < planes; ++i)
    if (pad.begin[i] != 0 || inType.getDimSize(i) != outType.getDimSize(i))
      return false;
  // The rows are written with the plane's sizes as constants: a dynamic
  // one (kDynamic, a huge negative number) made the row loop run zero
  // times and left the plane uninitialized.
  for (unsigned i = planes; i < planes + 2; ++i)
    if (inType.isDynamicDim(i) || outType.isDynamicDim(i))
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
  // An unsplit row is one part, with its middle a memcpy.
  int64_t parts = split ? split : 1;
  int64_t half = llvm::divideCeilSigned(wp, parts);
  os << llvm::formatv("{0}// a pad, by rows{1}\n"
                      "{0}for (int64_t r = 0; r < {2}; ++r) {{\n"
                      "{0}  {3} *row = {4} + r * {5};\n"
                      "{0}  const int64_t s = r - {6};\n"
                      "{0}  if (s < 0 || s >= {7}) {{\n"
                      "{0}    for (int64_t c = 0; c < {5}; ++c)\n"
                      "{0}      row[c] = {8};\n"
                      "{0}    continue;\n"
                      "{0}  }\n"
                      "{0}  const {3} *src = {9} + s * {10};\n",
                      indent,
                      split ? ", split by " + std::to_string(split) : "", hp,
                      type, name, parts * half, top, h, fill, base, w);
  auto fills = [&](std::string at, int64_t from, int64_t to) {
    if (from < to)
      os << llvm::formatv("{0}  for (int64_t c = {1}; c < {2}; ++c)\n"
                          "{0}    row[{3}c] = {4};\n",
                          indent, from, to, at, fill);
  };
  // Part q holds padded columns q + j * S at j: those in [lo, hi) copy the
  // input's column j * S + q - left, the others fill.
  for (int64_t q = 0; q < parts; ++q) {
    int64_t count = std::max<int64_t>(0, llvm::divideCeilSigned(wp - q, parts));
    int64_t lo = std::max<int64_t>(0, llvm::divideCeilSigned(left - q, parts));
    int64_t hi = std::clamp<int64_t>(
        llvm::divideCeilSigned(left + w - q, parts), lo, std::max(lo, count));
    std::string at = q ? std::to_string(q * half) + " + " : "";
    fills(at, 0, lo);
    if (!split)
      os << llvm::formatv(
          "{0}  std::memcpy(row + {1}, src, sizeof({2}) * {3});\n", indent,
          left, type, w);
    else if (lo < hi)
      os << llvm::formatv("{0}  for (int64_t c = {1}; c < {2}; ++c)\n"
                          "{0}    row[{3}c] = src[c * {4}{5}];\n",
                          indent, lo, hi, at, split,
                          q == left  ? std::string()
                          : q > left ? " + " + std::to_string(q - left)
                                     : " - " + std::to_string(left - q));
    fills(at, hi, count);
  }
  os << indent << "}\n";
  return true;
}

std::optional<PadMatch> cpp::planePad(linalg::GenericOp op) {
  std::optional<PadMatch> match = op ? matchPad(op) : std::nullopt;
  if (!match || match->begin.size() != 4 || match->begin[0] != 0 ||
      match->begin[1] != 0)
    return std::nullopt;
  // The batch and channels as they are.
  auto in = cast<RankedTensorType>(match->input.getType());
  auto out = cast<RankedTensorType>(op.getResult(0).getType());
  for (int64_t d = 0; d < 2; ++d)
    if (in.isDynamicDim(d) != out.isDynamicDim(d) ||
        in.getDimSize(d) != out.getDimSize(d))
      return std::nullopt;
  return match;
}
