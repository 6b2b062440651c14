//===- JitTest.cpp - tracing, in-process compiles, the cache, safetensors -===//
//
// References are computed here with plain loops, never by kiln.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

std::vector<float> values(const Tensor &t) {
  const float *p = t.data<float>();
  return std::vector<float>(p, p + t.numElements());
}

// y[m,n] = x[m,k] . w[n,k] + b[n]
std::vector<float> linearRef(const std::vector<float> &x,
                             const std::vector<float> &w,
                             const std::vector<float> &b, int m, int k, int n) {
  std::vector<float> y(m * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = b[j];
      for (int l = 0; l < k; ++l)
        acc += double(x[i * k + l]) * w[j * k + l];
      y[i * n + j] = float(acc);
    }
  return y;
}

double relL2(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den ? den : 1));
}

/// Runs `fn`, expecting a kiln::Error whose message holds every fragment.
template <typename F>
void expectError(F fn, const std::vector<std::string> &fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected: " << fragments.front();
  } catch (const Error &e) {
    for (const std::string &fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << e.what();
  }
}
template <typename F> void expectError(F fn, const std::string &fragment) {
  expectError(fn, std::vector<std::string>{fragment});
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("kiln-jit-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int counter = 0;
};

constexpr int kIn = 12, kHidden = 16, kOut = 5;

Traced traceMlp() {
  return trace(
      [](const Proxy &x) {
        Proxy h = relu(linear(x, parameter("fc1.weight", {kHidden, kIn}),
                              parameter("fc1.bias", {kHidden})));
        return linear(h, parameter("fc2.weight", {kOut, kHidden}),
                      parameter("fc2.bias", {kOut}));
      },
      {{"x", {"N", kIn}}});
}

std::map<std::string, Tensor> mlpWeights() {
  return {
      {"fc1.weight", tensor({kHidden, kIn}, randomFloats(kHidden * kIn, 1))},
      {"fc1.bias", tensor({kHidden}, randomFloats(kHidden, 2))},
      {"fc2.weight", tensor({kOut, kHidden}, randomFloats(kOut * kHidden, 3))},
      {"fc2.bias", tensor({kOut}, randomFloats(kOut, 4))}};
}

std::vector<float> mlpRef(const std::map<std::string, Tensor> &w,
                          const std::vector<float> &x, int n) {
  std::vector<float> h = linearRef(x, values(w.at("fc1.weight")),
                                   values(w.at("fc1.bias")), n, kIn, kHidden);
  for (float &v : h)
    v = std::max(v, 0.f);
  return linearRef(h, values(w.at("fc2.weight")), values(w.at("fc2.bias")), n,
                   kHidden, kOut);
}

jit::Options optionsIn(const TempDir &dir) {
  jit::Options o;
  o.cacheDir = dir.path.string();
  return o;
}

} // namespace

TEST(Trace, ShapesDtypesAndSymbols) {
  Traced t = trace(
      [](const Proxy &x, const Proxy &y) {
        Proxy s = x + y; // i32[3] + f32[2,1] -> f32[2,3]
        EXPECT_EQ(describe(s.dtype(), s.shape()), "f32[2,3]");
        Proxy z = y.reshape({-1});
        EXPECT_EQ(describe(z.dtype(), z.shape()), "f32[2]");
        return s;
      },
      {{"x", {3}, DType::I32}, {"y", {2, 1}}});
  EXPECT_EQ(t.inputs().size(), 2u);
  EXPECT_NE(t.str().find("Add"), std::string::npos);

  trace(
      [](const Proxy &x) {
        EXPECT_EQ(describe(x.dtype(), x.shape()), "f32[N,3,4]");
        Proxy f = x.flatten(1);
        EXPECT_EQ(describe(f.dtype(), f.shape()), "f32[N,12]");
        Proxy r = x.reshape({"N", -1});
        EXPECT_EQ(describe(r.dtype(), r.shape()), "f32[N,12]");
        Proxy m = matmul(x, x.transpose(-1, -2));
        EXPECT_EQ(describe(m.dtype(), m.shape()), "f32[N,3,3]");
        Proxy s = softmax(x, -1).sum({1}, /*keepdim=*/true);
        EXPECT_EQ(describe(s.dtype(), s.shape()), "f32[N,1,4]");
        return r;
      },
      {{"x", {"N", 3, 4}}});
}

TEST(Trace, TypePromotionFollowsTorch) {
  trace(
      [](const std::vector<Proxy> &in) {
        const Proxy &i32 = in[0], &u8 = in[1], &i8 = in[2], &b = in[3];
        EXPECT_EQ((u8 + i8).dtype(), DType::I16);
        EXPECT_EQ((i32 + 2.0).dtype(), DType::I32);
        EXPECT_EQ((i32 + 0.5).dtype(), DType::F32);
        EXPECT_EQ((i32 / i32).dtype(), DType::F32);
        EXPECT_EQ((b + b).dtype(), DType::Bool); // or, as torch
        EXPECT_THROW(b - b, Error);
        EXPECT_EQ((b * 1.0).dtype(), DType::I64);
        EXPECT_EQ(gt(i32, u8).dtype(), DType::Bool);
        EXPECT_EQ(sigmoid(i32).dtype(), DType::F32);
        EXPECT_EQ(i32.sum({}).dtype(), DType::I64);
        // A zero-dim tensor decides only when its kind is higher.
        EXPECT_EQ((i32 + parameter("z64", {}, DType::I64)).dtype(), DType::I32);
        EXPECT_EQ((i32 + parameter("zf", {}, DType::F64)).dtype(), DType::F64);
        EXPECT_EQ(clamp(i32, 0.5, 2.5).dtype(), DType::F32);
        EXPECT_EQ(clamp(i32, 0, INFINITY).dtype(), DType::F32);
        EXPECT_THROW(u8 + 300.0, Error); // does not fit u8
        return std::vector<Proxy>{i32 * 2.0};
      },
      {{"a", {2}, DType::I32},
       {"b", {2}, DType::U8},
       {"c", {2}, DType::I8},
       {"d", {2}, DType::Bool}});
}

TEST(Trace, ErrorsNameTheOpAndShapes) {
  auto bad = [](auto fn, const std::string &expected) {
    expectError([&] { trace(fn, {{"x", {"N", 4}}}); }, expected);
  };
  bad(
      [](const Proxy &x) {
        return matmul(x, parameter("w", {3, 2}));
      },
      "matmul: inner dims differ: f32[N,4] @ f32[3,2]");
  bad(
      [](const Proxy &x) {
        return x.reshape({"M", 4});
      },
      "reshape: 'M' is no symbol of the inputs");
  bad([](const Proxy &x) { return softmax(x, 2); },
      "softmax: dim 2 is out of range for rank 2");
  bad([](const Proxy &x) { return x + parameter("b", {3}); },
      "shapes cannot broadcast: dim 1 is 4 and 3");
  bad([](const Proxy &x) { return x + parameter("x", {4}); },
      "'x' is also the name of an input");
  EXPECT_THROW(parameter("w", {2}), Error); // no trace running
  bad(
      [](const Proxy &x) {
        return max_pool2d(x.reshape({"N", 1, 2, 2}), {5}, {1});
      },
      "max_pool2d: output size is too small");
  bad([](const Proxy &x) { return x + parameter("/Relu_3", {4}); },
      "is reserved");

  // A trace that fails to start leaves the thread free for the next one.
  EXPECT_THROW(
      trace([](const Proxy &x) { return x; }, {{"x", {2}}, {"x", {3}}}), Error);
  EXPECT_THROW(trace([](const Proxy &x) { return x; }, {{"output_0", {2}}}),
               Error);
  EXPECT_NO_THROW(trace([](const Proxy &x) { return x; }, {{"x", {2}}}));

  std::vector<Proxy> kept;
  trace(
      [&](const Proxy &x) {
        kept.push_back(x);
        return x;
      },
      {{"x", {2}}});
  EXPECT_THROW(relu(kept[0]), Error); // used after its trace ended
}

TEST(Jit, MlpWithSymbolicBatchMatchesLoops) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  Function f = jit::compile(traceMlp(), options);
  ASSERT_EQ(f.inputs().size(), 1u);
  for (int n : {2, 7}) {
    std::vector<float> x = randomFloats(n * kIn, 10 + n);
    std::vector<Tensor> y = f({tensor({n, kIn}, x)});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].shape(), (std::vector<int64_t>{n, kOut}));
    EXPECT_LT(relL2(values(y[0]), mlpRef(options.weights, x, n)), 1e-5);
  }
}

TEST(Jit, WeightsLandOnThePlannedDevice) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  options.device = "sim:1"; // a host-memory test device (docs/devices.md)
  Function f = jit::compile(traceMlp(), options);
  std::vector<DeviceInfo> devices = f.module().devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].boundName, "sim:1");
  // The weights were uploaded to sim:1 at load: its peak counts them.
  size_t weightBytes = 0;
  for (const auto &[name, t] : options.weights)
    weightBytes += t.nbytes();
  EXPECT_GE(f.module().peakBytes()[0], weightBytes);
  std::vector<float> x = randomFloats(4 * kIn, 77);
  EXPECT_LT(
      relL2(values(f({tensor({4, kIn}, x)})[0]), mlpRef(options.weights, x, 4)),
      1e-5);
}

TEST(Jit, OpsMatchLoops) {
  TempDir dir;
  // softmax over the last dim, gelu, layer_norm and a 3x3 conv.
  Traced t = trace(
      [](const Proxy &x, const Proxy &img) {
        Proxy s = softmax(gelu(x), -1);
        Proxy ln = layer_norm(
            x, {4}, constant(tensor({4}, std::vector<float>{1, 2, 3, 4})),
            constant(tensor({4}, std::vector<float>{0, 0.5, 0, -1})));
        Proxy c = conv2d(img, parameter("w", {2, 1, 3, 3}), parameter("b", {2}),
                         {1, 1}, {1, 1});
        return std::vector<Proxy>{s, ln, c};
      },
      {{"x", {3, 4}}, {"img", {1, 1, 5, 5}}});
  jit::Options options = optionsIn(dir);
  std::vector<float> w = randomFloats(18, 5), b = {0.25f, -0.5f};
  options.weights = {{"w", tensor({2, 1, 3, 3}, w)}, {"b", tensor({2}, b)}};
  Function f = jit::compile(t, options);
  std::vector<float> x = randomFloats(12, 6), img = randomFloats(25, 7);
  std::vector<Tensor> out = f({tensor({3, 4}, x), tensor({1, 1, 5, 5}, img)});
  ASSERT_EQ(out.size(), 3u);

  std::vector<float> soft(12), ln(12);
  const float gamma[4] = {1, 2, 3, 4}, beta[4] = {0, 0.5, 0, -1};
  for (int r = 0; r < 3; ++r) {
    double g[4], mx = -1e30, sum = 0, mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) {
      double v = x[r * 4 + c];
      g[c] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      mx = std::max(mx, g[c]);
      mean += v / 4;
    }
    for (int c = 0; c < 4; ++c)
      sum += std::exp(g[c] - mx);
    for (int c = 0; c < 4; ++c) {
      soft[r * 4 + c] = float(std::exp(g[c] - mx) / sum);
      var += (x[r * 4 + c] - mean) * (x[r * 4 + c] - mean) / 4;
    }
    for (int c = 0; c < 4; ++c)
      ln[r * 4 + c] = float(
          (x[r * 4 + c] - mean) / std::sqrt(var + 1e-5) * gamma[c] + beta[c]);
  }
  std::vector<float> conv(2 * 25);
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        double acc = b[o];
        for (int di = 0; di < 3; ++di)
          for (int dj = 0; dj < 3; ++dj) {
            int y = i + di - 1, z = j + dj - 1;
            if (y >= 0 && y < 5 && z >= 0 && z < 5)
              acc += double(img[y * 5 + z]) * w[o * 9 + di * 3 + dj];
          }
        conv[o * 25 + i * 5 + j] = float(acc);
      }
  EXPECT_LT(relL2(values(out[0]), soft), 1e-5);
  EXPECT_LT(relL2(values(out[1]), ln), 1e-5);
  EXPECT_LT(relL2(values(out[2]), conv), 1e-5);
}

TEST(Jit, SymbolicReshapeAndFlattenRun) {
  TempDir dir;
  Traced t = trace(
      [](const Proxy &x) {
        Proxy a = x.reshape({"N", -1});            // [N,12] through Shape(x)
        Proxy b = x.transpose(1, 2).flatten(1);    // [N,12], another order
        Proxy c = cat({a, b}, 1).reshape({-1, 4}); // [N*6, 4]
        return std::vector<Proxy>{a, c.sum({1})};
      },
      {{"x", {"N", 3, 4}}});
  Function f = jit::compile(t, optionsIn(dir));
  for (int n : {1, 3}) {
    std::vector<float> x = randomFloats(n * 12, 60 + n);
    std::vector<Tensor> out = f({tensor({n, 3, 4}, x)});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{n, 12}));
    EXPECT_EQ(values(out[0]), x);
    ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{n * 6}));
    std::vector<float> rows(n * 24), sums(n * 6, 0.f);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 12; ++j) {
        rows[i * 24 + j] = x[i * 12 + j];
        int c = j / 3, r = j % 3; // transposed [4,3] then flattened
        rows[i * 24 + 12 + j] = x[i * 12 + r * 4 + c];
      }
    for (size_t k = 0; k < rows.size(); ++k)
      sums[k / 4] += rows[k];
    EXPECT_LT(relL2(values(out[1]), sums), 1e-6);
  }
}

TEST(Jit, PromotedArithmeticRuns) {
  TempDir dir;
  Traced t = trace([](const Proxy &a, const Proxy &b) { return a / b + 0.5; },
                   {{"a", {3}, DType::I32}, {"b", {2, 1}, DType::I64}});
  Function f = jit::compile(t, optionsIn(dir));
  std::vector<Tensor> out = f({tensor({3}, std::vector<int32_t>{1, 2, 3}),
                               tensor({2, 1}, std::vector<int64_t>{2, 4})});
  ASSERT_EQ(out[0].dtype(), DType::F32);
  EXPECT_EQ(values(out[0]),
            (std::vector<float>{1.0f, 1.5f, 2.0f, 0.75f, 1.0f, 1.25f}));
}

TEST(Jit, BadOptionsAndFilesAreErrors) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  options.placement = "everywhere";
  expectError([&] { jit::compile(traceMlp(), options); },
              "--placement=everywhere is not a strategy");
  options.placement = "single";
  options.device = "tpu:0";
  expectError([&] { jit::compile(traceMlp(), options); }, "tpu:0");
  expectError(
      [&] {
        jit::compile((dir.path / "absent.onnx").string(), optionsIn(dir));
      },
      "cannot open ONNX model file");
}

TEST(Jit, HalfScalars) {
  TempDir dir;
  Traced t = trace([](const Proxy &x) { return x * 0.5 + 2.0; },
                   {{"x", {3}, DType::F16}});
  Function f = jit::compile(t, optionsIn(dir));
  // f16 bits: 1, 2, 3 in; 2.5, 3, 3.5 out.
  std::vector<uint16_t> in = {0x3c00, 0x4000, 0x4200};
  std::vector<Tensor> out =
      f({Tensor::fromBytes(DType::F16, {3}, in.data(), 6)});
  ASSERT_EQ(out[0].dtype(), DType::F16);
  const uint16_t *y = out[0].data<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(y, y + 3),
            (std::vector<uint16_t>{0x4100, 0x4200, 0x4300}));
}

TEST(Jit, WeightErrorsListEveryName) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  options.weights.erase("fc2.bias");
  options.weights["module.extra"] = tensor({1}, std::vector<float>{0});
  expectError([&] { jit::compile(traceMlp(), options); },
              std::vector<std::string>{"missing 'fc2.bias'",
                                       "unexpected 'module.extra'"});
  options.strict = false;
  options.weights["fc2.bias"] = tensor({kOut}, randomFloats(kOut, 9));
  EXPECT_NO_THROW(jit::compile(traceMlp(), options));
  options.weights["fc2.bias"] = tensor({kOut + 1}, randomFloats(kOut + 1, 9));
  expectError([&] { jit::compile(traceMlp(), options); },
              "'fc2.bias' is f32[6]");
}

TEST(Jit, CacheHitMissAndCorruptedEntry) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  Function first = jit::compile(traceMlp(), options);
  EXPECT_FALSE(first.info().cacheHit);
  ASSERT_FALSE(first.info().cachePath.empty());
  ASSERT_TRUE(fs::exists(first.info().cachePath));

  Function second = jit::compile(traceMlp(), options);
  EXPECT_TRUE(second.info().cacheHit);
  EXPECT_EQ(second.info().cacheKey, first.info().cacheKey);

  jit::Options changed = options;
  changed.optLevel = 2;
  Function third = jit::compile(traceMlp(), changed);
  EXPECT_FALSE(third.info().cacheHit);
  EXPECT_NE(third.info().cacheKey, first.info().cacheKey);

  jit::Options otherWeights = options;
  otherWeights.weights["fc2.bias"] = tensor({kOut}, randomFloats(kOut, 99));
  EXPECT_FALSE(jit::compile(traceMlp(), otherWeights).info().cacheHit);

  // Flip one byte in the middle of the cached artifact.
  {
    std::fstream file(first.info().cachePath,
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    std::streamoff middle = file.tellg() / 2;
    file.seekg(middle);
    char c = 0;
    file.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    file.seekp(middle);
    file.write(&c, 1);
  }
  Function rebuilt = jit::compile(traceMlp(), options);
  EXPECT_FALSE(rebuilt.info().cacheHit);
  std::vector<float> x = randomFloats(3 * kIn, 42);
  EXPECT_LT(relL2(values(rebuilt({tensor({3, kIn}, x)})[0]),
                  mlpRef(options.weights, x, 3)),
            1e-5);
  EXPECT_TRUE(jit::compile(traceMlp(), options).info().cacheHit);

  jit::Options off = options;
  off.cacheDir = "none";
  Function uncached = jit::compile(traceMlp(), off);
  EXPECT_FALSE(uncached.info().cacheHit);
  EXPECT_TRUE(uncached.info().cachePath.empty());
}

TEST(Jit, PreludeIsPrecompiledOnceAndADamagedOneIsDropped) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  jit::compile(traceMlp(), options);
  fs::path code = dir.path / "code";
  auto preludes = [&](const std::string &suffix) {
    std::vector<fs::path> found;
    for (const auto &entry : fs::directory_iterator(code)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("prelude-", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        found.push_back(entry.path());
    }
    return found;
  };
  ASSERT_EQ(preludes(".h").size(), 1u);
  std::vector<fs::path> gch = preludes(".h.gch");
  ASSERT_EQ(gch.size(), 1u);
  // Truncate the precompiled prelude and drop every other cache entry, so
  // that the next compile runs the C++ compiler on it.
  fs::resize_file(gch[0], 1000);
  std::uintmax_t damaged = fs::file_size(gch[0]);
  std::vector<fs::path> others;
  for (const auto &entry : fs::recursive_directory_iterator(dir.path))
    if (entry.is_regular_file() &&
        entry.path().filename().string().rfind("prelude-", 0) != 0)
      others.push_back(entry.path());
  ASSERT_FALSE(others.empty());
  for (const fs::path &p : others)
    fs::remove(p);
  Function again = jit::compile(traceMlp(), options);
  EXPECT_FALSE(again.info().cacheHit);
  std::vector<float> x = randomFloats(3 * kIn, 42);
  EXPECT_LT(relL2(values(again({tensor({3, kIn}, x)})[0]),
                  mlpRef(options.weights, x, 3)),
            1e-5);
  // GCC (taken to be the compiler kiln runs when it built this test)
  // rejects the damaged .gch, and kiln then removed it, so that it cannot
  // fail the next compile once more. Clang never reads it.
#if defined(__GNUC__) && !defined(__clang__)
  EXPECT_FALSE(fs::exists(gch[0]) && fs::file_size(gch[0]) == damaged)
      << "a damaged .gch was kept";
#else
  (void)damaged;
#endif
}

TEST(Jit, ConcurrentCallsMatchSerialCalls) {
  TempDir dir;
  jit::Options options = optionsIn(dir);
  options.weights = mlpWeights();
  Function f = jit::compile(traceMlp(), options);
  constexpr int kThreads = 8, kCalls = 20;
  std::vector<std::vector<float>> inputs, serial;
  for (int i = 0; i < kThreads; ++i) {
    inputs.push_back(randomFloats((i + 1) * kIn, 100 + i));
    serial.push_back(values(f({tensor({i + 1, kIn}, inputs[i])})[0]));
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int c = 0; c < kCalls; ++c)
        mismatches[i] +=
            values(f({tensor({i + 1, kIn}, inputs[i])})[0]) != serial[i];
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(mismatches[i], 0) << "thread " << i;
}

TEST(Jit, OnnxFileWithPrefixedSafetensors) {
  TempDir dir;
  std::string model = std::string(KILN_SOURCE_DIR) + "/examples/mlp.onnx";
  // examples/mlp.onnx: fc1 784->256, relu, fc2 256->256, gelu, fc3 256->10.
  std::map<std::string, Tensor> saved;
  int shapes[3][2] = {{256, 784}, {256, 256}, {10, 256}};
  for (int l = 0; l < 3; ++l) {
    std::string p = "module.fc" + std::to_string(l + 1);
    // Scaled like torch.nn.Linear's initialisation (1/sqrt(in)).
    std::vector<float> w = randomFloats(shapes[l][0] * shapes[l][1], 20 + l);
    for (float &v : w)
      v /= std::sqrt(float(shapes[l][1]));
    saved[p + ".weight"] = tensor({shapes[l][0], shapes[l][1]}, w);
    saved[p + ".bias"] =
        tensor({shapes[l][0]}, randomFloats(shapes[l][0], 30 + l));
  }
  std::string file = (dir.path / "w.safetensors").string();
  save_safetensors(file, saved);
  jit::Options options = optionsIn(dir);
  options.weights = load_safetensors(file, {"module."});
  ASSERT_EQ(options.weights.count("fc1.weight"), 1u);
  Function f = jit::compile(model, options);
  std::vector<float> x = randomFloats(2 * 784, 50);
  std::vector<float> h = x;
  int in = 784;
  for (int l = 0; l < 3; ++l) {
    std::string p = "fc" + std::to_string(l + 1);
    h = linearRef(h, values(options.weights[p + ".weight"]),
                  values(options.weights[p + ".bias"]), 2, in, shapes[l][0]);
    in = shapes[l][0];
    for (float &v : h) // fc1 -> relu, fc2 -> gelu (erf form)
      v = l == 0   ? std::max(v, 0.f)
          : l == 1 ? float(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))))
                   : v;
  }
  EXPECT_LT(relL2(values(f({tensor({2, 784}, x)})[0]), h), 1e-5);

  jit::Options unstripped = optionsIn(dir);
  unstripped.weights = load_safetensors(file);
  expectError([&] { jit::compile(model, unstripped); },
              "--strip-prefix module.");
}

TEST(Safetensors, RoundTripRemapAndBf16) {
  TempDir dir;
  std::string file = (dir.path / "t.safetensors").string();
  save_safetensors(
      file, {{"module.a", tensor({2, 2}, std::vector<float>{1, 2, 3, 4})},
             {"module.b", tensor({3}, std::vector<int64_t>{7, 8, 9})},
             {"c", tensor({1}, std::vector<int32_t>{5})}});
  auto t = load_safetensors(file, {"module.", {{"b", "bee"}}});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(values(t.at("a")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t.at("bee").dtype(), DType::I64);
  EXPECT_EQ(t.at("bee").data<int64_t>()[2], 9);
  EXPECT_EQ(t.at("c").data<int32_t>()[0], 5);
  EXPECT_THROW(load_safetensors(file, {"", {{"nope", "x"}}}), Error);
  EXPECT_THROW(load_safetensors(file, {"module.", {{"a", "c"}}}), Error);

  // BF16 written by hand: 1.0 = 0x3f80, -2.5 = 0xc020.
  std::string header =
      R"({"h":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  uint64_t size = header.size();
  std::memcpy(bytes.data(), &size, 8);
  bytes += header + std::string("\x80\x3f\x20\xc0", 4);
  std::ofstream(dir.path / "bf.safetensors", std::ios::binary) << bytes;
  auto bf = load_safetensors((dir.path / "bf.safetensors").string());
  EXPECT_EQ(values(bf.at("h")), (std::vector<float>{1.0f, -2.5f}));
}

TEST(Safetensors, BadFilesGiveClearErrors) {
  TempDir dir;
  auto write = [&](const std::string &header, const std::string &data,
                   int64_t claimed = -1) {
    std::string bytes(8, '\0');
    uint64_t size = claimed >= 0 ? uint64_t(claimed) : header.size();
    std::memcpy(bytes.data(), &size, 8);
    std::string file = (dir.path / "bad.safetensors").string();
    std::ofstream(file, std::ios::binary) << bytes + header + data;
    return file;
  };
  auto badFile = [](const std::string &file, const std::string &what) {
    expectError([&] { load_safetensors(file); }, what);
  };
  badFile((dir.path / "absent.safetensors").string(), "cannot open");
  badFile(write("", "", 1000), "truncated safetensors header");
  badFile(write("{not json", ""), "not valid JSON");
  badFile(write(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})",
                "x"),
          "tensor 'a': unknown or unsupported dtype 'F8_E4M3'");
  badFile(write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                "abcd"),
          "tensor 'a': F32 of shape [2] needs 8 bytes, data_offsets give 4");
  badFile(write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                "abcd"),
          "outside the 4 bytes of data (truncated file?)");
  badFile(
      write(
          R"({"a":{"dtype":"F32","shape":[16777216,1099511627776],"data_offsets":[0,0]}})",
          ""),
      "too many elements");
  std::ofstream(dir.path / "short.safetensors") << "abc";
  badFile((dir.path / "short.safetensors").string(),
          "truncated safetensors file");
}
