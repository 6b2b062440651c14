//===- CppWindow.cpp - small windows in the C++ kernels ------------------===//
//
// Windows whose taps unroll (kUnrolledTaps; the lowering puts them innermost)
// compute each output in their parallel loops: their init (a fill or bias)
// and an elementwise epilogue run per element there too. A pad that makes a
// window's input alone runs plane by plane inside the window's image and
// channel loops, into a per-thread buffer; a plane the window steps through
// by 2 or more is stored split by that stride, and the rows of a narrow
// window are flattened into one loop at the plane's row width.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"
#include "passes/lowering/KernelShapes.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// The number of leading loops of `op` when they are parallel, index its
/// output in order (d0, d1, ...), and are followed only by reductions that
/// unroll (kUnrolledTaps); else 0. Such a window computes each output
/// element whole inside its parallel loops: its init can be written there
/// first, and an elementwise epilogue applied there after.
unsigned cpp::unrolledWindow(linalg::GenericOp op) {
  if (libraryGemm(op))
    return 0;
  auto iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  size_t p = iterators.size();
  int64_t tail = 1;
  while (p > 0 && iterators[p - 1] == utils::IteratorType::reduction &&
         !ShapedType::isDynamic(ranges[p - 1])) {
    tail *= ranges[p - 1];
    --p;
  }
  if (p == iterators.size() || p < 2 ||
      tail > (matchDepthwise(op) ? kDepthwiseTaps : kUnrolledTaps))
    return 0;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() != p)
    return 0;
  for (unsigned d = 0; d < p; ++d)
    if (iterators[d] != utils::IteratorType::parallel ||
        out.getResult(d) != getAffineDimExpr(d, op.getContext()))
      return 0;
  return p;
}

bool cpp::fitsWindowLoops(linalg::GenericOp op, unsigned p) {
  if (op.getNumDpsInits() != 1 || op.getNumLoops() != p ||
      op.getNumParallelLoops() != p ||
      !op.getMatchingBlockArgument(op.getDpsInitOperand(0)).use_empty())
    return false;
  return op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity();
}

/// The elementwise generic applied to each element of window `op` (its only
/// user, reading it in loop order), computed inside the window's loops.
linalg::GenericOp cpp::windowEpilogue(linalg::GenericOp op) {
  unsigned p = unrolledWindow(op);
  Value result = op.getResult(0);
  if (!p || !result.hasOneUse())
    return {};
  auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
  // Emitted once, in the window: its own result has one use too.
  if (!user || !fitsWindowLoops(user, p) || !user.getResult(0).hasOneUse())
    return {};
  // Over the window's elements only: a user whose result is larger (an
  // Expand of a dynamic dim that is 1 at run time, read at index 0) needs
  // loops of its own.
  if (cast<RankedTensorType>(user.getResult(0).getType()).getShape() !=
      cast<RankedTensorType>(result.getType()).getShape())
    return {};
  // Its other inputs must be ready when the window runs (an average pool's
  // divisor is a window computed after the sums), and static: one with a
  // dynamic dim could broadcast the window's, and the window's loops would
  // not cover the epilogue's.
  for (OpOperand *input : user.getDpsInputOperands()) {
    Value v = input->get();
    if (v == result) {
      if (!user.getMatchingIndexingMap(input).isIdentity())
        return {};
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if ((type && !type.hasStaticShape()) ||
        (v.getDefiningOp() && !v.getDefiningOp()->isBeforeInBlock(op)))
      return {};
  }
  return user;
}

/// The fill or generic that only initialises window `op`, computed per
/// element inside its loops.
Operation *cpp::windowPrologue(linalg::GenericOp op) {
  unsigned p = unrolledWindow(op);
  Value init = op.getDpsInits()[0];
  Operation *def = init.getDefiningOp();
  if (!p || !def || !init.hasOneUse())
    return nullptr;
  if (isa<linalg::FillOp>(def))
    return def;
  auto generic = dyn_cast<linalg::GenericOp>(def);
  if (!generic || !fitsWindowLoops(generic, p))
    return nullptr;
  // Not also another window's epilogue: it is emitted in one place.
  for (OpOperand *input : generic.getDpsInputOperands())
    if (auto window = input->get().getDefiningOp<linalg::GenericOp>())
      if (window != op && windowEpilogue(window) == generic)
        return nullptr;
  return def;
}

/// The all-parallel generic (a pad, say) that makes an input of window
/// `op` for it alone, when the window's first `planes` loops (its images and
/// channels) read only what the producer writes at the same indices: the
/// producer then runs plane by plane inside those loops, just before the
/// window reads the plane, while it is in cache. Its own inputs must be the
/// kernel's, or computed in the kernel for it alone: nothing in between may
/// overwrite them.
linalg::GenericOp CppEmitter::planeProducer(linalg::GenericOp op,
                                            unsigned &planes) {
  unsigned p = unrolledWindow(op);
  if (p < 3)
    return {};
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  Block *kernelBody = &kernel.getBody().front();
  // A kernel input, or a local the producer alone reads.
  auto settled = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return (arg && arg.getOwner() == kernelBody) || v.hasOneUse();
  };
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto producer = input->get().getDefiningOp<linalg::GenericOp>();
    if (!producer || !input->get().hasOneUse() ||
        producer.getNumDpsInits() != 1 ||
        producer.getNumParallelLoops() != producer.getNumLoops() ||
        !producer.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() ||
        !producer.getMatchingIndexingMap(producer.getDpsInitOperand(0))
             .isIdentity() ||
        !llvm::all_of(producer.getDpsInputs(), settled))
      continue;
    bool settledReads = true;
    producer.getRegion().walk(
        [&](tensor::ExtractOp e) { settledReads &= settled(e.getTensor()); });
    if (!settledReads)
      continue;
    // The window's index into the plane, with its taps of one trip at 0.
    AffineMap read = op.getMatchingIndexingMap(input);
    SmallVector<AffineExpr> zeroed;
    for (unsigned d = 0; d < read.getNumDims(); ++d)
      zeroed.push_back(d >= p && ranges[d] == 1
                           ? getAffineConstantExpr(0, op.getContext())
                           : getAffineDimExpr(d, op.getContext()));
    unsigned n = 0;
    while (n + 1 < p && n < read.getNumResults() &&
           read.getResult(n).replaceDims(zeroed) ==
               getAffineDimExpr(n, op.getContext()) &&
           loopRange(producer, n) == loopRange(op, n))
      ++n;
    // Images and channels at least: fewer would leave the threads too
    // little to share at batch 1 (a channel multiplier reads c floordiv M).
    if (n < 2 || n == producer.getNumLoops())
      continue;
    planes = n;
    return producer;
  }
  return {};
}

/// Whether `e` reads only dims `from` and after (a window's taps).
static bool onlyDimsFrom(AffineExpr e, unsigned from) {
  bool only = true;
  e.walk([&](AffineExpr x) {
    if (auto d = dyn_cast<AffineDimExpr>(x))
      only &= d.getPosition() >= from;
  });
  return only;
}

/// The stride S of window `op`'s innermost output loop in its read of
/// `input`'s last dim, when that read is (output * S + taps) with S > 1,
/// the dim static and the loop at least kSplitPlaneWidth long: the plane is
/// then stored split by S (planeSplits), so that each tap reads a
/// contiguous row instead of every S-th element. Else 0. mobilenet_v2's
/// stride-2 depthwise windows (1 thread): 56 wide 1.11x faster, 28 wide
/// 1.21x, but 14 wide 1.3x slower.
int64_t cpp::planeSplit(linalg::GenericOp op, OpOperand *input, unsigned p) {
  auto type = cast<RankedTensorType>(input->get().getType());
  int64_t width = op.getStaticLoopRanges()[p - 1];
  if (type.isDynamicDim(type.getRank() - 1) || ShapedType::isDynamic(width) ||
      width < kSplitPlaneWidth)
    return 0;
  auto sum = dyn_cast<AffineBinaryOpExpr>(
      op.getMatchingIndexingMap(input).getResults().back());
  if (!sum || sum.getKind() != AffineExprKind::Add)
    return 0;
  for (auto [scaled, taps] : {std::pair(sum.getLHS(), sum.getRHS()),
                              std::pair(sum.getRHS(), sum.getLHS())}) {
    auto mul = dyn_cast<AffineBinaryOpExpr>(scaled);
    if (!mul || mul.getKind() != AffineExprKind::Mul)
      continue;
    auto dim = dyn_cast<AffineDimExpr>(mul.getLHS());
    auto stride = dyn_cast<AffineConstantExpr>(mul.getRHS());
    if (dim && stride && dim.getPosition() + 1 == p && stride.getValue() >= 2 &&
        onlyDimsFrom(taps, p))
      return stride.getValue();
  }
  return 0;
}

/// Whether window `op`, whose plane `producer` makes per (image, channel),
/// can run its rows flattened: every output position of the plane computed
/// at the plane's row width, in one loop, into a per-thread buffer, and then
/// copied out without the columns past the output's width. The window must
/// read the plane at (row + taps, column + taps), with unit stride, and
/// nothing else it, its prologue or its epilogue read may depend on the
/// row or column, and its init must be its prologue's. For rows narrower
/// than kSplitPlaneWidth: the loop around the taps is then long enough to
/// vectorize well (mobilenet_v2's 14x14 depthwise windows, 1 thread: 1.54x
/// faster; 7x7: 1.45x; 28 wide and more was slower).
bool cpp::flatWindow(linalg::GenericOp op, linalg::GenericOp producer,
                     unsigned planes, Operation *prologue,
                     linalg::GenericOp epilogue) {
  unsigned p = unrolledWindow(op);
  Value plane = producer.getResult(0);
  auto type = cast<RankedTensorType>(plane.getType());
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  Type element = type.getElementType();
  if (p != planes + 2 || !prologue || type.getRank() != planes + 2 ||
      type.isDynamicDim(planes) || type.isDynamicDim(planes + 1) ||
      ShapedType::isDynamic(ranges[p - 2]) ||
      ShapedType::isDynamic(ranges[p - 1]) ||
      ranges[p - 1] >= kSplitPlaneWidth ||
      element != getElementTypeOrSelf(op.getResult(0)) ||
      (epilogue && element != getElementTypeOrSelf(epilogue.getResult(0))))
    return false;
  MLIRContext *ctx = op.getContext();
  auto rowCol = [&](AffineExpr e, unsigned d) {
    return onlyDimsFrom(
        simplifyAffineExpr(e - getAffineDimExpr(d, ctx), op.getNumLoops(), 0),
        p);
  };
  auto independent = [&](linalg::GenericOp g, Value skip) {
    bool ok = true;
    g.getRegion().walk([&](Operation *inner) {
      ok &= !isa<linalg::IndexOp, tensor::ExtractOp>(inner);
    });
    for (OpOperand *input : g.getDpsInputOperands())
      if (input->get() != skip && input->get() != plane)
        for (AffineExpr e : g.getMatchingIndexingMap(input).getResults())
          ok &= !e.isFunctionOfDim(p - 2) && !e.isFunctionOfDim(p - 1);
    return ok;
  };
  for (OpOperand *input : op.getDpsInputOperands())
    if (input->get() == plane) {
      auto read = op.getMatchingIndexingMap(input).getResults();
      if (!rowCol(read[planes], p - 2) || !rowCol(read[planes + 1], p - 1))
        return false;
    }
  auto generic = dyn_cast_or_null<linalg::GenericOp>(prologue);
  return independent(op, {}) && (!generic || independent(generic, {})) &&
         (!epilogue || independent(epilogue, op.getResult(0)));
}

bool CppEmitter::absorbed(Operation *op) {
  if (inRows(op)) // emitted with the last of them (CppRows.cpp)
    return true;
  if (op->getNumResults() != 1 || !op->getResult(0).hasOneUse())
    return false;
  // A GEMM is emitted with its epilogue (CppGemm.cpp).
  if (auto gemm = dyn_cast<linalg::GenericOp>(op); gemm && gemmEpilogue(gemm))
    return true;
  Operation *user = *op->getUsers().begin();
  if (auto window = dyn_cast<linalg::GenericOp>(user)) {
    if (windowPrologue(window) == op || rowsConvPad(window) == op)
      return true;
    unsigned planes = 0;
    if (planeProducer(window, planes) == op)
      return true;
  }
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    for (OpOperand *input : generic.getDpsInputOperands())
      if (auto window = input->get().getDefiningOp<linalg::GenericOp>())
        if (windowEpilogue(window) == generic)
          return true;
  return false;
}

/// Declares the accumulator `acc` of the element window `op`'s loops are at,
/// set to the window's init: its prologue (a fill or a generic) or, without
/// one, the output's element. The taps then add into a register, not into
/// memory through the output's pointer (mobilenet_v2's 3x3 depthwise window
/// at 56x56: 1.2x faster with it).
LogicalResult CppEmitter::emitWindowPrologue(linalg::GenericOp op,
                                             Operation *prologue,
                                             const std::string &indent,
                                             const std::string &acc) {
  Value result = op.getResult(0);
  os << indent << typeName(getElementTypeOrSelf(result.getType())) << " "
     << acc;
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(prologue)) {
    os << " = " << scalarOf(fill.getInputs()[0]) << ";\n";
    return success();
  }
  if (!prologue) {
    os << " = " << bufferFor(result) << "["
       << index(result, op.getMatchingIndexingMap(op.getDpsInitOperand(0)))
       << "];\n";
    return success();
  }
  os << ";\n";
  return emitGenericBody(cast<linalg::GenericOp>(prologue), indent, acc);
}

/// Window `op`'s epilogue, if any, applied to its accumulator `acc`; else
/// `acc` stored as the window's element.
LogicalResult CppEmitter::emitWindowEpilogue(linalg::GenericOp op,
                                             linalg::GenericOp epilogue,
                                             const std::string &indent,
                                             const std::string &acc) {
  Value result = op.getResult(0);
  if (!epilogue) {
    os << indent << bufferFor(result) << "["
       << index(result, op.getMatchingIndexingMap(op.getDpsInitOperand(0)))
       << "] = " << acc << ";\n";
    return success();
  }
  reads[result] = acc;
  LogicalResult ok = emitGenericBody(epilogue, indent);
  reads.erase(result);
  return ok;
}

/// One buffer of one plane of `plane` per thread, allocated before the
/// threads start: a failed allocation inside them could not reach the caller.
/// A split plane has two: the producer's, and the split copy (unused when
/// the producer is a pad, which writes the plane split).
void CppEmitter::declarePlanes(Value plane) {
  std::string name = bufferFor(plane);
  os << llvm::formatv(
      "  const int64_t {0}_stride = (std::max<int64_t>({1}, 1) + 15) / 16 * "
      "16;\n"
      "  kiln_scratch {0}_owner(sizeof({2}) * {0}_stride * {3}"
      "omp_get_max_threads());\n",
      name, numElements(plane), typeName(getElementTypeOrSelf(plane.getType())),
      planeSplits.count(plane) ? "2 * " : "");
}

/// The loops of `producer` after its first `planes`, which the caller has
/// opened: one plane of it, in the thread's buffer.
LogicalResult CppEmitter::emitPlane(linalg::GenericOp producer, unsigned planes,
                                    std::string indent) {
  os << indent << "// linalg.generic: " << iteratorList(producer)
     << ", one plane\n";
  Value plane = producer.getResult(0);
  std::string name = bufferFor(plane);
  std::string type = typeName(getElementTypeOrSelf(plane.getType()));
  // The producer writes the plane as is; a split plane is copied after.
  int64_t split = planeSplits.lookup(plane);
  planeSplits.erase(plane);
  os << llvm::formatv("{0}{1} *__restrict {2} = static_cast<{1} *>({2}_owner."
                      "data) + omp_get_thread_num() * {3}{2}_stride;\n",
                      indent, type, name, split ? "2 * " : "");
  std::optional<PadMatch> pad = matchPad(producer);
  if (pad && emitPadPlane(producer, *pad, planes, name, split, indent)) {
    // A pad writes the plane split already.
    if (split) {
      planeSplits[plane] = split;
      return success();
    }
    indent += std::string(2 * (producer.getNumLoops() - planes), ' ');
  } else {
    for (unsigned d = planes; d < producer.getNumLoops(); ++d) {
      std::string size = loopRange(producer, d);
      if (size.empty())
        return producer.emitOpError()
               << "has a dynamic loop the kernel emitter cannot size";
      os << indent << forLoop(d, size)
         << (d + 1 == producer.getNumLoops() ? " {\n" : "\n");
      indent += "  ";
    }
    if (failed(emitGenericBody(producer, indent)))
      return failure();
    os << indent.substr(2) << "}\n";
  }
  if (!split)
    return success();
  // The window reads the split copy, row by row: [rows][split][ceil(W/split)].
  planeSplits[plane] = split;
  auto shape = cast<RankedTensorType>(plane.getType()).getShape();
  indent = indent.substr(2 * (producer.getNumLoops() - planes));
  std::string rows = "int64_t(1)";
  for (unsigned i = planes; i + 1 < shape.size(); ++i)
    rows += " * " + dimExpr(plane, i);
  int64_t width = shape.back(), half = llvm::divideCeil(width, split);
  std::string copy = nameBuffer(plane);
  os << llvm::formatv(
      "{0}{1} *__restrict {2} = {3} + {3}_stride;\n"
      "{0}for (int64_t r = 0; r < {4}; ++r)\n"
      "{0}  for (int64_t q = 0; q < {5}; ++q)\n"
      "{0}    for (int64_t h = 0; h < ({6} - q + {7}) / {5}; ++h)\n"
      "{0}      {2}[(r * {5} + q) * {8} + h] = {3}[r * {6} + h * {5} + q];\n",
      indent, type, copy, name, rows, split, width, split - 1, half);
  return success();
}

/// A flatWindow: per plane, the producer's plane, then every output
/// position at the plane's row width W in one loop (row 0, column d), whose
/// taps read the plane at d + tap offsets; then the first columns of each
/// row copied out. The positions past a row's end read into the next row,
/// and those of the last row up to W past the plane, where the buffer holds
/// zeros: their outputs are dropped.
LogicalResult CppEmitter::emitFlatWindow(linalg::GenericOp op,
                                         linalg::GenericOp producer,
                                         unsigned planes, Operation *prologue,
                                         linalg::GenericOp epilogue) {
  Value plane = producer.getResult(0), result = op.getResult(0);
  Value last = epilogue ? epilogue.getResult(0) : result;
  unsigned p = planes + 2;
  ArrayRef<int64_t> shape = cast<RankedTensorType>(plane.getType()).getShape();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t width = shape.back(), size = shape[planes] * width;
  int64_t flat = ranges[p - 2] * width;
  std::string name = bufferFor(plane), out = bufferFor(last);
  std::string at =
      index(last, AffineMap::getMultiDimIdentityMap(p, op.getContext()));
  std::string type = typeName(getElementTypeOrSelf(plane.getType()));
  os << llvm::formatv("  const int64_t {0}_stride = ({1} + 15) / 16 * 16;\n"
                      "  kiln_scratch {0}_owner(sizeof({2}) * {0}_stride * "
                      "omp_get_max_threads());\n",
                      name, size + width + flat, type);
  os << "  // linalg.generic: " << iteratorList(op) << ", rows flattened\n";
  emitParallelFor(op, planes);
  std::string indent = "  ";
  for (unsigned d = 0; d < planes; ++d) {
    os << indent << forLoop(d, loopRange(op, d))
       << (d + 1 == planes ? " {\n" : "\n");
    indent += "  ";
  }
  if (failed(emitPlane(producer, planes, indent)))
    return failure();
  std::string rows = fresh("t");
  os << llvm::formatv("{0}for (int64_t i = {1}; i < {2}; ++i)\n"
                      "{0}  {3}[i] = 0;\n"
                      "{0}{4} *__restrict {5} = {3} + {2};\n",
                      indent, size, size + width, name, type, rows);
  // The prologue, window and epilogue write the rows buffer, at row 0.
  SmallVector<Value> values = {op.getDpsInits()[0], result};
  if (epilogue)
    values.push_back(last);
  SmallVector<std::string> saved;
  for (Value v : values) {
    saved.push_back(bufferFor(v));
    bindBuffer(v, rows);
    planeDims[v] = planes;
    planeRows[v] = width;
  }
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    dimNames.push_back(d == p - 2 ? "0" : "d" + std::to_string(d));
  std::string column = "d" + std::to_string(p - 1);
  os << llvm::formatv("{0}for (int64_t {1} = 0; {1} < {2}; ++{1}) {{\n", indent,
                      column, flat);
  std::string inner = indent + "  ", acc = fresh("acc");
  if (failed(emitWindowPrologue(op, prologue, inner, acc)))
    return failure();
  std::string taps = inner;
  for (unsigned d = p; d < op.getNumLoops(); ++d) {
    os << taps << forLoop(d, loopRange(op, d))
       << (d + 1 == op.getNumLoops() ? " {\n" : "\n");
    taps += "  ";
  }
  if (failed(emitGenericBody(op, taps, acc)))
    return failure();
  os << inner << "}\n";
  if (failed(emitWindowEpilogue(op, epilogue, inner, acc)))
    return failure();
  os << indent << "}\n";
  dimNames.clear();
  for (auto [v, buffer] : llvm::zip(values, saved)) {
    bindBuffer(v, buffer);
    planeDims.erase(v);
    planeRows.erase(v);
  }
  std::string row = "d" + std::to_string(p - 2);
  os << llvm::formatv("{0}for (int64_t {1} = 0; {1} < {2}; ++{1})\n"
                      "{0}  for (int64_t {3} = 0; {3} < {4}; ++{3})\n"
                      "{0}    {5}[{6}] = {7}[{1} * {8} + {3}];\n",
                      indent, row, ranges[p - 2], column, ranges[p - 1], out,
                      at, rows, width);
  os << "  }\n";
  return success();
}
