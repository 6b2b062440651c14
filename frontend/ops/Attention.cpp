//===- Attention.cpp - Attention, RMSNormalization, RotaryEmbedding -------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {

FailureOr<Values> convertAttention(NodeContext &c) {
  return c.error("Attention is not supported yet");
}
FailureOr<Values> convertRMSNormalization(NodeContext &c) {
  return c.error("RMSNormalization is not supported yet");
}
FailureOr<Values> convertRotaryEmbedding(NodeContext &c) {
  return c.error("RotaryEmbedding is not supported yet");
}

} // namespace kiln::onnx_import
