//===- DeformConv.cpp - deformable convolution (2-D) ----------------------===//
//
// DeformConv as the reference defines it: each kernel tap of each output
// position reads the input at its usual place plus a learned offset,
// bilinearly (kiln.grid_sample, zeros outside, align_corners), scaled by the
// optional mask; the sampled columns [N, C, taps, OH, OW] are then contracted
// with the weights per group (a matmul [M/g, C/g * taps] x [C/g * taps,
// OH * OW]), plus the bias. Offsets and masks come per offset group, each
// covering C / offset_group input channels. Static shapes, 2-D.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

FailureOr<Values> kiln::onnx_import::convertDeformConv(NodeContext &c) {
  if (failed(arity(c, 3, 5)))
    return failure();
  Value x = c.inputs[0], w = c.inputs[1], offset = c.inputs[2];
  Value bias = c.inputs.size() > 3 ? c.inputs[3] : Value();
  Value mask = c.inputs.size() > 4 ? c.inputs[4] : Value();
  for (Value v : {x, w, offset, bias, mask})
    if (v && !typeOf(v).hasStaticShape())
      return c.error("DeformConv needs static shapes");
  auto xs = typeOf(x).getShape(), ws = typeOf(w).getShape(),
       os = typeOf(offset).getShape();
  if (xs.size() != 4 || ws.size() != 4 || os.size() != 4)
    return c.error("DeformConv supports 2-D convolutions (rank-4 X, W and "
                   "offset)");
  int64_t n = xs[0], ch = xs[1], h = xs[2], wd = xs[3];
  int64_t m = ws[0], kh = ws[2], kw = ws[3], taps = kh * kw;
  int64_t oh = os[2], ow = os[3];
  int64_t group = c.getInt("group", 1), og = c.getInt("offset_group", 1);
  std::vector<int64_t> strides = ints(c, "strides", {1, 1});
  std::vector<int64_t> dilations = ints(c, "dilations", {1, 1});
  std::vector<int64_t> pads = ints(c, "pads", {0, 0, 0, 0});
  if (group < 1 || og < 1 || ch % group || m % group || ch % og ||
      ws[1] * group != ch || os[1] != og * taps * 2 || os[0] != n ||
      strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return c.error("DeformConv's shapes, groups and attributes do not fit "
                   "together");
  if (mask &&
      typeOf(mask).getShape() != ArrayRef<int64_t>{n, og * taps, oh, ow})
    return c.error("DeformConv's mask must have shape [N, offset_group * "
                   "kernel size, OH, OW]");
  Type t = typeOf(x).getElementType();
  if (!isa<FloatType>(t))
    return c.error("DeformConv needs a floating-point input");
  int64_t cog = ch / og, cg = ch / group, mg = m / group;
  OpChain g(c);
  Builder &b = c.builder;
  Type f64 = b.getF64Type();
  // The tap's place without offset: y = -pad + stride i + kh_t dilation.
  std::vector<char> baseY(taps * oh * 8), baseX(taps * ow * 8);
  for (int64_t tap = 0; tap < taps; ++tap) {
    for (int64_t i = 0; i < oh; ++i) {
      double v = -pads[0] + strides[0] * i + (tap / kw) * dilations[0];
      std::memcpy(&baseY[(tap * oh + i) * 8], &v, 8);
    }
    for (int64_t j = 0; j < ow; ++j) {
      double v = -pads[1] + strides[1] * j + (tap % kw) * dilations[1];
      std::memcpy(&baseX[(tap * ow + j) * 8], &v, 8);
    }
  }
  Value by = g.constant({1, taps, oh, 1}, f64, baseY, "deform_y");
  Value bx = g.constant({1, taps, 1, ow}, f64, baseX, "deform_x");
  Value off = g.cast(g.reshape(offset, {n, og, taps, 2, oh, ow}), f64);
  Value masks = mask ? g.reshape(mask, {n, og, taps, oh, ow}) : Value();
  auto normalized = [&](Value pos, int64_t size) { // to [-1, 1], corners
    return g.sub(g.mul(g.div(pos, g.scalar(f64, size - 1)), g.scalar(f64, 2)),
                 g.scalar(f64, 1));
  };
  SmallVector<Value> columns;
  for (int64_t k = 0; k < og; ++k) {
    Value offK = g.reshape(g.slice(off, 1, k, 1), {n, taps, 2, oh, ow});
    Value y = g.add(by, g.reshape(g.slice(offK, 2, 0, 1), {n, taps, oh, ow}));
    Value xpos =
        g.add(bx, g.reshape(g.slice(offK, 2, 1, 1), {n, taps, oh, ow}));
    Value grid =
        g.concat({g.reshape(normalized(xpos, wd), {n, taps, oh, ow, 1}),
                  g.reshape(normalized(y, h), {n, taps, oh, ow, 1})},
                 4);
    grid = g.cast(g.reshape(grid, {n, taps * oh, ow, 2}), t);
    Value sampled = g.op<GridSampleOp>(
        {g.slice(x, 1, k * cog, cog), grid},
        {b.getNamedAttr("mode", b.getStringAttr("linear")),
         b.getNamedAttr("padding_mode", b.getStringAttr("zeros")),
         b.getNamedAttr("align_corners", b.getBoolAttr(true))});
    sampled = g.reshape(sampled, {n, cog, taps, oh, ow});
    if (masks)
      sampled = g.mul(sampled, g.slice(masks, 1, k, 1));
    columns.push_back(sampled);
  }
  Value cols = og == 1 ? columns.front() : g.concat(columns, 1);
  SmallVector<Value> outputs;
  for (int64_t k = 0; k < group; ++k) {
    Value colsK =
        g.reshape(g.slice(cols, 1, k * cg, cg), {n, cg * taps, oh * ow});
    Value wK = g.reshape(g.slice(w, 0, k * mg, mg), {mg, cg * taps});
    outputs.push_back(g.matmul(wK, colsK));
  }
  Value out = g.reshape(group == 1 ? outputs.front() : g.concat(outputs, 1),
                        {n, m, oh, ow});
  if (bias)
    out = g.add(out, g.reshape(bias, {1, m, 1, 1}));
  if (g.failed())
    return failure();
  return Values{out};
}

void kiln::onnx_import::addDeformConvConverters(ConverterTable &table) {
  addRows(table, {
                     {"DeformConv", convertDeformConv},
                 });
}
