//===- KilnOps.cpp - shape inference of the compute ops -------------------===//
//
// Each compute op infers its result type from its operands: shape by the ONNX
// rule of the op (numpy broadcasting, matmul promotion, Gemm transposes),
// element type from the first operand, device from the operands. Dynamic
// dimensions stay `?`. A declared result type is accepted when it is
// compatible (same rank and element type, equal or dynamic dims), so the
// shape inference pass can refine `?` later.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

namespace {
using Shape = SmallVector<int64_t>;

LogicalResult fail(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

Type resultOf(ArrayRef<int64_t> shape, Value like) {
  auto type = cast<RankedTensorType>(like.getType());
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

Shape shapeOf(Value v) {
  return Shape(cast<RankedTensorType>(v.getType()).getShape());
}

bool dimsConflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

std::string str(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + (ShapedType::isDynamic(d) ? "?" : std::to_string(d));
  return s + "]";
}

LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange operands,
                             SmallVectorImpl<Type> &results) {
  Shape shape;
  if (!mlir::OpTrait::util::getBroadcastedShape(shapeOf(operands[0]),
                                                shapeOf(operands[1]), shape))
    return fail(loc, "operands of shapes " + str(shapeOf(operands[0])) +
                         " and " + str(shapeOf(operands[1])) +
                         " do not broadcast");
  results.push_back(resultOf(shape, operands[0]));
  return success();
}

LogicalResult inferMatMul(std::optional<Location> loc, Value lhs, Value rhs,
                          SmallVectorImpl<Type> &results) {
  Shape a = shapeOf(lhs), b = shapeOf(rhs);
  if (a.empty() || b.empty())
    return fail(loc, "matmul operands must have rank >= 1");
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA)
    a.insert(a.begin(), 1);
  if (vecB)
    b.push_back(1);
  int64_t m = a[a.size() - 2], k = a.back(), k2 = b[b.size() - 2], n = b.back();
  if (dimsConflict(k, k2))
    return fail(loc, "matmul contraction sizes differ: " + str(shapeOf(lhs)) +
                         " x " + str(shapeOf(rhs)));
  Shape batch;
  if (!mlir::OpTrait::util::getBroadcastedShape(
          ArrayRef(a).drop_back(2), ArrayRef(b).drop_back(2), batch))
    return fail(loc, "matmul batch dimensions do not broadcast: " +
                         str(shapeOf(lhs)) + " x " + str(shapeOf(rhs)));
  if (!vecA)
    batch.push_back(m);
  if (!vecB)
    batch.push_back(n);
  results.push_back(resultOf(batch, lhs));
  return success();
}
} // namespace

// Compatible: same rank, element type and encoding; dims equal or dynamic.
static bool compatible(TypeRange l, TypeRange r) {
  if (l.size() != r.size())
    return false;
  for (auto [a, b] : llvm::zip(l, r)) {
    auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
    if (!ta || !tb || ta.getRank() != tb.getRank() ||
        ta.getElementType() != tb.getElementType() ||
        ta.getEncoding() != tb.getEncoding())
      return false;
    for (auto [x, y] : llvm::zip(ta.getShape(), tb.getShape()))
      if (dimsConflict(x, y))
        return false;
  }
  return true;
}

#define KILN_INFER(OP)                                                         \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr attributes, OpaqueProperties properties,                  \
      RegionRange regions, SmallVectorImpl<Type> &results)
#define KILN_COMPATIBLE(OP)                                                    \
  bool OP::isCompatibleReturnTypes(TypeRange l, TypeRange r) {                 \
    return compatible(l, r);                                                   \
  }

#define KILN_UNARY(OP)                                                         \
  KILN_INFER(OP) {                                                             \
    results.push_back(operands[0].getType());                                  \
    return success();                                                          \
  }                                                                            \
  KILN_COMPATIBLE(OP)
KILN_UNARY(ReluOp)
KILN_UNARY(ErfOp)
KILN_UNARY(TanhOp)
KILN_UNARY(SigmoidOp)
KILN_UNARY(ExpOp)
KILN_UNARY(NegOp)
KILN_UNARY(SqrtOp)
KILN_UNARY(GeluOp)
KILN_UNARY(ClipOp)
KILN_UNARY(LogOp)
KILN_UNARY(AbsOp)
KILN_UNARY(FloorOp)
KILN_UNARY(CeilOp)
KILN_UNARY(SinOp)
KILN_UNARY(CosOp)
KILN_UNARY(NotOp)
KILN_UNARY(SignOp)
KILN_UNARY(RoundOp)
KILN_UNARY(TanOp)
KILN_UNARY(AsinOp)
KILN_UNARY(AcosOp)
KILN_UNARY(AtanOp)
KILN_UNARY(SinhOp)
KILN_UNARY(CoshOp)
KILN_UNARY(AsinhOp)
KILN_UNARY(AcoshOp)
KILN_UNARY(AtanhOp)

#define KILN_BINARY(OP)                                                        \
  KILN_INFER(OP) { return inferBroadcast(loc, operands, results); }            \
  KILN_COMPATIBLE(OP)
KILN_BINARY(AddOp)
KILN_BINARY(SubOp)
KILN_BINARY(MulOp)
KILN_BINARY(DivOp)
KILN_BINARY(PowOp)
KILN_BINARY(MaxOp)
KILN_BINARY(MinOp)
KILN_BINARY(AndOp)
KILN_BINARY(OrOp)
KILN_BINARY(XorOp)
KILN_BINARY(ModOp)
KILN_BINARY(ShiftLeftOp)
KILN_BINARY(ShiftRightOp)

#define KILN_COMPARE(OP)                                                       \
  KILN_INFER(OP) {                                                             \
    if (failed(inferBroadcast(loc, operands, results)))                        \
      return failure();                                                        \
    auto type = cast<RankedTensorType>(results.back());                        \
    results.back() = RankedTensorType::get(                                    \
        type.getShape(), IntegerType::get(operands[0].getContext(), 1),        \
        type.getEncoding());                                                   \
    return success();                                                          \
  }                                                                            \
  KILN_COMPATIBLE(OP)
KILN_COMPARE(EqualOp)
KILN_COMPARE(LessOp)
KILN_COMPARE(LessEqualOp)
KILN_COMPARE(GreaterOp)
KILN_COMPARE(GreaterEqualOp)

KILN_INFER(WhereOp) {
  Shape shape;
  if (!mlir::OpTrait::util::getBroadcastedShape(shapeOf(operands[0]),
                                                shapeOf(operands[1]), shape) ||
      !mlir::OpTrait::util::getBroadcastedShape(Shape(shape),
                                                shapeOf(operands[2]), shape))
    return fail(loc, "where operands of shapes " + str(shapeOf(operands[0])) +
                         ", " + str(shapeOf(operands[1])) + " and " +
                         str(shapeOf(operands[2])) + " do not broadcast");
  if (!cast<RankedTensorType>(operands[0].getType())
           .getElementType()
           .isInteger(1))
    return fail(loc, "where condition must be i1");
  results.push_back(resultOf(shape, operands[1]));
  return success();
}
KILN_COMPATIBLE(WhereOp)

KILN_INFER(MatMulOp) {
  return inferMatMul(loc, operands[0], operands[1], results);
}
KILN_COMPATIBLE(MatMulOp)

KILN_INFER(GemmOp) {
  GemmOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape a = shapeOf(adaptor.getA()), b = shapeOf(adaptor.getB());
  if (a.size() != 2 || b.size() != 2)
    return fail(loc, "gemm operands A and B must be 2-D, got " + str(a) +
                         " and " + str(b));
  if (adaptor.getTransA())
    std::swap(a[0], a[1]);
  if (adaptor.getTransB())
    std::swap(b[0], b[1]);
  if (dimsConflict(a[1], b[0]))
    return fail(loc, "gemm contraction sizes differ: op(A) is " + str(a) +
                         " and op(B) is " + str(b));
  Shape out = {a[0], b[1]};
  if (Value c = adaptor.getC()) {
    Shape broadcast;
    if (!mlir::OpTrait::util::getBroadcastedShape(shapeOf(c), out, broadcast) ||
        broadcast.size() != 2 || dimsConflict(broadcast[0], out[0]) ||
        dimsConflict(broadcast[1], out[1]))
      return fail(loc, "gemm C of shape " + str(shapeOf(c)) +
                           " does not broadcast to " + str(out));
  }
  results.push_back(resultOf(out, adaptor.getA()));
  return success();
}
KILN_COMPATIBLE(GemmOp)

namespace {
// Output size of a sliding window (conv/pool) along one dim.
int64_t windowOutput(int64_t in, int64_t kernel, int64_t stride, int64_t padB,
                     int64_t padE, int64_t dilation, bool ceil) {
  if (ShapedType::isDynamic(in) || ShapedType::isDynamic(kernel))
    return ShapedType::kDynamic;
  // ONNX's count, floor or ceil of span / stride, plus 1. A ceil_mode
  // window may overhang the padded input by up to stride - 1, even when it
  // is the only one (span > -stride), as onnxruntime and torch count it.
  int64_t span = in + padB + padE - dilation * (kernel - 1) - 1;
  int64_t out =
      llvm::divideFloorSigned(ceil ? span + stride - 1 : span, stride) + 1;
  // A last window that would start in the end padding is dropped.
  if (ceil && out > 0 && (out - 1) * stride >= in + padB)
    --out;
  return out <= 0 ? -1 : out;
}

LogicalResult inferWindow(std::optional<Location> loc, Value input,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                          bool ceil, int64_t channels,
                          SmallVectorImpl<Type> &results) {
  Shape in = shapeOf(input);
  size_t r = kernel.size();
  if (in.size() != r + 2 || strides.size() != r || pads.size() != 2 * r ||
      dilations.size() != r)
    return fail(loc, "window of rank " + Twine(r) + " needs an input of rank " +
                         Twine(r + 2) + " and " + Twine(r) +
                         " strides and dilations and " + Twine(2 * r) +
                         " pads, got input " + str(in));
  Shape out = {in[0], channels};
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 ||
        (kernel[i] < 1 && !ShapedType::isDynamic(kernel[i])) || pads[i] < 0 ||
        pads[r + i] < 0)
      return fail(loc, "window sizes, strides and dilations must be positive "
                       "and pads non-negative");
    int64_t o = windowOutput(in[i + 2], kernel[i], strides[i], pads[i],
                             pads[r + i], dilations[i], ceil);
    if (o == -1 || o == 0)
      return fail(loc, "window of size " + Twine(kernel[i]) +
                           " does not fit input " + str(in));
    out.push_back(o);
  }
  results.push_back(resultOf(out, input));
  return success();
}
} // namespace

KILN_INFER(ConvOp) {
  ConvOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput()), w = shapeOf(adaptor.getWeight());
  int64_t group = adaptor.getGroup();
  if (w.size() != in.size() || w.size() < 3)
    return fail(loc,
                "conv weight " + str(w) + " does not match input " + str(in));
  if (group == 0) { // depthwise: as many groups as input channels
    if (dimsConflict(w[1], 1) ||
        (!ShapedType::isDynamic(w[0]) && !ShapedType::isDynamic(in[1]) &&
         w[0] % in[1] != 0))
      return fail(loc, "depthwise conv weight " + str(w) +
                           " must be [M, 1, ...] with M a multiple of the "
                           "input's " +
                           Twine(in[1]) + " channels");
    group = 1; // the channel check below then holds trivially
  } else if (group < 0 || (!ShapedType::isDynamic(w[0]) && w[0] % group != 0)) {
    return fail(loc, "conv group " + Twine(group) +
                         " must divide the output channels of weight " +
                         str(w));
  }
  if (adaptor.getGroup() != 0 && !ShapedType::isDynamic(in[1]) &&
      !ShapedType::isDynamic(w[1]) && in[1] != w[1] * group)
    return fail(loc, "conv input has " + Twine(in[1]) +
                         " channels but weight " + str(w) + " with group " +
                         Twine(group) + " needs " + Twine(w[1] * group));
  if (Value bias = adaptor.getBias()) {
    Shape b = shapeOf(bias);
    if (b.size() != 1 || dimsConflict(b[0], w[0]))
      return fail(loc,
                  "conv bias " + str(b) + " must be [" + Twine(w[0]) + "]");
  }
  return inferWindow(loc, adaptor.getInput(), ArrayRef(w).drop_front(2),
                     adaptor.getStrides(), adaptor.getPads(),
                     adaptor.getDilations(), false, w[0], results);
}
KILN_COMPATIBLE(ConvOp)

KILN_INFER(MaxPoolOp) {
  MaxPoolOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput());
  return inferWindow(loc, adaptor.getInput(), adaptor.getKernelShape(),
                     adaptor.getStrides(), adaptor.getPads(),
                     adaptor.getDilations(), adaptor.getCeilMode(),
                     in.size() > 1 ? in[1] : ShapedType::kDynamic, results);
}
KILN_COMPATIBLE(MaxPoolOp)

KILN_INFER(AvgPoolOp) {
  AvgPoolOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput());
  return inferWindow(loc, adaptor.getInput(), adaptor.getKernelShape(),
                     adaptor.getStrides(), adaptor.getPads(),
                     adaptor.getDilations(), adaptor.getCeilMode(),
                     in.size() > 1 ? in[1] : ShapedType::kDynamic, results);
}
KILN_COMPATIBLE(AvgPoolOp)

KILN_INFER(ExpandOp) {
  ExpandOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape shape;
  if (!mlir::OpTrait::util::getBroadcastedShape(shapeOf(adaptor.getInput()),
                                                adaptor.getShape(), shape))
    return fail(loc, "cannot expand " + str(shapeOf(adaptor.getInput())) +
                         " to " + str(adaptor.getShape()));
  // A dynamic dim expanded by 0 is 0 (it can only be 1 or 0), which
  // getBroadcastedShape leaves dynamic; the lowering sizes dynamic dims
  // from the input alone and would keep a 1.
  ArrayRef<int64_t> to = adaptor.getShape();
  for (auto [i, entry] : llvm::enumerate(llvm::reverse(to)))
    if (entry == 0)
      shape[shape.size() - 1 - i] = 0;
  results.push_back(resultOf(shape, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ExpandOp)

KILN_INFER(SliceOp) {
  SliceOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), sizes = adaptor.getSizes(),
                    steps = adaptor.getSteps();
  if (starts.size() != in.size() || sizes.size() != in.size() ||
      steps.size() != in.size())
    return fail(loc,
                "slice needs one start, size and step per dim of " + str(in));
  for (size_t i = 0; i < in.size(); ++i) {
    if (ShapedType::isDynamic(in[i]) || sizes[i] == 0)
      continue;
    int64_t last = starts[i] + (sizes[i] - 1) * steps[i];
    if (steps[i] == 0 || starts[i] < 0 || starts[i] >= in[i] || last < 0 ||
        last >= in[i])
      return fail(loc, "slice dim " + Twine(i) + " reads outside " + str(in));
  }
  results.push_back(resultOf(Shape(sizes), adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(SliceOp)

KILN_INFER(ConcatOp) {
  ConcatOp::Adaptor adaptor(operands, attributes, properties, regions);
  if (operands.empty())
    return fail(loc, "concat needs inputs");
  Shape out = shapeOf(operands[0]);
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= (int64_t)out.size())
    return fail(loc, "concat axis " + Twine(axis) + " is out of range");
  for (Value v : operands.drop_front()) {
    Shape s = shapeOf(v);
    if (s.size() != out.size())
      return fail(loc, "concat inputs differ in rank");
    for (size_t i = 0; i < s.size(); ++i) {
      if ((int64_t)i == axis) {
        out[i] = ShapedType::isDynamic(out[i]) || ShapedType::isDynamic(s[i])
                     ? ShapedType::kDynamic
                     : out[i] + s[i];
      } else if (dimsConflict(out[i], s[i])) {
        return fail(loc, "concat inputs differ in dim " + Twine(i));
      }
    }
  }
  results.push_back(resultOf(out, operands[0]));
  return success();
}
KILN_COMPATIBLE(ConcatOp)

KILN_INFER(ReduceOp) {
  ReduceOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput()), out;
  ArrayRef<int64_t> axes = adaptor.getAxes();
  for (int64_t axis : axes)
    if (axis < 0 || axis >= (int64_t)in.size())
      return fail(loc, "reduce axis " + Twine(axis) + " is out of range for " +
                           str(in));
  for (auto [i, d] : llvm::enumerate(in)) {
    if (!llvm::is_contained(axes, (int64_t)i))
      out.push_back(d);
    else if (adaptor.getKeepdims())
      out.push_back(1);
  }
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ReduceOp)

LogicalResult ReduceOp::verify() {
  if (!llvm::is_contained({"sum", "mean", "max", "min", "prod"}, getKind()))
    return emitOpError() << "kind '" << getKind()
                         << "' is not one of sum, mean, max, min, prod";
  SmallVector<int64_t> axes(getAxes());
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return emitOpError() << "repeats an axis";
  return success();
}

KILN_INFER(ReshapeOp) {
  ReshapeOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput()), out;
  ArrayRef<int64_t> spec = adaptor.getShape();
  int64_t known = 1, inferred = -1;
  bool dynamic = false;
  // Symbolic dims copied from the input: when they are all its symbolic
  // dims, they cancel out of the inferred one ([s, n, 2, 256] to [0, 0, -1]
  // is [s, n, 512] whatever n).
  int64_t copiedDynamic = 0, outDynamic = 0;
  for (auto [i, d] : llvm::enumerate(spec)) {
    int64_t dim = d;
    if (d == kReshapeCopy) {
      if (i >= in.size())
        return fail(loc, "reshape copies dim " + Twine(i) + " of " + str(in) +
                             ", which has no such dim");
      dim = in[i];
      copiedDynamic += ShapedType::isDynamic(dim);
    } else if (d == -1) {
      if (inferred >= 0)
        return fail(loc, "reshape shape has more than one -1");
      inferred = i;
    } else if (d < -1) {
      return fail(loc, "reshape shape has negative dim " + Twine(d));
    }
    out.push_back(dim);
    if (d != -1) {
      if (ShapedType::isDynamic(dim))
        dynamic = true, ++outDynamic;
      else if (llvm::MulOverflow(known, dim, known))
        return fail(loc, "reshape shape " + str(out) +
                             " has more elements than int64 counts");
    }
  }
  int64_t total = 1, inDynamic = 0;
  for (int64_t d : in) {
    if (ShapedType::isDynamic(d))
      dynamic = true, ++inDynamic;
    else if (llvm::MulOverflow(total, d, total))
      return fail(loc, "reshape input " + str(in) +
                           " has more elements than int64 counts");
  }
  bool cancels = outDynamic == copiedDynamic && copiedDynamic == inDynamic;
  if (inferred >= 0) {
    if (dynamic && !cancels)
      out[inferred] = ShapedType::kDynamic;
    else if (known == 0 || total % known != 0)
      return fail(loc, "cannot reshape " + str(in) + " to " + str(spec));
    else
      out[inferred] = total / known;
  } else if ((!dynamic || cancels) && known != total) {
    return fail(loc, "cannot reshape " + str(in) + " (" + Twine(total) +
                         " elements) to " + str(out));
  }
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ReshapeOp)

KILN_INFER(CastOp) {
  CastOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  Type to = adaptor.getTo();
  if (!to.isIntOrFloat())
    return fail(loc, "cast target must be an integer or float type");
  results.push_back(RankedTensorType::get(in.getShape(), to, in.getEncoding()));
  return success();
}
KILN_COMPATIBLE(CastOp)

KILN_INFER(BitcastOp) {
  BitcastOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  Type from = in.getElementType(), to = adaptor.getTo();
  auto storageBits = [](Type t) {
    return t.isInteger(1) ? 8u : t.getIntOrFloatBitWidth();
  };
  if (!to.isIntOrFloat() || to.isInteger(1) ||
      (from.isInteger(1) && !isa<IntegerType>(to)) ||
      storageBits(from) != storageBits(to) || storageBits(from) % 8)
    return fail(loc, "bitcast needs types of one width in bytes, not from " +
                         Twine(storageBits(from)) + " to " +
                         Twine(storageBits(to)) + " bits");
  results.push_back(RankedTensorType::get(in.getShape(), to, in.getEncoding()));
  return success();
}
KILN_COMPATIBLE(BitcastOp)

KILN_INFER(GatherElementsOp) {
  GatherElementsOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape data = shapeOf(adaptor.getData()), idx = shapeOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (data.size() != idx.size() || axis < 0 || axis >= (int64_t)data.size())
    return fail(loc, "gather_elements needs data and indices of one rank and "
                     "an axis within it, got " +
                         str(data) + " and " + str(idx));
  auto indexType =
      cast<RankedTensorType>(adaptor.getIndices().getType()).getElementType();
  if (!indexType.isInteger(64) && !indexType.isInteger(32))
    return fail(loc, "gather_elements indices must be i32 or i64");
  results.push_back(resultOf(idx, adaptor.getData()));
  return success();
}
KILN_COMPATIBLE(GatherElementsOp)

KILN_INFER(TransposeOp) {
  TransposeOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput()), out;
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<bool> seen(in.size(), false);
  if (perm.size() != in.size())
    return fail(loc, "transpose perm has " + Twine(perm.size()) +
                         " entries for rank " + Twine(in.size()));
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)in.size() || seen[p])
      return fail(loc, "transpose perm is not a permutation of 0.." +
                           Twine(in.size() - 1));
    seen[p] = true;
    out.push_back(in[p]);
  }
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(TransposeOp)

KILN_INFER(ShapeOp) {
  ShapeOp::Adaptor adaptor(operands, attributes, properties, regions);
  int64_t rank = shapeOf(adaptor.getInput()).size();
  int64_t start = adaptor.getStart(), end = adaptor.getEnd();
  if (start < 0 || end > rank || start > end)
    return fail(loc, "shape range [" + Twine(start) + ", " + Twine(end) +
                         ") does not lie in the input's rank " + Twine(rank));
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  results.push_back(RankedTensorType::get(
      {end - start}, IntegerType::get(input.getContext(), 64),
      input.getEncoding()));
  return success();
}
KILN_COMPATIBLE(ShapeOp)

namespace {
// The length of a 1-D integer tensor holding a shape or axes, or a
// diagnostic.
FailureOr<int64_t> specLength(std::optional<Location> loc, Value spec) {
  auto type = cast<RankedTensorType>(spec.getType());
  if (type.getRank() != 1 || type.isDynamicDim(0) ||
      !isa<IntegerType>(type.getElementType()))
    return fail(loc, "a shape or axes operand must be a 1-D integer tensor of "
                     "static length");
  return type.getDimSize(0);
}
} // namespace

KILN_INFER(ExpandToOp) {
  ExpandToOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto length = specLength(loc, adaptor.getShape());
  if (failed(length))
    return failure();
  Shape in = shapeOf(adaptor.getInput());
  int64_t rank = std::max<int64_t>(in.size(), *length);
  Shape out(rank, ShapedType::kDynamic);
  for (size_t i = 0; i < in.size(); ++i)
    if (!ShapedType::isDynamic(in[i]) && in[i] != 1)
      out[rank - in.size() + i] = in[i];
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ExpandToOp)

KILN_INFER(ConstantOfShapeOp) {
  ConstantOfShapeOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto length = specLength(loc, adaptor.getShape());
  if (failed(length))
    return failure();
  auto shape = cast<RankedTensorType>(adaptor.getShape().getType());
  results.push_back(RankedTensorType::get(Shape(*length, ShapedType::kDynamic),
                                          adaptor.getValue().getType(),
                                          shape.getEncoding()));
  return success();
}
KILN_COMPATIBLE(ConstantOfShapeOp)

KILN_INFER(ReshapeToOp) {
  ReshapeToOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto length = specLength(loc, adaptor.getSpec());
  if (failed(length))
    return failure();
  int64_t rank = shapeOf(adaptor.getInput()).size();
  StringRef mode = adaptor.getMode();
  int64_t out = mode.starts_with("reshape") ? *length
                : mode == "unsqueeze"       ? rank + *length
                : mode == "flatten"         ? 2
                                            : rank - *length;
  if (out < 0)
    return fail(loc, "cannot squeeze " + Twine(*length) + " axes of rank " +
                         Twine(rank));
  results.push_back(
      resultOf(Shape(out, ShapedType::kDynamic), adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ReshapeToOp)

LogicalResult ReshapeToOp::verify() {
  if (!llvm::is_contained(
          {"reshape", "reshape_allowzero", "unsqueeze", "squeeze", "flatten"},
          getMode()))
    return emitOpError() << "mode '" << getMode()
                         << "' is not one of reshape, reshape_allowzero, "
                            "unsqueeze, squeeze, flatten";
  return success();
}

KILN_INFER(PadOp) {
  PadOp::Adaptor adaptor(operands, attributes, properties, regions);
  // Pads and axes of a length known only at run time name distinct axes.
  for (Value spec : {adaptor.getPads(), adaptor.getAxes()})
    if (spec && (shapeOf(spec).size() != 1 ||
                 !isa<IntegerType>(
                     cast<RankedTensorType>(spec.getType()).getElementType())))
      return fail(loc, "pad's pads and axes must be 1-D integer tensors");
  Shape in = shapeOf(adaptor.getInput()), out = in;
  // Static where the pads are constants (and the axes, when given).
  auto ints = [](Value v) -> std::optional<SmallVector<int64_t>> {
    auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
    if (!constant)
      return std::nullopt;
    auto dense = dyn_cast<DenseIntElementsAttr>(constant.getValue());
    if (!dense)
      return std::nullopt;
    SmallVector<int64_t> values;
    for (const APInt &v : dense.getValues<APInt>())
      values.push_back(v.getSExtValue());
    return values;
  };
  auto pads = ints(adaptor.getPads());
  std::optional<SmallVector<int64_t>> axes;
  if (adaptor.getAxes())
    axes = ints(adaptor.getAxes());
  else
    axes = llvm::to_vector(llvm::seq<int64_t>(0, in.size()));
  int64_t rank = in.size();
  if (!pads || !axes) {
    out.assign(rank, ShapedType::kDynamic);
  } else {
    if ((int64_t)pads->size() != 2 * (int64_t)axes->size())
      return fail(loc, "pad needs a begin and an end pad per axis, got " +
                           Twine(pads->size()) + " pads for " +
                           Twine(axes->size()) + " axes");
    for (auto [k, a] : llvm::enumerate(*axes)) {
      int64_t axis = a < 0 ? a + rank : a;
      if (axis < 0 || axis >= rank)
        return fail(loc, "pad axis " + Twine(a) + " is out of range");
      if (ShapedType::isDynamic(out[axis]))
        continue;
      out[axis] += (*pads)[k] + (*pads)[axes->size() + k];
      if (out[axis] < 0)
        return fail(loc, "pads crop dim " + Twine(axis) + " below zero");
    }
  }
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(PadOp)

LogicalResult PadOp::verify() {
  if (!llvm::is_contained({"constant", "edge", "reflect", "wrap"}, getMode()))
    return emitOpError() << "mode '" << getMode()
                         << "' is not one of constant, edge, reflect, wrap";
  return success();
}

KILN_INFER(SliceByOp) {
  SliceByOp::Adaptor adaptor(operands, attributes, properties, regions);
  // The specs may be of a length known only at run time (distinct axes,
  // so at most the input's rank).
  for (Value spec : {adaptor.getStarts(), adaptor.getEnds(), adaptor.getAxes(),
                     adaptor.getSteps()})
    if (spec && (shapeOf(spec).size() != 1 ||
                 !isa<IntegerType>(
                     cast<RankedTensorType>(spec.getType()).getElementType())))
      return fail(loc, "slice starts, ends, axes and steps must be 1-D "
                       "integer tensors");
  Shape in = shapeOf(adaptor.getInput());
  results.push_back(
      resultOf(Shape(in.size(), ShapedType::kDynamic), adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(SliceByOp)

KILN_INFER(RangeOp) {
  for (Value v : operands)
    if (shapeOf(v).size() != 0 ||
        cast<RankedTensorType>(v.getType()).getElementType() !=
            cast<RankedTensorType>(operands[0].getType()).getElementType())
      return fail(loc, "range needs scalar start, limit and delta of one type");
  results.push_back(resultOf({ShapedType::kDynamic}, operands[0]));
  return success();
}
KILN_COMPATIBLE(RangeOp)

KILN_INFER(ReduceByOp) {
  ReduceByOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto length = specLength(loc, adaptor.getAxes());
  if (failed(length))
    return failure();
  Shape in = shapeOf(adaptor.getInput()), out;
  if (adaptor.getKeepdims()) {
    for (int64_t d : in)
      out.push_back(d == 1 ? 1 : ShapedType::kDynamic);
  } else if ((int64_t)in.size() >= *length) {
    out.assign(in.size() - *length, ShapedType::kDynamic);
  } else {
    return fail(loc, "cannot reduce " + Twine(*length) + " axes of rank " +
                         Twine(in.size()));
  }
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ReduceByOp)

KILN_INFER(ResizeOp) {
  ResizeOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> shape = adaptor.getShape();
  if (shape.size() != in.size())
    return fail(loc, "resize shape " + str(shape) +
                         " does not have the "
                         "input's rank " +
                         Twine(in.size()));
  Shape out;
  for (int64_t d : shape)
    out.push_back(d < 0 ? ShapedType::kDynamic : d);
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(ResizeOp)

KILN_INFER(GatherOp) {
  GatherOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape data = shapeOf(adaptor.getData()), idx = shapeOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= (int64_t)data.size())
    return fail(loc, "gather axis " + Twine(axis) + " is out of range for " +
                         str(data));
  auto indexType =
      cast<RankedTensorType>(adaptor.getIndices().getType()).getElementType();
  if (!indexType.isInteger(64) && !indexType.isInteger(32))
    return fail(loc, "gather indices must be i32 or i64");
  Shape out(data.begin(), data.begin() + axis);
  out.append(idx.begin(), idx.end());
  out.append(data.begin() + axis + 1, data.end());
  results.push_back(resultOf(out, adaptor.getData()));
  return success();
}
KILN_COMPATIBLE(GatherOp)

KILN_INFER(ScatterOp) {
  ScatterOp::Adaptor adaptor(operands, attributes, properties, regions);
  results.push_back(adaptor.getData().getType());
  return success();
}
KILN_COMPATIBLE(ScatterOp)

LogicalResult ScatterOp::verify() {
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, getReduction()))
    return emitOpError() << "reduction '" << getReduction()
                         << "' is not one of none, add, mul, max, min";
  auto data = getData().getType(), idx = getIndices().getType(),
       upd = getUpdates().getType();
  if (!isa<IntegerType>(idx.getElementType()) ||
      upd.getElementType() != data.getElementType())
    return emitOpError() << "needs integer indices and updates of data's "
                            "element type";
  int64_t rank = data.getRank();
  if (getMode() == "elements") {
    int64_t axis = static_cast<int64_t>(getAxis());
    if (idx.getRank() != rank || upd.getRank() != rank || axis < 0 ||
        axis >= rank)
      return emitOpError() << "needs indices and updates of data's rank and "
                              "an axis in range";
    for (int64_t d = 0; d < rank; ++d)
      if (!idx.isDynamicDim(d) && !upd.isDynamicDim(d) &&
          idx.getDimSize(d) != upd.getDimSize(d))
        return emitOpError() << "needs indices and updates of one shape";
    return success();
  }
  if (getMode() != "nd")
    return emitOpError() << "mode '" << getMode()
                         << "' is not one of elements, nd";
  int64_t k = idx.getRank() - 1 + rank - upd.getRank();
  if (idx.getRank() < 1 || k < 0 || k > rank ||
      (!idx.isDynamicDim(idx.getRank() - 1) &&
       idx.getDimSize(idx.getRank() - 1) != k))
    return emitOpError() << "needs index tuples of length K with updates of "
                            "rank (indices rank - 1 + data rank - K)";
  return success();
}

KILN_INFER(GatherNDOp) {
  GatherNDOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape data = shapeOf(adaptor.getData()), idx = shapeOf(adaptor.getIndices());
  int64_t b = adaptor.getBatchDims(), k = adaptor.getTupleLength();
  if (idx.empty() || (!ShapedType::isDynamic(idx.back()) && idx.back() != k))
    return fail(loc, "gather_nd index tuples must have length " + Twine(k));
  if (b < 0 || b + k > (int64_t)data.size() || b >= (int64_t)idx.size())
    return fail(loc, "gather_nd index tuples of length " + Twine(k) +
                         " after " + Twine(b) + " batch dims do not fit " +
                         str(data));
  Shape out(idx.begin(), idx.end() - 1);
  out.append(data.begin() + b + k, data.end());
  results.push_back(resultOf(out, adaptor.getData()));
  return success();
}
KILN_COMPATIBLE(GatherNDOp)

KILN_INFER(GridSampleOp) {
  GridSampleOp::Adaptor adaptor(operands, attributes, properties, regions);
  Shape in = shapeOf(adaptor.getInput()), grid = shapeOf(adaptor.getGrid());
  if (in.size() < 3 || grid.size() != in.size() ||
      (!ShapedType::isDynamic(grid.back()) &&
       grid.back() != (int64_t)in.size() - 2))
    return fail(loc, "grid_sample needs an input [N, C, D...] and a grid "
                     "[N, O..., k] of its rank, k its spatial rank; got " +
                         str(in) + " and " + str(grid));
  Shape out{in[0], in[1]};
  out.append(grid.begin() + 1, grid.end() - 1);
  results.push_back(resultOf(out, adaptor.getInput()));
  return success();
}
KILN_COMPATIBLE(GridSampleOp)

LogicalResult GridSampleOp::verify() {
  if (!llvm::is_contained({"nearest", "linear", "cubic"}, getMode()))
    return emitOpError() << "mode '" << getMode()
                         << "' is not one of nearest, linear, cubic";
  if (!llvm::is_contained({"zeros", "border", "reflection"}, getPaddingMode()))
    return emitOpError() << "padding_mode '" << getPaddingMode()
                         << "' is not one of zeros, border, reflection";
  if (!isa<FloatType>(getInput().getType().getElementType()) ||
      !isa<FloatType>(getGrid().getType().getElementType()))
    return emitOpError() << "needs a floating-point input and grid";
  return success();
}

LogicalResult kiln::inferResultTypes(Operation *op,
                                     SmallVectorImpl<Type> &types) {
  if (auto copy = dyn_cast<CopyOp>(op)) {
    types.push_back(withDevice(copy.getInput().getType(),
                               copy.getResult().getType().getEncoding()));
    return success();
  }
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return op->emitOpError() << "does not infer its result types";
  return infer.inferReturnTypes(op->getContext(), op->getLoc(),
                                op->getOperands(), op->getRawDictionaryAttrs(),
                                op->getPropertiesStorage(), op->getRegions(),
                                types);
}

namespace {
/// gemm(A, constant B, trans_b) -> gemm(A, constant B^T): the transpose is
/// paid once at compile time, and the kernel reads B with unit stride.
struct FoldConstantTransB : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    auto constant = op.getB().getDefiningOp<ConstantOp>();
    if (!op.getTransB() || !constant || !op.getB().hasOneUse())
      return failure();
    auto type = cast<RankedTensorType>(constant.getType());
    std::vector<char> bytes = getConstantBytes(constant.getValue());
    int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    if (bytes.empty() || rows * cols == 0)
      return failure();
    size_t width = bytes.size() / (rows * cols);
    std::vector<char> transposed(bytes.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(&transposed[(c * rows + r) * width],
                    &bytes[(r * cols + c) * width], width);
    auto newType = RankedTensorType::get({cols, rows}, type.getElementType(),
                                         type.getEncoding());
    std::string name = "transposed";
    if (auto resource =
            dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
      name = resource.getRawHandle().getKey().str() + "_T";
    rewriter.setInsertionPoint(constant);
    auto newConstant = rewriter.create<ConstantOp>(
        constant.getLoc(), newType,
        makeConstantAttr(newType, transposed, name));
    rewriter.modifyOpInPlace(op, [&] {
      op.getBMutable().assign(newConstant);
      op.setTransB(false);
    });
    return success();
  }
};
} // namespace

void GemmOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<FoldConstantTransB>(context);
}
