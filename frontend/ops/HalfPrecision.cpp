//===- HalfPrecision.cpp - half-precision nodes computed in f32 ----------===//
//
// Softmax, the norms and the composite reductions are built from several
// kiln ops. On float16 (bfloat16, float8) each of those would round its
// result to the narrow type: x - max loses the low bits exp then magnifies,
// and a sum of squares overflows float16 past 65,504 where its mean would
// not. torch and onnxruntime compute such nodes in float32 and round the
// result once (ONNX's stash_type 1 says so for the norms), so these nodes
// are built on f32 casts of their inputs.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;

namespace kiln::onnx_import {

FailureOr<Values> computeInFloat32(NodeContext &c, Converter convert,
                                   int narrowResults) {
  Value first = c.inputs.empty() ? Value() : c.inputs[0];
  Type narrow = first ? typeOf(first).getElementType() : Type();
  if (!narrow || !(narrow.isF16() || isNarrowFloat(narrow)))
    return convert(c);
  Type f32 = c.builder.getF32Type();
  Values original = c.inputs;
  for (Value &v : c.inputs) {
    if (!v || typeOf(v).getElementType() != narrow)
      continue;
    auto wide = castTo(c, v, f32);
    if (failed(wide))
      return failure();
    v = wide->front();
  }
  auto results = convert(c);
  c.inputs = original;
  if (failed(results))
    return failure();
  for (auto [i, r] : llvm::enumerate(*results)) {
    if (!r || (narrowResults >= 0 && (int)i >= narrowResults) ||
        !typeOf(r).getElementType().isF32())
      continue;
    auto back = castTo(c, r, narrow);
    if (failed(back))
      return failure();
    r = back->front();
  }
  return results;
}

} // namespace kiln::onnx_import
