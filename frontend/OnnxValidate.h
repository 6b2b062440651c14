//===- OnnxValidate.h - is an ONNX model well formed? -------------*- C++
//-*-===//
//
// The checks kilnc makes of a ModelProto before importing it, after
// onnx.checker.check_model: opset imports, names defined once and before
// use, and each node against its op's schema (the ONNX ops' schemas come
// from frontend/OnnxSchemas.inc, generated from the onnx package).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_ONNXVALIDATE_H
#define KILN_FRONTEND_ONNXVALIDATE_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <map>
#include <string>

namespace onnx {
class ModelProto;
}

namespace kiln::onnx_import {

/// The opset version `model` imports of each domain, keyed by domain (""
/// for the default one, which a model may also spell "ai.onnx"). A model
/// of IR version 1 or 2 imports nothing: it has default opset 1. When a
/// domain is listed twice the last entry wins (validateModel rejects it).
std::map<std::string, int64_t> importedOpsets(const onnx::ModelProto &model);

/// Reports, at `file` or at the node concerned, every way `model` breaks
/// the ONNX rules that onnx.checker.check_model enforces and kiln relies
/// on; fails if there is one.
mlir::LogicalResult validateModel(const onnx::ModelProto &model,
                                  mlir::Location file);

} // namespace kiln::onnx_import

#endif // KILN_FRONTEND_ONNXVALIDATE_H
