//===- Ml.cpp - ai.onnx.ml ops --------------------------------------------===//
//
// The classical-ML domain's elementwise and indexing ops:
//
//   Binarizer              1 where x > threshold, else 0, in x's type.
//   ArrayFeatureExtractor  x[..., indices] (indices flattened); a 1-D x
//                          gives [1, n].
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

FailureOr<Values> kiln::onnx_import::convertBinarizer(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  Type t = typeOf(x).getElementType();
  OpChain g(c);
  Value y =
      g.where(g.op<GreaterOp>({x, g.scalar(t, c.getFloat("threshold", 0))}),
              g.scalar(t, 1), g.scalar(t, 0));
  if (g.failed())
    return failure();
  return Values{y};
}

FailureOr<Values>
kiln::onnx_import::convertArrayFeatureExtractor(NodeContext &c) {
  if (failed(arity(c, 2, 2)))
    return failure();
  Value x = c.inputs[0], indices = c.inputs[1];
  auto iType = typeOf(indices);
  if (!iType.hasStaticShape() || !isa<IntegerType>(iType.getElementType()))
    return c.error("ArrayFeatureExtractor needs integer indices of static "
                   "shape");
  int64_t rank = typeOf(x).getRank();
  if (rank == 0)
    return c.error("ArrayFeatureExtractor of a scalar");
  OpChain g(c);
  Value flat = g.reshape(indices, {iType.getNumElements()});
  Value y = g.op<GatherOp>(
      {x, flat},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(rank - 1))});
  if (rank == 1)
    y = g.reshape(y, {1, iType.getNumElements()});
  if (g.failed())
    return failure();
  return Values{y};
}

void kiln::onnx_import::addMlConverters(ConverterTable &table) {
  addRows(table, {
                     {"ai.onnx.ml.Binarizer", convertBinarizer},
                     {"ai.onnx.ml.ArrayFeatureExtractor",
                      convertArrayFeatureExtractor},
                 });
}
