//===- Col2Im.cpp - Col2Im as a scatter-add of the columns ----------------===//
//
// Col2Im(x [N, C*K, L], image_shape [r], block_shape [r]) with dilations d,
// pads (begin pb, end pe) and strides s sums every column entry into the
// image it was taken from (the inverse of im2col, torch's fold). With the
// padded image P = image + pb + pe, the block grid has
//   G_i = (P_i - (d_i (B_i - 1) + 1)) / s_i + 1
// positions per axis (L = prod G), and entry (n, c K + k, l), with k and l
// unravelled over the block B and the grid G, lands at
//   p_i = o_i s_i + k_i d_i
// of channel c of the padded image. kiln computes that flat position for
// every entry (elementwise integer ops over iotas; image and block shapes
// may be data read at run time; of the declared result rank when their
// length is symbolic), scatter-adds the entries into zeros of
// N C prod(P) elements, reshapes to [N, C, P..] and slices the padding off.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

FailureOr<Values> convertCol2Im(NodeContext &c) {
  if (failed(arity(c, 3, 3)))
    return failure();
  Value x = c.inputs[0], image = c.inputs[1], block = c.inputs[2];
  if (typeOf(x).getRank() != 3)
    return c.error("Col2Im needs an input of rank 3 [N, C*K, L]");
  // Shapes of a length known only at run time take the spatial rank from
  // the declared result rank (checked when they are read).
  if (auto rank = c.declaredRank(0); rank && *rank > 2)
    for (Value *v : {&image, &block})
      if (typeOf(*v).getRank() == 1 && typeOf(*v).isDynamicDim(0)) {
        auto fixed = reshapeToDims(c, *v, {*rank - 2});
        if (failed(fixed))
          return failure();
        *v = *fixed;
      }
  RankedTensorType imageType = typeOf(image), blockType = typeOf(block);
  if (imageType.getRank() != 1 || imageType.isDynamicDim(0) ||
      imageType != blockType.clone(imageType.getElementType()) ||
      !imageType.getElementType().isInteger(64) ||
      !blockType.getElementType().isInteger(64))
    return c.error("Col2Im needs image_shape and block_shape as int64 "
                   "vectors of one static length");
  int64_t r = imageType.getDimSize(0);
  if (r < 1)
    return c.error("Col2Im needs at least one spatial axis");
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = ints(c, "pads", std::vector<int64_t>(2 * r, 0));
  if ((int64_t)dilations.size() != r || (int64_t)strides.size() != r ||
      (int64_t)pads.size() != 2 * r)
    return c.error("Col2Im needs " + Twine(r) + " dilations and strides and " +
                   Twine(2 * r) + " pads");
  if (llvm::any_of(dilations, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(strides, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(pads, [](int64_t v) { return v < 0; }))
    return c.error("Col2Im needs positive dilations and strides and "
                   "non-negative pads");

  OpChain g(c);
  auto i64 = [&](int64_t v) { return g.i64Constant({}, {v}, "col2im"); };
  SmallVector<Value> imageSizes, blockSizes, padBegin, padEnd;
  for (int64_t i = 0; i < r; ++i) {
    auto axis0 = c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0));
    imageSizes.push_back(g.op<GatherOp>({image, i64(i)}, {axis0}));
    blockSizes.push_back(g.op<GatherOp>({block, i64(i)}, {axis0}));
    padBegin.push_back(i64(pads[i]));
    padEnd.push_back(i64(pads[r + i]));
  }
  if (g.failed())
    return failure();
  return single(col2imAtRunTime(c, x, imageSizes, blockSizes, padBegin, padEnd,
                                strides, dilations));
}

FailureOr<Value> col2imAtRunTime(NodeContext &c, Value x, ArrayRef<Value> image,
                                 ArrayRef<Value> block,
                                 ArrayRef<Value> padBegin,
                                 ArrayRef<Value> padEnd,
                                 ArrayRef<int64_t> strides,
                                 ArrayRef<int64_t> dilations) {
  int64_t r = image.size();
  OpChain g(c);
  auto i64 = [&](int64_t v) { return g.i64Constant({}, {v}, "col2im"); };
  SmallVector<Value> padded, grid;
  Value blockCount = i64(1);
  for (int64_t i = 0; i < r; ++i) {
    padded.push_back(g.add(g.add(image[i], padBegin[i]), padEnd[i]));
    blockCount = g.mul(blockCount, block[i]);
    Value extent =
        g.add(g.mul(g.sub(block[i], i64(1)), i64(dilations[i])), i64(1));
    grid.push_back(
        g.add(g.div(g.sub(padded[i], extent), i64(strides[i])), i64(1)));
  }
  if (g.failed())
    return failure();
  auto n = iotaAlong(c, x, 0, 3, 0), ck = iotaAlong(c, x, 1, 3, 1),
       l = iotaAlong(c, x, 2, 3, 2);
  if (failed(n) || failed(ck) || failed(l))
    return failure();
  Value channels = g.div(g.dim(x, 1), blockCount);
  Value channel = g.div(*ck, blockCount);
  Value k = g.op<ModOp>({*ck, blockCount}), pos = *l;
  // Unravel k over the block and l over the grid, last axis fastest.
  SmallVector<Value> kAt(r), oAt(r);
  for (int64_t i = r - 1; i >= 0; --i) {
    kAt[i] = g.op<ModOp>({k, block[i]});
    k = g.div(k, block[i]);
    oAt[i] = g.op<ModOp>({pos, grid[i]});
    pos = g.div(pos, grid[i]);
  }
  Value flat = g.add(g.mul(*n, channels), channel);
  Value imageSize = i64(1);
  for (int64_t i = 0; i < r; ++i) {
    Value p =
        g.add(g.mul(oAt[i], i64(strides[i])), g.mul(kAt[i], i64(dilations[i])));
    flat = g.add(g.mul(flat, padded[i]), p);
    imageSize = g.mul(imageSize, padded[i]);
  }
  // Every entry's position, broadcast to x's shape, then both flattened.
  auto shape = shapeOfValue(c, x);
  if (failed(shape))
    return failure();
  Value positions = g.op<ExpandToOp>({flat, *shape});
  Value total = g.mul(g.mul(g.dim(x, 0), channels), imageSize);
  if (g.failed())
    return failure();
  Type element = typeOf(x).getElementType();
  auto zeros = c.create(
      ConstantOfShapeOp::getOperationName(), g.reshape(total, {1}),
      {c.builder.getNamedAttr("value", c.builder.getZeroAttr(element))});
  if (failed(zeros))
    return failure();
  Builder &b = c.builder;
  Value summed =
      g.op<ScatterOp>({*zeros, g.reshape(positions, {ShapedType::kDynamic}),
                       g.reshape(x, {ShapedType::kDynamic})},
                      {b.getNamedAttr("mode", b.getStringAttr("elements")),
                       b.getNamedAttr("axis", b.getI64IntegerAttr(0)),
                       b.getNamedAttr("reduction", b.getStringAttr("add"))});
  SmallVector<Value> dims = {g.reshape(g.dim(x, 0), {1}),
                             g.reshape(channels, {1})};
  for (Value p : padded)
    dims.push_back(g.reshape(p, {1}));
  Value out = g.reshapeBy(summed, g.concat(dims, 0));
  for (int64_t i = 0; i < r; ++i)
    out = g.sliceBy(out, i + 2, padBegin[i], g.add(padBegin[i], image[i]));
  if (g.failed())
    return failure();
  return out;
}

void addCol2ImConverters(ConverterTable &table) {
  addRows(table, {
                     {"Col2Im", convertCol2Im},
                 });
}

} // namespace kiln::onnx_import
