//===- NodeContext.cpp - what a converter sees of one node ----------------===//

#include "frontend/OnnxOps.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const onnx::GraphProto *NodeContext::graphAttr(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  return a && a->has_g() ? &a->g() : nullptr;
}

std::optional<int64_t> NodeContext::declaredRank(int i) const {
  if (!declaredRanks || i >= node.output_size())
    return std::nullopt;
  auto it = declaredRanks->find(node.output(i));
  if (it == declaredRanks->end())
    return std::nullopt;
  return it->second;
}

int64_t NodeContext::getInt(StringRef name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

float NodeContext::getFloat(StringRef name, float fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeContext::getString(StringRef name, StringRef fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback.str();
}

LogicalResult NodeContext::error(const Twine &message) const {
  return emitError(loc) << message;
}

FailureOr<Value> NodeContext::create(StringRef name, ValueRange operands,
                                     ArrayRef<NamedAttribute> attributes) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attributes);
  state.addTypes(operands.front().getType()); // replaced below
  Operation *op = builder.create(state);
  SmallVector<Type> types;
  if (failed(inferResultTypes(op, types))) {
    op->erase();
    return failure();
  }
  op->getResult(0).setType(types.front());
  return op->getResult(0);
}
