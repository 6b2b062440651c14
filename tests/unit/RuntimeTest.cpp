//===- RuntimeTest.cpp - artifacts through kiln::Module -------------------===//
//
// Compiles a small model with the driver (the same path as kilnc), then
// loads and runs it with the runtime. References are computed here with
// plain loops, independent of kiln.
//
//===----------------------------------------------------------------------===//

#include "OnnxBuilder.h"

#include "compiler/Compiler.h"
#include "kiln/runtime.h"
#include "runtime/Artifact.h"
#include "runtime/HostMemory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

using kiln::testing::OnnxBuilder;

namespace {

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/kiln-runtime-test-" +
         std::to_string(::getpid()) + "-" + name;
}

std::vector<char> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::vector<char> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), bytes.size());
}

// y = gelu(relu(x W^T + b) * 2), x: 4x3, W: 5x3, b: 5
class RuntimeTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist;
    weights.resize(15);
    bias.resize(5);
    for (float &w : weights)
      w = dist(rng);
    for (float &b : bias)
      b = dist(rng);
    OnnxBuilder b(/*opset=*/20); // Gelu is an opset-20 op
    b.input("x", {4, 3}).weight("W", {5, 3}, weights).weight("b", {5}, bias);
    b.weight("two", {}, {2.0f});
    auto &gemm = b.node("Gemm", "gemm", {"x", "W", "b"}, {"h"});
    OnnxBuilder::intAttr(gemm, "transB", 1);
    b.node("Relu", "relu", {"h"}, {"r"});
    b.node("Mul", "mul", {"r", "two"}, {"m"});
    b.node("Gelu", "gelu", {"m"}, {"y"});
    b.output("y");
    onnxPath = tempPath("model.onnx");
    artifactPath = tempPath("model.kiln");
    std::ofstream(onnxPath, std::ios::binary) << b.bytes();
    kiln::CompileOptions options;
    options.input = onnxPath;
    options.output = artifactPath;
    // Not an ASSERT: a fatal failure here makes GoogleTest skip every
    // test of the suite, which ctest reports as skipped, not failed (the
    // model once stopped compiling unseen). Each test checks it instead.
    compiled = mlir::succeeded(kiln::compileModel(options));
  }
  void SetUp() override {
    ASSERT_TRUE(compiled) << "the suite's model did not compile";
  }
  static void TearDownTestSuite() {
    std::remove(onnxPath.c_str());
    std::remove(artifactPath.c_str());
  }

  static kiln::Tensor input(float seed) {
    kiln::Tensor x = kiln::Tensor::empty(kiln::DType::F32, {4, 3});
    for (int i = 0; i < 12; ++i)
      x.data<float>()[i] = std::sin(seed + i);
    return x;
  }
  static std::vector<float> reference(const kiln::Tensor &x) {
    int64_t rows = x.shape()[0];
    std::vector<float> y(rows * 5);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < 5; ++j) {
        double acc = bias[j];
        for (int k = 0; k < 3; ++k)
          acc += double(x.data<float>()[i * 3 + k]) * weights[j * 3 + k];
        double m = std::max(acc, 0.0) * 2.0;
        y[i * 5 + j] = float(0.5 * m * (1.0 + std::erf(m / std::sqrt(2.0))));
      }
    return y;
  }
  static void expectMatches(const kiln::Tensor &y,
                            const std::vector<float> &ref) {
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{4, 5}));
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(y.data<float>()[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])))
          << "at " << i;
  }
  static void expectLoadError(const std::vector<char> &bytes,
                              const std::string &fragment) {
    std::string path = tempPath("bad.kiln");
    writeAll(path, bytes);
    try {
      kiln::Module::load(path);
      ADD_FAILURE() << "loaded a damaged artifact";
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << e.what();
    }
    std::remove(path.c_str());
  }

  static inline std::vector<float> weights, bias;
  static inline std::string onnxPath, artifactPath;
  static inline bool compiled = false;
};

TEST_F(RuntimeTest, RunsAndMatchesTheReference) {
  kiln::Module m = kiln::Module::load(artifactPath);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{4, 3}));
  ASSERT_EQ(m.outputs().size(), 1u);
  EXPECT_EQ(m.outputs()[0].name, "y");
  kiln::Tensor x = input(0.25f);
  std::vector<kiln::Tensor> out = m.run({x});
  ASSERT_EQ(out.size(), 1u);
  expectMatches(out[0], reference(x));
}

TEST_F(RuntimeTest, ConcurrentRunsAreIndependent) {
  kiln::Module m = kiln::Module::load(artifactPath);
  std::vector<std::thread> threads;
  std::vector<std::vector<kiln::Tensor>> results(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep)
        results[t] = m.run({input(float(t))});
    });
  for (auto &th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    expectMatches(results[t][0], reference(input(float(t))));
}

TEST_F(RuntimeTest, RejectsWrongInputs) {
  kiln::Module m = kiln::Module::load(artifactPath);
  auto expectRunError = [&](const std::vector<kiln::Tensor> &in,
                            const std::string &fragment) {
    try {
      m.run(in);
      ADD_FAILURE() << "ran with bad inputs";
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << e.what();
    }
  };
  expectRunError({kiln::Tensor::empty(kiln::DType::F32, {4, 4})},
                 "input #0 'x' must be f32[4,3], got f32[4,4]");
  expectRunError({kiln::Tensor::empty(kiln::DType::F64, {4, 3})},
                 "must be f32[4,3], got f64[4,3]");
  expectRunError({}, "expected 1 inputs, got 0");
}

TEST_F(RuntimeTest, RejectsTruncatedArtifacts) {
  std::vector<char> good = readAll(artifactPath);
  ASSERT_GT(good.size(), 100u);
  for (size_t keep : {size_t(0), size_t(7), size_t(19), size_t(40),
                      good.size() / 2, good.size() - 1}) {
    std::vector<char> bad(good.begin(), good.begin() + keep);
    expectLoadError(bad, keep < 20 ? "bad magic" : "truncated");
  }
}

TEST_F(RuntimeTest, RejectsEveryBitFlip) {
  std::vector<char> good = readAll(artifactPath);
  // Every byte of the header and manifest start, then a stride through the
  // rest: code, weights and padding alike.
  std::vector<size_t> positions;
  for (size_t i = 0; i < 64; ++i)
    positions.push_back(i);
  for (size_t i = 64; i < good.size(); i += good.size() / 97 + 1)
    positions.push_back(i);
  positions.push_back(good.size() - 1);
  for (size_t pos : positions) {
    std::vector<char> bad = good;
    bad[pos] ^= 0x10;
    std::string path = tempPath("flip.kiln");
    writeAll(path, bad);
    EXPECT_THROW(kiln::Module::load(path), kiln::Error) << "flip at " << pos;
    std::remove(path.c_str());
  }
}

TEST_F(RuntimeTest, MissingFileIsAnError) {
  EXPECT_THROW(kiln::Module::load("/nonexistent/x.kiln"), kiln::Error);
}

// The same model with a symbolic batch N, compiled once, then flattened
// (a view whose size is inferred at run time): any N runs, and the shapes
// of each run follow from the input's.
TEST_F(RuntimeTest, SymbolicBatchRunsAtAnySize) {
  OnnxBuilder b(/*opset=*/20);
  b.input("x", {-1, 3}).weight("W", {5, 3}, weights).weight("b", {5}, bias);
  b.weight("two", {}, {2.0f});
  b.int64Weight("flat", {1}, {-1});
  auto &gemm = b.node("Gemm", "gemm", {"x", "W", "b"}, {"h"});
  OnnxBuilder::intAttr(gemm, "transB", 1);
  b.node("Relu", "relu", {"h"}, {"r"});
  b.node("Mul", "mul", {"r", "two"}, {"m"});
  b.node("Gelu", "gelu", {"m"}, {"y"});
  b.node("Reshape", "flatten", {"y", "flat"}, {"z"});
  b.output("z");
  std::string onnx = tempPath("dynamic.onnx"), art = tempPath("dynamic.kiln");
  std::ofstream(onnx, std::ios::binary) << b.bytes();
  kiln::CompileOptions options;
  options.input = onnx;
  options.output = art;
  ASSERT_TRUE(mlir::succeeded(kiln::compileModel(options)));
  kiln::Module m = kiln::Module::load(art);
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(m.outputs()[0].shape, (std::vector<int64_t>{-1}));
  for (int64_t rows : {1, 4, 7}) {
    kiln::Tensor x = kiln::Tensor::empty(kiln::DType::F32, {rows, 3});
    for (int64_t i = 0; i < rows * 3; ++i)
      x.data<float>()[i] = std::cos(0.3 * i);
    std::vector<kiln::Tensor> y = m.run({x});
    ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{rows * 5}));
    std::vector<float> ref = reference(x);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(y[0].data<float>()[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])))
          << "rows " << rows << " at " << i;
  }
  try {
    m.run({kiln::Tensor::empty(kiln::DType::F32, {4, 4})});
    ADD_FAILURE() << "ran with a wrong static dim";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("must be f32[?,3], got f32[4,4]"),
              std::string::npos)
        << e.what();
  }
  std::remove(onnx.c_str());
  std::remove(art.c_str());
}

} // namespace

// The section checksums are zlib's CRC-32: the check value of "123456789",
// and buffers at odd offsets and lengths (the values from Python's
// zlib.crc32 over the same bytes), which cover the 8-byte steps and the tail.
TEST(ArtifactTest, Crc32MatchesZlib) {
  EXPECT_EQ(kiln::artifact::crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(kiln::artifact::crc32("", 0), 0u);
  std::vector<uint8_t> bytes(100003);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>((i * 131 + 7) % 256);
  EXPECT_EQ(kiln::artifact::crc32(bytes.data(), bytes.size()), 0xCDB01CBFu);
  EXPECT_EQ(kiln::artifact::crc32(bytes.data() + 3, 777), 0x3D3ADA6Du);
  EXPECT_EQ(kiln::artifact::crc32(bytes.data() + 5, 13), 0xB36AC8F4u);
}

// Host blocks of 2 MiB and more are 2 MiB aligned and asked for in huge pages
// (runtime/HostMemory.cpp); smaller ones 64-byte aligned. Whether the kernel
// grants the advice is checked in /proc/self/smaps, where it reports it.
TEST(HostMemoryTest, LargeBlocksAskForHugePages) {
  constexpr size_t kHuge = size_t(2) << 20;
  void *small = kiln::host::allocate(1000);
  void *large = kiln::host::allocate(3 * kHuge + 5);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % kHuge, 0u);
  std::memset(large, 1, 3 * kHuge + 5); // the whole rounded-up size is ours
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modeText((std::istreambuf_iterator<char>(mode)),
                       std::istreambuf_iterator<char>());
  if (modeText.empty() || modeText.find("[never]") != std::string::npos) {
    std::free(small);
    std::free(large);
    GTEST_SKIP() << "transparent huge pages are off on this machine: "
                 << (modeText.empty() ? "no THP setting" : modeText);
  }
  // The mapping holding `large`: its header line is "lo-hi perms ...".
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false, eligible = false, found = false;
  auto address = reinterpret_cast<uintptr_t>(large);
  while (std::getline(smaps, line)) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo <= address && address < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) {
      found = true;
      eligible = line.find('1') != std::string::npos;
    }
  }
  std::free(small);
  std::free(large);
  ASSERT_TRUE(found) << "no THPeligible line for the block in /proc/self/smaps";
  EXPECT_TRUE(eligible);
}
