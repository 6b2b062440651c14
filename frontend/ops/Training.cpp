//===- Training.cpp - optimizer steps (ai.onnx.preview.training) ----------===//
//
// Adagrad, Adam and Momentum: one update of N tensors from the shared
// learning rate R and step count T. Inputs are R, T, then the N tensors X,
// their N gradients G and the N states (Adagrad: H; Momentum: V; Adam: V
// then H); outputs are the new X, then the new states in the same order.
// Each update is elementwise, computed in float64 (the reference mixes its
// float attributes and T in double) and rounded once to the tensors' type.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

enum class Optimizer { Adagrad, Adam, Momentum };

FailureOr<Values> optimizerStep(NodeContext &c, Optimizer kind) {
  size_t perTensor = kind == Optimizer::Adam ? 4 : 3;
  size_t n = c.inputs.size() < 2 ? 0 : (c.inputs.size() - 2) / perTensor;
  if (n == 0 || c.inputs.size() != 2 + n * perTensor ||
      llvm::is_contained(c.inputs, Value()))
    return c.error(c.node.op_type() + " takes R, T and " + Twine(perTensor) +
                   " inputs per tensor updated");
  if (kind == Optimizer::Momentum)
    for (const char *name : {"alpha", "beta", "mode", "norm_coefficient"})
      if (!c.attr(name))
        return c.error("Momentum needs the " + Twine(name) + " attribute");
  Type f64 = c.builder.getF64Type();
  OpChain g(c);
  auto k = [&](double v) { return g.scalar(f64, v); };
  auto wide = [&](Value v) { return g.cast(g.reshape(v, {}), f64); };
  Value r = wide(c.inputs[0]), t = wide(c.inputs[1]);
  Value started = g.op<GreaterOp>({t, k(0)});
  float norm = c.getFloat("norm_coefficient", 0);
  Values newX, states1, states2;
  for (size_t i = 0; i < n; ++i) {
    Value x = c.inputs[2 + i];
    Type type = typeOf(x).getElementType();
    // Input group `group` (0: X, 1: G, 2 and 3: the states) of tensor i,
    // in f64, and a value rounded back to that input's type.
    auto in = [&](size_t group) {
      return g.cast(c.inputs[2 + group * n + i], f64);
    };
    auto asInput = [&](Value v, size_t group) {
      return g.cast(v, typeOf(c.inputs[2 + group * n + i]).getElementType());
    };
    Value xw = g.cast(x, f64);
    Value grad = g.add(g.mul(k(norm), xw), in(1));
    auto sqrtPlusEps = [&](Value h) {
      return g.add(g.unary(SqrtOp::getOperationName(), h),
                   k(c.getFloat("epsilon", 1e-6f)));
    };
    if (kind == Optimizer::Adagrad) {
      Value rate =
          g.div(r, g.add(k(1), g.mul(t, k(c.getFloat("decay_factor", 0)))));
      Value h = g.add(in(2), g.mul(grad, grad));
      newX.push_back(
          g.cast(g.sub(xw, g.div(g.mul(rate, grad), sqrtPlusEps(h))), type));
      states1.push_back(asInput(h, 2));
    } else if (kind == Optimizer::Momentum) {
      std::string mode = c.getString("mode", "standard");
      if (mode != "standard" && mode != "nesterov")
        return c.error("Momentum mode '" + mode +
                       "' is not standard or nesterov");
      double alpha = c.getFloat("alpha", 0);
      Value betaAdjusted = g.where(started, k(c.getFloat("beta", 0)), k(1));
      Value v = g.add(g.mul(k(alpha), in(2)), g.mul(betaAdjusted, grad));
      Value step = mode == "standard" ? v : g.add(grad, g.mul(k(alpha), v));
      newX.push_back(g.cast(g.sub(xw, g.mul(r, step)), type));
      states1.push_back(asInput(v, 2));
    } else {
      double alpha = c.getFloat("alpha", 0.9), beta = c.getFloat("beta", 0.999);
      Value v = g.add(g.mul(k(alpha), in(2)), g.mul(k(1 - alpha), grad));
      Value h =
          g.add(g.mul(k(beta), in(3)), g.mul(k(1 - beta), g.mul(grad, grad)));
      auto pow = [&](double base) { return g.op<PowOp>({k(base), t}); };
      Value adjusted = g.div(
          g.mul(r, g.unary(SqrtOp::getOperationName(), g.sub(k(1), pow(beta)))),
          g.sub(k(1), pow(alpha)));
      Value rate = g.where(started, adjusted, r);
      Value updated = g.sub(xw, g.mul(rate, g.div(v, sqrtPlusEps(h))));
      double post = c.getFloat("norm_coefficient_post", 0);
      newX.push_back(g.cast(g.mul(k(1 - post), updated), type));
      states1.push_back(asInput(v, 2));
      states2.push_back(asInput(h, 3));
    }
  }
  if (g.failed())
    return failure();
  Values results = newX;
  results.append(states1);
  results.append(states2);
  return results;
}

} // namespace

FailureOr<Values> kiln::onnx_import::convertAdagrad(NodeContext &c) {
  return optimizerStep(c, Optimizer::Adagrad);
}
FailureOr<Values> kiln::onnx_import::convertAdam(NodeContext &c) {
  return optimizerStep(c, Optimizer::Adam);
}
FailureOr<Values> kiln::onnx_import::convertMomentum(NodeContext &c) {
  return optimizerStep(c, Optimizer::Momentum);
}

void kiln::onnx_import::addTrainingConverters(ConverterTable &table) {
  addRows(table, {
                     {"ai.onnx.preview.training.Adagrad", convertAdagrad},
                     {"ai.onnx.preview.training.Adam", convertAdam},
                     {"ai.onnx.preview.training.Momentum", convertMomentum},
                 });
}
