//===- Resize.cpp - Resize, Upsample, GridSample --------------------------===//
//
// Both become one kiln.resize (passes/lowering/Resize.cpp interpolates).
// Scales, sizes and roi may be known only at run time, as the ONNX node
// tests give them; when they are constants (as exported models have them)
// the result shape is static and the axes that keep their size at scale 1
// are dropped. Upsample (opset 9, scales as an input) and Resize-10 map
// output i to i / scale ("asymmetric") with nearest picking the floor, as
// onnxruntime does for them.
//
// GridSample becomes one kiln.grid_sample (passes/lowering/GridSample.cpp);
// opset 16's modes bilinear and bicubic are opset 20's linear and cubic.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

// Whether `v` is absent: omitted, or an empty tensor standing for one.
bool absent(Value v) {
  return !v || (typeOf(v).hasStaticShape() && typeOf(v).getNumElements() == 0);
}

LogicalResult oneOf(NodeContext &c, StringRef what, StringRef value,
                    ArrayRef<StringRef> allowed) {
  if (llvm::is_contained(allowed, value))
    return success();
  return c.error(what + " '" + value + "' is not one of " +
                 llvm::join(allowed, ", "));
}

} // namespace

FailureOr<Values> convertResize(NodeContext &c) {
  bool old = c.node.op_type() == "Upsample" || c.opset < 11;
  Value x, roi, scales, sizes;
  if (old) {
    if (failed(arity(c, 2, 2)))
      return failure();
    scales = c.inputs[1];
  } else {
    if (failed(arity(c, 1, 4)))
      return failure();
    roi = c.inputs.size() > 1 ? c.inputs[1] : Value();
    scales = c.inputs.size() > 2 ? c.inputs[2] : Value();
    sizes = c.inputs.size() > 3 ? c.inputs[3] : Value();
  }
  x = c.inputs[0];
  if (absent(scales) == absent(sizes))
    return c.error("Resize needs exactly one of scales and sizes");
  Value spec = absent(sizes) ? scales : sizes;
  bool bySizes = !absent(sizes);

  std::string mode = c.getString("mode", "nearest");
  std::string coordinate = c.getString("coordinate_transformation_mode",
                                       old ? "asymmetric" : "half_pixel");
  std::string nearest =
      c.getString("nearest_mode", old ? "floor" : "round_prefer_floor");
  std::string policy = c.getString("keep_aspect_ratio_policy", "stretch");
  if (failed(oneOf(c, "mode", mode, {"nearest", "linear", "cubic"})) ||
      failed(oneOf(c, "coordinate_transformation_mode", coordinate,
                   {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                    "align_corners", "asymmetric", "tf_crop_and_resize"})) ||
      failed(oneOf(
          c, "nearest_mode", nearest,
          {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})) ||
      failed(oneOf(c, "keep_aspect_ratio_policy", policy,
                   {"stretch", "not_larger", "not_smaller"})))
    return failure();
  bool antialias = c.getInt("antialias", 0) != 0;
  if (antialias && mode == "nearest")
    return c.error("antialias is not defined for mode 'nearest'");
  if (policy != "stretch" && !bySizes)
    policy = "stretch"; // the policy applies to sizes only

  RankedTensorType xType = typeOf(x);
  int64_t rank = xType.getRank();
  auto given = normalizedAxes(c, {}, rank);
  if (failed(given))
    return failure();
  std::vector<int64_t> axes = *given;
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  int64_t k = axes.size();
  RankedTensorType specType = typeOf(spec);
  if (specType.getRank() != 1 ||
      (!specType.isDynamicDim(0) && specType.getDimSize(0) != k))
    return c.error(Twine(bySizes ? "sizes" : "scales") + " must hold one " +
                   "value per resized axis (" + Twine(k) + ")");
  if (!bySizes && !isa<FloatType>(specType.getElementType()))
    return c.error("scales must be floating-point");
  if (bySizes && !specType.getElementType().isInteger(64))
    return c.error("sizes must be int64");
  bool crop = coordinate == "tf_crop_and_resize";
  if (crop && absent(roi))
    return c.error("coordinate_transformation_mode 'tf_crop_and_resize' "
                   "needs roi");
  if (crop &&
      (typeOf(roi).getRank() != 1 ||
       !isa<FloatType>(typeOf(roi).getElementType()) ||
       (!typeOf(roi).isDynamicDim(0) && typeOf(roi).getDimSize(0) != 2 * k)))
    return c.error("roi must be a floating-point vector of " + Twine(2 * k) +
                   " values");
  // Lengths known only at run time are checked there (a reshape).
  if (specType.isDynamicDim(0)) {
    auto counted = reshapeTo(c, spec, {k});
    if (failed(counted))
      return failure();
    spec = *counted;
  }
  if (crop && typeOf(roi).isDynamicDim(0)) {
    auto counted = reshapeTo(c, roi, {2 * k});
    if (failed(counted))
      return failure();
    roi = *counted;
  }

  // The result shape, static where the spec is a constant.
  std::vector<int64_t> shape(xType.getShape().begin(), xType.getShape().end());
  auto values = constantValues<double>(spec);
  if (values)
    for (double v : *values)
      if (!(v > 0)) // also NaN
        return c.error(Twine(bySizes ? "sizes" : "scales") +
                       " must be positive");
  bool staticAxes = values && static_cast<int64_t>(values->size()) == k;
  for (int64_t a : axes)
    staticAxes &= !xType.isDynamicDim(a);
  std::vector<double> scale(k);
  for (int64_t p = 0; p < k; ++p) {
    int64_t a = axes[p];
    if (!staticAxes) {
      shape[a] = -1;
      continue;
    }
    double in = static_cast<double>(xType.getDimSize(a));
    scale[p] = bySizes ? (*values)[p] / in : (*values)[p];
    shape[a] = bySizes ? static_cast<int64_t>((*values)[p])
                       : static_cast<int64_t>(scale[p] * in);
  }
  if (staticAxes && policy != "stretch") {
    double common = scale[0];
    for (double s : scale)
      common =
          policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    for (int64_t p = 0; p < k; ++p) {
      scale[p] = common;
      shape[axes[p]] = static_cast<int64_t>(
          common * static_cast<double>(xType.getDimSize(axes[p])) + 0.5);
    }
  }
  for (int64_t d : shape)
    if (d == 0)
      return c.error("Resize to an empty dim is not supported");
  // Constant scales of 1 that keep an axis's size leave it alone.
  if (staticAxes && !crop && policy == "stretch") {
    std::vector<int64_t> kept;
    std::vector<double> keptValues;
    for (int64_t p = 0; p < k; ++p)
      if (!(scale[p] == 1.0 && shape[axes[p]] == xType.getDimSize(axes[p]))) {
        kept.push_back(axes[p]);
        keptValues.push_back((*values)[p]);
      }
    if (kept.empty())
      return Values{x};
    if (kept.size() != axes.size()) {
      axes = kept;
      k = kept.size();
      if (bySizes) {
        std::vector<int64_t> ints(keptValues.begin(), keptValues.end());
        spec = int64Constant(c, {k}, ints, "sizes");
      } else {
        auto plain = RankedTensorType::get({k}, c.builder.getF32Type());
        std::vector<float> floats(keptValues.begin(), keptValues.end());
        spec = c.builder.create<ConstantOp>(
            c.loc, RankedTensorType::get({k}, plain.getElementType(), c.device),
            DenseElementsAttr::get(plain, ArrayRef<float>(floats)));
      }
    }
  }

  Builder &b = c.builder;
  SmallVector<Value> operands = {x, spec};
  if (crop)
    operands.push_back(roi);
  return single(c.create(
      ResizeOp::getOperationName(), operands,
      {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes)),
       b.getNamedAttr("sizes", b.getBoolAttr(bySizes)),
       b.getNamedAttr("mode", b.getStringAttr(mode)),
       b.getNamedAttr("coordinate_mode", b.getStringAttr(coordinate)),
       b.getNamedAttr("nearest_mode", b.getStringAttr(nearest)),
       b.getNamedAttr("cubic_coeff_a",
                      b.getF64FloatAttr(c.getFloat("cubic_coeff_a", -0.75f))),
       b.getNamedAttr("exclude_outside",
                      b.getBoolAttr(c.getInt("exclude_outside", 0) != 0)),
       b.getNamedAttr("extrapolation_value",
                      b.getF64FloatAttr(c.getFloat("extrapolation_value", 0))),
       b.getNamedAttr("antialias", b.getBoolAttr(antialias)),
       b.getNamedAttr("aspect_policy", b.getStringAttr(policy)),
       b.getNamedAttr("shape", b.getDenseI64ArrayAttr(shape))}));
}

// GridSample: kiln.grid_sample; opset 16's bilinear/bicubic are linear/cubic.
FailureOr<Values> convertGridSample(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  std::string mode = c.getString("mode", c.opset < 20 ? "bilinear" : "linear");
  if (mode == "bilinear")
    mode = "linear";
  else if (mode == "bicubic")
    mode = "cubic";
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return c.error("GridSample mode '" + mode + "' is not supported");
  std::string padding = c.getString("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return c.error("GridSample padding_mode '" + padding +
                   "' is not supported");
  auto &b = c.builder;
  return single(c.create(
      GridSampleOp::getOperationName(), c.inputs,
      {b.getNamedAttr("mode", b.getStringAttr(mode)),
       b.getNamedAttr("padding_mode", b.getStringAttr(padding)),
       b.getNamedAttr("align_corners",
                      b.getBoolAttr(c.getInt("align_corners", 0) != 0))}));
}

void addResizeConverters(ConverterTable &table) {
  addRows(table, {
                     {"Resize", convertResize},
                     {"Upsample", convertResize},
                     {"GridSample", convertGridSample},
                 });
}

} // namespace kiln::onnx_import
