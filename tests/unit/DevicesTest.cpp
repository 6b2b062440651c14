//===- DevicesTest.cpp - multi-device plans through kiln::Module ----------===//
//
// Hand-written artifacts (docs/devices.md): a few float kernels compiled with
// the system C++ compiler into the code section, and manifests built here, so
// these tests need neither the compiler nor LLVM. They check that a plan
// spread over cpu and sim:N devices, with copies both ways, gives exactly the
// bytes of the same plan on one device and of a reference computed here;
// binding, capacities, malformed manifests and concurrent runs.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "runtime/Artifact.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

using nlohmann::json;

namespace {

constexpr int N = 256; // floats per tensor: every kernel works on f32[256]
constexpr size_t kBytes = N * sizeof(float);

const char kKernelSource[] = R"(
#include <cstdint>
#include <stdexcept>
#define N 256
extern "C" int kiln_abi_version(void) { return 1; }
extern "C" void k_add(void **b) {
  const float *x = (const float *)b[0], *y = (const float *)b[1];
  float *z = (float *)b[2];
  for (int i = 0; i < N; ++i)
    z[i] = x[i] + y[i];
}
// Writes garbage, dawdles, then the sum: a reader that does not wait for it
// sees the garbage.
extern "C" void k_slow_add(void **b) {
  float *z = (float *)b[2];
  for (int i = 0; i < N; ++i)
    z[i] = -1e30f;
  for (volatile int spin = 0; spin < 20000; ++spin) {
  }
  k_add(b);
}
extern "C" void k_mul(void **b) {
  const float *x = (const float *)b[0], *y = (const float *)b[1];
  float *z = (float *)b[2];
  for (int i = 0; i < N; ++i)
    z[i] = x[i] * y[i];
}
extern "C" void k_scale(void **b) {
  const float *x = (const float *)b[0];
  float *y = (float *)b[1];
  for (int i = 0; i < N; ++i)
    y[i] = x[i] * 3.0f;
}
extern "C" void k_throw(void **) { throw std::runtime_error("kernel exploded"); }
// A dims function that keeps the static dims: named with dims_data, it makes
// a run resolve shapes step by step.
extern "C" const char *k_same_dims(int64_t *, void *const *) { return nullptr; }
)";

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/kiln-devices-test-" +
         std::to_string(::getpid()) + "-" + name;
}

std::vector<char> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::vector<char> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A manifest under construction: roles, values of f32[256], steps.
struct PlanBuilder {
  json roles = json::array(), values = json::array(), inputs = json::array(),
       outputs = json::array(), steps = json::array();
  std::vector<char> weights;

  size_t role(const std::string &name, const std::string &kind) {
    roles.push_back({{"name", name}, {"kind", kind}});
    return roles.size() - 1;
  }
  size_t value(const std::string &kind, size_t role) {
    values.push_back(
        {{"dtype", "f32"}, {"shape", {N}}, {"kind", kind}, {"device", role}});
    return values.size() - 1;
  }
  size_t input(const std::string &name, size_t role) {
    size_t id = value("input", role);
    inputs.push_back({{"name", name}, {"value", id}});
    return id;
  }
  size_t constant(size_t role, const std::vector<float> &data) {
    size_t id = value("constant", role);
    size_t offset = (weights.size() + 63) / 64 * 64;
    weights.resize(offset + data.size() * sizeof(float));
    std::memcpy(weights.data() + offset, data.data(),
                data.size() * sizeof(float));
    values[id]["offset"] = offset;
    return id;
  }
  size_t temp(size_t role) { return value("temp", role); }
  size_t alias(size_t of) {
    size_t id = value("alias", values[of]["device"].get<size_t>());
    values[id]["of"] = of;
    return id;
  }
  size_t kernel(const std::string &name, std::vector<size_t> in, size_t role) {
    size_t out = temp(role);
    json args = in;
    args.push_back(out);
    steps.push_back({{"kernel", name},
                     {"args", args},
                     {"num_inputs", in.size()},
                     {"nodes", "/" + name},
                     {"device", role}});
    return out;
  }
  size_t copy(size_t src, size_t role) {
    size_t dst = temp(role);
    steps.push_back({{"copy", {src, dst}}, {"bytes", kBytes}});
    return dst;
  }
  void output(const std::string &name, size_t id) {
    outputs.push_back({{"name", name}, {"value", id}});
  }
  json manifest() const {
    json m;
    m["abi"] = 1;
    m["target"]["cpu_features"] = json::array();
    m["devices"] = roles;
    m["values"] = values;
    m["inputs"] = inputs;
    m["outputs"] = outputs;
    m["steps"] = steps;
    return m;
  }
};

class DevicesTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    std::string source = tempPath("kernels.cpp");
    std::string library = tempPath("kernels.so");
    std::ofstream(source) << kKernelSource;
    std::string command = "c++ -shared -fPIC -O2 -o '" + library + "' '" +
                          source + "' > /dev/null 2>&1";
    if (std::system("command -v c++ > /dev/null 2>&1") != 0)
      skipReason = "no system C++ compiler (c++) to build the test kernels";
    else if (std::system(command.c_str()) != 0)
      skipReason = "the system C++ compiler failed on the test kernels";
    else
      code = readAll(library);
    std::remove(source.c_str());
    std::remove(library.c_str());
    for (int i = 0; i < N; ++i)
      weight.push_back(0.5f + 0.01f * float(i % 37));
  }

  void SetUp() override {
    if (!skipReason.empty())
      GTEST_SKIP() << skipReason;
  }
  void TearDown() override {
    for (const std::string &path : written)
      std::remove(path.c_str());
  }

  /// out = ((x + y) * w * 3 + z) + x, u = (x + y) * w * 3, view = u + z.
  /// Multi-device: x, y and out on role 0 (cpu); z, w, u and view on role 1
  /// (sim:0), with copies both ways. One device: all of it on role 0.
  static PlanBuilder mainPlan(bool multi) {
    PlanBuilder b;
    size_t cpu = b.role("cpu", "cpu");
    size_t sim = multi ? b.role("sim:0", "sim") : cpu;
    size_t x = b.input("x", cpu), y = b.input("y", cpu);
    size_t z = b.input("z", sim);
    size_t w = b.constant(sim, weight);
    size_t s = b.kernel("k_slow_add", {x, y}, cpu);
    if (multi)
      s = b.copy(s, sim);
    size_t t = b.kernel("k_mul", {s, w}, sim);
    size_t u = b.kernel("k_scale", {t}, sim);
    size_t v = b.alias(b.kernel("k_add", {u, z}, sim));
    size_t back = multi ? b.copy(v, cpu) : v;
    size_t out = b.kernel("k_add", {back, x}, cpu);
    b.output("out", out);
    b.output("u", u);
    b.output("view", v);
    return b;
  }

  /// Writes an artifact with the test kernels and `currentWeights`.
  std::string write(const json &manifest, const std::string &name) {
    std::string path = tempPath(name);
    writeAll(path,
             kiln::artifact::write(
                 manifest, {{"code", code}, {"weights", currentWeights}}));
    if (std::find(written.begin(), written.end(), path) == written.end())
      written.push_back(path);
    return path;
  }
  std::string write(const PlanBuilder &b, const std::string &name) {
    currentWeights = b.weights;
    return write(b.manifest(), name);
  }

  static std::vector<kiln::Tensor> inputs(float seed) {
    std::vector<kiln::Tensor> in;
    for (int k = 0; k < 3; ++k) {
      kiln::Tensor t = kiln::Tensor::empty(kiln::DType::F32, {N});
      for (int i = 0; i < N; ++i)
        t.data<float>()[i] = std::sin(seed + 0.37f * float(i) + float(k));
      in.push_back(t);
    }
    return in;
  }

  /// The three outputs, computed here with the kernels' float operations.
  static std::vector<std::vector<float>>
  reference(const std::vector<kiln::Tensor> &in) {
    const float *x = in[0].data<float>(), *y = in[1].data<float>(),
                *z = in[2].data<float>();
    std::vector<std::vector<float>> r(3, std::vector<float>(N));
    for (int i = 0; i < N; ++i) {
      float s = x[i] + y[i];
      float t = s * weight[i];
      float u = t * 3.0f;
      float v = u + z[i];
      r[0][i] = v + x[i];
      r[1][i] = u;
      r[2][i] = v;
    }
    return r;
  }

  static void expectSameBytes(const std::vector<kiln::Tensor> &got,
                              const std::vector<std::vector<float>> &want,
                              const std::string &what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].shape(), std::vector<int64_t>{N}) << what;
      EXPECT_EQ(std::memcmp(got[o].raw(), want[o].data(), kBytes), 0)
          << what << ": output " << o << " differs";
    }
  }
  static void expectSameBytes(const std::vector<kiln::Tensor> &got,
                              const std::vector<kiln::Tensor> &want,
                              const std::string &what) {
    std::vector<std::vector<float>> floats;
    for (const kiln::Tensor &t : want)
      floats.emplace_back(t.data<float>(), t.data<float>() + N);
    expectSameBytes(got, floats, what);
  }

  /// Loading `path` fails with a kiln::Error containing `fragment`.
  static void expectLoadError(const std::string &path,
                              const kiln::LoadOptions &options,
                              const std::string &fragment) {
    try {
      kiln::Module::load(path, options);
      ADD_FAILURE() << "loaded, but expected an error with: " << fragment;
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "error: " << e.what() << "\nexpected: " << fragment;
    }
  }

  static inline std::string skipReason;
  static inline std::vector<char> code;
  static inline std::vector<float> weight;
  std::vector<char> currentWeights;
  std::vector<std::string> written;
};

TEST_F(DevicesTest, MultiDevicePlanMatchesOneDeviceAndTheReference) {
  kiln::Module multi = kiln::Module::load(write(mainPlan(true), "multi.kiln"));
  std::vector<kiln::DeviceInfo> roles = multi.devices();
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0].role, 0u);
  EXPECT_EQ(roles[0].compiledName, "cpu");
  EXPECT_EQ(roles[0].boundName, "cpu");
  EXPECT_EQ(roles[1].role, 1u);
  EXPECT_EQ(roles[1].compiledName, "sim:0");
  EXPECT_EQ(roles[1].boundName, "sim:0");
  ASSERT_EQ(multi.outputs().size(), 3u);
  EXPECT_EQ(multi.outputs()[2].name, "view");

  kiln::Module single =
      kiln::Module::load(write(mainPlan(false), "single.kiln"));
  kiln::LoadOptions onSim;
  onSim.device = "sim:3";
  kiln::Module singleOnSim =
      kiln::Module::load(write(mainPlan(false), "single.kiln"), onSim);
  EXPECT_EQ(singleOnSim.devices()[0].boundName, "sim:3");
  for (float seed : {0.0f, 1.5f, -2.25f}) {
    std::vector<kiln::Tensor> in = inputs(seed);
    std::vector<kiln::Tensor> got = multi.run(in);
    expectSameBytes(got, reference(in), "cpu+sim:0");
    expectSameBytes(got, single.run(in), "cpu+sim:0 against cpu alone");
    expectSameBytes(singleOnSim.run(in), reference(in), "one role on sim:3");
  }
}

TEST_F(DevicesTest, RebindingRolesGivesTheSameBytes) {
  std::string path = write(mainPlan(true), "multi.kiln");
  struct Case {
    std::map<std::string, std::string> bind;
    std::string device;
    std::vector<std::string> bound;
  };
  std::vector<Case> cases = {
      {{{"1", "cpu"}}, "", {"cpu", "cpu"}},
      {{{"sim:0", "cpu"}}, "", {"cpu", "cpu"}},
      {{}, "cpu", {"cpu", "cpu"}},
      {{}, "sim:3", {"sim:3", "sim:3"}},
      {{{"0", "sim:1"}, {"sim:0", "sim:2"}}, "", {"sim:1", "sim:2"}},
      {{{"cpu", "sim:7"}, {"1", "cpu"}}, "", {"sim:7", "cpu"}},
      {{{"0", "cpu"}}, "sim:3", {"cpu", "sim:3"}},
  };
  std::vector<kiln::Tensor> in = inputs(0.75f);
  for (const Case &c : cases) {
    kiln::LoadOptions options;
    options.bind = c.bind;
    options.device = c.device;
    kiln::Module m = kiln::Module::load(path, options);
    std::string what = c.bound[0] + "+" + c.bound[1];
    ASSERT_EQ(m.devices().size(), 2u);
    EXPECT_EQ(m.devices()[0].boundName, c.bound[0]) << what;
    EXPECT_EQ(m.devices()[1].boundName, c.bound[1]) << what;
    expectSameBytes(m.run(in), reference(in), what);
    expectSameBytes(m.run(in), reference(in), what + ", again");
  }
}

TEST_F(DevicesTest, ConstantsAreUploadedOnceAtLoad) {
  std::string path = write(mainPlan(true), "multi.kiln");
  kiln::Module m = kiln::Module::load(path);
  // w (f32[256]) lives on sim:0 from the start; cpu constants stay in the
  // file.
  EXPECT_EQ(m.peakBytes(), (std::vector<size_t>{0, kBytes}));
  m.run(inputs(0));
  m.run(inputs(1));
  std::vector<size_t> peaks = m.peakBytes();
  // Per run: z staged and 4 temps on sim:0; 2 temps on cpu (x and y are the
  // caller's, out is computed into the output tensor).
  EXPECT_EQ(peaks[1], kBytes + 5 * kBytes);
  EXPECT_EQ(peaks[0], 2 * kBytes);

  kiln::LoadOptions tight;
  tight.memoryCapacity["sim:0"] = kBytes - 1;
  expectLoadError(path, tight,
                  "sim:0: out of memory: needs 1024 bytes, 0 of 1023 in use");
  kiln::LoadOptions onCpu;
  onCpu.device = "cpu";
  onCpu.memoryCapacity["sim:0"] = 1; // not bound: no constraint
  EXPECT_EQ(kiln::Module::load(path, onCpu).peakBytes(),
            (std::vector<size_t>{0, 0}));
}

// A dims function reading a temp's data makes a run go step by step; its
// temps still go back to their device after the last step that reads them,
// so a chain of seven steps holds two temps at a time, not seven.
TEST_F(DevicesTest, StepByStepRunsReleaseTempsAfterTheirLastReader) {
  for (bool multi : {false, true}) {
    PlanBuilder b;
    size_t cpu = b.role("cpu", "cpu");
    size_t sim = multi ? b.role("sim:0", "sim") : cpu;
    size_t t = b.kernel("k_scale", {b.input("x", cpu)}, cpu);
    if (multi)
      t = b.copy(t, sim);
    for (int k = 0; k < 6; ++k)
      t = b.kernel("k_scale", {t}, sim);
    b.steps.back()["dims"] = "k_same_dims";
    b.steps.back()["dims_data"] = {0};
    b.output("y", t);
    kiln::Module m =
        kiln::Module::load(write(b, multi ? "chain-multi.kiln" : "chain.kiln"));
    std::vector<kiln::Tensor> in = {inputs(0.25f)[0]};
    std::vector<float> want(in[0].data<float>(), in[0].data<float>() + N);
    for (float &v : want)
      for (int k = 0; k < 7; ++k)
        v *= 3.0f;
    std::string what = multi ? "cpu then sim:0" : "cpu";
    expectSameBytes(m.run(in), {want}, what);
    expectSameBytes(m.run(in), {want}, what + ", again");
    std::vector<size_t> peaks = {2 * kBytes};
    if (multi)
      peaks = {kBytes, 2 * kBytes};
    EXPECT_EQ(m.peakBytes(), peaks) << what;
  }
}

TEST_F(DevicesTest, RunningOutOfDeviceMemoryIsAnError) {
  std::string path = write(mainPlan(true), "multi.kiln");
  kiln::LoadOptions options;
  options.memoryCapacity["sim:0"] = 2 * kBytes; // w and one more buffer
  kiln::Module m = kiln::Module::load(path, options);
  for (int attempt = 0; attempt < 2; ++attempt) { // nothing leaks
    try {
      m.run(inputs(0));
      ADD_FAILURE() << "ran past the capacity of sim:0";
    } catch (const kiln::Error &e) {
      EXPECT_STREQ(e.what(),
                   "sim:0: out of memory: needs 1024 bytes, 2048 of 2048 in "
                   "use");
    }
  }
  options.memoryCapacity["sim:0"] = 6 * kBytes; // exactly enough
  options.memoryCapacity["cpu"] = 2 * kBytes;
  kiln::Module fits = kiln::Module::load(path, options);
  std::vector<kiln::Tensor> in = inputs(0.5f);
  expectSameBytes(fits.run(in), reference(in), "at capacity");
  EXPECT_EQ(fits.peakBytes(), (std::vector<size_t>{2 * kBytes, 6 * kBytes}));
  options.memoryCapacity["cpu"] = 2 * kBytes - 1;
  EXPECT_THROW(kiln::Module::load(path, options).run(in), kiln::Error);
}

TEST_F(DevicesTest, BadBindingsAreClearErrors) {
  std::string path = write(mainPlan(true), "multi.kiln");
  auto expectBindError = [&](std::map<std::string, std::string> bind,
                             std::string device, const std::string &fragment) {
    kiln::LoadOptions options;
    options.bind = std::move(bind);
    options.device = std::move(device);
    expectLoadError(path, options, fragment);
  };
  expectBindError({{"7", "cpu"}}, "",
                  "cannot bind '7': the plan has no such role; its roles are "
                  "0 'cpu', 1 'sim:0'");
  expectBindError({{"sim:5", "cpu"}}, "", "cannot bind 'sim:5'");
  expectBindError({}, "cuda:0",
                  "cannot bind role 0 'cpu' to 'cuda:0': its kernels run on "
                  "cpu or sim:N");
  expectBindError({{"1", "cuda:auto"}}, "",
                  "cannot bind role 1 'sim:0' to 'cuda:auto'");
  expectBindError({}, "tpu:1",
                  "unknown device 'tpu:1' (expected cpu, sim:N, cuda:N or "
                  "cuda:auto)");
  expectBindError({{"0", "sim"}}, "", "unknown device 'sim'");
  expectBindError({{"0", "cpu:0"}}, "", "unknown device 'cpu:0'");
  // Only kinds that pick a device by free memory have KIND:auto.
  expectBindError({{"1", "sim:auto"}}, "", "unknown device 'sim:auto'");
  expectBindError({{"0", "cpu:auto"}}, "", "unknown device 'cpu:auto'");
  expectBindError({{"1", "sim:-1"}}, "", "unknown device 'sim:-1'");
  kiln::LoadOptions capacity;
  capacity.memoryCapacity["gpu0"] = 1;
  expectLoadError(path, capacity, "memory capacity for unknown device 'gpu0'");

  // A role compiled for cuda: without a CUDA driver (and without a cpu role
  // to fall back on) refused by default; bound to a host device it runs the
  // CPU code (tests/unit/CudaTest.cpp covers the rest).
  PlanBuilder b;
  size_t gpu = b.role("cuda:0", "cuda");
  b.output("y", b.kernel("k_scale", {b.input("x", gpu)}, gpu));
  std::string cudaPath = write(b, "cuda.kiln");
  const char *driver = std::getenv("KILN_CUDA_DRIVER");
  std::string saved = driver ? driver : "";
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  expectLoadError(cudaPath, {},
                  "role 0 'cuda:0': no CUDA driver (/nonexistent/libcuda.so.1: "
                  "cannot open shared object file");
  if (driver)
    setenv("KILN_CUDA_DRIVER", saved.c_str(), 1);
  else
    unsetenv("KILN_CUDA_DRIVER");
  kiln::LoadOptions toCpu;
  toCpu.device = "cpu";
  kiln::Module onCpu = kiln::Module::load(cudaPath, toCpu);
  EXPECT_EQ(onCpu.devices()[0].boundName, "cpu");
  kiln::Tensor x = inputs(0)[0];
  std::vector<kiln::Tensor> y = onCpu.run({x});
  for (int i = 0; i < N; ++i)
    EXPECT_EQ(y[0].data<float>()[i], x.data<float>()[i] * 3.0f);
}

TEST_F(DevicesTest, MalformedManifestsAreErrors) {
  const PlanBuilder good = mainPlan(true);
  currentWeights = good.weights;
  // Values: 0 x, 1 y (cpu), 2 z, 3 w (sim), 4 s (cpu), 5 s' (sim), 6 t, 7 u,
  // 8 u+z, 9 alias of 8 (sim), 10 back (cpu), 11 out (cpu).
  // Steps: 0 slow_add, 1 copy 4->5, 2 mul, 3 scale, 4 add, 5 copy 9->10,
  // 6 add.
  struct Case {
    std::string what;
    std::function<void(json &)> edit;
    std::string fragment;
  };
  std::vector<Case> cases = {
      {"kernel argument on another role",
       [](json &m) { m["steps"][2]["device"] = 0; },
       "step 2 (kernel 'k_mul') runs on role 0 'cpu', but its argument value "
       "5 is on role 1 'sim:0'"},
      {"copy changes the shape",
       [](json &m) {
         m["values"][5]["shape"] = {2, 128};
       },
       "step 1 (copy) copies value 4 f32[256] to value 5 f32[2,128]; a copy "
       "keeps dtype and shape"},
      {"copy changes the dtype",
       [](json &m) { m["values"][5]["dtype"] = "i32"; },
       "a copy keeps dtype and shape"},
      {"copy within one role", [](json &m) { m["values"][5]["device"] = 0; },
       "copies value 4 to value 5 on the same role 0 'cpu'"},
      {"copy of the wrong size", [](json &m) { m["steps"][1]["bytes"] = 4; },
       "step 1 (copy) moves 4 bytes, but value 4 has 1024"},
      {"copy without two ends", [](json &m) { m["steps"][1]["copy"] = {4}; },
       "step 1 (copy) must name [source, destination]"},
      {"value role out of range", [](json &m) { m["values"][3]["device"] = 5; },
       "value 3 is on role 5, but the plan has 2 role(s)"},
      {"step role out of range", [](json &m) { m["steps"][0]["device"] = 2; },
       "runs on role 2, but the plan has 2 role(s)"},
      {"format 1 device names",
       [](json &m) { m["values"][0]["device"] = "cpu"; },
       "value 0's device must be a non-negative integer, got \"cpu\""},
      {"negative role", [](json &m) { m["values"][0]["device"] = -1; },
       "must be a non-negative integer, got -1"},
      {"CPU feature this CPU lacks",
       [](json &m) { m["target"]["cpu_features"] = {"avx512_kiln_test"}; },
       "compiled for CPUs with avx512_kiln_test, which this CPU lacks; "
       "recompile it here or for a lower level (kilnc --cpu=x86-64-v3 or "
       "--cpu=generic)"},
      {"no roles", [](json &m) { m.erase("devices"); }, "malformed manifest"},
      {"roles not a list", [](json &m) { m["devices"] = 3; },
       "devices must be a list of roles"},
      {"unknown role kind", [](json &m) { m["devices"][1]["kind"] = "tpu"; },
       "role 1 has an unknown kind 'tpu'"},
      {"role name of another kind",
       [](json &m) { m["devices"][1]["name"] = "cpu"; },
       "role 1 was compiled for 'cpu', which is not a sim device"},
      {"unknown step kind",
       [](json &m) {
         m["steps"][3] = {{"barrier", 1}};
       },
       "step 3 has an unknown kind"},
      {"kernel and copy at once",
       [](json &m) { m["steps"][1]["kernel"] = "k_add"; },
       "step 1 has an unknown kind"},
      {"alias on another role", [](json &m) { m["values"][9]["device"] = 0; },
       "alias value 9 is on role 0 'cpu', but its source value 8 is on role 1 "
       "'sim:0'; an alias is on its source's device"},
      {"alias of a later value", [](json &m) { m["values"][9]["of"] = 10; },
       "alias value 9 must view an earlier value"},
      {"read before write",
       [](json &m) { std::swap(m["steps"][2], m["steps"][3]); },
       "step 2 (kernel 'k_scale') reads value 6 before any step computes it"},
      {"written twice", [](json &m) { m["steps"].push_back(m["steps"][1]); },
       "step 7 (copy) writes value 5, which an earlier step already computed"},
      {"writes a constant", [](json &m) { m["steps"][2]["args"][2] = 3; },
       "step 2 (kernel 'k_mul') writes value 3, which is a constant, not a "
       "temp"},
      {"more inputs than arguments",
       [](json &m) { m["steps"][0]["num_inputs"] = 4; },
       "has 4 inputs but only 3 arguments"},
      {"unknown kernel", [](json &m) { m["steps"][0]["kernel"] = "k_nope"; },
       "code section lacks kernel 'k_nope'"},
      {"argument out of range", [](json &m) { m["steps"][0]["args"][0] = 99; },
       "step 0 (kernel 'k_slow_add') refers to value 99 of only 12"},
      {"output never computed",
       [](json &m) {
         m["values"].push_back(m["values"][11]);
         m["outputs"][0]["value"] = 12;
       },
       "graph output 'out' (value 12) is never computed"},
      {"input that is no graph input", [](json &m) { m["inputs"].erase(2); },
       "input value 2 is no graph input"},
      {"graph input that is a temp",
       [](json &m) { m["inputs"][0]["value"] = 4; },
       "graph input 'x' is value 4, which is not an input value"},
      {"constant outside the weights",
       [](json &m) { m["values"][3]["offset"] = 1 << 20; },
       "constant value 3 lies outside the weights section"},
      {"huge shape",
       [](json &m) {
         m["values"][4]["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
       },
       "value 4 is too large"},
  };
  for (const Case &c : cases) {
    json m = good.manifest();
    c.edit(m);
    expectLoadError(write(m, "bad.kiln"), {}, c.fragment);
  }

  // Another format version, in the header.
  std::string path = write(good, "v1.kiln");
  std::vector<char> bytes = readAll(path);
  bytes[8] = 1;
  writeAll(path, bytes);
  expectLoadError(path, {},
                  "artifact has format version 1, this runtime reads version "
                  "2; recompile it");

  // Every leaf of the plan replaced by values of other types and ranges:
  // kiln::Error or a good load, never anything else.
  std::vector<json> junk = {-1, 7, 99, "zz", nullptr, json::array()};
  json base = good.manifest();
  json flat = base.flatten();
  for (const auto &[pointer, leaf] : flat.items()) {
    if (pointer.rfind("/target", 0) == 0 || pointer == "/abi")
      continue;
    for (const json &replacement : junk) {
      json edited = base;
      edited[json::json_pointer(pointer)] = replacement;
      std::string file = write(edited, "junk.kiln");
      try {
        kiln::Module::load(file);
      } catch (const kiln::Error &) {
      } catch (const std::exception &e) {
        ADD_FAILURE() << pointer << " = " << replacement.dump() << ": "
                      << e.what();
      }
    }
  }
}

TEST_F(DevicesTest, ConcurrentRunsMatchSerialRuns) {
  std::string path = write(mainPlan(true), "multi.kiln");
  kiln::LoadOptions options;
  options.bind["0"] = "sim:1"; // both roles on sim devices
  for (const kiln::LoadOptions &o : {kiln::LoadOptions(), options}) {
    kiln::Module m = kiln::Module::load(path, o);
    const int threads = 8, runs = 25;
    std::vector<std::vector<kiln::Tensor>> serial;
    for (int t = 0; t < threads; ++t)
      serial.push_back(m.run(inputs(float(t))));
    std::vector<std::vector<std::vector<kiln::Tensor>>> results(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<kiln::Tensor> in = inputs(float(t));
        for (int r = 0; r < runs; ++r)
          results[t].push_back(m.run(in));
      });
    for (std::thread &th : pool)
      th.join();
    for (int t = 0; t < threads; ++t) {
      expectSameBytes(serial[t], reference(inputs(float(t))), "serial");
      for (int r = 0; r < runs; ++r)
        expectSameBytes(results[t][r], serial[t],
                        "thread " + std::to_string(t) + " run " +
                            std::to_string(r));
    }
  }
}

TEST_F(DevicesTest, KernelErrorsOnAStreamReachTheCaller) {
  PlanBuilder b;
  size_t cpu = b.role("cpu", "cpu"), sim = b.role("sim:0", "sim");
  size_t x = b.input("x", cpu);
  size_t s = b.copy(b.kernel("k_add", {x, x}, cpu), sim);
  size_t bad = b.kernel("k_throw", {s}, sim);
  size_t after = b.kernel("k_scale", {bad}, sim);
  b.output("y", b.kernel("k_add", {b.copy(after, cpu), x}, cpu));
  b.output("s", s);
  std::string path = write(b, "throws.kiln");
  kiln::Module m = kiln::Module::load(path);
  kiln::Tensor in = inputs(0)[0];
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      m.run({in});
      ADD_FAILURE() << "a throwing kernel went unnoticed";
    } catch (const std::exception &e) {
      EXPECT_STREQ(e.what(), "kernel exploded");
    }
  }
  // Several at once: every run reports, none hangs.
  std::vector<std::thread> pool;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r)
        try {
          m.run({in});
        } catch (const std::exception &) {
          ++failures[t];
        }
    });
  for (std::thread &th : pool)
    th.join();
  EXPECT_EQ(failures, (std::vector<int>{10, 10, 10, 10}));
}

TEST_F(DevicesTest, PlanWithoutStepsOrRoles) {
  PlanBuilder b;
  kiln::Module empty = kiln::Module::load(write(b, "empty.kiln"));
  EXPECT_TRUE(empty.devices().empty());
  EXPECT_TRUE(empty.run({}).empty());

  // A sim input read straight back: staged, then copied out.
  PlanBuilder echo;
  size_t sim = echo.role("sim:4", "sim");
  echo.output("y", echo.input("x", sim));
  kiln::Module m = kiln::Module::load(write(echo, "echo.kiln"));
  kiln::Tensor x = inputs(1)[0];
  std::vector<kiln::Tensor> y = m.run({x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::memcmp(y[0].raw(), x.raw(), kBytes), 0);
  EXPECT_EQ(m.peakBytes(), std::vector<size_t>{kBytes});
}

} // namespace
