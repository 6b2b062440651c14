//===- Losses.cpp - NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

FailureOr<Values> convertNegativeLogLikelihoodLoss(NodeContext &c) {
  return c.error("NegativeLogLikelihoodLoss is not supported yet");
}
FailureOr<Values> convertSoftmaxCrossEntropyLoss(NodeContext &c) {
  return c.error("SoftmaxCrossEntropyLoss is not supported yet");
}

} // namespace kiln::onnx_import
