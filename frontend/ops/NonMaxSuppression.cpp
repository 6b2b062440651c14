//===- NonMaxSuppression.cpp - greedy box selection -----------------------===//
//
// NonMaxSuppression over boxes [B, N, 4] and scores [B, C, N] (B, C and N
// static), for every batch entry and class at once:
//
//   1. The boxes' order by score, highest first (ties: lower index first),
//      as a one-hot permutation P [B, C, N, N] (P[r, i] = rank(i) == r).
//   2. Which pairs suppress each other: IoU(i, j) > iou_threshold, with the
//      reference's rules for empty intersections and degenerate boxes,
//      [B, 1, N, N], then reordered by rank: P S P^T.
//   3. The greedy pass, unrolled over the N ranks: the box at rank r is kept
//      when it is a candidate (score > score_threshold, when given), fewer
//      than max_output_boxes_per_class are kept so far, and no kept box of a
//      higher rank suppresses it.
//   4. The kept (batch, class, box) triples in batch, class, rank order: the
//      true entries of the flattened mask (a length known at run time).
//
// The unrolled pass builds a few ops per box, so N is limited (kMaxBoxes).
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {
constexpr int64_t kMaxBoxes = 512;
} // namespace

FailureOr<Values> kiln::onnx_import::convertNonMaxSuppression(NodeContext &c) {
  if (failed(arity(c, 2, 5)))
    return failure();
  auto input = [&](size_t i) {
    return i < c.inputs.size() ? c.inputs[i] : Value();
  };
  Value boxes = input(0), scores = input(1);
  auto bType = typeOf(boxes), sType = typeOf(scores);
  if (bType.getRank() != 3 || sType.getRank() != 3 || !bType.hasStaticShape() ||
      !sType.hasStaticShape() || bType.getDimSize(2) != 4 ||
      sType.getDimSize(0) != bType.getDimSize(0) ||
      sType.getDimSize(2) != bType.getDimSize(1))
    return c.error("NonMaxSuppression needs boxes [B, N, 4] and scores "
                   "[B, C, N] of static shapes");
  int64_t batch = bType.getDimSize(0), classes = sType.getDimSize(1),
          n = bType.getDimSize(1);
  if (n > kMaxBoxes)
    return c.error("NonMaxSuppression over " + Twine(n) +
                   " boxes is more "
                   "than the " +
                   Twine(kMaxBoxes) + " kiln unrolls");
  Type f32 = c.builder.getF32Type();
  OpChain g(c);
  auto k = [&](double v) { return g.scalar(f32, v); };
  auto asF32 = [&](Value v) { return g.cast(v, f32); };
  auto scalarOf = [&](Value v, Type t) { return g.cast(g.reshape(v, {}), t); };
  Value boxesF = asF32(boxes), scoresF = asF32(scores);
  // NaN scores rank last (as -inf), so every box has its own rank.
  scoresF = g.where(g.op<EqualOp>({scoresF, scoresF}), scoresF,
                    k(-std::numeric_limits<double>::infinity()));
  Value maxOut = input(2)
                     ? g.op<MaxOp>({scalarOf(input(2), c.builder.getI64Type()),
                                    g.i64Constant({}, {0}, "zero")})
                     : g.i64Constant({}, {0}, "zero");
  Value iouThreshold = input(3) ? scalarOf(input(3), f32) : k(0);

  // 1. Ranks and the permutation. [B, C, N (i), 1] against [B, C, 1, N (j)].
  Value si = g.reshape(scoresF, {batch, classes, n, 1});
  Value sj = g.reshape(scoresF, {batch, classes, 1, n});
  Value index =
      g.i64Constant({n}, llvm::to_vector(llvm::seq<int64_t>(0, n)), "iota");
  Value ii = g.reshape(index, {n, 1}), jj = g.reshape(index, {1, n});
  Value ahead = g.op<OrOp>(
      {g.op<GreaterOp>({sj, si}),
       g.op<AndOp>({g.op<EqualOp>({sj, si}), g.op<LessOp>({jj, ii})})});
  Value rank =
      g.reshape(g.reduceAxes("sum", g.cast(ahead, c.builder.getI64Type()), {3}),
                {batch, classes, 1, n}); // rank of box i, along the last axis
  Value perm = asF32(g.op<EqualOp>({rank, ii})); // [B, C, N (r), N (i)]
  Value order = g.reshape(g.matmul(perm, g.reshape(asF32(index), {n, 1})),
                          {batch, classes, n});

  // 2. Suppression between boxes i and j of one batch entry.
  int64_t center = c.getInt("center_point_box", 0);
  auto coord = [&](int64_t at) {
    return g.reshape(g.slice(boxesF, 2, at, 1), {batch, n});
  };
  Value xmin, xmax, ymin, ymax;
  if (center) {
    Value cx = coord(0), cy = coord(1);
    Value hw = g.div(coord(2), k(2)), hh = g.div(coord(3), k(2));
    xmin = g.sub(cx, hw), xmax = g.add(cx, hw);
    ymin = g.sub(cy, hh), ymax = g.add(cy, hh);
  } else {
    Value y1 = coord(0), x1 = coord(1), y2 = coord(2), x2 = coord(3);
    xmin = g.op<MinOp>({x1, x2}), xmax = g.op<MaxOp>({x1, x2});
    ymin = g.op<MinOp>({y1, y2}), ymax = g.op<MaxOp>({y1, y2});
  }
  auto asI = [&](Value v) { return g.reshape(v, {batch, 1, n, 1}); };
  auto asJ = [&](Value v) { return g.reshape(v, {batch, 1, 1, n}); };
  Value ix = g.sub(g.op<MinOp>({asI(xmax), asJ(xmax)}),
                   g.op<MaxOp>({asI(xmin), asJ(xmin)}));
  Value iy = g.sub(g.op<MinOp>({asI(ymax), asJ(ymax)}),
                   g.op<MaxOp>({asI(ymin), asJ(ymin)}));
  Value area = g.mul(g.sub(xmax, xmin), g.sub(ymax, ymin));
  Value inter = g.mul(ix, iy);
  Value uni = g.sub(g.add(asI(area), asJ(area)), inter);
  auto positive = [&](Value v) { return g.op<GreaterOp>({v, k(0)}); };
  auto all = [&](std::initializer_list<Value> vs) {
    Value acc;
    for (Value v : vs)
      acc = acc ? g.op<AndOp>({acc, v}) : v;
    return acc;
  };
  Value suppress = all({positive(ix), positive(iy), positive(inter),
                        positive(asI(area)), positive(asJ(area)), positive(uni),
                        g.op<GreaterOp>({g.div(inter, uni), iouThreshold})});
  // By rank: [B, C, N (r), N (q)].
  Value byRank = g.matmul(g.matmul(perm, asF32(suppress)),
                          g.transpose(perm, {0, 1, 3, 2}));

  // 3. The greedy pass over ranks.
  // Thresholded before the permutation: a one-hot product with an infinite
  // score would give NaN.
  Value candidate = g.splat({batch, classes, n}, f32, 1);
  if (input(4)) {
    Value above = asF32(g.op<GreaterOp>({si, scalarOf(input(4), f32)}));
    candidate = g.reshape(g.matmul(perm, above), {batch, classes, n});
  }
  Value maxF = asF32(maxOut);
  Value kept = g.splat({batch, classes, n}, f32, 0);
  for (int64_t r = 0; r < n; ++r) {
    Value row = g.reshape(g.slice(byRank, 2, r, 1), {batch, classes, n});
    Value blocked = g.reduceAxes("max", g.mul(kept, row), {2});
    Value count = g.reduceAxes("sum", kept, {2});
    Value room = asF32(g.op<LessOp>({count, maxF}));
    Value take = g.mul(g.mul(g.slice(candidate, 2, r, 1), g.sub(k(1), blocked)),
                       room); // [B, C, 1]
    std::vector<char> onehot(n * 4, 0);
    float one = 1;
    std::memcpy(&onehot[r * 4], &one, 4);
    kept = g.add(kept, g.mul(take, g.constant({n}, f32, onehot,
                                              "rank" + std::to_string(r))));
  }

  // 4. The kept triples.
  Value flatKept =
      g.reshape(g.op<GreaterOp>({kept, k(0.5)}), {batch * classes * n});
  if (g.failed())
    return failure();
  auto positions = trueIndices(c, flatKept);
  if (failed(positions))
    return failure();
  Value flatOrder =
      g.cast(g.reshape(order, {batch * classes * n}), c.builder.getI64Type());
  auto column = [&](Value v) { return unsqueezeAt(c, v, 1); };
  Value b = g.div(*positions, g.i64Constant({}, {classes * n}, "cn"));
  Value cl = g.sub(g.div(*positions, g.i64Constant({}, {n}, "n")),
                   g.mul(b, g.i64Constant({}, {classes}, "classes")));
  Value box = g.op<GatherOp>(
      {flatOrder, *positions},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0))});
  if (g.failed())
    return failure();
  auto cb = column(b), cc = column(cl), cx = column(box);
  if (failed(cb) || failed(cc) || failed(cx))
    return failure();
  return single(concatOf(c, {*cb, *cc, *cx}, 1));
}

void kiln::onnx_import::addNonMaxSuppressionConverters(ConverterTable &table) {
  addRows(table, {
                     {"NonMaxSuppression", convertNonMaxSuppression},
                 });
}
