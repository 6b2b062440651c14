//===- CompilerTest.cpp - the compile library, stage by stage -------------===//
//
// The stages of compiler/Compiler.h on a small model: what each leaves in
// the module, the option checks a client gets before any work, and the
// placement strategy's one parser.
//
//===----------------------------------------------------------------------===//

#include "OnnxBuilder.h"

#include "compiler/Compiler.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <gtest/gtest.h>

using kiln::testing::OnnxBuilder;

namespace {

using Kind = kiln::PlacementStrategy::Kind;

TEST(PlacementStrategy, ParsesEachStrategyAndPrintsItBack) {
  for (auto [text, kind, parts] :
       {std::tuple("single", Kind::Single, 0u),
        std::tuple("auto", Kind::Auto, 0u),
        std::tuple("data:2", Kind::Data, 2u),
        std::tuple("pipeline:12", Kind::Pipeline, 12u)}) {
    auto strategy = kiln::parsePlacementStrategy(text);
    ASSERT_TRUE(strategy.has_value()) << text;
    EXPECT_EQ(strategy->kind, kind) << text;
    EXPECT_EQ(strategy->parts, parts) << text;
    EXPECT_EQ(strategy->str(), text);
  }
}

TEST(PlacementStrategy, RejectsWhatIsNotAStrategy) {
  for (const char *text :
       {"", "Single", "everywhere", "data", "data:", "data:x", "data:+2",
        "data:0x2", "data:2 ", "pipeline:-1", "pipeline:99999999999", "auto:2"})
    EXPECT_FALSE(kiln::parsePlacementStrategy(text).has_value())
        << "'" << text << "'";
}

// y = relu(x W^T + b) + x, x: 2x4
onnx::ModelProto smallModel() {
  OnnxBuilder b;
  b.input("x", {2, 4})
      .weight("W", {4, 4}, std::vector<float>(16, 0.5f))
      .weight("b", {4}, {1, 2, 3, 4});
  auto &gemm = b.node("Gemm", "gemm", {"x", "W", "b"}, {"h"});
  OnnxBuilder::intAttr(gemm, "transB", 1);
  b.node("Relu", "relu", {"h"}, {"r"});
  b.node("Add", "add", {"r", "x"}, {"y"});
  b.output("y");
  return b.model();
}

size_t count(mlir::ModuleOp module, llvm::StringRef name) {
  size_t n = 0;
  module.walk(
      [&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

// A compile of smallModel() in memory: its artifact and its messages.
struct SmallCompile {
  onnx::ModelProto model = smallModel();
  std::string messages;
  llvm::raw_string_ostream diagnostics{messages};
  std::vector<char> artifact;
  kiln::CompileOptions options;
  SmallCompile() {
    options.input = "small.onnx";
    options.model = &model;
    options.diagnostics = &diagnostics;
    options.artifact = &artifact;
  }
};

TEST(Compilation, EachStageLeavesTheModuleItPromises) {
  SmallCompile small;
  std::string &messages = small.messages;
  std::vector<char> &artifact = small.artifact;
  kiln::Compilation c(small.options);
  ASSERT_TRUE(mlir::succeeded(c.checkOptions())) << messages;
  ASSERT_TRUE(mlir::succeeded(c.import())) << messages;
  ASSERT_TRUE(mlir::succeeded(c.verify())) << messages;
  // The imported graph: one op per node, no loops yet.
  EXPECT_EQ(count(c.module(), "kiln.gemm"), 1u);
  EXPECT_EQ(count(c.module(), "kiln.relu"), 1u);
  EXPECT_EQ(count(c.module(), "linalg.generic"), 0u);
  ASSERT_TRUE(mlir::succeeded(c.place())) << messages;
  ASSERT_TRUE(mlir::succeeded(c.fuse())) << messages;
  // Gemm with its bias, relu and residual add as epilogue: one kernel.
  EXPECT_EQ(count(c.module(), "kiln.kernel"), 1u);
  c.module().walk([](mlir::Operation *op) {
    if (op->getName().getStringRef() == "kiln.relu") {
      EXPECT_EQ(op->getParentOp()->getName().getStringRef(), "kiln.kernel");
    }
  });
  ASSERT_TRUE(mlir::succeeded(c.lower())) << messages;
  EXPECT_GT(count(c.module(), "linalg.generic"), 0u);
  std::string text = c.moduleText();
  EXPECT_NE(text.find("kiln.kernel"), std::string::npos);
  ASSERT_TRUE(mlir::succeeded(c.generate())) << messages;
  std::string cpp = c.cppText();
  EXPECT_NE(cpp.find("kiln_abi_version"), std::string::npos);
  EXPECT_EQ(c.backendKernels("cuda"), 0u);
  EXPECT_TRUE(artifact.empty());
  ASSERT_TRUE(mlir::succeeded(c.package())) << messages;
  EXPECT_GT(artifact.size(), 64u);
  EXPECT_EQ(messages, "");
}

// --time-stages: one line after the compile naming each stage that ran, in
// order, with its seconds and the total.
TEST(Compilation, TimeStagesNamesEveryStageInOrder) {
  SmallCompile small;
  std::string &messages = small.messages;
  kiln::CompileOptions &options = small.options;
  options.timeStages = true;
  ASSERT_TRUE(mlir::succeeded(kiln::compileModel(options))) << messages;
  EXPECT_GT(small.artifact.size(), 64u);
  size_t at = messages.find("time by stage: ");
  ASSERT_NE(at, std::string::npos) << messages;
  for (const char *stage :
       {"importing ", "optimizing the graph ", "fusing ", "lowering ",
        "generating code ", "compiling kernels ", "writing the artifact ",
        "(total "}) {
    size_t next = messages.find(stage, at);
    EXPECT_NE(next, std::string::npos) << stage << " in " << messages;
    at = next == std::string::npos ? at : next;
  }
  EXPECT_EQ(messages.back(), '\n');

  // Without it, nothing is printed.
  messages.clear();
  options.timeStages = false;
  ASSERT_TRUE(mlir::succeeded(kiln::compileModel(options))) << messages;
  EXPECT_EQ(messages, "");
}

// Each bad option fails checkOptions with its own message, before the
// model is read (the input file does not exist).
TEST(Compilation, BadOptionsFailBeforeAnyWork) {
  struct Case {
    std::function<void(kiln::CompileOptions &)> set;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](auto &o) { o.cxx.optLevel = 4; }, "-O4 is not one of -O0..-O3"},
      {[](auto &o) { o.cxx.sanitize = "address,thread"; },
       "--sanitize=address,thread: 'thread' is not one of address, "
       "undefined"},
      {[](auto &o) { o.cuda.arch = "compute_80"; },
       "--cuda-arch=compute_80 is not a CUDA architecture"},
      {[](auto &o) {
         o.pipeline.placement = {Kind::Data, 3};
       },
       "--placement=data:3 needs K between 1 and the number of --devices (1)"},
      {[](auto &o) {
         o.pipeline.placement = {Kind::Pipeline, 0};
       },
       "--placement=pipeline:0 needs K between 1 and the number of --devices "
       "(1)"},
      {[](auto &o) {
         o.pipeline.placement = {Kind::Pipeline, 1};
         o.pipeline.microbatches = 0;
       },
       "--microbatches must be at least 1"},
      {[](auto &o) { o.sequenceLengths = {"xs=-1"}; },
       "malformed sequence length 'xs=-1'"},
  };
  for (const Case &test : cases) {
    std::string messages;
    llvm::raw_string_ostream diagnostics(messages);
    kiln::CompileOptions options;
    options.input = "/nonexistent/model.onnx";
    options.diagnostics = &diagnostics;
    test.set(options);
    EXPECT_TRUE(mlir::failed(kiln::compileModel(options))) << test.message;
    EXPECT_NE(messages.find("error: " + test.message), std::string::npos)
        << messages;
    EXPECT_EQ(messages.find("nonexistent"), std::string::npos) << messages;
  }
}

// Every device kind names a code generator that exists: the generated C++
// ("cpp"), or a device backend createDeviceBackends makes (else a compile
// for that kind stops with a fatal error).
TEST(Backends, EveryDeviceKindHasItsCodeGenerator) {
  auto backends = kiln::createDeviceBackends({});
  ASSERT_FALSE(backends.empty());
  for (const kiln::DeviceKind &kind : kiln::deviceKinds()) {
    if (kind.backend == "cpp")
      continue;
    bool found = false;
    for (const auto &backend : backends)
      found |= backend->name() == kind.backend;
    EXPECT_TRUE(found) << "kind '" << kind.name.str() << "' names backend '"
                       << kind.backend.str() << "', which none is";
  }
}

// On cuda:0 the kernel goes to the cuda backend as well as to the C++ (its
// host twin); on cpu only to the C++.
TEST(Backends, KernelsGoToTheirKindsBackend) {
  onnx::ModelProto model = smallModel();
  for (const char *device : {"cuda:0", "cpu"}) {
    std::string messages;
    llvm::raw_string_ostream diagnostics(messages);
    kiln::CompileOptions options;
    options.input = "small.onnx";
    options.model = &model;
    options.diagnostics = &diagnostics;
    options.pipeline.devices = {device};
    kiln::Compilation c(options);
    ASSERT_TRUE(mlir::succeeded(c.toKernels()) && mlir::succeeded(c.generate()))
        << device << ": " << messages;
    bool cuda = std::string(device) == "cuda:0";
    EXPECT_EQ(c.backendKernels("cuda"), cuda ? 1u : 0u) << device;
    std::string source = c.backendSource("cuda");
    EXPECT_EQ(source.find("__global__") != std::string::npos, cuda) << source;
    EXPECT_NE(c.cppText().find("kiln_k0"), std::string::npos)
        << "every kernel has its C++";
  }
}

TEST(Compilation, SetPlacementNamesTheStrategies) {
  kiln::CompileOptions options;
  std::string error;
  EXPECT_TRUE(mlir::succeeded(kiln::setPlacement(options, "data:2", error)));
  EXPECT_EQ(options.pipeline.placement.kind, Kind::Data);
  EXPECT_TRUE(mlir::failed(kiln::setPlacement(options, "data:two", error)));
  EXPECT_EQ(error, "--placement=data:two is not a strategy (available: "
                   "single, auto, data:K, pipeline:K)");
  EXPECT_EQ(options.pipeline.placement.str(), "data:2") << "left unchanged";
}

} // namespace
