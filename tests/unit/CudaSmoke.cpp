//===- CudaSmoke.cpp - kiln-cuda-smoke: the CUDA backend on a real GPU ----===//
//
//   kiln-cuda-smoke [--device N]
//   kiln-cuda-smoke --write DIR   (artifacts and an input for kiln-run)
//
// Loads the CUDA driver the way the runtime does (libcuda.so.1 or
// $KILN_CUDA_DRIVER), lists the devices with their free memory, then on
// cuda:N (0 by default): loads the hand-written PTX of CudaTestKernels.h,
// runs its kernels through the driver API directly and checks the numbers,
// checks that the caching allocator reuses a block, and, when
// libkiln-cuda-test-kernels.so sits next to this binary, loads artifacts
// with a cuda role through kiln::Module and checks one- and multi-device
// runs, concurrent runs and timing. Prints "OK" at the end and exits 0;
// otherwise "kiln-cuda-smoke: error: ..." and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "CudaTestKernels.h"
#include "kiln/tensor_io.h"
#include "runtime/Cuda.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>
#include <unistd.h>

using namespace kiln::test;
namespace cuda = kiln::cuda;

namespace {

void require(bool ok, const std::string &what) {
  if (!ok)
    throw kiln::Error(what);
}

/// Checks `got` against `want`, naming the first difference.
void compare(const float *got, const float *want, const std::string &what) {
  for (int i = 0; i < N; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      throw kiln::Error(what + ": element " + std::to_string(i) + " is " +
                        std::to_string(got[i]) + ", expected " +
                        std::to_string(want[i]));
}

void driverLevel(const cuda::Driver &driver, int ordinal) {
  cuda::Context context(driver, ordinal, "cuda:" + std::to_string(ordinal));
  context.loadModule(kCudaTestPtx, std::strlen(kCudaTestPtx), "sm_80");
  cuda::CUfunction addOne = context.function("kiln_add_one", "smoke");
  cuda::CUfunction twice = context.function("kiln_twice", "smoke");
  cuda::CUfunction plusOne = context.function("kiln_plus_one", "smoke");
  std::printf("ptx loaded, entry points found\n");

  cuda::CUdeviceptr x = context.allocate(kBytes), y = context.allocate(kBytes),
                    t = context.allocate(kBytes);
  require(x && y && t, "cannot allocate 3 x 4000 bytes");
  kiln::Tensor in = input(0.5f);
  std::vector<float> out(N), want(N);
  cuda::CUstream stream = context.acquireStream();
  context.toDevice(x, in.raw(), kBytes, stream);
  std::vector<cuda::CUdeviceptr> slots = {x, y};
  context.launch(addOne, N, slots, stream, "kiln_add_one");
  context.toHost(out.data(), y, kBytes, stream);
  context.synchronize(stream, "kiln_add_one");
  for (int i = 0; i < N; ++i)
    want[i] = in.data<float>()[i] + 1.0f;
  compare(out.data(), want.data(), "kiln_add_one");
  std::printf("kiln_add_one: ok\n");

  // Two launches in order on one stream through a scratch slot; 300 threads
  // for 1000 elements exercise the grid-stride loop.
  slots = {x, y, t};
  context.launch(twice, 300, slots, stream, "kiln_twice");
  context.launch(plusOne, N, slots, stream, "kiln_plus_one");
  context.toHost(out.data(), y, kBytes, stream);
  context.synchronize(stream, "kiln_twice, kiln_plus_one");
  for (int i = 0; i < N; ++i)
    want[i] = (in.data<float>()[i] + in.data<float>()[i]) + 1.0f;
  compare(out.data(), want.data(), "kiln_twice + kiln_plus_one");
  std::printf("kiln_twice + kiln_plus_one (grid-stride): ok\n");

  // Within the device.
  context.withinDevice(t, y, kBytes, stream);
  context.toHost(out.data(), t, kBytes, stream);
  context.synchronize(stream, "cuMemcpyDtoDAsync");
  compare(out.data(), want.data(), "device to device copy");
  std::printf("device to device copy: ok\n");
  context.releaseStream(stream);

  context.release(y, kBytes);
  cuda::CUdeviceptr again = context.allocate(kBytes - 100);
  require(again == y, "the caching allocator did not reuse a freed block");
  std::printf("caching allocator reuses blocks: ok\n");
  context.release(again, kBytes);
  context.release(x, kBytes);
  context.release(t, kBytes);
  context.emptyCache();
  require(context.cachedBytes() == 0, "the cache is not empty");
}

void moduleLevel(const std::string &dir, int ordinal) {
  std::string kernels = dir + "/libkiln-cuda-test-kernels.so";
  std::ifstream in(kernels, std::ios::binary);
  if (!in) {
    std::printf("module level: skipped (%s not found)\n", kernels.c_str());
    return;
  }
  std::vector<char> code((std::istreambuf_iterator<char>(in)), {});
  std::string device = "cuda:" + std::to_string(ordinal);
  auto write = [&](const PlanBuilder &b, const std::string &name) {
    std::string path =
        "/tmp/kiln-cuda-smoke-" + std::to_string(::getpid()) + "-" + name;
    std::vector<char> bytes =
        artifactBytes(b.manifest(), code, b.weights, kCudaTestPtx);
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), std::streamsize(bytes.size()));
    return path;
  };
  std::string single = write(singlePlan(), "single.kiln");
  std::string multi = write(multiPlan(), "multi.kiln");
  kiln::LoadOptions options;
  options.device = device;
  {
    kiln::Module m = kiln::Module::load(single, options);
    kiln::Tensor x = input(1.5f);
    std::vector<kiln::Tensor> got = m.run({x});
    std::vector<std::vector<float>> want = singleReference(x);
    for (size_t o = 0; o < want.size(); ++o)
      compare(got[o].data<float>(), want[o].data(),
              "one-device plan, output " + std::to_string(o));
    std::printf("module on %s: ok\n", m.devices()[0].boundName.c_str());

    std::vector<std::thread> pool;
    std::vector<std::string> errors(4);
    for (int t = 0; t < 4; ++t)
      pool.emplace_back([&, t] {
        try {
          kiln::Tensor xt = input(float(t));
          std::vector<std::vector<float>> w = singleReference(xt);
          for (int r = 0; r < 25; ++r)
            compare(m.run({xt})[0].data<float>(), w[0].data(), "concurrent");
        } catch (const std::exception &e) {
          errors[t] = e.what();
        }
      });
    for (std::thread &th : pool)
      th.join();
    for (const std::string &e : errors)
      require(e.empty(), e);
    std::printf("4 threads x 25 concurrent runs: ok\n");

    using Clock = std::chrono::steady_clock;
    Clock::time_point start = Clock::now();
    for (int r = 0; r < 200; ++r)
      m.run({x});
    std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
    std::printf("one run (4 launches, 3 copies, 1 sync): %.1f us\n",
                elapsed.count() / 200);
  }
  // The vendor libraries: a GEMM through cuBLAS, a conv and a fused conv
  // (bias, residual, ReLU) through cuDNN, each against its CPU twin.
  for (auto [name, plan, count] :
       {std::tuple<const char *, PlanBuilder, size_t>{
            "gemm (cuBLAS)", gemmPlan("cuda:0"), kGemmOutputs},
        {"conv (cuDNN)", convPlan("cuda:0"), kConvOutputs},
        {"fused conv (cuDNN)", fusedConvPlan("cuda:0"), kConvOutputs}}) {
    std::string path = write(plan, "library.kiln");
    std::string error = differsFromTwin(path, kiln::Module::load(path, options),
                                        input(0.25f), count, 1);
    std::remove(path.c_str());
    require(error.empty(), std::string(name) + ": " + error);
    std::printf("%s on %s: ok\n", name, device.c_str());
  }
  kiln::LoadOptions bind;
  bind.bind["1"] = device;
  bind.bind["2"] = device;
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 1)
      bind.bind["1"] = "sim:0";
    kiln::Module m = kiln::Module::load(multi, bind);
    kiln::Tensor x = input(-0.75f);
    std::vector<kiln::Tensor> got = m.run({x});
    std::vector<std::vector<float>> want = multiReference(x);
    for (size_t o = 0; o < want.size(); ++o)
      compare(got[o].data<float>(), want[o].data(),
              "multi-device plan, output " + std::to_string(o));
    std::printf("multi-device plan on cpu+%s+%s: ok\n",
                m.devices()[1].boundName.c_str(),
                m.devices()[2].boundName.c_str());
  }
  std::remove(single.c_str());
  std::remove(multi.c_str());
}

/// Writes DIR/single.kiln, DIR/multi.kiln (the test plans) and DIR/x.npy
/// (an input) for trying kiln-run.
void writeExamples(const std::string &dir) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string kernels =
      exe.parent_path().string() + "/libkiln-cuda-test-kernels.so";
  std::ifstream in(kernels, std::ios::binary);
  require(bool(in), kernels + ": cannot open");
  std::vector<char> code((std::istreambuf_iterator<char>(in)), {});
  for (const auto &[name, plan] :
       {std::pair<std::string, PlanBuilder>{"single.kiln", singlePlan()},
        {"multi.kiln", multiPlan()}}) {
    std::vector<char> bytes =
        artifactBytes(plan.manifest(), code, plan.weights, kCudaTestPtx);
    std::ofstream(dir + "/" + name, std::ios::binary)
        .write(bytes.data(), std::streamsize(bytes.size()));
  }
  kiln::writeNpy(dir + "/x.npy", input(0.5f));
  std::printf("wrote %s/single.kiln, multi.kiln, x.npy\n", dir.c_str());
}

int smoke(int argc, char **argv) {
  int ordinal = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      ordinal = std::atoi(argv[++i]);
    } else if (arg == "--write" && i + 1 < argc) {
      writeExamples(argv[++i]);
      return 0;
    } else {
      throw kiln::Error("usage: kiln-cuda-smoke [--device N] [--write DIR]");
    }
  }
  std::string reason;
  const cuda::Driver *driver = cuda::load(reason);
  if (!driver)
    throw kiln::Error(reason);
  std::printf("driver %s: CUDA %d.%d, %d device(s)\n", driver->path.c_str(),
              driver->version / 1000, driver->version % 1000 / 10,
              driver->deviceCount);
  for (int d = 0; d < driver->deviceCount; ++d)
    std::printf("  cuda:%d: %s\n", d, cuda::describeDevice(*driver, d).c_str());
  std::printf("cuda:auto would pick cuda:%d\n",
              cuda::deviceWithMostFreeMemory(*driver));
  driverLevel(*driver, ordinal);
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  moduleLevel(ec ? "." : exe.parent_path().string(), ordinal);
  std::printf("OK\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return smoke(argc, argv);
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kiln-cuda-smoke: error: %s\n", e.what());
    return 1;
  }
}
