//===- Gemm.cpp - contractions a GEMM library can run ---------------------===//
//
// A generic is a GEMM when its body is a multiply-accumulate and its indexing
// maps, read as lists of loop dims, split into groups that each lie
// contiguously in memory: C = batch ++ M ++ N, A = [batch] ++ M ++ K (or
// K ++ M), B = [batch] ++ K ++ N (or N ++ K), with K in the same order in A
// and B. N is the run of C's trailing dims that only B indexes, M the run
// before it that only A indexes, and the batch whatever leads C. A conv
// lowered through im2col (N = the output's spatial dims, K = channel and
// window) and a matmul with any batch dims are both such generics. When
// either input can be A, the split with the largest products wins.
//
//===----------------------------------------------------------------------===//

#include "codegen/Gemm.h"
#include "ir/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace kiln;

namespace {
using Dims = SmallVector<unsigned>;

bool isMultiplyAccumulate(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 3)
    return false;
  Operation *mul = &body.front();
  Operation *add = mul->getNextNode();
  if (!(isa<arith::MulFOp>(mul) && isa<arith::AddFOp>(add)))
    return false;
  Value a = body.getArgument(0), b = body.getArgument(1),
        acc = body.getArgument(2);
  auto pair = [](Operation *op, Value x, Value y) {
    return (op->getOperand(0) == x && op->getOperand(1) == y) ||
           (op->getOperand(0) == y && op->getOperand(1) == x);
  };
  return body.getTerminator()->getOperand(0) == add->getResult(0) &&
         pair(mul, a, b) && pair(add, acc, mul->getResult(0));
}

/// [d_i, d_j] when `e` is d_i * S + d_j (either order) with S d_j's static
/// size and the tensor dim it indexes `size` = d_i's size * S: the pair
/// flattened, as one dim of the tensor holds it in memory.
std::optional<std::pair<unsigned, unsigned>>
flattenedPair(AffineExpr e, ArrayRef<int64_t> ranges, int64_t size) {
  auto add = dyn_cast<AffineBinaryOpExpr>(e);
  if (!add || add.getKind() != AffineExprKind::Add)
    return std::nullopt;
  for (auto [scaled, inner] : {std::make_pair(add.getLHS(), add.getRHS()),
                               std::make_pair(add.getRHS(), add.getLHS())}) {
    auto mul = dyn_cast<AffineBinaryOpExpr>(scaled);
    auto j = dyn_cast<AffineDimExpr>(inner);
    if (!mul || mul.getKind() != AffineExprKind::Mul || !j)
      continue;
    auto i = dyn_cast<AffineDimExpr>(mul.getLHS());
    auto s = dyn_cast<AffineConstantExpr>(mul.getRHS());
    if (!i || !s)
      continue;
    int64_t ri = ranges[i.getPosition()], rj = ranges[j.getPosition()];
    if (!ShapedType::isDynamic(ri) && !ShapedType::isDynamic(rj) &&
        rj == s.getValue() && !ShapedType::isDynamic(size) && size == ri * rj &&
        i != j)
      return std::make_pair(i.getPosition(), j.getPosition());
  }
  return std::nullopt;
}

/// The loop dims `operand` is indexed by, in memory order, leaving out dims of
/// size 1; nullopt when an index is not a plain loop dim (constant 0 on a
/// dim of static size 1, and flattenedPair's form, excepted) or a dim
/// repeats.
std::optional<Dims> operandDims(linalg::GenericOp op, OpOperand &operand,
                                ArrayRef<int64_t> ranges) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  auto type = cast<RankedTensorType>(operand.get().getType());
  Dims dims;
  auto push = [&](unsigned d) {
    if (ranges[d] == 1)
      return true;
    if (llvm::is_contained(dims, d))
      return false;
    dims.push_back(d);
    return true;
  };
  for (auto [i, e] : llvm::enumerate(map.getResults())) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (!push(d.getPosition()))
        return std::nullopt;
      continue;
    }
    if (auto pair = flattenedPair(e, ranges, type.getDimSize(i))) {
      if (!push(pair->first) || !push(pair->second))
        return std::nullopt;
      continue;
    }
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0 || type.getDimSize(i) != 1)
      return std::nullopt;
  }
  return dims;
}

Dims concat(ArrayRef<unsigned> x, ArrayRef<unsigned> y) {
  Dims out(x.begin(), x.end());
  out.append(y.begin(), y.end());
  return out;
}

/// Splits an operand's dims into [batch] ++ (rows ++ cols | cols ++ rows),
/// where [batch] may also be a proper tail of the batch dims (`sharedLead`:
/// how many leading ones it leaves out).
bool layout(ArrayRef<unsigned> dims, ArrayRef<unsigned> batch,
            ArrayRef<unsigned> rows, ArrayRef<unsigned> cols, bool &batched,
            unsigned &sharedLead, bool &transposed) {
  Dims matrix = concat(rows, cols), transposedMatrix = concat(cols, rows);
  for (unsigned lead = 0; lead <= batch.size(); ++lead) {
    ArrayRef<unsigned> mine = batch.drop_front(lead);
    if (dims.size() != mine.size() + matrix.size() ||
        dims.take_front(mine.size()) != mine)
      continue;
    ArrayRef<unsigned> rest = dims.drop_front(mine.size());
    if (rest != ArrayRef<unsigned>(matrix) &&
        rest != ArrayRef<unsigned>(transposedMatrix))
      continue;
    transposed = rest != ArrayRef<unsigned>(matrix);
    batched = !batch.empty() && lead == 0;
    sharedLead = lead < batch.size() ? lead : 0;
    return true;
  }
  return false;
}

/// The GEMM with input `first` as A.
std::optional<GemmMatch> matchOrder(linalg::GenericOp op, unsigned first) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  std::optional<Dims> a =
      operandDims(op, *op.getDpsInputOperand(first), ranges);
  std::optional<Dims> b =
      operandDims(op, *op.getDpsInputOperand(1 - first), ranges);
  std::optional<Dims> c = operandDims(op, *op.getDpsInitOperand(0), ranges);
  if (!a || !b || !c)
    return std::nullopt;
  auto inA = [&](unsigned d) { return llvm::is_contained(*a, d); };
  auto inB = [&](unsigned d) { return llvm::is_contained(*b, d); };
  auto inC = [&](unsigned d) { return llvm::is_contained(*c, d); };
  auto iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < iterators.size(); ++d) {
    if (ranges[d] == 1)
      continue;
    bool reduction = iterators[d] == utils::IteratorType::reduction;
    if (reduction ? !(inA(d) && inB(d) && !inC(d)) : !inC(d))
      return std::nullopt;
  }
  GemmMatch g;
  g.element = getElementTypeOrSelf(op.getResult(0).getType());
  g.a = first;
  size_t end = c->size();
  while (end > 0 && inB((*c)[end - 1]) && !inA((*c)[end - 1]))
    --end;
  size_t mid = end;
  while (mid > 0 && inA((*c)[mid - 1]) && !inB((*c)[mid - 1]))
    --mid;
  ArrayRef<unsigned> cDims = *c;
  g.batch = Dims(cDims.take_front(mid));
  g.m = Dims(cDims.slice(mid, end - mid));
  g.n = Dims(cDims.drop_front(end));
  for (unsigned d : *a)
    if (!inC(d))
      g.k.push_back(d);
  if (!layout(*a, g.batch, g.m, g.k, g.batchedA, g.sharedLeadA, g.transA) ||
      !layout(*b, g.batch, g.k, g.n, g.batchedB, g.sharedLeadB, g.transB) ||
      g.k.empty() || (g.m.empty() && g.n.empty()) ||
      (g.sharedLeadA && g.sharedLeadB))
    return std::nullopt;
  auto unitDims = [&](OpOperand &operand) {
    Dims dims;
    for (AffineExpr e : op.getMatchingIndexingMap(&operand).getResults())
      if (auto d = dyn_cast<AffineDimExpr>(e);
          d && ranges[d.getPosition()] == 1)
        dims.push_back(d.getPosition());
    return dims;
  };
  Dims unitA = unitDims(*op.getDpsInputOperand(first)),
       unitB = unitDims(*op.getDpsInputOperand(1 - first)),
       unitC = unitDims(*op.getDpsInitOperand(0));
  auto perImage = [&](const Dims &mine, const Dims &other) {
    return llvm::any_of(mine, [&](unsigned d) {
      return llvm::is_contained(unitC, d) && !llvm::is_contained(other, d);
    });
  };
  g.perImageA = perImage(unitA, unitB);
  g.perImageB = perImage(unitB, unitA);
  return g;
}
} // namespace

std::optional<GemmMatch> kiln::matchGemm(linalg::GenericOp op) {
  Type t = getElementTypeOrSelf(op.getResult(0).getType());
  if (!(t.isF32() || t.isF64()) || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !op.hasPureTensorSemantics() ||
      !isMultiplyAccumulate(op))
    return std::nullopt;
  std::optional<GemmMatch> first = matchOrder(op, 0);
  std::optional<GemmMatch> second = matchOrder(op, 1);
  if (!first || !second)
    return first ? first : second;
  // Both orders can fit when a dim of size 1 left a group empty: an im2col
  // conv at batch 1 reads as 64 matrix-vector products with W's rows as the
  // batch, or as one [64 x 576] x [576 x 3136] GEMM. Take the one with both
  // M and N, then the one with fewer batch dims (larger products).
  auto rank = [](const GemmMatch &g) {
    return std::make_pair(g.m.empty() || g.n.empty(), g.batch.size());
  };
  return rank(*second) < rank(*first) ? second : first;
}

namespace {
/// A conv generic's 7 loops: d[i] is loop i's dim expr.
struct ConvLoops {
  explicit ConvLoops(MLIRContext *ctx) : ctx(ctx) {
    for (unsigned i = 0; i < 7; ++i)
      d.push_back(getAffineDimExpr(i, ctx));
  }
  AffineMap map(ArrayRef<AffineExpr> exprs) const {
    return AffineMap::get(7, 0, exprs, ctx);
  }
  MLIRContext *ctx;
  SmallVector<AffineExpr> d;
};
} // namespace

/// The indexing maps of `op` when it is an f32 multiply-accumulate over 7
/// loops of these iterators, with a static 4-D weight as input 1; else
/// none.
static std::optional<SmallVector<AffineMap>>
convMaps(linalg::GenericOp op, ArrayRef<utils::IteratorType> iterators) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 7 || !op.hasPureTensorSemantics() ||
      !getElementTypeOrSelf(op.getResult(0).getType()).isF32() ||
      !isMultiplyAccumulate(op) ||
      !llvm::equal(op.getIteratorTypesArray(), iterators))
    return std::nullopt;
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  if (!weight.hasStaticShape() || weight.getRank() != 4)
    return std::nullopt;
  return op.getIndexingMapsArray();
}

/// The strides [sh, sw] (1 or 2) and groups of `op` when it is a direct f32
/// 2-D conv with a static 4-D weight: loops [n, m, c, kh, kw, oh, ow],
/// out[n, m, oh, ow] += in[n, g * C + c, oh * sh + kh, ow * sw + kw] * w[m,
/// c, kh, kw], g = m floordiv (M / groups) (the input channel is c without
/// groups).
static std::optional<DirectConv> directConv(linalg::GenericOp op) {
  using Iter = utils::IteratorType;
  std::optional<SmallVector<AffineMap>> maps = convMaps(
      op, {Iter::parallel, Iter::parallel, Iter::reduction, Iter::reduction,
           Iter::reduction, Iter::parallel, Iter::parallel});
  ConvLoops l(op.getContext());
  ArrayRef<AffineExpr> d = l.d;
  if (!maps || (*maps)[1] != l.map({d[1], d[2], d[3], d[4]}) ||
      (*maps)[2] != l.map({d[0], d[1], d[5], d[6]}))
    return std::nullopt;
  auto in = cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  int64_t m = weight.getDimSize(0), c = weight.getDimSize(1), groups = 1;
  AffineExpr channel = d[2];
  if (in.getRank() == 4 && !in.isDynamicDim(1) && in.getDimSize(1) != c) {
    groups = c > 0 && in.getDimSize(1) % c == 0 ? in.getDimSize(1) / c : 0;
    if (groups < 2 || m % groups)
      return std::nullopt;
    channel = d[1].floorDiv(m / groups) * c + d[2];
  }
  for (int64_t sh : {1, 2})
    for (int64_t sw : {1, 2})
      if ((*maps)[0] ==
          l.map({d[0], channel, d[5] * sh + d[3], d[6] * sw + d[4]}))
        return DirectConv{sh, sw, groups};
  return std::nullopt;
}

std::optional<DepthwiseConv> kiln::matchDepthwise(linalg::GenericOp op) {
  using Iter = utils::IteratorType;
  std::optional<SmallVector<AffineMap>> maps = convMaps(
      op, {Iter::parallel, Iter::parallel, Iter::parallel, Iter::parallel,
           Iter::reduction, Iter::reduction, Iter::reduction});
  if (!maps)
    return std::nullopt;
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  ConvLoops l(op.getContext());
  ArrayRef<AffineExpr> d = l.d;
  if (weight.getDimSize(1) != 1 ||
      (*maps)[1] != l.map({d[1], d[4], d[5], d[6]}) ||
      (*maps)[2] != l.map({d[0], d[1], d[2], d[3]}))
    return std::nullopt;
  for (int64_t sh : {1, 2})
    for (int64_t sw : {1, 2})
      if ((*maps)[0] ==
          l.map({d[0], d[1] + d[4], d[2] * sh + d[5], d[3] * sw + d[6]}))
        return DepthwiseConv{weight.getDimSize(2), weight.getDimSize(3), sh,
                             sw};
  return std::nullopt;
}

std::optional<int64_t> kiln::matchMaxPool3x3(linalg::GenericOp op) {
  using Iter = utils::IteratorType;
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 6 || op.getNumReductionLoops() != 2)
    return std::nullopt;
  auto in = dyn_cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto window = dyn_cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  if (!in || !in.getElementType().isF32() || !window ||
      window.getShape() != ArrayRef<int64_t>{3, 3})
    return std::nullopt;
  // The body: the accumulator's max with the input's element.
  Block &body = op.getRegion().front();
  auto max = dyn_cast<arith::MaximumFOp>(&body.front());
  if (!max || body.getOperations().size() != 2 ||
      body.getTerminator()->getOperand(0) != max.getResult())
    return std::nullopt;
  Value acc = body.getArgument(2), elem = body.getArgument(0);
  if (!((max.getLhs() == acc && max.getRhs() == elem) ||
        (max.getLhs() == elem && max.getRhs() == acc)))
    return std::nullopt;
  // The output's dims in order, the window's, and the input at the
  // output's spatial dims times the stride plus the window's (the taps
  // innermost or, at stride 1, outside the spatial loops).
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<AffineExpr> out(maps[2].getResults()), taps(maps[1].getResults()),
      at(maps[0].getResults());
  if (out.size() != 4 || at.size() != 4 || taps.size() != 2 ||
      !maps[2].isProjectedPermutation() || !maps[1].isProjectedPermutation() ||
      at[0] != out[0] || at[1] != out[1])
    return std::nullopt;
  for (unsigned i = 0; i < 4; ++i)
    if (op.getIteratorTypesArray()[cast<AffineDimExpr>(out[i]).getPosition()] !=
        Iter::parallel)
      return std::nullopt;
  for (int64_t s : {1, 2}) {
    auto is = [&](AffineExpr e, AffineExpr o, AffineExpr t) {
      return e == o * s + t || e == t + o * s;
    };
    if (is(at[2], out[2], taps[0]) && is(at[3], out[3], taps[1]))
      return s;
  }
  return std::nullopt;
}

/// Whether the lowering chose `kind` (ir/KilnDialect.h's kConvKind) for
/// conv `op`, or for the CPU twin of a library conv (kConvTwinKind).
static bool loweredAs(linalg::GenericOp op, StringRef kind) {
  auto chosen = op->getAttrOfType<StringAttr>(kConvKind);
  auto twin = op->getAttrOfType<StringAttr>(kConvTwinKind);
  return (chosen && chosen.getValue() == kind) ||
         (twin && twin.getValue() == kind);
}

bool kiln::matchWinograd(linalg::GenericOp op) {
  if (!loweredAs(op, "winograd"))
    return false;
  std::optional<DirectConv> conv = directConv(op);
  if (!conv || conv->sh != 1 || conv->sw != 1 || conv->groups != 1)
    return false;
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  return weight.getDimSize(2) == 3 && weight.getDimSize(3) == 3;
}

std::optional<DirectConv> kiln::matchRowsConv(linalg::GenericOp op) {
  if (!loweredAs(op, "rows"))
    return std::nullopt;
  return directConv(op);
}

std::optional<ConvMatch> kiln::matchLibraryConv(linalg::GenericOp op) {
  using Iter = utils::IteratorType;
  if (!loweredAs(op, "library"))
    return std::nullopt;
  std::optional<SmallVector<AffineMap>> maps = convMaps(
      op, {Iter::parallel, Iter::parallel, Iter::reduction, Iter::reduction,
           Iter::reduction, Iter::parallel, Iter::parallel});
  if (!maps)
    return std::nullopt;
  auto in = cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  auto out = cast<RankedTensorType>(op.getResult(0).getType());
  ConvLoops l(op.getContext());
  ArrayRef<AffineExpr> d = l.d;
  if (!in.hasStaticShape() || in.getRank() != 4 || !out.hasStaticShape() ||
      (*maps)[1] != l.map({d[1], d[2], d[3], d[4]}) ||
      (*maps)[2] != l.map({d[0], d[1], d[5], d[6]}) ||
      (*maps)[0].getNumResults() != 4)
    return std::nullopt;
  int64_t channels = in.getDimSize(1), m = weight.getDimSize(0),
          cg = weight.getDimSize(1);
  // Not depthwise (one input channel per group): generated loops run it.
  if (cg <= 0 || channels % cg || m % (channels / cg) ||
      (cg == 1 && channels > 1))
    return std::nullopt;
  ConvMatch match;
  match.groups = channels / cg;
  // Each spatial index's stride and dilation: its value at oh (ow) = 1 and at
  // kh (kw) = 1, the rest 0; the map must then be exactly the one they make.
  auto at = [&](int64_t dim) {
    SmallVector<int64_t> point(7, 0);
    if (dim >= 0)
      point[dim] = 1;
    return (*maps)[0].compose(point);
  };
  SmallVector<int64_t> origin = at(-1);
  for (int64_t i = 0; i < 2; ++i) {
    match.strides[i] = at(5 + i)[2 + i] - origin[2 + i];
    match.dilations[i] = at(3 + i)[2 + i] - origin[2 + i];
    int64_t window = match.dilations[i] * (weight.getDimSize(2 + i) - 1) + 1;
    if (match.strides[i] < 1 || match.dilations[i] < 1 ||
        in.getDimSize(2 + i) < window ||
        out.getDimSize(2 + i) !=
            (in.getDimSize(2 + i) - window) / match.strides[i] + 1)
      return std::nullopt;
  }
  AffineExpr channel =
      match.groups == 1 ? d[2] : d[1].floorDiv(m / match.groups) * cg + d[2];
  if ((*maps)[0] !=
      l.map({d[0], channel, d[5] * match.strides[0] + d[3] * match.dilations[0],
             d[6] * match.strides[1] + d[4] * match.dilations[1]}))
    return std::nullopt;
  return match;
}

linalg::FillOp kiln::zeroFillOf(linalg::GenericOp op) {
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getResult(0).hasOneUse())
    return {};
  auto zero = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto value = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
  if (!value || !value.getValue().isZero())
    return {};
  return fill;
}

std::optional<ConvEpilogue> kiln::matchConvEpilogue(linalg::GenericOp conv) {
  Value y = conv.getResult(0);
  if (!y.hasOneUse())
    return std::nullopt;
  auto op = dyn_cast<linalg::GenericOp>(*y.getUsers().begin());
  auto type = cast<RankedTensorType>(y.getType());
  if (!op || op.getNumDpsInits() != 1 || type.getRank() != 4 ||
      !type.getElementType().isF32() ||
      op.getResult(0).getType() != y.getType() ||
      op.getNumParallelLoops() != 4 || op.getNumLoops() != 4 ||
      !op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>())
    return std::nullopt;
  MLIRContext *ctx = op.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(4, ctx);
  AffineMap channel = AffineMap::get(4, 0, getAffineDimExpr(1, ctx));
  if (op.getIndexingMapsArray().back() != identity)
    return std::nullopt;
  Value convArg, biasArg, zArg;
  ConvEpilogue epilogue{op, {}, {}};
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    Value arg = op.getMatchingBlockArgument(in);
    auto inType = cast<RankedTensorType>(in->get().getType());
    if (in->get() == y && map == identity && !convArg) {
      convArg = arg;
    } else if (map == channel && !biasArg && inType.getRank() == 1 &&
               inType.getElementType().isF32() &&
               inType.getDimSize(0) == type.getDimSize(1)) {
      biasArg = arg;
      epilogue.bias = in->get();
    } else if (map == identity && !zArg && in->get() != y && inType == type) {
      zArg = arg;
      epilogue.z = in->get();
    } else {
      return std::nullopt;
    }
  }
  Block &body = op.getRegion().front();
  if (!convArg || !biasArg || !body.getArguments().back().use_empty())
    return std::nullopt;
  // A chain from the conv's value: + bias and + z in either order, then
  // max(., 0); each link used only by the next.
  Value sum = convArg;
  bool addedBias = false, addedZ = false, relu = false;
  for (Operation &link : body.without_terminator()) {
    if (relu || link.getNumOperands() != 2 || !sum.hasOneUse())
      return std::nullopt;
    Value lhs = link.getOperand(0), rhs = link.getOperand(1);
    Value other = lhs == sum ? rhs : rhs == sum ? lhs : Value();
    if (!other)
      return std::nullopt;
    if (isa<arith::AddFOp>(link) && other == biasArg && !addedBias)
      addedBias = true;
    else if (isa<arith::AddFOp>(link) && zArg && other == zArg && !addedZ)
      addedZ = true;
    else if (isa<arith::MaximumFOp>(link) &&
             matchPattern(other, m_AnyZeroFloat()))
      relu = true;
    else
      return std::nullopt;
    sum = link.getResult(0);
  }
  if (!relu || !addedBias || (zArg && !addedZ) ||
      body.getTerminator()->getOperand(0) != sum)
    return std::nullopt;
  return epilogue;
}
