//===- fuzz_placement_json.cpp - libFuzzer target for placement's JSON ----===//
//
// kilnc reads two JSON files a user writes by hand: a pins file (--pins:
// rules of op types, node-name regular expressions and device names) and
// device profiles (--profile DEVICE=FILE.json: numbers and op lists). Any
// bytes must give rules or profiles, or an error reported through MLIR's
// diagnostics; never a crash, undefined behaviour (a huge number cast to an
// integer), an uncaught exception, or a regular expression that runs away.
//
// The first byte picks the file (even: pins, odd: a profile); the rest is
// its text, in an in-memory file. Pins run the kiln-place-pins pass over a
// small imported model (ops with ONNX node names and types to match); a
// profile is loaded as an override of sim:0 and then asked what the cost
// model asks of it (supports, seconds, transferSeconds) for every op.
//
//===----------------------------------------------------------------------===//

#include "../FuzzCommon.h"
#include "frontend/OnnxImporter.h"
#include "ir/KilnDialect.h"
#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

#include <onnx/onnx_pb.h>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

// x[2,8] -> Relu "/enc/relu" -> MatMul "/enc/layers.0/MatMul" (w[8,4])
// -> Add "head.add" -> Softmax "head/softmax".
onnx::ModelProto smallModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("pins");
  auto value = [](onnx::ValueInfoProto *v, const char *name,
                  std::initializer_list<int64_t> dims) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "x", {2, 8});
  value(g->add_output(), "y", {2, 4});
  onnx::TensorProto *w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(8);
  w->add_dims(4);
  for (int i = 0; i < 32; ++i)
    w->add_float_data(0.125f * (i % 7) - 0.25f);
  auto node = [&](const char *op, const char *name,
                  std::initializer_list<const char *> ins, const char *out) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const char *i : ins)
      n->add_input(i);
    n->add_output(out);
  };
  node("Relu", "/enc/relu", {"x"}, "r");
  node("MatMul", "/enc/layers.0/MatMul", {"r", "w"}, "mm");
  node("Add", "head.add", {"mm", "mm"}, "s");
  node("Softmax", "head/softmax", {"s"}, "y");
  return m;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return -1;
  static kiln::fuzz::MemFile file("placement.json");
  file.assign(data + 1, size - 1);
  bool pins = data[0] % 2 == 0;

  // One context and model for many inputs (importing per input would cost
  // most of the time), renewed now and then: device names and patterns
  // intern attributes in the context, which would otherwise only grow.
  static std::unique_ptr<mlir::MLIRContext> context;
  static mlir::OwningOpRef<mlir::ModuleOp> module;
  static unsigned uses = 0;
  if (!context || ++uses % 4096 == 0) {
    module = nullptr;
    context = std::make_unique<mlir::MLIRContext>(
        mlir::MLIRContext::Threading::DISABLED);
    context
        ->loadDialect<kiln::KilnDialect, mlir::func::FuncDialect,
                      mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect,
                      mlir::arith::ArithDialect, mlir::math::MathDialect>();
    // Errors are the expected outcome for most inputs; they must only be
    // reported, which a handler that takes them all lets them be.
    context->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
    module = kiln::importOnnxModel(*context, smallModel(), "pins.onnx");
    if (!module) {
      std::fprintf(stderr, "kiln fuzz invariant: the fixed model no longer "
                           "imports\n");
      std::abort();
    }
  }
  // Placement from the last input must not decide what this one sees.
  module->walk([](mlir::Operation *op) { op->removeAttr(kiln::kPlaceAttr); });
  if (pins) {
    mlir::PassManager pm(context.get());
    kiln::KilnPlacePinsOptions options;
    options.rules = file.path();
    pm.addNestedPass<mlir::func::FuncOp>(kiln::createKilnPlacePins(options));
    (void)pm.run(*module);
    return 0;
  }
  auto profiles = kiln::loadProfiles(
      module->getLoc(), {"cpu", "sim:0", "cuda:0"}, {"sim:0=" + file.path()});
  if (mlir::failed(profiles))
    return 0;
  double total = 0;
  module->walk([&](mlir::Operation *op) {
    if (!kiln::isPlaceable(op))
      return;
    for (const kiln::DeviceProfile &p : *profiles) {
      if (p.supports(op))
        total += p.seconds(op);
      total += p.transferSeconds(4096, profiles->front());
    }
  });
  // Costs are compared and summed by placement: they must be numbers.
  if (std::isnan(total)) {
    std::fprintf(stderr, "kiln fuzz invariant: a loaded profile gives a "
                         "NaN cost\n");
    std::abort();
  }
  return 0;
}
