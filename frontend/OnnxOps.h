//===- OnnxOps.h - per-node converters (internal) -----------------*- C++
//-*-===//

#ifndef KILN_FRONTEND_ONNXOPS_H
#define KILN_FRONTEND_ONNXOPS_H

#include "ir/KilnDialect.h"

#include <onnx/onnx_pb.h>

namespace kiln::onnx_import {

/// Converts a TensorProto to a constant of its type on `device`. Data kept
/// in an external file is read relative to `modelDir`.
mlir::FailureOr<std::pair<mlir::RankedTensorType, mlir::ElementsAttr>>
convertTensor(const onnx::TensorProto &tensor, mlir::Attribute device,
              mlir::Location loc, llvm::StringRef blobName,
              llvm::StringRef modelDir);

/// What a converter sees of one node.
struct NodeContext {
  const onnx::NodeProto &node;
  mlir::OpBuilder &builder;
  mlir::Location loc;
  mlir::Attribute device;
  llvm::StringRef modelDir;
  int64_t opset;
  /// One per node input; null for an omitted optional input ("").
  llvm::SmallVector<mlir::Value> inputs;

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t fallback) const;
  float getFloat(llvm::StringRef name, float fallback) const;
  std::string getString(llvm::StringRef name, llvm::StringRef fallback) const;
  /// Creates kiln op `name` with result types inferred from the operands;
  /// fails (with a diagnostic at the node) when they do not fit the op.
  mlir::FailureOr<mlir::Value>
  create(llvm::StringRef name, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attributes = {});
  mlir::LogicalResult error(const llvm::Twine &message) const;
};

using Converter =
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> (*)(NodeContext &);

/// The converter for ONNX op `opType` in the default domain, or null.
Converter findConverter(llvm::StringRef opType);

/// Evaluates a node whose inputs are all small integer constants (shape
/// computations) into constants. nullopt: not such a node, convert it.
std::optional<mlir::FailureOr<llvm::SmallVector<mlir::Value>>>
tryFold(NodeContext &c);

/// Ops kiln supports only when they can be folded (tryFold).
bool isOnlyFolded(llvm::StringRef opType);

} // namespace kiln::onnx_import

#endif // KILN_FRONTEND_ONNXOPS_H
