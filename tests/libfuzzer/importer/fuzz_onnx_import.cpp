//===- fuzz_onnx_import.cpp - libFuzzer target for the ONNX importer ------===//
//
// kilnc takes ONNX files from anywhere. Any bytes must give either an
// error (reported through MLIR diagnostics, as kilnc prints them) or a
// module in the kiln dialect that verifies; never a crash, undefined
// behaviour, an uncaught exception, or a module that fails the verifier
// (the passes after the importer assume a verified module).
//
// The bytes are parsed as an onnx::ModelProto (protobuf's parser is not
// what is under test, so inputs it rejects are skipped), the validity
// checks and the importer run on it (importOnnxModel, what kilnc calls
// after reading the file), then mlir::verify. Models over a small budget of
// nodes are skipped to keep executions fast.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "ir/KilnDialect.h"

#include <onnx/onnx_pb.h>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size)))
    return -1; // not a model: keep it out of the corpus
  int nodes = model.graph().node_size();
  for (const auto &function : model.functions())
    nodes += function.node_size();
  if (nodes > 200)
    return -1;
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.loadDialect<kiln::KilnDialect, mlir::func::FuncDialect,
                      mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect,
                      mlir::arith::ArithDialect, mlir::math::MathDialect>();
  // Errors are the expected outcome for most inputs; they must only be
  // reported, which a handler that takes them all lets them be.
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      kiln::importOnnxModel(context, model, "fuzz.onnx");
  if (module && mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "kiln fuzz invariant: the importer returned a "
                         "module that fails verification\n");
    std::abort();
  }
  return 0;
}
