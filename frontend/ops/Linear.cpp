//===- Linear.cpp - Gemm and MatMul ---------------------------------------===//
//
// Matrix products: Gemm (transposes, alpha, beta, bias) and MatMul.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

FailureOr<Values> gemm(NodeContext &c) {
  if (failed(arity(c, 2, 3)))
    return failure();
  Builder &b = c.builder;
  SmallVector<Value> operands = presentInputs(c);
  bool transA = c.getInt("transA", 0) != 0, transB = c.getInt("transB", 0) != 0;
  if (operands.size() == 3 && !typeOf(operands[2]).hasStaticShape()) {
    // C broadcasts to [M, N]; with symbolic dims only the run time knows
    // whether it is [1, N], [N], [M, 1] or [M, N], so it is expanded there.
    OpChain g(c);
    Value shape = g.concat({g.reshape(g.dim(operands[0], transA ? 1 : 0), {1}),
                            g.reshape(g.dim(operands[1], transB ? 0 : 1), {1})},
                           0);
    if (g.failed())
      return failure();
    auto expanded =
        c.create(ExpandToOp::getOperationName(), {operands[2], shape});
    if (failed(expanded))
      return failure();
    operands[2] = *expanded;
  }
  return single(c.create(
      GemmOp::getOperationName(), operands,
      {b.getNamedAttr("alpha", b.getF32FloatAttr(c.getFloat("alpha", 1.0f))),
       b.getNamedAttr("beta", b.getF32FloatAttr(c.getFloat("beta", 1.0f))),
       b.getNamedAttr("trans_a", b.getBoolAttr(transA)),
       b.getNamedAttr("trans_b", b.getBoolAttr(transB))}));
}
} // namespace

void kiln::onnx_import::addLinearConverters(ConverterTable &table) {
  addRows(table, {
                     {"Gemm", gemm},
                     {"MatMul", binary<MatMulOp>},
                 });
}
