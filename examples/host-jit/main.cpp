//===- main.cpp - trace, load weights, compile, run: kiln from a host -----===//
//
// Traces a two-layer MLP whose batch dim is the symbol N, binds its weights
// from a safetensors file saved from a torch.nn.DataParallel model (keys
// "module.fc1.weight", ...), compiles it in-process (a second process finds
// it in the on-disk cache), and runs it at batch 3 and 8. Inputs and outputs
// are written as .npy files to OUTDIR so that they can be checked.
//
//   host-jit WEIGHTS.safetensors OUTDIR
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>

namespace {
constexpr int64_t kIn = 784, kHidden = 128, kOut = 10;

kiln::Proxy mlp(const kiln::Proxy &x) {
  kiln::Proxy h =
      kiln::relu(kiln::linear(x, kiln::parameter("fc1.weight", {kHidden, kIn}),
                              kiln::parameter("fc1.bias", {kHidden})));
  return kiln::linear(h, kiln::parameter("fc2.weight", {kOut, kHidden}),
                      kiln::parameter("fc2.bias", {kOut}));
}
} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: host-jit WEIGHTS.safetensors OUTDIR\n");
    return 2;
  }
  std::string outDir = argv[2];
  try {
    kiln::Traced traced = kiln::trace(mlp, {{"x", {"N", kIn}}});
    kiln::jit::Options options;
    options.weights =
        kiln::load_safetensors(argv[1], {.strip_prefix = "module."});
    kiln::Function f = kiln::jit::compile(traced, options);
    std::printf("compile: %.4f s (%s)\n", f.info().seconds,
                f.info().cacheHit ? "cache hit" : "cache miss");

    for (int64_t n : {3, 8}) {
      std::vector<float> x(n * kIn);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = std::sin(0.01f * float(i));
      kiln::Tensor input = kiln::tensor({n, kIn}, x);
      kiln::Tensor output = f({input})[0];
      kiln::writeNpy(outDir + "/x_" + std::to_string(n) + ".npy", input);
      kiln::writeNpy(outDir + "/y_" + std::to_string(n) + ".npy", output);
      std::printf("batch %lld: %s, row 0:", static_cast<long long>(n),
                  kiln::describe(output.dtype(), output.shape()).c_str());
      for (int64_t j = 0; j < kOut; ++j)
        std::printf(" %.4f", output.data<float>()[j]);
      std::printf("\n");
    }
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "host-jit: %s\n", e.what());
    return 1;
  }
  return 0;
}
