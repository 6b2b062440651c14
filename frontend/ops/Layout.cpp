//===- Layout.cpp - DepthToSpace, SpaceToDepth, EyeLike, Tile, Compress,
//                 CenterCropPad, ReverseSequence ------------------------===//
//
//  - DepthToSpace(x [N, C, H, W], blocksize b): DCR mode reshapes to
//    [N, b, b, C/b^2, H, W], CRD mode to [N, C/b^2, b, b, H, W]; a transpose
//    interleaves the blocks with H and W ([N, C/b^2, H, b, W, b]) and a
//    reshape gives [N, C/b^2, H*b, W*b].
//  - SpaceToDepth: the inverse: [N, C, H/b, b, W/b, b] transposed to
//    [N, b, b, C, H/b, W/b] (DCR) or [N, C, b, b, H/b, W/b] and reshaped to
//    [N, C*b^2, H/b, W/b]. ONNX's SpaceToDepth has no mode attribute; kiln
//    also takes mode = "CRD" (a node test uses it), DepthToSpace's inverse.
//    Over dims known only at run time both reshape by shapes computed from
//    them.
//  - EyeLike(x [R, C], k, dtype): cast(col - row == k) from two iotas.
//  - Tile(x, repeats): x as [1, d0, 1, d1, ...] broadcast to
//    [r0, d0, r1, d1, ...] and reshaped to [r0 d0, r1 d1, ...]; static when
//    x and repeats are, else with shapes computed at run time.
//  - Compress(x, condition, axis): with cs the inclusive running count of
//    true conditions, output p (of count(condition), known at run time)
//    takes index #{j : cs[j] <= p} along the axis (x flattened without
//    one): two comparisons of O(L^2) and O(count L), then a Gather.
//  - CenterCropPad(x, shape, axes): a Pad by (shape - dims) / 2 (truncated:
//    negative crops) before and the rest after, on the axes.
//  - NonZero(x): Compress's indices of the nonzero elements of x flattened,
//    split into coordinates.
//  - ReverseSequence(x, sequence_lens, batch_axis, time_axis): a
//    GatherElements along the time axis at t < len[b] ? len[b] - 1 - t : t.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

FailureOr<Value> permuted(NodeContext &c, Value x, ArrayRef<int64_t> perm) {
  return c.create(
      TransposeOp::getOperationName(), x,
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
}

// The [N, C, H, W] shape of a DepthToSpace/SpaceToDepth input and its
// block size, checked.
FailureOr<std::pair<SmallVector<int64_t>, int64_t>> blocks(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  RankedTensorType type = typeOf(c.inputs[0]);
  int64_t b = c.getInt("blocksize", 0);
  if (type.getRank() != 4)
    return c.error("'" + c.node.op_type() + "' needs a 4-D input");
  if (b < 1 || b > (1 << 20)) // b * b must not overflow
    return c.error("blocksize " + Twine(b) + " is out of range");
  return std::make_pair(SmallVector<int64_t>(type.getShape()), b);
}

// The same rearrangement over dims known only at run time: reshapes by
// shapes computed from them ("-1" the one inferred), and the transpose.
// `split` and `merged` list, per output dim, an input dim (0..3), a block
// size (kBlock), a dim multiplied or divided by it (kTimes, kOver), or -1.
enum : int64_t { kBlock = 10, kTimes = 20, kOver = 30, kInfer = -1 };
FailureOr<Values> blocksAtRunTime(NodeContext &c, int64_t b,
                                  ArrayRef<int64_t> split,
                                  ArrayRef<int64_t> perm,
                                  ArrayRef<int64_t> merged) {
  OpChain g(c);
  Value x = c.inputs[0];
  Value block = g.i64Constant({}, {b}, "block");
  auto spec = [&](ArrayRef<int64_t> dims) {
    SmallVector<Value> parts;
    for (int64_t d : dims) {
      Value v = d == kInfer   ? g.i64Constant({}, {-1}, "infer")
                : d == kBlock ? block
                : d >= kOver  ? g.div(g.dim(x, d - kOver), block)
                : d >= kTimes ? g.mul(g.dim(x, d - kTimes), block)
                              : g.dim(x, d);
      parts.push_back(g.reshape(v, {1}));
    }
    return g.concat(parts, 0);
  };
  Value out =
      g.reshapeBy(g.transpose(g.reshapeBy(x, spec(split)), perm), spec(merged));
  if (g.failed())
    return failure();
  return Values{out};
}

} // namespace

FailureOr<Values> convertDepthToSpace(NodeContext &c) {
  auto in = blocks(c);
  if (failed(in))
    return failure();
  auto [s, b] = *in;
  bool crdMode = c.getString("mode", "DCR") == "CRD";
  if (!typeOf(c.inputs[0]).hasStaticShape())
    return blocksAtRunTime(
        c, b,
        crdMode ? ArrayRef<int64_t>{0, kInfer, kBlock, kBlock, 2, 3}
                : ArrayRef<int64_t>{0, kBlock, kBlock, kInfer, 2, 3},
        crdMode ? ArrayRef<int64_t>{0, 1, 4, 2, 5, 3}
                : ArrayRef<int64_t>{0, 3, 4, 1, 5, 2},
        {0, kInfer, kTimes + 2, kTimes + 3});
  int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
  if (ch % (b * b))
    return c.error("DepthToSpace channels " + Twine(ch) +
                   " are not a multiple of blocksize^2");
  bool crd = c.getString("mode", "DCR") == "CRD";
  auto split =
      reshapeTo(c, c.inputs[0],
                crd ? std::vector<int64_t>{n, ch / (b * b), b, b, h, w}
                    : std::vector<int64_t>{n, b, b, ch / (b * b), h, w});
  if (failed(split))
    return failure();
  auto t = permuted(c, *split,
                    crd ? ArrayRef<int64_t>{0, 1, 4, 2, 5, 3}
                        : ArrayRef<int64_t>{0, 3, 4, 1, 5, 2});
  if (failed(t))
    return failure();
  return single(reshapeTo(c, *t, {n, ch / (b * b), h * b, w * b}));
}

FailureOr<Values> convertSpaceToDepth(NodeContext &c) {
  auto in = blocks(c);
  if (failed(in))
    return failure();
  auto [s, b] = *in;
  if (!typeOf(c.inputs[0]).hasStaticShape())
    return blocksAtRunTime(c, b, {0, 1, kOver + 2, kBlock, kOver + 3, kBlock},
                           c.getString("mode", "DCR") == "CRD"
                               ? ArrayRef<int64_t>{0, 1, 3, 5, 2, 4}
                               : ArrayRef<int64_t>{0, 3, 5, 1, 2, 4},
                           {0, kInfer, kOver + 2, kOver + 3});
  int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
  if (h % b || w % b)
    return c.error("SpaceToDepth spatial dims are not multiples of blocksize");
  // DCR (the default) puts the block offsets before the channels, CRD after.
  bool crd = c.getString("mode", "DCR") == "CRD";
  auto split = reshapeTo(c, c.inputs[0], {n, ch, h / b, b, w / b, b});
  if (failed(split))
    return failure();
  auto t = permuted(c, *split,
                    crd ? ArrayRef<int64_t>{0, 1, 3, 5, 2, 4}
                        : ArrayRef<int64_t>{0, 3, 5, 1, 2, 4});
  if (failed(t))
    return failure();
  return single(reshapeTo(c, *t, {n, ch * b * b, h / b, w / b}));
}

FailureOr<Values> convertEyeLike(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  if (typeOf(x).getRank() != 2)
    return c.error("EyeLike needs a 2-D input");
  Type type = typeOf(x).getElementType();
  if (int dtype = c.getInt("dtype", 0)) {
    type = elementType(c.builder.getContext(), dtype);
    if (!type)
      return c.error("EyeLike dtype " + Twine(dtype) + " is not supported");
  }
  auto rows = iotaAlong(c, x, 0, 2, 0);
  auto cols = iotaAlong(c, x, 1, 2, 1);
  if (failed(rows) || failed(cols))
    return failure();
  auto d = binaryOp(c, SubOp::getOperationName(), *cols, *rows);
  if (failed(d))
    return failure();
  auto on = binaryOp(c, EqualOp::getOperationName(), *d,
                     int64Constant(c, {}, {c.getInt("k", 0)}));
  if (failed(on))
    return failure();
  return castTo(c, *on, type);
}

namespace {
FailureOr<Value> asInt64(NodeContext &c, Value v) {
  auto cast = castTo(c, v, c.builder.getI64Type());
  if (failed(cast))
    return failure();
  return (*cast)[0];
}
} // namespace

FailureOr<Values> convertTile(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  auto repeatsType = typeOf(c.inputs[1]);
  if (repeatsType.getRank() != 1 ||
      (!repeatsType.isDynamicDim(0) && repeatsType.getDimSize(0) != rank))
    return c.error("Tile needs one repeat per dim of its input");
  if (rank == 0)
    return Values{x};
  auto fixed = constantValues<int64_t>(c.inputs[1]);
  if (fixed && type.hasStaticShape()) {
    std::vector<int64_t> spread, wide, out;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t d = type.getDimSize(i), r = (*fixed)[i];
      if (r < 0)
        return c.error("Tile repeats must not be negative");
      spread.insert(spread.end(), {1, d});
      wide.insert(wide.end(), {r, d});
      int64_t size;
      if (llvm::MulOverflow(r, d, size))
        return c.error("Tile's result has more elements than int64 counts");
      out.push_back(size);
    }
    auto s = reshapeToDims(c, x, spread);
    if (failed(s))
      return failure();
    auto e = c.create(ExpandOp::getOperationName(), *s,
                      {c.builder.getNamedAttr(
                          "shape", c.builder.getDenseI64ArrayAttr(wide))});
    if (failed(e))
      return failure();
    return single(reshapeToDims(c, *e, out));
  }
  auto repeats = asInt64(c, c.inputs[1]);
  auto shape = shapeOfValue(c, x);
  if (failed(repeats) || failed(shape))
    return failure();
  // [r0, d0, r1, d1, ...] from two columns.
  auto rc = unsqueezeAt(c, *repeats, 1), dc = unsqueezeAt(c, *shape, 1);
  if (failed(rc) || failed(dc))
    return failure();
  auto pairs = concatOf(c, {*rc, *dc}, 1);
  if (failed(pairs))
    return failure();
  auto wide = reshapeTo(c, *pairs, {2 * rank});
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i)
    axes.push_back(2 * i);
  auto spread =
      reshapeBySpec(c, x, int64Constant(c, {rank}, axes), "unsqueeze");
  if (failed(wide) || failed(spread))
    return failure();
  auto expanded = c.create(ExpandToOp::getOperationName(), {*spread, *wide});
  auto out = binaryOp(c, MulOp::getOperationName(), *repeats, *shape);
  if (failed(expanded) || failed(out))
    return failure();
  // Sizes, not ONNX's spec: a 0 is a dim of size 0, not a copy.
  return single(reshapeBySpec(c, *expanded, *out, "reshape_allowzero"));
}

// The indices of the true entries of a 1-D bool `condition`, in order, as a
// 1-D int64 of a length known at run time (see Compress above).
FailureOr<Value> trueIndices(NodeContext &c, Value condition) {
  auto flags = asInt64(c, condition);
  if (failed(flags))
    return failure();
  // cs[j] = sum over m <= j of flags[m]: [L (j), L (m)].
  auto row = unsqueezeAt(c, *flags, 0);
  auto jj = iotaAlong(c, condition, 0, 2, 0);
  auto mm = iotaAlong(c, condition, 0, 2, 1);
  if (failed(row) || failed(jj) || failed(mm))
    return failure();
  auto upTo = binaryOp(c, LessEqualOp::getOperationName(), *mm, *jj);
  if (failed(upTo))
    return failure();
  auto kept = c.create(WhereOp::getOperationName(),
                       ValueRange{*upTo, *row, int64Constant(c, {}, {0})});
  if (failed(kept))
    return failure();
  auto cs = reduce(c, "sum", {1}, false, *kept);
  auto count = reduce(c, "sum", {0}, false, *flags);
  if (failed(cs) || failed(count))
    return failure();
  auto positions =
      c.create(RangeOp::getOperationName(),
               {int64Constant(c, {}, {0}), *count, int64Constant(c, {}, {1})});
  if (failed(positions))
    return failure();
  // index[p] = #{j : cs[j] <= p}: [P, 1] against [1, L].
  auto pc = unsqueezeAt(c, *positions, 1), csr = unsqueezeAt(c, *cs, 0);
  if (failed(pc) || failed(csr))
    return failure();
  auto before = binaryOp(c, LessEqualOp::getOperationName(), *csr, *pc);
  if (failed(before))
    return failure();
  auto counted = asInt64(c, *before);
  if (failed(counted))
    return failure();
  auto index = reduce(c, "sum", {1}, false, *counted);
  if (failed(index))
    return failure();
  return index;
}

FailureOr<Values> convertCompress(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0], condition = c.inputs[1];
  if (typeOf(condition).getRank() != 1)
    return c.error("Compress needs a 1-D condition");
  int64_t axis = 0;
  if (c.attr("axis")) {
    auto a = normalizeAxis(c, c.getInt("axis", 0), typeOf(x).getRank());
    if (failed(a))
      return failure();
    axis = *a;
  } else {
    auto flat =
        typeOf(x).hasStaticShape()
            ? reshapeTo(c, x, {-1})
            : reshapeBySpec(c, x, int64Constant(c, {1}, {-1}), "reshape");
    if (failed(flat))
      return failure();
    x = *flat;
  }
  auto index = trueIndices(c, condition);
  if (failed(index))
    return failure();
  return single(c.create(
      GatherOp::getOperationName(), {x, *index},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(axis))}));
}

FailureOr<Values> convertCenterCropPad(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  std::vector<int64_t> all;
  for (int64_t i = 0; i < rank; ++i)
    all.push_back(i);
  auto normalized = normalizedAxes(c, all, rank);
  if (failed(normalized))
    return failure();
  std::vector<int64_t> axes = *normalized;
  int64_t n = axes.size();
  auto target = asInt64(c, c.inputs[1]);
  auto shape = shapeOfValue(c, x);
  if (failed(target) || failed(shape))
    return failure();
  auto dims = c.create(
      GatherOp::getOperationName(), {*shape, int64Constant(c, {n}, axes)},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0))});
  if (failed(dims))
    return failure();
  auto diff = binaryOp(c, SubOp::getOperationName(), *target, *dims);
  if (failed(diff))
    return failure();
  auto begin =
      binaryOp(c, DivOp::getOperationName(), *diff, int64Constant(c, {}, {2}));
  if (failed(begin))
    return failure();
  auto end = binaryOp(c, SubOp::getOperationName(), *diff, *begin);
  if (failed(end))
    return failure();
  auto pads = concatOf(c, {*begin, *end}, 0);
  if (failed(pads))
    return failure();
  return single(
      padBy(c, x, *pads, Value(), int64Constant(c, {n}, axes), "constant"));
}

FailureOr<Values> convertReverseSequence(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0];
  int64_t rank = typeOf(x).getRank();
  if (rank < 2)
    return c.error("ReverseSequence needs an input of rank >= 2");
  auto batch = normalizeAxis(c, c.getInt("batch_axis", 1), rank);
  auto time = normalizeAxis(c, c.getInt("time_axis", 0), rank);
  if (failed(batch) || failed(time))
    return failure();
  if (*batch == *time)
    return c.error("ReverseSequence's batch and time axes must differ");
  return single(reverseByLengths(c, x, c.inputs[1], *batch, *time));
}

FailureOr<Value> reverseByLengths(NodeContext &c, Value x, Value lengths,
                                  int64_t batch, int64_t time) {
  int64_t rank = typeOf(x).getRank();
  auto wide = asInt64(c, lengths);
  if (failed(wide) || typeOf(*wide).getRank() != 1)
    return c.error("'" + c.node.op_type() + "' needs 1-D sequence lengths");
  SmallVector<int64_t> dims(rank, 1);
  dims[batch] = typeOf(*wide).getDimSize(0);
  auto len = reshapeToDims(c, *wide, dims);
  auto t = iotaAlong(c, x, time, rank, time);
  if (failed(len) || failed(t))
    return failure();
  auto inside = binaryOp(c, LessOp::getOperationName(), *t, *len);
  auto last =
      binaryOp(c, SubOp::getOperationName(), *len, int64Constant(c, {}, {1}));
  if (failed(inside) || failed(last))
    return failure();
  auto reversed = binaryOp(c, SubOp::getOperationName(), *last, *t);
  if (failed(reversed))
    return failure();
  auto index =
      c.create(WhereOp::getOperationName(), ValueRange{*inside, *reversed, *t});
  if (failed(index))
    return failure();
  auto full = expandLike(c, *index, x);
  if (failed(full))
    return failure();
  return c.create(
      GatherElementsOp::getOperationName(), {x, *full},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(time))});
}

// NonZero(x): the flat indices of the nonzero elements (trueIndices), each
// split into its coordinates ((f / stride) % dim per dim): [rank, count].
FailureOr<Values> convertNonZero(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  if (!type.hasStaticShape())
    return c.error("NonZero needs an input of static shape");
  auto flat = reshapeTo(c, x, {type.getNumElements()});
  if (failed(flat))
    return failure();
  auto nonzero =
      binaryOp(c, EqualOp::getOperationName(), *flat, scalarLike(c, *flat, 0));
  if (failed(nonzero))
    return failure();
  auto isSet = c.create(NotOp::getOperationName(), *nonzero);
  if (failed(isSet))
    return failure();
  auto index = trueIndices(c, *isSet);
  if (failed(index))
    return failure();
  auto row = unsqueezeAt(c, *index, 0); // [1, count]
  if (failed(row))
    return failure();
  SmallVector<Value> coordinates;
  int64_t stride = type.getNumElements();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = type.getDimSize(d);
    stride = size ? stride / size : 0;
    auto q = binaryOp(c, DivOp::getOperationName(), *row,
                      int64Constant(c, {}, {std::max<int64_t>(stride, 1)}));
    if (failed(q))
      return failure();
    auto m = c.create(ModOp::getOperationName(),
                      {*q, int64Constant(c, {}, {std::max<int64_t>(size, 1)})});
    if (failed(m))
      return failure();
    coordinates.push_back(*m);
  }
  if (rank == 0)
    return c.error("NonZero of a scalar is not supported");
  return single(concatOf(c, coordinates, 0));
}

void addLayoutConverters(ConverterTable &table) {
  addRows(table, {
                     {"DepthToSpace", convertDepthToSpace},
                     {"SpaceToDepth", convertSpaceToDepth},
                     {"EyeLike", convertEyeLike},
                     {"NonZero", convertNonZero},
                     {"Tile", convertTile},
                     {"Compress", convertCompress},
                     {"CenterCropPad", convertCenterCropPad},
                     {"ReverseSequence", convertReverseSequence},
                 });
}

} // namespace kiln::onnx_import
