//===- kiln-stress.cpp - one artifact run from many threads at once -------===//
//
//   kiln-stress OUT.kiln INPUT.npy... [--threads T] [--runs R]
//               [--device D] [--bind ROLE=DEVICE]
//
// Loads the artifact once and runs it from T threads at once, R runs each,
// every thread on inputs of its own (the given inputs plus the thread's
// index, for floats), and checks every run's outputs against a run of the
// same inputs made alone beforehand, byte for byte. kiln::Module promises
// that concurrent runs are independent; built with ThreadSanitizer
// (kiln-stress-tsan, ctest -L tsan) this is the check that the runtime
// keeps that promise without data races, on single- and multi-device plans.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "kiln/tensor_io.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const char kUsage[] =
    "usage: kiln-stress OUT.kiln INPUT.npy... [--threads T] [--runs R] "
    "[--device D] [--bind ROLE=DEVICE]\n";

long positive(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < 1 || v > 1000000)
    throw kiln::Error(flag + " expects a positive number, got '" + text + "'");
  return v;
}

// The given inputs, with `offset` added to every float element, so that
// each thread computes something different.
std::vector<kiln::Tensor> inputsFor(const std::vector<kiln::Tensor> &base,
                                    int offset) {
  std::vector<kiln::Tensor> out;
  for (const kiln::Tensor &t : base) {
    kiln::Tensor copy =
        kiln::Tensor::fromBytes(t.dtype(), t.shape(), t.raw(), t.nbytes());
    if (t.dtype() == kiln::DType::F32)
      for (int64_t i = 0; i < copy.numElements(); ++i)
        copy.data<float>()[i] += static_cast<float>(offset);
    out.push_back(std::move(copy));
  }
  return out;
}

bool same(const std::vector<kiln::Tensor> &a,
          const std::vector<kiln::Tensor> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0)
      return false;
  return true;
}

int run(int argc, char **argv) {
  std::string path;
  std::vector<std::string> inputPaths;
  long threads = 8, runs = 50;
  kiln::LoadOptions load;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc)
        throw kiln::Error("option '" + arg + "' needs a value");
      std::string value = argv[++i];
      if (arg == "--threads")
        threads = positive(arg, value);
      else if (arg == "--runs")
        runs = positive(arg, value);
      else if (arg == "--device")
        load.device = value;
      else if (arg == "--bind" && value.find('=') != std::string::npos)
        load.bind[value.substr(0, value.find('='))] =
            value.substr(value.find('=') + 1);
      else
        throw kiln::Error("unknown option '" + arg + "' (or a bad value)");
      continue;
    }
    if (path.empty())
      path = arg;
    else
      inputPaths.push_back(arg);
  }
  if (path.empty())
    throw kiln::Error("missing the .kiln artifact");
  std::vector<kiln::Tensor> base;
  for (const std::string &p : inputPaths)
    base.push_back(kiln::readTensorFile(p));
  kiln::Module module = kiln::Module::load(path, load);
  std::vector<std::vector<kiln::Tensor>> inputs, expected;
  for (long t = 0; t < threads; ++t) {
    inputs.push_back(inputsFor(base, static_cast<int>(t)));
    expected.push_back(module.run(inputs.back()));
  }
  std::atomic<long> mismatches{0}, errors{0};
  std::vector<std::string> firstError(threads);
  std::vector<std::thread> pool;
  for (long t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (long r = 0; r < runs; ++r) {
        try {
          if (!same(module.run(inputs[t]), expected[t]))
            ++mismatches;
        } catch (const std::exception &e) {
          if (errors++ == 0)
            firstError[t] = e.what();
        }
      }
    });
  for (std::thread &th : pool)
    th.join();
  std::printf("%ld threads x %ld runs: %ld mismatches, %ld errors\n", threads,
              runs, mismatches.load(), errors.load());
  for (const std::string &e : firstError)
    if (!e.empty())
      std::fprintf(stderr, "kiln-stress: a run failed: %s\n", e.c_str());
  return mismatches || errors ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-stress: error: %s\n%s", e.what(), kUsage);
    return 2;
  }
}
