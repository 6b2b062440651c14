//===- ConvTranspose.cpp - ConvTranspose as a convolution -----------------===//
//
// ConvTranspose(x [N, C, D1..Dr], w [C, M/g, K1..Kr], b [M]) with strides s,
// dilations d, pads (begin pb, end pe), output_padding, output_shape,
// auto_pad and group g is the ordinary convolution of
//   - x with s - 1 zeros inserted between neighbours along every spatial axis
//     (a reshape that adds an axis, a concat with zeros on it, a reshape
//     back, and a slice dropping the trailing zeros: length L = s (D - 1) + 1);
//   - padded by (K - 1) d - pb at the begin and out - L + pb at the end, where
//     out is the output length (given by output_shape, else
//     s (D - 1) + output_padding + (K - 1) d + 1 - pb - pe); a negative pad
//     crops the dilated input instead;
//   - with the weight regrouped to [M, C/g, K..] (reshape [g, C/g, M/g, K..],
//     transpose to [g, M/g, C/g, K..], reshape) and flipped along every
//     spatial axis (slices with step -1), stride 1, dilation d, group g,
//     bias b.
// With output_shape and auto_pad SAME_UPPER/SAME_LOWER the pads come from the
// total s (D - 1) + output_padding + (K - 1) d + 1 - out, split as the ONNX
// reference splits it.
//
// With strides equal to the kernel and no pads, dilation or groups it is a
// 1x1 convolution whose channels are spread over the output's blocks
// (convTransposeByBlocks).
//
// Over shapes known only at run time (but the batch) it is instead, per
// group, the product of the weight's transpose with the input (columns [N,
// M*K, D1*..*Dr]) summed into the output by Col2Im (ops/Col2Im.cpp), whose
// scatter-add loops over every (output, column entry) pair: 0.74 s for a
// 64 -> 32 channel 2x2 transposed conv at 16x16, where the convolution
// takes 0.24 ms.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

namespace {

FailureOr<Value> sliceAxis(NodeContext &c, Value v, int64_t axis, int64_t start,
                           int64_t size, int64_t step) {
  auto shape = typeOf(v).getShape();
  SmallVector<int64_t> starts(shape.size(), 0), sizes(shape),
      steps(shape.size(), 1);
  starts[axis] = start;
  sizes[axis] = size;
  steps[axis] = step;
  Builder &b = c.builder;
  return c.create(SliceOp::getOperationName(), v,
                  {b.getNamedAttr("starts", b.getDenseI64ArrayAttr(starts)),
                   b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes)),
                   b.getNamedAttr("steps", b.getDenseI64ArrayAttr(steps))});
}

// `v` padded with `begin` and `end` zeros along `axis` (cropped where
// negative): what a slice or a concat with a zeros constant does, for a
// tensor with a symbolic dim (a batch sized at run time), where neither
// the slice's sizes nor the constant's shape can be written.
FailureOr<Value> padAxis(NodeContext &c, Value v, int64_t axis, int64_t begin,
                         int64_t end) {
  int64_t rank = typeOf(v).getRank();
  std::vector<int64_t> pads(2 * rank, 0);
  pads[axis] = begin;
  pads[rank + axis] = end;
  return padBy(c, v, int64Constant(c, {2 * rank}, pads), Value(), Value(),
               "constant");
}

// `v` with `stride - 1` zeros between neighbours along `axis`.
FailureOr<Value> insertZeros(NodeContext &c, Value v, int64_t axis,
                             int64_t stride) {
  auto type = typeOf(v);
  SmallVector<int64_t> shape(type.getShape());
  int64_t n = shape[axis];
  if (stride == 1 || n == 0)
    return v;
  if (!type.hasStaticShape()) {
    // The symbolic dims (before `axis`) are copied by the reshapes (0).
    SmallVector<int64_t> spec(shape);
    for (int64_t &d : spec)
      if (ShapedType::isDynamic(d))
        d = 0;
    SmallVector<int64_t> split(spec);
    split.insert(split.begin() + axis + 1, 1);
    auto column = reshapeTo(c, v, split);
    if (failed(column))
      return failure();
    auto spread = padAxis(c, *column, axis + 1, 0, stride - 1);
    if (failed(spread))
      return failure();
    spec[axis] = n * stride;
    auto flat = reshapeTo(c, *spread, spec);
    if (failed(flat))
      return failure();
    return padAxis(c, *flat, axis, 0, 1 - stride);
  }
  SmallVector<int64_t> split(shape);
  split.insert(split.begin() + axis + 1, 1);
  auto column = reshapeTo(c, v, split);
  if (failed(column))
    return failure();
  split[axis + 1] = stride - 1;
  auto zerosType = RankedTensorType::get(split, type.getElementType());
  Value zeros = c.builder.create<ConstantOp>(
      c.loc, RankedTensorType::get(split, type.getElementType(), c.device),
      DenseElementsAttr::get(zerosType,
                             c.builder.getFloatAttr(type.getElementType(), 0)));
  auto joined = c.create(
      ConcatOp::getOperationName(), ValueRange{*column, zeros},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(axis + 1))});
  if (failed(joined))
    return failure();
  SmallVector<int64_t> merged(shape);
  merged[axis] = n * stride;
  auto flat = reshapeTo(c, *joined, merged);
  if (failed(flat))
    return failure();
  return sliceAxis(c, *flat, axis, 0, (n - 1) * stride + 1, 1);
}

// ConvTranspose over shapes known only at run time: per group, the
// weight's transpose times the input gives the columns [N, M*K, L] (L the
// input's spatial positions), which Col2Im sums into the output; its block
// grid is then the input's spatial size.
FailureOr<Values> convTransposeAtRunTime(NodeContext &c, int64_t group,
                                         ArrayRef<int64_t> strides,
                                         ArrayRef<int64_t> dilations,
                                         ArrayRef<int64_t> extra,
                                         ArrayRef<int64_t> outShape) {
  Value x = c.inputs[0], w = c.inputs[1];
  int64_t r = typeOf(x).getRank() - 2;
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  std::vector<int64_t> pads = ints(c, "pads", std::vector<int64_t>(2 * r, 0));
  if (autoPad == "VALID")
    pads.assign(2 * r, 0);
  else if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" &&
           autoPad != "SAME_LOWER")
    return c.error("auto_pad '" + autoPad + "' is not supported");
  if ((int64_t)pads.size() != 2 * r)
    return c.error("'pads' needs " + Twine(2 * r) + " values");
  OpChain g(c);
  auto i64 = [&](int64_t v) { return g.i64Constant({}, {v}, "deconv"); };
  auto one = [&](Value v) { return g.reshape(v, {1}); };
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  SmallVector<Value> kernel, image, padBegin, padEnd, front, sizes;
  Value positions = i64(1), blockCount = i64(1);
  for (int64_t i = 0; i < r; ++i) {
    Value in = g.dim(x, i + 2), k = g.dim(w, i + 2);
    kernel.push_back(k);
    positions = g.mul(positions, in);
    blockCount = g.mul(blockCount, k);
    // natural = s (D - 1) + output_padding + (K - 1) d + 1
    Value natural = g.add(
        g.add(g.mul(g.sub(in, i64(1)), i64(strides[i])), i64(extra[i] + 1)),
        g.mul(g.sub(k, i64(1)), i64(dilations[i])));
    Value out, begin;
    if (same || !outShape.empty()) {
      out = outShape.empty() ? g.mul(in, i64(strides[i])) : i64(outShape[i]);
      Value total = g.sub(natural, out);
      Value half = g.div(total, i64(2));
      begin = !same                     ? i64(pads[i])
              : autoPad == "SAME_UPPER" ? half
                                        : g.sub(total, half);
    } else {
      begin = i64(pads[i]);
      out = g.sub(natural, i64(pads[i] + pads[r + i]));
    }
    // Col2Im gives the positions from max(begin, 0) up to natural less the
    // output_padding (no end pad, so that its block grid is the input's:
    // the output_padding tail and a negative begin receive nothing); zeros
    // in front for a negative begin, then cropping or zeros at the end,
    // give the output's size.
    Value cut = g.op<MaxOp>({begin, i64(0)});
    image.push_back(g.sub(g.sub(natural, i64(extra[i])), cut));
    padBegin.push_back(cut);
    padEnd.push_back(i64(0));
    front.push_back(g.sub(cut, begin));
    sizes.push_back(out);
  }
  // x [N, g, C/g, L], w [g, C/g, M/g * K] transposed; columns [N, M * K, L].
  Value xs = g.reshapeBy(
      x, g.concat({one(i64(0)), one(i64(group)), one(i64(-1)), one(positions)},
                  0));
  Value ws = g.reshapeBy(w, g.concat({one(i64(group)), one(i64(-1)),
                                      one(g.mul(g.dim(w, 1), blockCount))},
                                     0));
  Value cols = g.matmul(g.transpose(ws, {0, 2, 1}), xs);
  cols = g.reshapeBy(cols,
                     g.concat({one(i64(0)), one(i64(-1)), one(positions)}, 0));
  if (g.failed())
    return failure();
  auto y = col2imAtRunTime(c, cols, image, kernel, padBegin, padEnd, strides,
                           dilations);
  if (failed(y))
    return failure();
  SmallVector<Value> extend; // pads: r begins, r ends
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < r; ++i)
    extend.push_back(one(front[i]));
  for (int64_t i = 0; i < r; ++i) {
    Value have = g.add(front[i], image[i]);
    extend.push_back(one(g.op<MaxOp>({g.sub(sizes[i], have), i64(0)})));
    axes.push_back(i + 2);
  }
  Value out = g.padConstant(*y, g.concat(extend, 0),
                            g.scalar(typeOf(x).getElementType(), 0),
                            g.i64Constant({r}, axes, "axes"));
  for (int64_t i = 0; i < r; ++i)
    out = g.sliceBy(out, i + 2, i64(0), sizes[i]);
  if (c.inputs.size() == 3 && c.inputs[2]) {
    SmallVector<int64_t> biasShape(r + 1, 1);
    biasShape[0] = ShapedType::kDynamic;
    out = g.add(out, g.reshape(c.inputs[2], biasShape));
  }
  if (g.failed())
    return failure();
  return Values{out};
}

// The kiln.conv of `operands` (input, weight[, bias]) with stride 1 along
// every spatial axis: both ways below end in one.
FailureOr<Value> strideOneConv(NodeContext &c, ValueRange operands,
                               ArrayRef<int64_t> pads,
                               ArrayRef<int64_t> dilations, int64_t group) {
  Builder &b = c.builder;
  return c.create(
      ConvOp::getOperationName(), operands,
      {b.getNamedAttr("strides", b.getDenseI64ArrayAttr(SmallVector<int64_t>(
                                     dilations.size(), 1))),
       b.getNamedAttr("pads", b.getDenseI64ArrayAttr(pads)),
       b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(dilations)),
       b.getNamedAttr("group", b.getI64IntegerAttr(group))});
}

// Strides equal to the kernel, no pads, dilation or groups (a U-Net's 2x2
// upsampling): each input position writes its own K1 x .. x Kr block of the
// output, so the whole op is a 1x1 conv to M * K1 * .. * Kr channels (the
// weight [C, M, K..] transposed to [M, K.., C]) whose channels are then
// spread over the blocks: reshape to [N, M, K.., D..], transpose to [N, M,
// D1, K1, D2, K2, ..], reshape to [N, M, D1 K1, ..]. The convolution over the
// zero-inserted input computes zeros for all but 1 in K1 .. Kr of its taps
// (unet's 2x2 up-convs: 16.6 of 43 ms).
FailureOr<Values> convTransposeByBlocks(NodeContext &c,
                                        ArrayRef<int64_t> kernel) {
  Value x = c.inputs[0], w = c.inputs[1];
  auto xType = typeOf(x), wType = typeOf(w);
  int64_t r = kernel.size(), channels = wType.getDimSize(0),
          out = wType.getDimSize(1), blocks = 1;
  for (int64_t k : kernel)
    blocks *= k;
  OpChain g(c);
  SmallVector<int64_t> perm = {1};
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i + 2);
  perm.push_back(0);
  SmallVector<int64_t> oneByOne = {out * blocks, channels};
  oneByOne.append(r, 1);
  Value weight = g.reshape(g.transpose(w, perm), oneByOne);
  SmallVector<Value> operands = {x, weight};
  if (c.inputs.size() == 3 && c.inputs[2]) {
    // Each output channel's bias for each of its block positions.
    Value bias = g.reshape(c.inputs[2], {out, 1});
    SmallVector<Value> copies(blocks, bias);
    operands.push_back(g.reshape(g.concat(copies, 1), {out * blocks}));
  }
  if (g.failed())
    return failure();
  auto conv = strideOneConv(c, operands, SmallVector<int64_t>(2 * r, 0),
                            SmallVector<int64_t>(r, 1), 1);
  if (failed(conv))
    return failure();
  int64_t batch = xType.getDimSize(0);
  SmallVector<int64_t> split = {batch, out}, spread = {0, 1},
                       merged = {batch, out};
  split.append(kernel.begin(), kernel.end());
  for (int64_t i = 0; i < r; ++i) {
    int64_t size = xType.getDimSize(i + 2);
    split.push_back(size);
    spread.append({2 + r + i, 2 + i});
    merged.push_back(size * kernel[i]);
  }
  Value y = g.reshape(g.transpose(g.reshape(*conv, split), spread), merged);
  if (g.failed())
    return failure();
  return Values{y};
}

} // namespace

FailureOr<Values> convertConvTranspose(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Value x = c.inputs[0], w = c.inputs[1];
  auto xType = typeOf(x), wType = typeOf(w);
  if (!isa<FloatType>(xType.getElementType()))
    return c.error("ConvTranspose needs a floating-point input");
  if (wType.getRank() < 3 || xType.getRank() != wType.getRank())
    return c.error("ConvTranspose needs an input and a weight of the same "
                   "rank >= 3");
  // A batch sized at run time keeps the convolution below (its zeros
  // inserted by pads); other symbolic dims take the columns' way.
  if (!wType.hasStaticShape() ||
      llvm::any_of(xType.getShape().drop_front(), ShapedType::isDynamic)) {
    size_t r = wType.getRank() - 2;
    int64_t group = c.getInt("group", 1);
    std::vector<int64_t> strides =
        ints(c, "strides", std::vector<int64_t>(r, 1));
    std::vector<int64_t> dilations =
        ints(c, "dilations", std::vector<int64_t>(r, 1));
    std::vector<int64_t> extra =
        ints(c, "output_padding", std::vector<int64_t>(r, 0));
    std::vector<int64_t> outShape = ints(c, "output_shape", {});
    if (outShape.size() == r + 2)
      outShape.erase(outShape.begin(), outShape.begin() + 2);
    if (group < 1 || strides.size() != r || dilations.size() != r ||
        extra.size() != r || (!outShape.empty() && outShape.size() != r))
      return c.error("ConvTranspose's group, strides, dilations, "
                     "output_padding and output_shape need one value per "
                     "spatial axis");
    return convTransposeAtRunTime(c, group, strides, dilations, extra,
                                  outShape);
  }
  size_t r = wType.getRank() - 2;
  int64_t group = c.getInt("group", 1);
  int64_t channels = xType.getDimSize(1);
  if (group < 1 || channels % group || wType.getDimSize(0) != channels)
    return c.error("ConvTranspose's weight [" + Twine(wType.getDimSize(0)) +
                   ", ...] does not fit " + Twine(channels) +
                   " input channels in " + Twine(group) + " groups");
  std::vector<int64_t> kernel(wType.getShape().begin() + 2,
                              wType.getShape().end());
  std::vector<int64_t> given = ints(c, "kernel_shape", kernel);
  if (given != kernel)
    return c.error("ConvTranspose's kernel_shape does not match the weight");
  std::vector<int64_t> strides = ints(c, "strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations =
      ints(c, "dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> extra =
      ints(c, "output_padding", std::vector<int64_t>(r, 0));
  std::vector<int64_t> outShape = ints(c, "output_shape", {});
  if (strides.size() != r || dilations.size() != r || extra.size() != r ||
      (!outShape.empty() && outShape.size() != r && outShape.size() != r + 2))
    return c.error("ConvTranspose's strides, dilations, output_padding and "
                   "output_shape need one value per spatial axis");
  if (outShape.size() == r + 2)
    outShape.erase(outShape.begin(), outShape.begin() + 2);
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * r, 0);
  auto natural = [&](size_t i) {
    return strides[i] * (xType.getDimSize(i + 2) - 1) + extra[i] +
           (kernel[i] - 1) * dilations[i] + 1;
  };
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < r; ++i) {
      int64_t out =
          outShape.empty() ? xType.getDimSize(i + 2) * strides[i] : outShape[i];
      int64_t total = natural(i) - out;
      pads[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[r + i] = total - pads[i];
    }
  } else if (autoPad == "NOTSET") {
    pads = ints(c, "pads", pads);
    if (pads.size() != 2 * r)
      return c.error("'pads' needs " + Twine(2 * r) + " values");
  } else if (autoPad != "VALID") {
    return c.error("auto_pad '" + autoPad + "' is not supported");
  }

  if (group == 1 && llvm::all_of(pads, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(extra, [](int64_t e) { return e == 0; }) &&
      llvm::all_of(dilations, [](int64_t d) { return d == 1; }) &&
      strides == kernel &&
      (outShape.empty() || llvm::all_of(llvm::seq<size_t>(0, r), [&](size_t i) {
         return outShape[i] == natural(i);
       })))
    return convTransposeByBlocks(c, kernel);

  // The input, dilated by the strides and cropped where a pad is negative.
  Value input = x;
  SmallVector<int64_t> convPads(2 * r);
  for (size_t i = 0; i < r; ++i) {
    int64_t axis = i + 2;
    auto dilated = insertZeros(c, input, axis, strides[i]);
    if (failed(dilated))
      return failure();
    input = *dilated;
    int64_t length = typeOf(input).getDimSize(axis);
    int64_t out =
        outShape.empty() ? natural(i) - pads[i] - pads[r + i] : outShape[i];
    if (out < 1)
      return c.error("ConvTranspose's output would be empty along axis " +
                     Twine(axis));
    int64_t begin = (kernel[i] - 1) * dilations[i] - pads[i];
    int64_t end = out - length + pads[i];
    if (begin < 0 || end < 0) {
      int64_t from = std::max<int64_t>(0, -begin);
      int64_t keep = length - from - std::max<int64_t>(0, -end);
      auto cropped = typeOf(input).hasStaticShape()
                         ? sliceAxis(c, input, axis, from, keep, 1)
                         : padAxis(c, input, axis, -from, keep + from - length);
      if (failed(cropped))
        return failure();
      input = *cropped;
      begin = std::max<int64_t>(0, begin);
      end = std::max<int64_t>(0, end);
    }
    convPads[i] = begin;
    convPads[r + i] = end;
  }

  // The weight, regrouped to [M, C/g, K..] and flipped.
  int64_t perGroupOut = wType.getDimSize(1), perGroupIn = channels / group;
  SmallVector<int64_t> grouped = {group, perGroupIn, perGroupOut};
  grouped.append(kernel.begin(), kernel.end());
  auto wg = reshapeTo(c, w, grouped);
  if (failed(wg))
    return failure();
  SmallVector<int64_t> perm = {0, 2, 1};
  for (size_t i = 0; i < r; ++i)
    perm.push_back(i + 3);
  auto wt = c.create(
      TransposeOp::getOperationName(), *wg,
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
  if (failed(wt))
    return failure();
  SmallVector<int64_t> regrouped = {group * perGroupOut, perGroupIn};
  regrouped.append(kernel.begin(), kernel.end());
  auto weight = reshapeTo(c, *wt, regrouped);
  if (failed(weight))
    return failure();
  for (size_t i = 0; i < r; ++i) {
    if (kernel[i] == 1)
      continue;
    auto flipped = sliceAxis(c, *weight, i + 2, kernel[i] - 1, kernel[i], -1);
    if (failed(flipped))
      return failure();
    weight = flipped;
  }

  SmallVector<Value> operands = {input, *weight};
  if (c.inputs.size() == 3 && c.inputs[2])
    operands.push_back(c.inputs[2]);
  return single(strideOneConv(c, operands, convPads, dilations, group));
}

void addConvTransposeConverters(ConverterTable &table) {
  addRows(table, {
                     {"ConvTranspose", convertConvTranspose},
                 });
}

} // namespace kiln::onnx_import
