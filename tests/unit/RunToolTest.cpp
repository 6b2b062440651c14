//===- RunToolTest.cpp - kiln-run's logic as a library --------------------===//
//
// runtime/tool/RunTool.h on a small compiled model (a + b and relu(a)):
// input files by name and position and their errors, output files and
// summary lines, comparing outputs, and timing and profiling runs.
// Expected values are computed here, not read back from kiln.
//
//===----------------------------------------------------------------------===//

#include "OnnxBuilder.h"

#include "compiler/Compiler.h"
#include "kiln/tensor_io.h"
#include "runtime/tool/RunTool.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

using kiln::testing::OnnxBuilder;
namespace tool = kiln::tool;

namespace {

kiln::Tensor f32(std::vector<int64_t> shape, std::vector<float> values) {
  return kiln::Tensor::fromBytes(kiln::DType::F32, std::move(shape),
                                 values.data(), values.size() * sizeof(float));
}

// A message of the kiln::Error `call` throws ("" when none).
template <typename F> std::string errorOf(F call) {
  try {
    call();
  } catch (const kiln::Error &e) {
    return e.what();
  }
  return "";
}

class RunToolTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir = std::filesystem::temp_directory_path() /
          ("kiln-run-tool-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    OnnxBuilder b;
    b.input("a", {2, 3}).input("b", {2, 3});
    b.node("Add", "add", {"a", "b"}, {"sum"});
    b.node("Relu", "relu", {"a"}, {"positive"});
    b.output("sum").output("positive");
    std::string onnx = (dir / "model.onnx").string();
    std::ofstream(onnx, std::ios::binary) << b.bytes();
    kiln::CompileOptions options;
    options.input = onnx;
    options.output = (dir / "model.kiln").string();
    compiled = mlir::succeeded(kiln::compileModel(options));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir); }
  void SetUp() override {
    ASSERT_TRUE(compiled) << "the suite's model did not compile";
    module = std::make_unique<kiln::Module>(
        kiln::Module::load((dir / "model.kiln").string()));
    kiln::writeNpy(path("a.npy"), a);
    kiln::writeNpy(path("b.npy"), b);
  }
  static std::string path(const std::string &name) {
    return (dir / name).string();
  }

  static inline std::filesystem::path dir;
  static inline bool compiled = false;
  std::unique_ptr<kiln::Module> module;
  kiln::Tensor a = f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  kiln::Tensor b = f32({2, 3}, {10, 20, 30, 40, 50, 60});
};

TEST_F(RunToolTest, InputsByNameAndPositionRunTheModel) {
  // b by name, a by position: files land in port order.
  std::vector<std::string> files =
      tool::assignInputFiles({"b=" + path("b.npy"), path("a.npy")}, *module);
  ASSERT_EQ(files, (std::vector<std::string>{path("a.npy"), path("b.npy")}));
  std::vector<kiln::Tensor> inputs = tool::readInputs(files, *module);
  std::vector<kiln::Tensor> outputs = module->run(inputs);
  ASSERT_EQ(outputs.size(), 2u);
  std::vector<float> sum = {9, 22, 27, 44, 45, 66}, relu = {0, 2, 0, 4, 0, 6};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(outputs[0].data<float>()[i], sum[i]);
    EXPECT_EQ(outputs[1].data<float>()[i], relu[i]);
  }
  std::vector<std::string> lines = tool::outputLines(*module, outputs);
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "output_0 sum f32[2,3]: 9 22 27 44 45 66",
                       "output_1 positive f32[2,3]: 0 2 0 4 0 6"}));
}

TEST_F(RunToolTest, InputMistakesNameTheFileAndTheModelsInputs) {
  EXPECT_NE(errorOf([&] { tool::assignInputFiles({path("a.npy")}, *module); })
                .find("expected 2 input file(s) but got 1; the model's inputs "
                      "are: a f32[2,3], b f32[2,3]"),
            std::string::npos);
  EXPECT_NE(
      errorOf([&] {
        tool::assignInputFiles({"c=" + path("a.npy"), path("b.npy")}, *module);
      }).find("the model has no input named 'c'"),
      std::string::npos);
  EXPECT_NE(errorOf([&] {
              tool::assignInputFiles(
                  {"a=" + path("a.npy"), "a=" + path("b.npy")}, *module);
            }).find("input 'a' is given more than once"),
            std::string::npos);
  kiln::writeNpy(path("wide.npy"), f32({2, 4}, std::vector<float>(8, 1)));
  std::string message = errorOf([&] {
    tool::readInputs({path("a.npy"), path("wide.npy")}, *module);
  });
  EXPECT_NE(message.find(path("wide.npy") + ": input 'b' is f32[2,4], but "
                                            "the model expects f32[2,3]"),
            std::string::npos)
      << message;
}

TEST_F(RunToolTest, OutputsAreWrittenAsNpyFiles) {
  std::vector<kiln::Tensor> outputs = module->run({a, b});
  std::string out = path("out/nested");
  tool::writeOutputs(out, *module, outputs);
  kiln::Tensor sum = kiln::readNpy(out + "/output_0.npy");
  kiln::Tensor relu = kiln::readNpy(out + "/output_1.npy");
  ASSERT_EQ(sum.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sum.data<float>()[5], 66.0f);
  EXPECT_EQ(relu.data<float>()[2], 0.0f);
  // A file where the folder should be.
  std::ofstream(path("taken"), std::ios::binary) << "x";
  EXPECT_NE(errorOf([&] {
              tool::writeOutputs(path("taken"), *module, outputs);
            }).find("taken"),
            std::string::npos);
}

TEST(RunTool, CompareOutputsSaysHowTheyDiffer) {
  kiln::Tensor x = f32({4}, {1, 2, 3, 4}), same = f32({4}, {1, 2, 3, 4});
  EXPECT_EQ(tool::compareOutputs({x}, {same}), "outputs bit-identical");
  // rel L2 = |(0, 0, 0, 0.3)| / |(1, 2, 3, 4)| = 0.3 / sqrt(30).
  kiln::Tensor near = f32({4}, {1, 2, 3, 4.3f});
  char want[96];
  std::snprintf(want, sizeof want,
                "outputs differ: largest rel L2 %.2e (output_0)",
                std::sqrt(std::pow(double(4.3f) - 4, 2) / 30));
  EXPECT_EQ(tool::compareOutputs({x}, {near}), want);
  // A NaN is the worst difference, even beside a larger finite one.
  kiln::Tensor far = f32({4}, {100, 2, 3, 4});
  kiln::Tensor nan = f32({4}, {1, 2, NAN, 4});
  EXPECT_EQ(tool::compareOutputs({x, x}, {far, nan}),
            "outputs differ: largest rel L2 nan (output_1)");
  EXPECT_EQ(tool::compareOutputs({x}, {f32({2, 2}, {1, 2, 3, 4})}),
            "output_0 differs: f32[2,2] against f32[4]");
  EXPECT_EQ(tool::compareOutputs({x}, {}),
            "outputs differ: 0 outputs against 1");
  int64_t i = 7, j = 8;
  auto ints = [](int64_t v) {
    return kiln::Tensor::fromBytes(kiln::DType::I64, {1}, &v, sizeof v);
  };
  EXPECT_EQ(tool::compareOutputs({ints(i)}, {ints(j)}),
            "outputs differ: output_0 (compared bit for bit)");
}

TEST(RunTool, MedianAndElementText) {
  EXPECT_EQ(tool::median({3, 1, 2}), 2);
  EXPECT_EQ(tool::median({4, 1, 3, 2}), 2.5);
  int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tool::formatElement(
                kiln::Tensor::fromBytes(kiln::DType::I64, {1}, &big, 8), 0),
            "9223372036854775807");
  EXPECT_EQ(tool::formatElement(f32({1}, {0.1f}), 0), "0.1");
  uint8_t byte = 255;
  EXPECT_EQ(tool::formatElement(
                kiln::Tensor::fromBytes(kiln::DType::U8, {1}, &byte, 1), 0),
            "255");
}

TEST_F(RunToolTest, TimingAndProfilingRuns) {
  std::vector<kiln::Tensor> inputs = {a, b};
  std::vector<std::vector<double>> millis =
      tool::timeRuns({module.get(), module.get()}, inputs, 5);
  ASSERT_EQ(millis.size(), 2u);
  for (const std::vector<double> &times : millis) {
    ASSERT_EQ(times.size(), 5u);
    for (double t : times)
      EXPECT_GT(t, 0.0);
  }
  std::string report = tool::benchReport(millis, {"one", "two"}, *module);
  EXPECT_EQ(report.rfind("latency over 5 runs: median ", 0), 0u) << report;
  EXPECT_NE(report.find("\nversus two: median "), std::string::npos) << report;
  EXPECT_EQ(report.find("peak device memory"), std::string::npos)
      << "one cpu role: no per-device peaks";

  std::string trace = path("trace.json");
  std::string text = tool::profileRun(*module, inputs, trace);
  EXPECT_EQ(text.rfind("profile: ", 0), 0u) << text;
  std::ifstream in(trace);
  nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  ASSERT_TRUE(events.is_array());
  size_t slices = 0;
  for (const nlohmann::json &e : events)
    slices += e.value("ph", "") == "X";
  EXPECT_GT(slices, 0u);
  EXPECT_NE(text.find(std::to_string(slices) + " steps"), std::string::npos)
      << text;
}

} // namespace
