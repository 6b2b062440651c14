//===- OpChain.h - a converter's chain of kiln ops ---------------*- C++
//-*-===//
//
// Converters that build many ops (Attention, the recurrent ops) chain them
// through OpChain: each call creates one kiln op at the node and returns
// null once any has failed (the diagnostic is already at the node), so the
// code reads as a formula and checks failed() once at the end.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_OPCHAIN_H
#define KILN_FRONTEND_OPCHAIN_H

#include "frontend/OnnxOps.h"

namespace kiln::onnx_import {

/// Builds kiln ops for one node. After the first failure (reported at the
/// node by NodeContext::create) every call returns null; check failed().
class OpChain {
public:
  explicit OpChain(NodeContext &c) : c(c) {}

  bool failed() const { return !ok; }

  mlir::Value op(llvm::StringRef name, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    if (!ok || llvm::is_contained(operands, mlir::Value()))
      return fail();
    auto result = c.create(name, operands, attributes);
    return mlir::failed(result) ? fail() : *result;
  }
  template <typename OpTy>
  mlir::Value op(mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    return op(OpTy::getOperationName(), operands, attributes);
  }

  mlir::Value add(mlir::Value a, mlir::Value b) { return op<AddOp>({a, b}); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return op<SubOp>({a, b}); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return op<MulOp>({a, b}); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return op<DivOp>({a, b}); }
  mlir::Value matmul(mlir::Value a, mlir::Value b) {
    return op<MatMulOp>({a, b});
  }
  /// A matmul (or a sum over the last axis) whose float16 operands are
  /// widened to float32 so that it accumulates in float32 (as numpy does for
  /// float16), the result rounded back once.
  mlir::Value wideMatmul(mlir::Value a, mlir::Value b) {
    mlir::Type t = a ? typeOf(a).getElementType() : mlir::Type();
    if (!t || !t.isF16())
      return matmul(a, b);
    mlir::Type f32 = c.builder.getF32Type();
    return cast(matmul(cast(a, f32), cast(b, f32)), t);
  }
  mlir::Value wideSumLast(mlir::Value v) {
    mlir::Type t = v ? typeOf(v).getElementType() : mlir::Type();
    if (!t || !t.isF16())
      return reduceLast("sum", v);
    return cast(reduceLast("sum", cast(v, c.builder.getF32Type())), t);
  }
  mlir::Value where(mlir::Value cond, mlir::Value x, mlir::Value y) {
    return op<WhereOp>({cond, x, y});
  }

  /// A rank-0 constant of element type `element`.
  mlir::Value scalar(mlir::Type element, double value) {
    auto plain = mlir::RankedTensorType::get({}, element);
    mlir::Attribute attr =
        mlir::isa<mlir::FloatType>(element)
            ? mlir::Attribute(c.builder.getFloatAttr(element, value))
            : mlir::Attribute(
                  c.builder.getIntegerAttr(element, (int64_t)value));
    return c.builder.create<ConstantOp>(
        c.loc, mlir::RankedTensorType::get({}, element, c.device),
        mlir::DenseElementsAttr::get(plain, attr));
  }

  /// The blob name of a constant this node makes.
  std::string blobName(llvm::StringRef what) const {
    return (c.node.output_size() ? c.node.output(0)
                                 : std::string("attention")) +
           "_" + what.str();
  }
  /// A constant of `shape` and `element` holding `bytes` (row-major; one
  /// byte per i1 element).
  mlir::Value constant(llvm::ArrayRef<int64_t> shape, mlir::Type element,
                       llvm::ArrayRef<char> bytes, llvm::StringRef what) {
    auto type = mlir::RankedTensorType::get(shape, element, c.device);
    return c.builder.create<ConstantOp>(
        c.loc, type, makeConstantAttr(type, bytes, blobName(what)));
  }
  mlir::Value i64Constant(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> values,
                          llvm::StringRef what) {
    return int64Constant(c, shape, values, blobName(what));
  }
  /// A constant of `shape` filled with `value`.
  mlir::Value splat(llvm::ArrayRef<int64_t> shape, mlir::Type element,
                    double value) {
    auto plain = mlir::RankedTensorType::get(shape, element);
    mlir::Attribute attr = c.builder.getFloatAttr(element, value);
    return c.builder.create<ConstantOp>(
        c.loc, mlir::RankedTensorType::get(shape, element, c.device),
        mlir::DenseElementsAttr::get(plain, attr));
  }

  mlir::Value cast(mlir::Value v, mlir::Type to) {
    if (!v || typeOf(v).getElementType() == to)
      return v;
    return op<CastOp>({v},
                      {c.builder.getNamedAttr("to", mlir::TypeAttr::get(to))});
  }
  mlir::Value unary(llvm::StringRef name, mlir::Value v) {
    return op(name, {v});
  }
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> dims) {
    if (!ok || !v)
      return fail();
    auto result = reshapeToDims(c, v, dims);
    return mlir::failed(result) ? fail() : *result;
  }
  /// kiln.reshape_to `v` by the ONNX Reshape `spec` (0 copies, -1 infers),
  /// read at run time.
  mlir::Value reshapeBy(mlir::Value v, mlir::Value spec) {
    if (!ok || !v || !spec)
      return fail();
    return take(reshapeBySpec(c, v, spec, "reshape"));
  }
  /// kiln.pad (constant mode) of `v` by `pads` with `value` along `axes`.
  mlir::Value padConstant(mlir::Value v, mlir::Value pads, mlir::Value value,
                          mlir::Value axes) {
    if (!ok || !v || !pads || !value || !axes)
      return fail();
    return take(padBy(c, v, pads, value, axes, "constant"));
  }
  /// kiln.slice_by of `axis` from `start` to `end` (rank-0 int64s read at
  /// run time) every `step`.
  mlir::Value sliceBy(mlir::Value v, int64_t axis, mlir::Value start,
                      mlir::Value end, int64_t step = 1) {
    mlir::Builder &b = c.builder;
    return op<SliceByOp>(
        {v, reshape(start, {1}), reshape(end, {1}),
         i64Constant({1}, {axis}, "axis"), i64Constant({1}, {step}, "step")},
        {b.getNamedAttr("operandSegmentSizes",
                        b.getDenseI32ArrayAttr({1, 1, 1, 1, 1}))});
  }
  /// Dim `axis` (negative counts from the end) of `v` as a rank-0 int64.
  mlir::Value dim(mlir::Value v, int64_t axis) {
    if (!ok || !v)
      return fail();
    if (axis < 0)
      axis += typeOf(v).getRank();
    auto result = dimValue(c, v, axis);
    return mlir::failed(result) ? fail() : *result;
  }
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm) {
    return op<TransposeOp>(
        {v},
        {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
  }
  /// `size` elements of `axis` from `start`, every `step`th.
  mlir::Value slice(mlir::Value v, int64_t axis, int64_t start, int64_t size,
                    int64_t step = 1) {
    if (!ok || !v)
      return fail();
    auto shape = typeOf(v).getShape();
    llvm::SmallVector<int64_t> starts(shape.size(), 0), sizes(shape),
        steps(shape.size(), 1);
    starts[axis] = start;
    sizes[axis] = size;
    steps[axis] = step;
    mlir::Builder &b = c.builder;
    return op<SliceOp>(
        {v}, {b.getNamedAttr("starts", b.getDenseI64ArrayAttr(starts)),
              b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes)),
              b.getNamedAttr("steps", b.getDenseI64ArrayAttr(steps))});
  }
  /// `size` elements of the last axis from `start`, every `step`th.
  mlir::Value sliceLast(mlir::Value v, int64_t start, int64_t size,
                        int64_t step = 1) {
    return v ? slice(v, typeOf(v).getRank() - 1, start, size, step) : fail();
  }
  mlir::Value concat(mlir::ValueRange values, int64_t axis) {
    return op<ConcatOp>(
        values,
        {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(axis))});
  }
  /// kiln.reduce of `kind` over `axes`, keeping them.
  mlir::Value reduceAxes(llvm::StringRef kind, mlir::Value v,
                         std::vector<int64_t> axes) {
    if (!ok || !v)
      return fail();
    auto result = reduce(c, kind, std::move(axes), true, v);
    return mlir::failed(result) ? fail() : *result;
  }
  mlir::Value reduceLast(llvm::StringRef kind, mlir::Value v) {
    return reduceAxes(kind, v, {-1});
  }

  /// `x` [B, H, S, E] with each head repeated `repeat` times in place
  /// ([B, H * repeat, S, E]: grouped KV heads widened to the query heads).
  mlir::Value repeatHeads(mlir::Value x, int64_t repeat) {
    if (!ok || !x || repeat == 1)
      return x;
    auto shape = typeOf(x).getShape();
    int64_t heads = shape[1] * repeat;
    mlir::Value five = take(unsqueezeAt(c, x, 2));
    if (typeOf(x).hasStaticShape())
      return reshape(
          op<ExpandOp>({five}, {c.builder.getNamedAttr(
                                   "shape", c.builder.getDenseI64ArrayAttr(
                                                {shape[0], shape[1], repeat,
                                                 shape[2], shape[3]}))}),
          {shape[0], heads, shape[2], shape[3]});
    mlir::Value expanded = op<ExpandToOp>(
        {five, i64Constant({5}, {1, 1, repeat, 1, 1}, "repeat")});
    mlir::Value spec =
        concat({reshape(dim(x, 0), {1}), i64Constant({1}, {heads}, "heads"),
                reshape(dim(x, 2), {1}), reshape(dim(x, 3), {1})},
               0);
    return reshapeBy(expanded, spec);
  }

private:
  mlir::Value take(mlir::FailureOr<mlir::Value> result) {
    return mlir::failed(result) ? fail() : *result;
  }
  mlir::Value fail() {
    ok = false;
    return {};
  }

  NodeContext &c;
  bool ok = true;
};

} // namespace kiln::onnx_import

#endif // KILN_FRONTEND_OPCHAIN_H
