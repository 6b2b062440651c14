//===- FrontendTest.cpp - the ONNX importer -------------------------------===//

#include "OnnxBuilder.h"

#include "frontend/OnnxImporter.h"
#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using kiln::testing::OnnxBuilder;

namespace {

struct Imported {
  OwningOpRef<ModuleOp> module;
  std::vector<std::string> errors; // "location: message"
};

Imported import(MLIRContext &ctx, const OnnxBuilder &b) {
  Imported out;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << d.getLocation() << ": " << d.str();
    out.errors.push_back(text);
    return success();
  });
  out.module = kiln::importOnnxModel(ctx, b.model(), "test.onnx");
  return out;
}

bool anyContains(const std::vector<std::string> &all,
                 std::initializer_list<const char *> parts) {
  for (const std::string &s : all) {
    bool every = true;
    for (const char *p : parts)
      every &= s.find(p) != std::string::npos;
    if (every)
      return true;
  }
  return false;
}

TEST(Frontend, ImportsGemmReluWithNamesDevicesAndWeights) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {2, 20})
      .weight("fc.weight", {4, 20}, std::vector<float>(80, 0.5f));
  auto &gemm = b.node("Gemm", "/fc/Gemm", {"x", "fc.weight"}, {"h"});
  OnnxBuilder::intAttr(gemm, "transB", 1);
  b.node("Relu", "/relu", {"h"}, {"y"});
  b.output("y");
  Imported r = import(ctx, b);
  ASSERT_TRUE(r.module) << (r.errors.empty() ? "" : r.errors.front());

  auto func = *r.module->getOps<func::FuncOp>().begin();
  ASSERT_EQ(func.getNumArguments(), 1u);
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(0, "kiln.name").str(), "x");
  auto argType = cast<RankedTensorType>(func.getArgument(0).getType());
  EXPECT_EQ(kiln::getDevice(argType).str(), "cpu");

  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  ASSERT_EQ(ops.size(), 4u); // constant, gemm, relu, return
  auto constant = dyn_cast<kiln::ConstantOp>(ops[0]);
  ASSERT_TRUE(constant);
  EXPECT_TRUE(isa<DenseResourceElementsAttr>(constant.getValue()))
      << "weights must be resource blobs, not inline text";
  auto gemmOp = dyn_cast<kiln::GemmOp>(ops[1]);
  ASSERT_TRUE(gemmOp);
  EXPECT_TRUE(gemmOp.getTransB());
  auto loc = dyn_cast<NameLoc>(gemmOp.getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getName().str(), "/fc/Gemm");
  EXPECT_EQ(cast<RankedTensorType>(gemmOp.getType()).getShape(),
            ArrayRef<int64_t>({2, 4}));
  EXPECT_TRUE(isa<kiln::ReluOp>(ops[2]));
}

TEST(Frontend, SymbolicDimsStayDynamic) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {-1, 3});
  b.node("Relu", "r", {"x"}, {"y"});
  b.output("y");
  Imported r = import(ctx, b);
  ASSERT_TRUE(r.module);
  auto func = *r.module->getOps<func::FuncOp>().begin();
  auto type = cast<RankedTensorType>(func.getResultTypes()[0]);
  EXPECT_TRUE(type.isDynamicDim(0));
  EXPECT_EQ(type.getDimSize(1), 3);
}

// StringNormalizer and Multinomial are ONNX ops of opset 17 (which the
// builder imports: the model is valid) that kiln does not support.
TEST(Frontend, ListsEveryUnsupportedNode) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {1, 3, 8, 8});
  b.node("StringNormalizer", "normalizer_1", {"x"}, {"c"});
  b.node("Relu", "relu_1", {"c"}, {"r"});
  b.node("Multinomial", "multinomial_1", {"r"}, {"p"});
  b.node("StringNormalizer", "normalizer_2", {"p"}, {"y"});
  b.output("y");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(anyContains(
      r.errors, {"normalizer_1", "unsupported ONNX op 'StringNormalizer'"}));
  EXPECT_TRUE(anyContains(
      r.errors, {"multinomial_1", "unsupported ONNX op 'Multinomial'"}));
  EXPECT_TRUE(anyContains(
      r.errors, {"normalizer_2", "unsupported ONNX op 'StringNormalizer'"}));
  EXPECT_TRUE(anyContains(r.errors, {"2 unsupported op type(s)",
                                     "StringNormalizer (2 nodes)",
                                     "Multinomial (1 node)"}));
}

TEST(Frontend, ListsUnsupportedNodesInsideSubgraphs) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("c", {}, onnx::TensorProto::BOOL).input("x", {4});
  onnx::NodeProto &branch = b.node("If", "if_1", {"c"}, {"y"});
  for (const char *name : {"then_branch", "else_branch"}) {
    onnx::AttributeProto *a = branch.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto *g = a->mutable_g();
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(std::string(name) == "then_branch" ? "Multinomial" : "Relu");
    n->set_name(std::string(name) + "_node");
    n->add_input("x");
    n->add_output("out");
    g->add_output()->set_name("out");
  }
  b.output("y");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(anyContains(
      r.errors, {"then_branch_node", "unsupported ONNX op 'Multinomial'"}));
  EXPECT_TRUE(anyContains(
      r.errors, {"1 unsupported op type(s)", "Multinomial (1 node)"}));
}

TEST(Frontend, ShapeErrorsNameTheNode) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {2, 3}).input("y", {4});
  b.node("Add", "bad_add", {"x", "y"}, {"z"});
  b.output("z");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(
      anyContains(r.errors, {"bad_add", "[2,3] and [4] do not broadcast"}));
}

TEST(Frontend, UndefinedInputIsAnError) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {2});
  b.node("Add", "add", {"x", "ghost"}, {"z"});
  b.output("z");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(anyContains(r.errors, {"add", "input 'ghost' is not produced"}));
}

TEST(Frontend, WeightSizeMismatchIsAnError) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("x", {2}).weight("w", {3}, {1.0f, 2.0f});
  b.node("Add", "add", {"x", "w"}, {"z"});
  b.output("z");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(
      anyContains(r.errors, {"tensor 'w'", "needs 12 bytes of data, has 8"}));
}

TEST(Frontend, UnsupportedInputTypeIsAnError) {
  MLIRContext ctx;
  OnnxBuilder b;
  b.input("s", {2}, onnx::TensorProto::STRING);
  b.node("Identity", "id", {"s"}, {"z"});
  b.output("z");
  Imported r = import(ctx, b);
  EXPECT_FALSE(r.module);
  EXPECT_TRUE(
      anyContains(r.errors, {"input 's' has unsupported element type STRING"}));
}

TEST(Frontend, MissingFileIsAnError) {
  MLIRContext ctx;
  std::vector<std::string> errors;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    errors.push_back(d.str());
    return success();
  });
  EXPECT_FALSE(kiln::importOnnxFile(ctx, "/nonexistent/model.onnx"));
  EXPECT_TRUE(anyContains(errors, {"cannot open ONNX model file"}));
}

} // namespace
