//===- CudaTest.cpp - the CUDA backend of the runtime ---------------------===//
//
// Hand-written artifacts with a code section (CudaTestKernels.cpp, built
// next to this binary) and a ptx section (CudaTestKernels.h), run three ways:
//
//   - without CUDA ($KILN_CUDA_DRIVER names no library, or a library that is
//     no driver): binding errors, fallback to cpu, host bindings;
//   - on the fake driver (unit/fakecuda/, a copy per test so each starts
//     fresh): the whole cuda path on host memory, with the fake checking
//     contexts, streams and pointers, and counting what leaks;
//   - on a real GPU when libcuda.so.1 loads (GTEST_SKIP otherwise).
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"
#include "CudaTestKernels.h"
#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

using nlohmann::json;

namespace {

using namespace kiln::test;

std::string binaryDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/kiln-cuda-test-" +
         std::to_string(::getpid()) + "-" + name;
}

std::vector<char> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void expectOutputs(const std::vector<kiln::Tensor> &got,
                   const std::vector<std::vector<float>> &want,
                   const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].nbytes(), kBytes) << what;
    EXPECT_EQ(std::memcmp(got[o].raw(), want[o].data(), kBytes), 0)
        << what << ": output " << o << " differs (first value "
        << got[o].data<float>()[0] << ", want " << want[o][0] << ")";
  }
}

class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    code = readAll(binaryDir() + "/libkiln-cuda-test-kernels.so");
    ASSERT_FALSE(code.empty()) << "libkiln-cuda-test-kernels.so is missing "
                                  "next to the test binary";
    const char *old = std::getenv("KILN_CUDA_DRIVER");
    savedDriver = old ? std::optional<std::string>(old) : std::nullopt;
  }
  void TearDown() override {
    if (savedDriver)
      setenv("KILN_CUDA_DRIVER", savedDriver->c_str(), 1);
    else
      unsetenv("KILN_CUDA_DRIVER");
    unsetenv("FAKE_CUDA_DEVICES");
    unsetenv("FAKE_CUDA_MEMORY");
    unsetenv("KILN_CUBLAS");
    unsetenv("KILN_CUDNN");
    for (const std::string &path : written)
      std::remove(path.c_str());
  }

  std::string write(const json &manifest, const std::vector<char> &weights,
                    const std::string &ptx, const std::string &name) {
    std::string path = tempPath(name);
    std::vector<char> bytes = artifactBytes(manifest, code, weights, ptx);
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), std::streamsize(bytes.size()));
    written.push_back(path);
    return path;
  }
  std::string write(const PlanBuilder &b, const std::string &name,
                    const std::string &ptx = kiln::test::kCudaTestPtx) {
    return write(b.manifest(), b.weights, ptx, name);
  }

  /// Points $KILN_CUDA_DRIVER at a fresh copy of the fake driver.
  std::string useFake(int devices, const std::string &memory = "") {
    static int copies = 0;
    std::string path = tempPath("fake-" + std::to_string(copies++) + ".so");
    std::filesystem::copy_file(
        binaryDir() + "/libkiln-fake-cuda.so", path,
        std::filesystem::copy_options::overwrite_existing);
    written.push_back(path);
    setenv("FAKE_CUDA_DEVICES", std::to_string(devices).c_str(), 1);
    if (memory.empty())
      unsetenv("FAKE_CUDA_MEMORY");
    else
      setenv("FAKE_CUDA_MEMORY", memory.c_str(), 1);
    setenv("KILN_CUDA_DRIVER", path.c_str(), 1);
    return path;
  }

  /// The fake's count of `what`; -1 when the library was never loaded.
  static long fakeCount(const std::string &path, const char *what) {
    void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!library)
      return -1;
    auto count = reinterpret_cast<long (*)(const char *)>(
        dlsym(library, "fake_cuda_count"));
    long n = count ? count(what) : -2;
    dlclose(library);
    return n;
  }

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

  static void expectRunError(const kiln::Module &m, const kiln::Tensor &x,
                             const std::string &fragment) {
    try {
      m.run({x});
      ADD_FAILURE() << "ran, but expected an error with: " << fragment;
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "error: " << e.what() << "\nexpected: " << fragment;
    }
  }

  /// For each case, `plan` with its first step's first launch's `kind`
  /// ("gemm", "conv") given `key` = `value` must fail to load with `error`
  /// (no driver is needed: decoding rejects it).
  struct BadLaunch {
    const char *key;
    json value;
    const char *error;
  };
  void expectBadLaunches(const PlanBuilder &plan, const char *kind,
                         std::initializer_list<BadLaunch> cases) {
    setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    for (const BadLaunch &c : cases) {
      PlanBuilder b = plan;
      b.steps[0]["cuda"]["launches"][0][kind][c.key] = c.value;
      expectLoadError(write(b, std::string("bad-") + kind + ".kiln"), {},
                      c.error);
    }
  }

  std::vector<char> code;
  std::optional<std::string> savedDriver;
  std::vector<std::string> written;
};

//===----------------------------------------------------------------------===//
// Without CUDA
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, NoDriverFallsBackToCpuWhenThePlanHasACpuRole) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  std::string path = write(multiPlan(), "multi.kiln");
  testing::internal::CaptureStderr();
  kiln::Module m = kiln::Module::load(path);
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_EQ(warning.rfind("kiln: warning: cuda:0 is unavailable (no CUDA "
                          "driver (/nonexistent/libcuda.so.1: cannot open "
                          "shared object file",
                          0),
            0u)
      << warning;
  EXPECT_NE(warning.find("); role 1 runs on cpu\n"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("kiln: warning: cuda:1 is unavailable"),
            std::string::npos)
      << warning;
  std::vector<kiln::DeviceInfo> devices = m.devices();
  ASSERT_EQ(devices.size(), 3u);
  for (const kiln::DeviceInfo &d : devices)
    EXPECT_EQ(d.boundName, "cpu");
  kiln::Tensor x = input(0.5f);
  expectOutputs(m.run({x}), multiReference(x), "fallen back to cpu");
}

TEST_F(CudaTest, NoDriverWithoutACpuRoleIsAnError) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  std::string path = write(singlePlan(), "single.kiln");
  expectLoadError(path, {},
                  "role 0 'cuda:0': no CUDA driver (/nonexistent/libcuda.so.1: "
                  "cannot open shared object file");
  expectLoadError(path, {}, "; bind it to a host device with --bind 0=cpu");
  kiln::LoadOptions autoGpu;
  autoGpu.device = "cuda:auto";
  expectLoadError(path, autoGpu,
                  "role 0 'cuda:0': cuda:auto was asked for, but no CUDA "
                  "driver");
}

TEST_F(CudaTest, AnExplicitlyRequestedGpuNeverFallsBack) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  std::string path = write(multiPlan(), "multi.kiln"); // has a cpu role
  kiln::LoadOptions options;
  options.bind["1"] = "cuda:0";
  expectLoadError(path, options,
                  "role 1 'cuda:0': cuda:0 was asked for, but no CUDA driver");
}

TEST_F(CudaTest, ABogusDriverLibraryIsAnError) {
  setenv("KILN_CUDA_DRIVER", "libm.so.6", 1);
  expectLoadError(write(singlePlan(), "single.kiln"), {},
                  "role 0 'cuda:0': libm.so.6 is not a usable CUDA driver (it "
                  "lacks cuGetErrorName)");
}

TEST_F(CudaTest, CudaRolesBoundToHostDevicesRunTheCpuCode) {
  std::string fake = useFake(1);
  std::string path = write(singlePlan(), "single.kiln");
  kiln::Tensor x = input(1.0f);
  for (const char *device : {"cpu", "sim:2"}) {
    kiln::LoadOptions options;
    options.bind["0"] = device;
    kiln::Module m = kiln::Module::load(path, options);
    EXPECT_EQ(m.devices()[0].boundName, device);
    expectOutputs(m.run({x}), singleReference(x), device);
  }
  EXPECT_EQ(fakeCount(fake, "launches"), -1) << "the driver was loaded";
}

TEST_F(CudaTest, HostRolesDoNotBindToCuda) {
  std::string fake = useFake(1);
  std::string path = write(multiPlan(), "multi.kiln");
  kiln::LoadOptions options;
  options.device = "cuda:0";
  expectLoadError(path, options,
                  "cannot bind role 0 'cpu' to 'cuda:0': its kernels run on "
                  "cpu or sim:N");
  options.device = "";
  options.bind["cuda:0"] = "cpu";
  options.bind["cuda:1"] = "sim:1";
  options.bind["cpu"] = "cuda:auto";
  expectLoadError(path, options, "cannot bind role 0 'cpu' to 'cuda:auto'");
  EXPECT_EQ(fakeCount(fake, "launches"), -1) << "the driver was loaded";
}

TEST_F(CudaTest, MalformedCudaDescriptionsAreErrors) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  const PlanBuilder good = multiPlan();
  // Steps: 0 add_one (cpu), 1 copy, 2 add (cuda:0), 3 copy,
  // 4 twice_plus_one (cuda:1), 5 copy, 6 add_one (cpu).
  struct Case {
    std::function<void(json &)> edit;
    std::string fragment;
  };
  std::vector<Case> cases = {
      {[](json &m) { m["steps"][2]["cuda"]["slots"] = 4; },
       "step 2 (kernel 'k_add') has 4 cuda slots, but 3 arguments and 0 "
       "scratch buffers"},
      {[](json &m) {
         m["steps"][4]["cuda"]["scratch"] = {4000, 8};
       },
       "step 4 (kernel 'k_twice_plus_one') has 3 cuda slots, but 2 arguments "
       "and 2 scratch buffers"},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0].erase("entry"); },
       "malformed manifest"},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0]["entry"] = 7; },
       "step 2 (kernel 'k_add')'s cuda launch 0 must name its entry point, "
       "got 7"},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0]["entry"] = ""; },
       "must name its entry point"},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0]["entry"] = "a b"; },
       "has a bad entry point name \"a b\""},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0]["threads"] = -1; },
       "step 2 (kernel 'k_add')'s cuda launch 0's threads must be a "
       "non-negative integer, got -1"},
      {[](json &m) { m["steps"][2]["cuda"]["launches"][0]["threads"] = 2.5; },
       "threads must be a non-negative integer, got 2.5"},
      {[](json &m) { m["steps"][4]["cuda"]["scratch"] = {-4}; },
       "cuda scratch size must be a non-negative integer, got -4"},
      {[](json &m) { m["steps"][4]["cuda"]["scratch"] = 4000; },
       "cuda scratch must be a list of sizes"},
      {[](json &m) { m["steps"][4]["cuda"]["launches"] = "kiln_twice"; },
       "cuda launches must be a list"},
      {[](json &m) { m["steps"][4]["cuda"]["launches"][1] = 3; },
       "cuda launch 1 must be an object"},
      {[](json &m) { m["steps"][2]["cuda"] = "kiln_add"; },
       "step 2 (kernel 'k_add')'s \"cuda\" must be an object"},
      {[](json &m) { m["steps"][2]["cuda"].erase("slots"); },
       "malformed manifest"},
      {[](json &m) { m["steps"][0]["cuda"] = cudaFor("k_add_one"); },
       "step 0 (kernel 'k_add_one') has a \"cuda\" launch description but "
       "runs on role 0 'cpu', which is no cuda role"},
  };
  for (const Case &c : cases) {
    json m = good.manifest();
    c.edit(m);
    expectLoadError(
        write(m, good.weights, kiln::test::kCudaTestPtx, "bad.kiln"), {},
        c.fragment);
  }
  // Every leaf of the cuda objects replaced by junk: kiln::Error or a load.
  std::vector<json> junk = {-1, 7, 1u << 30, "zz", nullptr, json::array()};
  json base = good.manifest();
  json flat = base.flatten();
  for (const auto &[pointer, leaf] : flat.items()) {
    if (pointer.find("/cuda") == std::string::npos)
      continue;
    for (const json &replacement : junk) {
      json edited = base;
      edited[json::json_pointer(pointer)] = replacement;
      testing::internal::CaptureStderr();
      try {
        kiln::Module::load(write(edited, good.weights, "", "junk.kiln"));
      } catch (const kiln::Error &) {
      } catch (const std::exception &e) {
        ADD_FAILURE() << pointer << " = " << replacement.dump() << ": "
                      << e.what();
      }
      testing::internal::GetCapturedStderr();
    }
  }
}

TEST_F(CudaTest, LaunchGeometry) {
  EXPECT_EQ(kiln::cuda::gridSize(0), 1u);
  EXPECT_EQ(kiln::cuda::gridSize(1), 1u);
  EXPECT_EQ(kiln::cuda::gridSize(256), 1u);
  EXPECT_EQ(kiln::cuda::gridSize(257), 2u);
  EXPECT_EQ(kiln::cuda::gridSize(uint64_t(1) << 40), 1u << 20);
}

//===----------------------------------------------------------------------===//
// On the fake driver
//===----------------------------------------------------------------------===//

/// The fake's kiln_fault fails asynchronously; other entries as in the PTX.
const std::string kFakePtx = std::string(kiln::test::kCudaTestPtx) +
                             "\n.visible .entry kiln_fault(.param .b64 s)\n";

TEST_F(CudaTest, FakeSingleDeviceRunsInlineAndLeaksNothing) {
  std::string fake = useFake(1);
  std::string path = write(singlePlan(), "single.kiln");
  {
    kiln::Module m = kiln::Module::load(path);
    EXPECT_EQ(m.devices()[0].boundName, "cuda:0");
    EXPECT_EQ(fakeCount(fake, "modules"), 1);
    EXPECT_EQ(fakeCount(fake, "contexts"), 1);
    EXPECT_EQ(m.peakBytes(), std::vector<size_t>{kBytes}); // w, from load
    for (float seed : {0.0f, 1.0f, 2.0f}) {
      kiln::Tensor x = input(seed);
      expectOutputs(m.run({x}), singleReference(x), "cuda:0");
    }
    // x, a, b, c and the scratch buffer per run; blocks are reused.
    EXPECT_EQ(m.peakBytes(), std::vector<size_t>{6 * kBytes});
    long allocations = fakeCount(fake, "allocations");
    EXPECT_EQ(allocations, 6);
    EXPECT_EQ(fakeCount(fake, "launches"), 3 * 4);
    kiln::Tensor x = input(3.0f);
    expectOutputs(m.run({x}), singleReference(x), "again");
    EXPECT_EQ(fakeCount(fake, "allocations"), allocations);
    EXPECT_EQ(fakeCount(fake, "streams"), 1);
  }
  for (const char *what :
       {"allocations", "bytes", "contexts", "streams", "modules"})
    EXPECT_EQ(fakeCount(fake, what), 0) << what << " leaked";
}

TEST_F(CudaTest, FakeTensorsMoveToTheGpuAndBack) {
  std::string fake = useFake(2);
  {
    kiln::Tensor x = input(1.5f);
    kiln::Tensor onGpu = x.to("cuda:1");
    EXPECT_EQ(onGpu.device(), "cuda:1");
    EXPECT_FALSE(onGpu.isHost());
    EXPECT_EQ(onGpu.shape(), x.shape());
    try {
      (void)onGpu.raw();
      ADD_FAILURE() << "raw() of a cuda tensor returned";
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find("is on cuda:1: read it with "
                                           ".to(\"cpu\")"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(fakeCount(fake, "allocations"), 1);
    kiln::Tensor moved = onGpu.to("cuda:0"); // through the host
    EXPECT_EQ(moved.device(), "cuda:0");
    kiln::Tensor back = moved.to("cpu");
    EXPECT_EQ(back.device(), "cpu");
    ASSERT_EQ(back.nbytes(), x.nbytes());
    EXPECT_EQ(std::memcmp(back.raw(), x.raw(), x.nbytes()), 0);
    EXPECT_EQ(x.to("sim:2").device(), "sim:2");
    EXPECT_EQ(onGpu.to("cuda:1").devicePointer(), onGpu.devicePointer());

    // A plan takes inputs wherever they are.
    kiln::Module m =
        kiln::Module::load(write(singlePlan(), "tensor-inputs.kiln"));
    expectOutputs(m.run({onGpu}), singleReference(x), "a cuda:1 input");

    for (auto [name, fragment] : {std::pair("cuda:5", "the driver sees 2 GPUs"),
                                  std::pair("gpu:0", "gpu:0")})
      try {
        x.to(name);
        ADD_FAILURE() << name << ": no error";
      } catch (const kiln::Error &e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
            << e.what();
      }
  }
  // Device memory is returned when the last tensor on it goes.
  EXPECT_EQ(fakeCount(fake, "contexts"), 0);
  setenv("KILN_CUDA_DRIVER", (tempPath("absent") + ".so").c_str(), 1);
  try {
    input(0.0f).to("cuda:0");
    ADD_FAILURE() << "no error without a driver";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 was asked for"),
              std::string::npos)
        << e.what();
  }
}

// Copies of at least kStageMin bytes to a device go through a pinned block,
// reused by the next; without pinned memory they still work, from pageable
// memory.
TEST_F(CudaTest, FakeLargeCopiesStageThroughPinnedMemory) {
  for (const char *pinned : {"1", "0"}) {
    setenv("FAKE_CUDA_PINNED", pinned, 1);
    std::string fake = useFake(1);
    bool on = std::string(pinned) == "1";
    kiln::Tensor big =
        kiln::Tensor::empty(kiln::DType::F32, {int64_t(1) << 17}); // 512 KiB
    for (int64_t i = 0; i < big.numElements(); ++i)
      big.data<float>()[i] = float(i % 1013) * 0.5f;
    {
      kiln::Tensor held = big.to("cuda:0"); // keeps the device bound
      for (int round = 0; round < 2; ++round) {
        kiln::Tensor back = big.to("cuda:0").to("cpu");
        ASSERT_EQ(back.nbytes(), big.nbytes());
        EXPECT_EQ(std::memcmp(back.raw(), big.raw(), big.nbytes()), 0);
      }
      EXPECT_EQ(fakeCount(fake, "pinned_copies"), on ? 3 : 0) << pinned;
      EXPECT_EQ(fakeCount(fake, "pinned"), on ? 1 : 0) << "one block, reused";
      // Small copies are direct.
      kiln::Tensor x = input(0.5f);
      kiln::Tensor small = x.to("cuda:0").to("cpu");
      EXPECT_EQ(std::memcmp(small.raw(), x.raw(), x.nbytes()), 0);
      EXPECT_EQ(fakeCount(fake, "pinned_copies"), on ? 3 : 0) << pinned;
    }
    EXPECT_EQ(fakeCount(fake, "pinned"), 0) << "freed with the device";
  }
  unsetenv("FAKE_CUDA_PINNED");
}

TEST_F(CudaTest, FakeGemmLaunchesRunThroughCublas) {
  std::string fake = useFake(1);
  setenv("KILN_CUBLAS", fake.c_str(), 1);
  std::string path = write(gemmPlan("cuda:0"), "gemm.kiln");
  {
    kiln::Module m = kiln::Module::load(path);
    EXPECT_EQ(differsFromTwin(path, m, input(2.0f), kGemmOutputs), "");
    EXPECT_EQ(fakeCount(fake, "gemms"), 2);
    EXPECT_EQ(fakeCount(fake, "blas"), 1);
    EXPECT_EQ(fakeCount(fake, "launches"), 0);
  }
  EXPECT_EQ(fakeCount(fake, "blas"), 0) << "the cuBLAS handle leaked";
}

TEST_F(CudaTest, GemmLaunchesAreValidated) {
  expectBadLaunches(
      gemmPlan("cuda:0"), "gemm",
      {
          {"dtype", "f16", "gemm dtype must be f32 or f64"},
          {"c", 3, "gemm slot c is 3, but the kernel has 3 slots"},
          {"stride_a", 900, "reads or writes past slot 0"},
          {"m", 40, "reads or writes past slot"},
          {"beta", 2, "gemm beta must be 0 or 1"},
          {"stride_c", 100, "output matrices overlap"},
          {"k", -1, "gemm k must be an integer"},
      });
}

TEST_F(CudaTest, FakeConvLaunchesRunThroughCudnn) {
  std::string fake = useFake(1);
  setenv("KILN_CUDNN", fake.c_str(), 1);
  std::string path = write(convPlan("cuda:0"), "conv.kiln");
  {
    kiln::Module m = kiln::Module::load(path);
    EXPECT_EQ(differsFromTwin(path, m, input(0.5f), kConvOutputs), "");
    EXPECT_EQ(fakeCount(fake, "convs"), 2);
    EXPECT_EQ(fakeCount(fake, "convs_not_fma"), 0) << "TF32 math allowed";
    EXPECT_EQ(fakeCount(fake, "dnn"), 1);
    EXPECT_EQ(fakeCount(fake, "launches"), 0);
  }
  EXPECT_EQ(fakeCount(fake, "dnn"), 0) << "the cuDNN handle leaked";
  EXPECT_EQ(fakeCount(fake, "dnn_descriptors"), 0) << "descriptors leaked";
}

TEST_F(CudaTest, FakeConvWithoutAFittingAlgorithmIsAnError) {
  std::string fake = useFake(1);
  setenv("KILN_CUDNN", fake.c_str(), 1);
  PlanBuilder b = convPlan("cuda:0");
  b.steps[0]["cuda"]["scratch"][0] = 128; // algorithm 0 needs 256 bytes
  b.steps[0]["cuda"]["launches"][0]["conv"]["workspace_bytes"] = 128;
  kiln::Module m = kiln::Module::load(write(b, "conv-small.kiln"));
  expectRunError(
      m, input(1.0f),
      "cuDNN offers no conv algorithm in FMA math whose workspace fits "
      "128 bytes (offered: 6 (math type 1), 5 (math type 0), 7 "
      "(CUDNN_STATUS_NOT_SUPPORTED), 1 (1099511627776 bytes), 0 "
      "(256 bytes), 2 (256 bytes))");
}

// A fused conv (bias, residual, ReLU in one cuDNN call): the fake refuses
// the first fitting algorithm (0) for the fused call as not supported, so
// kiln must go on to the next (2) and keep it.
TEST_F(CudaTest, FakeFusedConvRunsThroughCudnn) {
  std::string fake = useFake(1);
  setenv("KILN_CUDNN", fake.c_str(), 1);
  std::string path = write(fusedConvPlan("cuda:0"), "conv-fused.kiln");
  {
    kiln::Module m = kiln::Module::load(path);
    kiln::Tensor x = input(0.5f);
    EXPECT_EQ(differsFromTwin(path, m, x, kConvOutputs), "");
    EXPECT_EQ(fakeCount(fake, "convs_fused"), 2);
    EXPECT_EQ(fakeCount(fake, "convs_not_fma"), 0) << "TF32 math allowed";
    // The ReLU clamped some outputs: the check above covers both sides.
    std::vector<kiln::Tensor> y = m.run({x});
    size_t zeros = 0;
    for (size_t i = 0; i < kConvOutputs; ++i)
      zeros += y[0].data<float>()[i] == 0.0f;
    EXPECT_GT(zeros, 0u);
    EXPECT_LT(zeros, kConvOutputs);
  }
  EXPECT_EQ(fakeCount(fake, "dnn"), 0) << "the cuDNN handle leaked";
  EXPECT_EQ(fakeCount(fake, "dnn_descriptors"), 0) << "descriptors leaked";
}

TEST_F(CudaTest, ConvLaunchesAreValidated) {
  expectBadLaunches(
      convPlan("cuda:0"), "conv",
      {
          {"dtype", "f64", "conv dtype must be f32"},
          {"groups", 3, "conv shapes do not make a conv"},
          {"y_shape", json({2, 6, 4, 6}), "conv shapes do not make a conv"},
          {"pads", json({2}), "conv pads must be 2 integers"},
          {"strides", json({0, 1}),
           "conv strides must hold integers in [1, 2^31)"},
          {"dilations", json({1}),
           "conv dilations must be a list of 2 integers"},
          {"x_shape", json({2, 8, 10, 10}), "conv shapes do not make a conv"},
          {"y", 4, "conv slot y is 4, but the kernel has 4 slots"},
          {"x", 3, "conv reads or writes past slot 3 (1024 bytes)"},
          {"workspace", 4, "conv slot workspace is 4, but the kernel has 4"},
          {"workspace_bytes", 8192, "larger than its slot (1024 bytes)"},
          {"beta", 2, "conv beta must be 0 or 1"},
          {"y", 0,
           "conv slots overlap, or its workspace is an argument (x 0, w "
           "1, y 0, workspace 3)"},
          {"workspace", 1,
           "conv slots overlap, or its workspace is an argument"},
          {"z", 0, "conv has a z or an activation but no bias"},
      });
  expectBadLaunches(
      fusedConvPlan("cuda:0"), "conv",
      {
          {"activation", "gelu",
           "conv with a bias must have the activation \"relu\", got "
           "\"gelu\""},
          {"beta", 1, "conv with a bias must overwrite its output (beta 0)"},
          {"bias", 4, "conv slot bias is 4, but the kernel has 4 slots"},
          {"bias", 2,
           "conv bias or z shares slot 2 with its output or workspace"},
          {"z", 2, "conv bias or z shares slot 2 with its output or workspace"},
      });
}

TEST_F(CudaTest, ToolkitCudnnHasEverySymbolKilnUses) {
  // The real library, found as at run time (no GPU is needed to load it).
  unsetenv("KILN_CUDNN");
  try {
    const kiln::cuda::Dnn &dnn = kiln::cuda::loadDnn();
    EXPECT_NE(dnn.forward, nullptr);
    EXPECT_NE(dnn.errorString, nullptr) << dnn.path;
  } catch (const kiln::Error &e) {
    if (std::string(e.what()).find("cannot load cuDNN") != std::string::npos)
      GTEST_SKIP() << "no cuDNN installed: " << e.what();
    FAIL() << e.what();
  }
}

TEST_F(CudaTest, FakeConcurrentRunsUseStreamsOfTheirOwn) {
  std::string fake = useFake(1);
  kiln::Module m = kiln::Module::load(write(singlePlan(), "single.kiln"));
  const int threads = 6, runs = 20;
  std::vector<int> failures(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      kiln::Tensor x = input(float(t));
      std::vector<std::vector<float>> want = singleReference(x);
      for (int r = 0; r < runs; ++r) {
        std::vector<kiln::Tensor> got = m.run({x});
        if (std::memcmp(got[0].raw(), want[0].data(), kBytes) != 0)
          ++failures[t];
      }
    });
  for (std::thread &th : pool)
    th.join();
  EXPECT_EQ(failures, std::vector<int>(threads, 0));
  EXPECT_GE(fakeCount(fake, "streams"), 1);
  EXPECT_LE(fakeCount(fake, "streams"), threads);
}

TEST_F(CudaTest, FakeMultiDevicePlansMoveDataEveryWay) {
  std::string fake = useFake(2);
  std::string path = write(multiPlan(), "multi.kiln");
  struct Case {
    std::map<std::string, std::string> bind;
    std::vector<std::string> bound;
  };
  std::vector<Case> cases = {
      {{}, {"cpu", "cuda:0", "cuda:1"}},                // peer copies
      {{{"2", "cuda:0"}}, {"cpu", "cuda:0", "cuda:0"}}, // within a device
      {{{"1", "sim:1"}}, {"cpu", "sim:1", "cuda:1"}},   // host to cuda
      {{{"cuda:1", "cpu"}}, {"cpu", "cuda:0", "cpu"}},  // cuda to host
      {{{"1", "cuda:1"}, {"2", "cuda:0"}}, {"cpu", "cuda:1", "cuda:0"}},
  };
  for (const Case &c : cases) {
    kiln::LoadOptions options;
    options.bind = c.bind;
    std::string what = c.bound[1] + "+" + c.bound[2];
    kiln::Module m = kiln::Module::load(path, options);
    for (size_t r = 0; r < 3; ++r)
      EXPECT_EQ(m.devices()[r].boundName, c.bound[r]) << what;
    long waits = fakeCount(fake, "event_waits"),
         hostWaits = fakeCount(fake, "event_syncs");
    for (float seed : {0.25f, -1.0f}) {
      kiln::Tensor x = input(seed);
      expectOutputs(m.run({x}), multiReference(x), what);
    }
    // Steps order themselves after GPU work through events: a cuda step's
    // stream waits for its inputs' events, the cpu step after the copy to
    // the host waits for that copy's event on the host.
    EXPECT_GT(fakeCount(fake, "event_waits"), waits) << what;
    EXPECT_GT(fakeCount(fake, "event_syncs"), hostWaits) << what;
    EXPECT_EQ(fakeCount(fake, "events"), 0) << what << ": events leaked";
  }
  EXPECT_EQ(fakeCount(fake, "allocations"), 0);
  EXPECT_EQ(fakeCount(fake, "contexts"), 0);
}

TEST_F(CudaTest, FakeAutoPicksTheDeviceWithTheMostFreeMemory) {
  std::string fake = useFake(3, "1000000000,3000000000,2000000000");
  std::string path = write(singlePlan(), "single.kiln");
  kiln::LoadOptions options;
  options.device = "cuda:auto";
  options.memoryCapacity["cuda:auto"] = 6 * kBytes;
  kiln::Tensor x = input(0.0f);
  {
    kiln::Module m = kiln::Module::load(path, options);
    EXPECT_EQ(m.devices()[0].boundName, "cuda:1");
    expectOutputs(m.run({x}), singleReference(x), "cuda:auto");
  }
  options.memoryCapacity["cuda:auto"] = 6 * kBytes - 1;
  expectRunError(kiln::Module::load(path, options), x,
                 "cuda:1: out of memory: needs 4000 bytes, 20000 of 23999 in "
                 "use");

  kiln::LoadOptions outOfRange;
  outOfRange.bind["0"] = "cuda:5";
  expectLoadError(path, outOfRange,
                  "cuda:5: this machine has 3 CUDA device(s) (cuda:0, cuda:1, "
                  "cuda:2)");
  EXPECT_EQ(fakeCount(fake, "contexts"), 0);
}

TEST_F(CudaTest, FakeOutOfDeviceMemoryIsAnError) {
  std::string fake = useFake(1, "20000"); // w and 3 more blocks of 4096
  std::string path = write(singlePlan(), "single.kiln");
  kiln::Module m = kiln::Module::load(path);
  kiln::Tensor x = input(0.0f);
  for (int attempt = 0; attempt < 2; ++attempt)
    expectRunError(m, x,
                   "cuda:0: out of memory: cuMemAlloc of 4000 bytes failed "
                   "with 16000 bytes in use by kiln");
  EXPECT_EQ(fakeCount(fake, "allocations"), 4); // w and the cache
}

TEST_F(CudaTest, FakeDriverErrorsNameTheDeviceAndTheCall) {
  std::string fake = useFake(1);
  // A JIT error with its log.
  PlanBuilder b = singlePlan();
  expectLoadError(write(b, "jit.kiln", "FAKE_JIT_ERROR"), {},
                  "cuda:0: cannot load the PTX (for sm_80): cuModuleLoadDataEx "
                  "failed: CUDA_ERROR_INVALID_PTX (fake error); the JIT log "
                  "says:\nptxas fatal   : fake syntax error");
  // An entry the PTX lacks.
  json m = b.manifest();
  m["steps"][1]["cuda"]["launches"][0]["entry"] = "kiln_nope";
  expectLoadError(write(m, b.weights, kiln::test::kCudaTestPtx, "entry.kiln"),
                  {},
                  "cuda:0: step 1 (kernel 'k_add'): the ptx section lacks "
                  "entry 'kiln_nope'");
  // No ptx section, no launch description.
  expectLoadError(write(b, "noptx.kiln", ""), {},
                  "the artifact has no ptx section, but role 0 'cuda:0' is "
                  "bound to cuda:0");
  m = b.manifest();
  m["steps"][2].erase("cuda");
  expectLoadError(write(m, b.weights, kiln::test::kCudaTestPtx, "nodesc.kiln"),
                  {},
                  "step 2 (kernel 'k_twice_plus_one') runs on role 0 'cuda:0' "
                  "bound to cuda:0, but has no \"cuda\" launch description");
  // ... both fine on a host device.
  kiln::LoadOptions onCpu;
  onCpu.device = "cpu";
  kiln::Tensor x = input(0.0f);
  expectOutputs(kiln::Module::load(write(b, "noptx.kiln", ""), onCpu).run({x}),
                singleReference(x), "no ptx, on cpu");
  EXPECT_EQ(fakeCount(fake, "contexts"), 0);
  EXPECT_EQ(fakeCount(fake, "modules"), 0);
}

TEST_F(CudaTest, FakeKernelFaultsReachTheCaller) {
  std::string fake = useFake(1);
  PlanBuilder single;
  size_t gpu = single.role("cuda:0");
  size_t y = single.kernel("k_fault", {single.input("x", gpu)}, gpu);
  single.output("y", single.kernel("k_add_one", {y}, gpu));
  kiln::Module inlined =
      kiln::Module::load(write(single, "fault.kiln", kFakePtx));
  kiln::Tensor x = input(0.0f);
  expectRunError(inlined, x,
                 "cuda:0: running the plan (kernels run asynchronously: with "
                 "CUDA_LAUNCH_BLOCKING=1 the failing one reports itself): "
                 "cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS");
  PlanBuilder multi;
  size_t cpu = multi.role("cpu");
  gpu = multi.role("cuda:0");
  size_t in = multi.copy(multi.input("x", cpu), gpu);
  size_t bad = multi.kernel("k_fault", {in}, gpu);
  multi.output("y", multi.copy(multi.kernel("k_add_one", {bad}, gpu), cpu));
  kiln::Module streamed =
      kiln::Module::load(write(multi, "fault2.kiln", kFakePtx));
  // Steps on streams do not wait for the GPU either (events order them):
  // the fault surfaces where the run waits for its streams at the end.
  for (int attempt = 0; attempt < 2; ++attempt)
    expectRunError(streamed, x,
                   "cuda:0: running the plan (kernels run asynchronously: "
                   "with CUDA_LAUNCH_BLOCKING=1 the failing one reports "
                   "itself): cuStreamSynchronize failed: "
                   "CUDA_ERROR_ILLEGAL_ADDRESS");
}

TEST_F(CudaTest, FakeWithoutDevicesFallsBackOrFails) {
  useFake(0);
  expectLoadError(write(singlePlan(), "single.kiln"), {},
                  "role 0 'cuda:0': cuInit failed: CUDA_ERROR_NO_DEVICE (no "
                  "CUDA-capable device is detected); bind it to a host device "
                  "with --bind 0=cpu");
  testing::internal::CaptureStderr();
  kiln::Module m = kiln::Module::load(write(multiPlan(), "multi.kiln"));
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "kiln: warning: cuda:0 is unavailable (cuInit failed: "
                "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)); "
                "role 1 runs on cpu"),
            std::string::npos);
  kiln::Tensor x = input(2.0f);
  expectOutputs(m.run({x}), multiReference(x), "no device");
}

//===----------------------------------------------------------------------===//
// On a real GPU
//===----------------------------------------------------------------------===//

class CudaGpuTest : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    unsetenv("KILN_CUDA_DRIVER");
    std::string reason;
    driver = kiln::cuda::load(reason);
    if (!driver)
      GTEST_SKIP() << "no GPU: " << reason;
  }
  const kiln::cuda::Driver *driver = nullptr;
};

TEST_F(CudaGpuTest, HandWrittenPtxRunsOnOneDevice) {
  std::string path = write(singlePlan(), "single.kiln");
  for (const char *device : {"cuda:0", "cuda:auto"}) {
    kiln::LoadOptions options;
    options.device = device;
    kiln::Module m = kiln::Module::load(path, options);
    EXPECT_EQ(m.devices()[0].boundName.rfind("cuda:", 0), 0u);
    for (float seed : {0.0f, 1.0f, 2.0f}) {
      kiln::Tensor x = input(seed);
      expectOutputs(m.run({x}), singleReference(x), device);
    }
    EXPECT_EQ(m.peakBytes(), std::vector<size_t>{6 * kBytes});
  }
}

TEST_F(CudaGpuTest, VendorLibrariesMatchTheCpuTwins) {
  // The toolkit's cuBLAS and cuDNN (not the fake): a GEMM, a conv with
  // groups, pads, strides and dilations, and the same conv fused with a
  // bias, a residual and a ReLU, twice each (the second reuses the handle
  // and the conv's descriptors).
  struct Case {
    const char *name;
    PlanBuilder plan;
    size_t count;
  } cases[] = {{"gemm", gemmPlan("cuda:0"), kGemmOutputs},
               {"conv", convPlan("cuda:0"), kConvOutputs},
               {"fused conv", fusedConvPlan("cuda:0"), kConvOutputs}};
  for (const Case &c : cases) {
    std::string path = write(c.plan, std::string(c.name) + ".kiln");
    kiln::Module m = kiln::Module::load(path);
    EXPECT_EQ(differsFromTwin(path, m, input(0.75f), c.count), "") << c.name;
  }
}

TEST_F(CudaGpuTest, ConcurrentRunsOnOneDevice) {
  kiln::Module m = kiln::Module::load(write(singlePlan(), "single.kiln"));
  const int threads = 8, runs = 50;
  std::vector<int> failures(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      kiln::Tensor x = input(float(t));
      std::vector<std::vector<float>> want = singleReference(x);
      for (int r = 0; r < runs; ++r) {
        std::vector<kiln::Tensor> got = m.run({x});
        for (size_t o = 0; o < got.size(); ++o)
          if (std::memcmp(got[o].raw(), want[o].data(), kBytes) != 0)
            ++failures[t];
      }
    });
  for (std::thread &th : pool)
    th.join();
  EXPECT_EQ(failures, std::vector<int>(threads, 0));
}

TEST_F(CudaGpuTest, MultiDevicePlans) {
  std::string path = write(multiPlan(), "multi.kiln");
  std::vector<std::map<std::string, std::string>> binds = {
      {{"2", "cuda:0"}},
      {{"1", "sim:0"}, {"2", "cuda:0"}},
      {{"1", "cuda:0"}, {"2", "cpu"}}};
  if (driver->deviceCount > 1)
    binds.push_back({});
  for (const auto &bind : binds) {
    kiln::LoadOptions options;
    options.bind = bind;
    kiln::Module m = kiln::Module::load(path, options);
    std::string what =
        m.devices()[1].boundName + "+" + m.devices()[2].boundName;
    for (float seed : {0.5f, -3.0f}) {
      kiln::Tensor x = input(seed);
      expectOutputs(m.run({x}), multiReference(x), what);
    }
  }
  if (driver->deviceCount == 1)
    expectLoadError(path, {},
                    "cuda:1: this machine has 1 CUDA device(s) "
                    "(cuda:0)");
}

TEST_F(CudaGpuTest, DriverErrorsAreReadable) {
  PlanBuilder b = singlePlan();
  expectLoadError(write(b, "jit.kiln", ".version 7.0\n.target sm_80\nbogus"),
                  {},
                  "cuda:0: cannot load the PTX (for sm_80): "
                  "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX");
  json m = b.manifest();
  m["steps"][1]["cuda"]["launches"][0]["entry"] = "kiln_nope";
  expectLoadError(write(m, b.weights, kiln::test::kCudaTestPtx, "entry.kiln"),
                  {}, "the ptx section lacks entry 'kiln_nope'");
  kiln::LoadOptions huge;
  huge.memoryCapacity["cuda:0"] = kBytes; // w fits, nothing else
  expectRunError(kiln::Module::load(write(b, "single.kiln"), huge), input(0),
                 "cuda:0: out of memory: needs 4000 bytes, 4000 of 4000 in "
                 "use");
}

} // namespace
