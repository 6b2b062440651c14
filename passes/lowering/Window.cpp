//===- Window.cpp - conv and max_pool to linalg.generic -------------------===//
//
// Both pad their input first (zeros for conv, -inf for max_pool, plus extra
// end padding for ceil_mode windows), then reduce over sliding windows with
// one generic. Iteration order [n, channel, reduction dims..., output
// spatial...] keeps the output's innermost dim innermost, so the inner loop
// is a unit-stride (stride-1 conv) multiply-add that vectorizes; a small
// conv window instead loops its taps innermost (kUnrolledTaps).
// Input index along spatial dim i: o_i * stride_i + k_i * dilation_i.
// Grouped conv: input channel (m floordiv M/group) * C/group + c.
// An f32 conv without groups gathers its windows first (im2col: col[n, c,
// k..., o...] = input[n, c, o * s + k * d]), so that the reduction reads
// plain dims and is a GEMM (W as [M, C*K], col as [C*K, O]) that the
// backends hand to a library (codegen/Gemm.h); a 1x1 window with stride 1
// and no padding is one already, on the input itself. But a 3x3 stride-1
// conv on the CPU with a constant weight and planes at least
// kWinogradMinWidth wide (or sizes known only at run time, which rule out
// im2col) stays a direct window, which the C++ kernel runs as Winograd
// F(2x2, 3x3); its input is padded to whole 2x2 output tiles where the
// planes are static. A conv over a few input channels (a stem) on the CPU
// stays a direct window too, which the C++ kernel runs by output rows. On
// a cuda device a 2-D f32 conv of static shapes (not depthwise, not a 1x1
// GEMM) stays a direct window [n, m, c, kh, kw, oh, ow] for cuDNN, its
// bias added after the sums. The conv's generic names the choice
// (kConvKind, ir/KilnDialect.h), which the code generators follow
// (codegen/Gemm.h checks the form).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/KernelShapes.h"
#include "passes/lowering/Lowering.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln;

bool lowering::isWindowFamily(Operation *op) {
  return isa<ConvOp, MaxPoolOp, AvgPoolOp>(op);
}

namespace {
using Iter = utils::IteratorType;

// A direct conv window of at most kUnrolledTaps taps (input channels per
// group x kernel elements) loops as [n, channel, o..., reductions...]: the
// taps, innermost with constant trip counts, unroll completely, so each
// output sums in a register and the output's last dim is the vectorized
// loop (codegen leaves it out of the threads' collapse). Larger windows keep
// [n, channel, reductions..., o...], and so do pools, but for strided max
// pools at least kSplitPlaneWidth wide.

// Moves the reduction dims [first, firstO) of `maps` and `iterators` after
// the r output spatial dims that follow them; each output's sum keeps its
// order.
void reductionsInnermost(SmallVector<AffineMap> &maps,
                         SmallVector<Iter> &iterators, int64_t first,
                         int64_t firstO, int64_t r) {
  int64_t numDims = iterators.size();
  SmallVector<int64_t> order; // new position -> old dim
  for (int64_t i = 0; i < first; ++i)
    order.push_back(i);
  for (int64_t i = 0; i < r; ++i)
    order.push_back(firstO + i);
  for (int64_t i = first; i < firstO; ++i)
    order.push_back(i);
  MLIRContext *ctx = maps.front().getContext();
  SmallVector<AffineExpr> rename(numDims);
  SmallVector<Iter> reordered(numDims);
  for (auto [to, from] : llvm::enumerate(order)) {
    rename[from] = getAffineDimExpr(to, ctx);
    reordered[to] = iterators[from];
  }
  for (AffineMap &map : maps)
    map = map.replaceDimsAndSymbols(rename, {}, numDims, 0);
  iterators = reordered;
}

// The taps of a window of `kernel` over `channels` inputs, or -1 when a
// size is dynamic.
int64_t taps(ArrayRef<int64_t> kernel, int64_t channels) {
  int64_t n = channels;
  for (int64_t k : kernel)
    n = ShapedType::isDynamic(k) || ShapedType::isDynamic(n) ? -1 : n * k;
  return n;
}

// A 3x3 conv on planes narrower than this runs through im2col. resnet18's
// layer4 (7x7, 16 tiles per image) measured even at batch 1 and made the
// model 0.80x at batch 8, where the chunks of images make wider GEMMs
// (docs/performance-log.md, step 21).
constexpr int64_t kWinogradMinWidth = 7;

// Whether `op` (a conv whose im2col GEMM would run on the CPU) runs as
// Winograd F(2x2, 3x3) instead: see the file comment.
bool winogradConv(ConvOp op, Value weight, RankedTensorType wType,
                  RankedTensorType outType) {
  if (!runsCppKernels(getDevice(op.getResult().getType())))
    return false;
  if (wType.getRank() != 4 || wType.getDimSize(2) != 3 ||
      wType.getDimSize(3) != 3 ||
      llvm::any_of(op.getStrides(), [](int64_t s) { return s != 1; }) ||
      llvm::any_of(op.getDilations(), [](int64_t d) { return d != 1; }))
    return false;
  if (outType.isDynamicDim(2) || outType.isDynamicDim(3)) {
    // Planes known only at run time rule out im2col's GEMM, so the
    // alternative is loops: Winograd unless the taps unroll (8 to 24
    // channels at 56x56 took 0.086 ms as Winograd against 0.348 by loops on
    // a 2-core AVX-512 Xeon).
    if (wType.getDimSize(1) * 9 <= kUnrolledTaps)
      return false;
  } else if (wType.getDimSize(0) < 16 || wType.getDimSize(1) < 16 ||
             outType.getDimSize(2) < kWinogradMinWidth ||
             outType.getDimSize(3) < kWinogradMinWidth) {
    return false;
  }
  // The weight must be a constant input of the kernel: kiln-pack-weights
  // transforms it ahead of time.
  return bool(boundConstant(weight));
}

// Whether the C++ kernel runs `op` by output rows (KernelShapes.h,
// kRowsConvChannels): a 2-D window without groups of kRowsConvMinTaps or
// more over a few input channels with output rows at least
// kRowsConvMinWidth wide, or one in groups of a static weight
// (groupedRowsConvSizes); strides 1 or 2, no dilation. On the CPU such a
// conv runs so instead of its im2col GEMM; on a cuda device its CPU twin
// does.
bool rowsConv(ConvOp op, RankedTensorType wType, RankedTensorType outType) {
  if (wType.getRank() != 4)
    return false;
  bool stem = op.getGroup() == 1 &&
              rowsConvSizes(wType.getDimSize(1), wType.getDimSize(2),
                            wType.getDimSize(3), outType.getDimSize(3));
  bool grouped = op.getGroup() > 1 && wType.hasStaticShape() &&
                 wType.getDimSize(0) % op.getGroup() == 0 &&
                 groupedRowsConvSizes(wType.getDimSize(1),
                                      wType.getDimSize(0) / op.getGroup(),
                                      wType.getDimSize(2), wType.getDimSize(3));
  return (stem || grouped) &&
         llvm::all_of(op.getStrides(),
                      [](int64_t s) { return s == 1 || s == 2; }) &&
         llvm::all_of(op.getDilations(), [](int64_t d) { return d == 1; });
}

// Whether `op` (an f32 conv) runs as a batch of GEMMs, one per group, on
// the CPU: groups of several input channels (a depthwise conv has its own
// kernels), more than one output channel per group (with one, g * 1 + m
// folds to g + m, which neither linalg's loop sizes nor codegen/Gemm.h
// read as a pair: fuzz seed 29194 found such 1-D convs miscompiled) and a
// static weight. Against the direct loops they ran as
// before, on 2 AVX-512 cores, regnet_x_400mf (16 channels per group) went
// from 16.5 to 9.9 ms at batch 1 and 107 to 55 at batch 8, regnet_y_400mf
// 0.78x and resnext50_32x4d 0.88x (docs/performance-log.md, step 61).
bool groupedGemmConv(ConvOp op, RankedTensorType wType,
                     RankedTensorType outType) {
  return op.getGroup() > 1 && outType.getElementType().isF32() &&
         wType.hasStaticShape() && wType.getDimSize(1) > 1 &&
         wType.getDimSize(0) / op.getGroup() > 1 &&
         runsCppKernels(getDevice(op.getResult().getType()));
}

// Whether `op` runs on a cuda device through cuDNN (codegen/Gemm.h's
// matchLibraryConv): a 2-D f32 conv of static shapes but a depthwise one
// (one input channel per group: its generated loop of 9 or so taps per
// output suits it) and a 1x1 stride-1 unpadded one without groups (a GEMM
// on the input itself, for cuBLAS).
bool cudnnConv(ConvOp op, RankedTensorType inType, RankedTensorType wType,
               RankedTensorType outType) {
  DeviceAttr device = getDevice(op.getResult().getType());
  if (!device || !kindOf(device)->libraryConvs ||
      !outType.getElementType().isF32() || wType.getRank() != 4 ||
      !inType.hasStaticShape() || !wType.hasStaticShape() ||
      !outType.hasStaticShape() || op.getGroup() < 1 ||
      (op.getGroup() > 1 && wType.getDimSize(1) == 1))
    return false;
  bool pointwise =
      op.getGroup() == 1 && wType.getDimSize(2) == 1 &&
      wType.getDimSize(3) == 1 &&
      llvm::all_of(op.getStrides(), [](int64_t s) { return s == 1; }) &&
      llvm::all_of(op.getPads(), [](int64_t p) { return p == 0; });
  return !pointwise;
}

// Spatial input exprs: o_i * s_i + k_i * d_i.
SmallVector<AffineExpr> windowExprs(OpBuilder &b, ArrayRef<int64_t> strides,
                                    ArrayRef<int64_t> dilations, int64_t firstK,
                                    int64_t firstO) {
  SmallVector<AffineExpr> exprs;
  for (size_t i = 0; i < strides.size(); ++i)
    exprs.push_back(b.getAffineDimExpr(firstO + i) * strides[i] +
                    b.getAffineDimExpr(firstK + i) * dilations[i]);
  return exprs;
}

// A conv's body: acc + in * w.
void multiplyAccumulate(OpBuilder &nb, Location l, ValueRange a) {
  Value prod = nb.create<arith::MulFOp>(l, a[0], a[1]);
  nb.create<linalg::YieldOp>(l, Value(nb.create<arith::AddFOp>(l, a[2], prod)));
}

// col[n, c, k..., o...] = in[n, c, o * s + k * d] for a window of `wType`'s
// spatial dims and the output's; with `groups` > 1 (of static channel
// counts), col[n, g, c, k..., o...] = in[n, g * C/groups + c, ...].
Value im2col(OpBuilder &b, Location loc, Value in, RankedTensorType wType,
             RankedTensorType outType, ArrayRef<int64_t> strides,
             ArrayRef<int64_t> dilations, int64_t groups = 1) {
  int64_t r = wType.getRank() - 2;
  auto inType = cast<RankedTensorType>(in.getType());
  int64_t lead = groups > 1 ? 3 : 2; // n, [g,] c
  SmallVector<int64_t> shape = {inType.getDimSize(0), inType.getDimSize(1)};
  // A group's channels from the weight: the input's may be known only at
  // run time (the same number, as the kernel's dims function checks).
  if (groups > 1)
    shape = {inType.getDimSize(0), groups, wType.getDimSize(1)};
  llvm::append_range(shape, wType.getShape().drop_front(2));
  llvm::append_range(shape, outType.getShape().drop_front(2));
  auto colType = RankedTensorType::get(shape, inType.getElementType());
  Value empty = lowering::emptyTensor(b, loc, colType, [&](int64_t i) {
    return i < lead && colType.isDynamicDim(i) ? lowering::dimOf(b, loc, in, i)
                                               : Value();
  });
  // Dims: n = 0, [g = 1,] c = lead - 1, k = lead.., o = lead + r..
  SmallVector<AffineExpr> inExprs = {b.getAffineDimExpr(0),
                                     b.getAffineDimExpr(1)};
  if (groups > 1)
    inExprs[1] = b.getAffineDimExpr(1) * shape[2] + b.getAffineDimExpr(2);
  llvm::append_range(inExprs,
                     windowExprs(b, strides, dilations, lead, lead + r));
  int64_t rank = colType.getRank();
  MLIRContext *ctx = b.getContext();
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{colType}, ValueRange{in}, ValueRange{empty},
          SmallVector<AffineMap>{AffineMap::get(rank, 0, inExprs, ctx),
                                 b.getMultiDimIdentityMap(rank)},
          SmallVector<Iter>(rank, Iter::parallel),
          [](OpBuilder &nb, Location l, ValueRange a) {
            nb.create<linalg::YieldOp>(l, a[0]);
          })
      .getResult(0);
}

Value lowerConv(OpBuilder &b, ConvOp op, ValueRange operands) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  auto wType = cast<RankedTensorType>(operands[1].getType());
  int64_t r = wType.getRank() - 2, cg = wType.getDimSize(1),
          mg = op.getGroup() > 0 ? wType.getDimSize(0) / op.getGroup() : 0;
  // Groups read the input's channels through the group index, not as a
  // loop dim of their own: nothing else checks that a channel count known
  // only at run time is the one the weight needs.
  auto inType = cast<RankedTensorType>(operands[0].getType());
  if (op.getGroup() > 1 && inType.isDynamicDim(1) && !wType.isDynamicDim(1)) {
    int64_t channels = op.getGroup() * cg;
    Value same = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq, lowering::dimOf(b, loc, operands[0], 1),
        b.create<arith::ConstantIndexOp>(loc, channels));
    b.create<cf::AssertOp>(loc, same,
                           b.getStringAttr("conv input needs " +
                                           Twine(channels) + " channels (" +
                                           Twine(op.getGroup()) +
                                           " groups of " + Twine(cg) + ")"));
  }
  ArrayRef<int64_t> pads = op.getPads();
  SmallVector<int64_t> begin = {0, 0}, end = {0, 0};
  begin.append(pads.begin(), pads.begin() + r);
  end.append(pads.begin() + r, pads.end());
  bool dense = outType.getElementType().isF32() && op.getGroup() == 1 &&
               wType.hasStaticShape();
  bool staticPlanes =
      llvm::none_of(outType.getShape().drop_front(2), ShapedType::isDynamic);
  // A conv for cuDNN: a direct window that starts from zeros.
  bool cudnn = cudnnConv(op, cast<RankedTensorType>(operands[0].getType()),
                         wType, outType);
  // Groups of several channels on the CPU: a batch of GEMMs, one per group,
  // over im2col's windows (a group's channels lie together in them).
  bool grouped = groupedGemmConv(op, wType, outType) && !cudnn && staticPlanes;
  bool gemm = grouped || (dense && staticPlanes && !cudnn);
  bool winograd =
      dense && !cudnn && winogradConv(op, operands[1], wType, outType);
  if (winograd) {
    // A direct window: its taps (9 per channel, 16 channels or more) are too
    // many to unroll, so its loops stay [n, m, c, kh, kw, oh, ow], the form
    // matchWinograd takes. Whole tiles where the planes are static: one more
    // row (column) of zeros under an odd output size, which only the
    // Winograd input transform reads (at run-time sizes it reads the last
    // tile's rows and columns that exist).
    gemm = false;
    if (staticPlanes) {
      end[2] += outType.getDimSize(2) % 2;
      end[3] += outType.getDimSize(3) % 2;
    }
  }
  // A stem conv, or one of small groups, by output rows: a direct window
  // with its taps outside.
  bool rows = gemm && !winograd &&
              runsCppKernels(getDevice(op.getResult().getType())) &&
              rowsConv(op, wType, outType);
  if (rows)
    gemm = grouped = false;
  Value input = lowering::padTensor(b, loc, operands[0], begin, end, 0);

  // Dims: n = 0, m = 1, c = 2, k = 3.., o = 3 + r..
  int64_t numDims = 3 + 2 * r;
  auto d = [&](int64_t i) { return b.getAffineDimExpr(i); };
  MLIRContext *ctx = b.getContext();
  // Depthwise (group 0) or groups of channel counts known only at run time.
  bool dynamicGroups =
      op.getGroup() == 0 ||
      (op.getGroup() != 1 && (wType.isDynamicDim(0) || wType.isDynamicDim(1)));
  AffineExpr channel = op.getGroup() == 1 || dynamicGroups
                           ? d(2)
                           : d(1).floorDiv(mg) * cg + d(2);
  SmallVector<AffineExpr> inExprs = {d(0), channel};
  bool pointwise =
      llvm::all_of(wType.getShape().drop_front(2),
                   [](int64_t k) { return k == 1; }) &&
      llvm::all_of(op.getStrides(), [](int64_t s) { return s == 1; }) &&
      input == operands[0];
  if (gemm && pointwise) {
    for (int64_t i = 0; i < r; ++i)
      inExprs.push_back(d(3 + r + i));
  } else if (gemm) {
    input = im2col(b, loc, input, wType, outType, op.getStrides(),
                   op.getDilations(), grouped ? op.getGroup() : 1);
    for (int64_t i = 0; i < 2 * r; ++i)
      inExprs.push_back(d(3 + i));
  } else {
    llvm::append_range(
        inExprs, windowExprs(b, op.getStrides(), op.getDilations(), 3, 3 + r));
  }
  SmallVector<AffineExpr> wExprs = {d(1), d(2)}, outExprs = {d(0), d(1)};
  for (int64_t i = 0; i < r; ++i) {
    wExprs.push_back(d(3 + i));
    outExprs.push_back(d(3 + r + i));
  }
  // The bias starts the sums of a direct conv. A GEMM (or Winograd, or a
  // conv by rows) starts from zeros (the library overwrites them) and the
  // bias is added after it, where the epilogue (an activation) fuses with
  // it.
  int64_t rank = outType.getRank();
  auto addBias = [&](Value sums) -> Value {
    Value empty = lowering::emptyResult(b, op, operands);
    bool init = !sums;
    SmallVector<Value> ins = {operands[2]};
    SmallVector<AffineMap> maps = {AffineMap::get(rank, 0, {d(1)}, ctx)};
    if (!init) {
      ins.push_back(sums);
      maps.push_back(b.getMultiDimIdentityMap(rank));
    }
    maps.push_back(b.getMultiDimIdentityMap(rank));
    return b
        .create<linalg::GenericOp>(
            loc, TypeRange{outType}, ins, ValueRange{empty}, maps,
            SmallVector<Iter>(rank, Iter::parallel),
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value v = init ? a[0] : nb.create<arith::AddFOp>(l, a[1], a[0]);
              nb.create<linalg::YieldOp>(l, v);
            })
        .getResult(0);
  };
  if (grouped) {
    // Loops [n, g, m, c, k..., o...]: sums[n, g, m, o...] += w[g * mg + m,
    // c, k...] * col[n, g, c, k..., o...] (or in[n, g * cg + c, o...] for a
    // 1x1 window on the input itself), a batch [n, g] of [mg] x [o...]
    // products over [c, k...] whose weight is the same for every image
    // (codegen/Gemm.h reads the weight's flattened pair as [g, m]). Every
    // loop is some operand's plain dim, as linalg needs; the output's
    // channel m = g * mg + m' is read back by the generic after, which adds
    // the bias (or copies).
    int64_t groups = op.getGroup(), numLoops = 4 + 2 * r;
    SmallVector<int64_t> sumsShape = {outType.getDimSize(0), groups, mg};
    llvm::append_range(sumsShape, outType.getShape().drop_front(2));
    auto sumsType = RankedTensorType::get(sumsShape, outType.getElementType());
    Value sumsInit = lowering::fill(
        b, loc,
        lowering::emptyTensor(b, loc, sumsType,
                              [&](int64_t i) {
                                return i == 0 && sumsType.isDynamicDim(0)
                                           ? lowering::dimOf(b, loc,
                                                             operands[0], 0)
                                           : Value();
                              }),
        0);
    SmallVector<AffineExpr> inAt = {d(0)}, wAt = {d(1) * mg + d(2), d(3)},
                            sumsAt = {d(0), d(1), d(2)};
    if (pointwise)
      inAt.push_back(d(1) * cg + d(3));
    else
      llvm::append_range(inAt, SmallVector<AffineExpr>{d(1), d(3)});
    for (int64_t i = 0; i < r; ++i) {
      if (!pointwise)
        inAt.push_back(d(4 + i));
      wAt.push_back(d(4 + i));
      sumsAt.push_back(d(4 + r + i));
    }
    for (int64_t i = 0; i < r; ++i)
      inAt.push_back(d(4 + r + i));
    SmallVector<Iter> loops(numLoops, Iter::parallel);
    for (int64_t i = 3; i < 4 + r; ++i)
      loops[i] = Iter::reduction;
    auto conv = b.create<linalg::GenericOp>(
        loc, TypeRange{sumsType}, ValueRange{input, operands[1]},
        ValueRange{sumsInit},
        SmallVector<AffineMap>{AffineMap::get(numLoops, 0, inAt, ctx),
                               AffineMap::get(numLoops, 0, wAt, ctx),
                               AffineMap::get(numLoops, 0, sumsAt, ctx)},
        loops, multiplyAccumulate);
    conv->setAttr(kConvKind, b.getStringAttr("gemm"));
    // out[n, m, o...] = sums[n, m floordiv mg, m mod mg, o...] (+ b[m]).
    SmallVector<AffineExpr> back = {d(0), d(1).floorDiv(mg), d(1) % mg};
    for (int64_t i = 0; i < r; ++i)
      back.push_back(d(2 + i));
    SmallVector<Value> ins = {conv.getResult(0)};
    SmallVector<AffineMap> maps = {AffineMap::get(rank, 0, back, ctx)};
    if (operands.size() == 3) {
      ins.push_back(operands[2]);
      maps.push_back(AffineMap::get(rank, 0, {d(1)}, ctx));
    }
    maps.push_back(b.getMultiDimIdentityMap(rank));
    bool bias = operands.size() == 3;
    return b
        .create<linalg::GenericOp>(
            loc, TypeRange{outType}, ins,
            ValueRange{lowering::emptyResult(b, op, operands)}, maps,
            SmallVector<Iter>(rank, Iter::parallel),
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value v = bias ? nb.create<arith::AddFOp>(l, a[0], a[1]) : a[0];
              nb.create<linalg::YieldOp>(l, v);
            })
        .getResult(0);
  }
  bool biasAfter = (gemm || winograd || rows || cudnn) && operands.size() == 3;
  Value init =
      operands.size() == 3 && !biasAfter
          ? addBias(Value())
          : lowering::fill(b, loc, lowering::emptyResult(b, op, operands), 0);
  SmallVector<Iter> iterators(numDims, Iter::parallel);
  for (int64_t i = 2; i < 3 + r; ++i)
    iterators[i] = Iter::reduction;
  SmallVector<AffineMap> maps = {AffineMap::get(numDims, 0, inExprs, ctx),
                                 AffineMap::get(numDims, 0, wExprs, ctx),
                                 AffineMap::get(numDims, 0, outExprs, ctx)};
  int64_t n = taps(wType.getShape().drop_front(2), cg);
  if (dynamicGroups) {
    // The input channel (m / mg) * cg + c is no affine expr when mg or cg
    // is known only at run time, so the input is read in the body (loop
    // sizes come from the weight and the result).
    Value groups =
        op.getGroup() == 0
            ? lowering::dimOf(b, loc, operands[0], 1)
            : b.create<arith::ConstantIndexOp>(loc, op.getGroup()).getResult();
    Value perGroupOut = b.create<arith::DivSIOp>(
        loc, lowering::dimOf(b, loc, operands[1], 0), groups);
    Value perGroupIn = lowering::dimOf(b, loc, operands[1], 1);
    ArrayRef<int64_t> strides = op.getStrides(), dilations = op.getDilations();
    // Loops [n, m, o..., c, k...]: each output sums its taps in turn.
    reductionsInnermost(maps, iterators, 2, 3 + r, r);
    auto conv = b.create<linalg::GenericOp>(
        loc, TypeRange{outType}, ValueRange{operands[1]}, ValueRange{init},
        SmallVector<AffineMap>{maps[1], maps[2]}, iterators,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          auto index = [&](int64_t i) -> Value {
            return nb.create<linalg::IndexOp>(l, i);
          };
          auto constant = [&](int64_t v) -> Value {
            return nb.create<arith::ConstantIndexOp>(l, v);
          };
          Value group = nb.create<arith::DivSIOp>(l, index(1), perGroupOut);
          SmallVector<Value> at = {
              index(0), nb.create<arith::AddIOp>(
                            l, nb.create<arith::MulIOp>(l, group, perGroupIn),
                            index(2 + r))};
          for (int64_t i = 0; i < r; ++i)
            at.push_back(nb.create<arith::AddIOp>(
                l,
                nb.create<arith::MulIOp>(l, index(2 + i), constant(strides[i])),
                nb.create<arith::MulIOp>(l, index(3 + r + i),
                                         constant(dilations[i]))));
          Value x = nb.create<tensor::ExtractOp>(l, input, at);
          Value prod = nb.create<arith::MulFOp>(l, x, a[0]);
          nb.create<linalg::YieldOp>(
              l, Value(nb.create<arith::AddFOp>(l, a[1], prod)));
        });
    conv->setAttr(kConvKind, b.getStringAttr("direct"));
    return conv.getResult(0);
  }
  bool depthwise = cg == 1 && mg == 1 && r == 2 &&
                   runsCppKernels(getDevice(op.getResult().getType()));
  if (!gemm && !winograd && !rows && !cudnn && n >= 0 &&
      n <= (depthwise ? kDepthwiseTaps : kUnrolledTaps))
    reductionsInnermost(maps, iterators, 2, 3 + r, r);
  auto conv = b.create<linalg::GenericOp>(
      loc, TypeRange{outType}, ValueRange{input, operands[1]}, ValueRange{init},
      maps, iterators, multiplyAccumulate);
  conv->setAttr(kConvKind, b.getStringAttr(gemm       ? "gemm"
                                           : winograd ? "winograd"
                                           : rows     ? "rows"
                                           : cudnn    ? "library"
                                                      : "direct"));
  // Its CPU twin (Winograd needs the transformed weight, which only cpu
  // kernels get): by rows or by loops.
  if (cudnn)
    conv->setAttr(
        kConvTwinKind,
        b.getStringAttr(rowsConv(op, wType, outType) ? "rows" : "direct"));
  Value sums = conv.getResult(0);
  return biasAfter ? addBias(sums) : sums;
}

// Reduces every window of `in` (padded with `padValue`) with `combine`,
// starting from `identity`.
Value poolWindows(OpBuilder &b, Location loc, RankedTensorType outType,
                  lowering::SizeFn outSize, Value in, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                  ArrayRef<int64_t> dilations, double padValue, double identity,
                  bool max) {
  auto inType = cast<RankedTensorType>(in.getType());
  int64_t r = kernel.size();
  SmallVector<int64_t> begin = {0, 0}, end = {0, 0};
  for (int64_t i = 0; i < r; ++i) {
    begin.push_back(pads[i]);
    // ceil_mode windows may run past the end padding: pad them too (by at
    // most stride - 1, the most they can overhang, when sizes are dynamic).
    if (outType.isDynamicDim(2 + i) || inType.isDynamicDim(2 + i)) {
      end.push_back(pads[r + i] + strides[i] - 1);
      continue;
    }
    int64_t need = (outType.getDimSize(2 + i) - 1) * strides[i] +
                   (kernel[i] - 1) * dilations[i] + 1;
    int64_t have = inType.getDimSize(2 + i) + pads[i] + pads[r + i];
    end.push_back(pads[r + i] + std::max<int64_t>(0, need - have));
  }
  Value input = lowering::padTensor(b, loc, in, begin, end, padValue);
  // Dims: n = 0, c = 1, k = 2.., o = 2 + r..
  int64_t numDims = 2 + 2 * r;
  auto d = [&](int64_t i) { return b.getAffineDimExpr(i); };
  SmallVector<AffineExpr> inExprs = {d(0), d(1)}, outExprs = {d(0), d(1)};
  llvm::append_range(inExprs, windowExprs(b, strides, dilations, 2, 2 + r));
  for (int64_t i = 0; i < r; ++i)
    outExprs.push_back(d(2 + r + i));
  SmallVector<Iter> iterators(numDims, Iter::parallel);
  for (int64_t i = 2; i < 2 + r; ++i)
    iterators[i] = Iter::reduction;
  MLIRContext *ctx = b.getContext();
  // linalg derives loop sizes from operand shapes: an unread window-shaped
  // operand gives the kernel dims theirs (as linalg's pooling ops do).
  SmallVector<AffineExpr> windowDims;
  for (int64_t i = 0; i < r; ++i)
    windowDims.push_back(d(2 + i));
  Value window =
      b.create<tensor::EmptyOp>(loc, kernel, inType.getElementType());
  SmallVector<AffineMap> maps = {AffineMap::get(numDims, 0, inExprs, ctx),
                                 AffineMap::get(numDims, 0, windowDims, ctx),
                                 AffineMap::get(numDims, 0, outExprs, ctx)};
  // Taps innermost for strided rows at least kSplitPlaneWidth wide, where
  // the emitter splits a padded plane: resnet18's 3x3 stride-2 max pool
  // then takes 0.29 ms instead of 0.61 (2 threads). Unpadded ones, read
  // unsplit, gain too (2x2 stride 2, 112 wide: 0.46 -> 0.20 ms on 1 thread;
  // 3x3: 1.3 -> 0.93), with the NaN test of kiln_maximum on the new element
  // (with it on the accumulator, strided taps innermost were 2.3x slower).
  int64_t n = taps(kernel, 1), width = outType.getShape().back();
  if (max && n >= 0 && n <= kUnrolledTaps && strides.back() > 1 &&
      !ShapedType::isDynamic(width) && width >= kSplitPlaneWidth)
    reductionsInnermost(maps, iterators, 2, 2 + r, r);
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{outType}, ValueRange{input, window},
          ValueRange{lowering::filled(b, loc, outType, identity, outSize)},
          maps, iterators,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Type t = a[0].getType();
            Value v =
                !max ? nb.create<arith::AddFOp>(l, a[2], a[0]).getResult()
                : isa<FloatType>(t)
                    ? nb.create<arith::MaximumFOp>(l, a[2], a[0]).getResult()
                : t.isUnsignedInteger()
                    ? nb.create<arith::MaxUIOp>(l, a[2], a[0]).getResult()
                    : nb.create<arith::MaxSIOp>(l, a[2], a[0]).getResult();
            nb.create<linalg::YieldOp>(l, v);
          })
      .getResult(0);
}

Value lowerMaxPool(OpBuilder &b, MaxPoolOp op, Value in) {
  // The type's lowest value (exact in a double for every integer type).
  Type element = cast<RankedTensorType>(in.getType()).getElementType();
  double lowest = isa<FloatType>(element)
                      ? -std::numeric_limits<double>::infinity()
                  : element.isUnsignedInteger()
                      ? 0.0
                      : -std::ldexp(1.0, element.getIntOrFloatBitWidth() - 1);
  return poolWindows(
      b, op.getLoc(), lowering::plainResultType(op),
      [&](int64_t i) { return lowering::resultDim(b, op, ValueRange{in}, i); },
      in, op.getKernelShape(), op.getStrides(), op.getPads(), op.getDilations(),
      lowest, lowest, /*max=*/true);
}

// Window sums divided by how many of each window's elements count: the
// window sums of ones, padded with zeros (count_include_pad: ones over the
// padded input, so only the ceil_mode overhang is left out).
Value lowerAvgPool(OpBuilder &b, AvgPoolOp op, Value in) {
  Location loc = op.getLoc();
  auto outType = lowering::plainResultType(op);
  auto inType = cast<RankedTensorType>(in.getType());
  auto outSize = [&](int64_t i) {
    return lowering::resultDim(b, op, ValueRange{in}, i);
  };
  auto sums = poolWindows(b, loc, outType, outSize, in, op.getKernelShape(),
                          op.getStrides(), op.getPads(), op.getDilations(), 0,
                          0, /*max=*/false);
  int64_t r = op.getKernelShape().size();
  SmallVector<int64_t> onesShape(inType.getShape());
  SmallVector<int64_t> pads(op.getPads()), added(2 + r, 0);
  if (op.getCountIncludePad()) {
    for (int64_t i = 0; i < r; ++i) {
      added[2 + i] = pads[i] + pads[r + i];
      if (!inType.isDynamicDim(2 + i))
        onesShape[2 + i] += added[2 + i];
    }
    pads.assign(2 * r, 0);
  }
  auto ones = lowering::filled(
      b, loc, RankedTensorType::get(onesShape, inType.getElementType()), 1,
      [&](int64_t i) -> Value {
        return b.create<arith::AddIOp>(
            loc, lowering::dimOf(b, loc, in, i),
            b.create<arith::ConstantIndexOp>(loc, added[i]));
      });
  Value counts = poolWindows(b, loc, outType, outSize, ones,
                             op.getKernelShape(), op.getStrides(), pads,
                             op.getDilations(), 0, 0, /*max=*/false);
  return lowering::buildElementwise(
      b, loc, outType, ValueRange{sums, counts},
      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return nb.create<arith::DivFOp>(l, a[0], a[1]);
      });
}
} // namespace

FailureOr<Value> lowering::lowerWindow(OpBuilder &b, Operation *op,
                                       ValueRange operands) {
  Type element = plainResultType(op).getElementType();
  if (auto pool = dyn_cast<MaxPoolOp>(op);
      pool && isa<IntegerType>(element) && !element.isInteger(1))
    return lowerMaxPool(b, pool, operands[0]);
  if (!isa<FloatType>(element))
    return op->emitOpError() << "needs a floating-point element type";
  if (auto conv = dyn_cast<ConvOp>(op))
    return lowerConv(b, conv, operands);
  if (auto avg = dyn_cast<AvgPoolOp>(op))
    return lowerAvgPool(b, avg, operands[0]);
  return lowerMaxPool(b, cast<MaxPoolOp>(op), operands[0]);
}
