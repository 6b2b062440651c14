//===- Layout.cpp - DepthToSpace, SpaceToDepth, EyeLike -------------------===//
//
//  - DepthToSpace(x [N, C, H, W], blocksize b): DCR mode reshapes to
//    [N, b, b, C/b^2, H, W], CRD mode to [N, C/b^2, b, b, H, W]; a transpose
//    interleaves the blocks with H and W ([N, C/b^2, H, b, W, b]) and a
//    reshape gives [N, C/b^2, H*b, W*b].
//  - SpaceToDepth: the inverse: [N, C, H/b, b, W/b, b] transposed to
//    [N, b, b, C, H/b, W/b] (DCR) or [N, C, b, b, H/b, W/b] and reshaped to
//    [N, C*b^2, H/b, W/b]. ONNX's SpaceToDepth has no mode attribute; kiln
//    also takes mode = "CRD" (a node test uses it), DepthToSpace's inverse.
//  - EyeLike(x [R, C], k, dtype): cast(col - row == k) from two iotas.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

FailureOr<Value> permuted(NodeContext &c, Value x, ArrayRef<int64_t> perm) {
  return c.create(
      TransposeOp::getOperationName(), x,
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
}

// The static [N, C, H, W] shape of a DepthToSpace/SpaceToDepth input and
// its block size, checked.
FailureOr<std::pair<SmallVector<int64_t>, int64_t>> blocks(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  RankedTensorType type = typeOf(c.inputs[0]);
  int64_t b = c.getInt("blocksize", 0);
  if (type.getRank() != 4 || !type.hasStaticShape())
    return c.error("'" + c.node.op_type() +
                   "' needs a 4-D input of static shape");
  if (b < 1 || b > (1 << 20)) // b * b must not overflow
    return c.error("blocksize " + Twine(b) + " is out of range");
  return std::make_pair(SmallVector<int64_t>(type.getShape()), b);
}

} // namespace

FailureOr<Values> convertDepthToSpace(NodeContext &c) {
  auto in = blocks(c);
  if (failed(in))
    return failure();
  auto [s, b] = *in;
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

} // namespace kiln::onnx_import
