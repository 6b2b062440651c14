//===- OnnxImporter.h - ONNX models into the kiln dialect ---------*- C++
//-*-===//
//
// Turns an ONNX ModelProto into a module with one func.func @main in the
// kiln dialect: graph inputs become arguments (named by `kiln.name`),
// initializers become kiln.constant ops holding dense resource blobs, each
// node becomes kiln ops located at the node's name. Every tensor is placed on
// `device`. A model that breaks the ONNX rules (OnnxValidate.h) is rejected
// first; then unsupported ops are all reported (node name and op type), not
// only the first.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_ONNXIMPORTER_H
#define KILN_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace kiln {

class Tensor;
enum class DType : uint8_t;

/// The ONNX TensorProto.DataType of a runtime dtype.
int onnxDataType(DType dtype);

struct ImportOptions {
  std::string device = "cpu";
  /// NAME=D0xD1... bindings for graph inputs with symbolic dims, applied at
  /// import so that shape computations fold to constants.
  std::vector<std::string> inputShapes;
  /// The length of each sequence graph input: kiln compiles a sequence as
  /// that many tensors (named NAME[0], NAME[1], ...).
  std::map<std::string, int64_t> sequenceLengths;
  /// Optional graph inputs compiled as having no value.
  std::vector<std::string> emptyOptionals;
};

/// Reads and imports `path`. On failure, reports through the context's
/// diagnostic handler and returns null.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxFile(mlir::MLIRContext &context, const std::string &path,
               const ImportOptions &options = {});

/// Imports an already-parsed model; `source` names it in locations.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, const onnx::ModelProto &model,
                const std::string &source, const ImportOptions &options = {});

/// Reads and parses `path` into `model` without importing it.
mlir::LogicalResult readOnnxFile(mlir::MLIRContext &context,
                                 const std::string &path,
                                 onnx::ModelProto &model);

/// Binds `weights` (kilnc --weights: names already remapped) to `model`
/// before import: a name that is an initializer replaces its data, one that
/// is a graph input without an initializer supplies it as a constant. Shapes
/// must match (an input's symbolic dims take any size); f16 and f64 weights
/// convert to f32 tensors, other dtypes must match. Every name that fits
/// nothing and every mismatch is reported at `loc`, in one error.
mlir::LogicalResult applyWeights(onnx::ModelProto &model,
                                 const std::map<std::string, Tensor> &weights,
                                 mlir::Location loc);

} // namespace kiln

#endif // KILN_FRONTEND_ONNXIMPORTER_H
