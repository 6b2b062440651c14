//===- CudaBackend.cpp - the cuda device kind's code generator ------------===//
//
// Kernels on cuda devices as CUDA C++ (CudaEmitter.cpp) in one translation
// unit, compiled by NVRTC (Nvrtc.cpp) to the artifact's "ptx" section; each
// kernel's step gets its slots, scratch and launches (docs/devices.md).
//
//===----------------------------------------------------------------------===//

#include "codegen/Backend.h"
#include "codegen/cuda/CudaEmitter.h"

#include <map>

using namespace mlir;
using namespace kiln;

namespace {
class CudaBackend : public DeviceBackend {
public:
  explicit CudaBackend(const CudaOptions &options) : options(options) {}

  StringRef name() const override { return "cuda"; }

  LogicalResult addKernel(KernelOp kernel, StringRef symbol) override {
    FailureOr<CudaKernel> cuda = emitKernelCuda(kernel, symbol, options);
    if (failed(cuda))
      return failure();
    half |= cuda->usesHalf;
    kernels += "\n" + cuda->source;
    steps[symbol.str()] = {{"slots", cuda->slots},
                           {"scratch", cuda->scratch},
                           {"launches", cuda->launches}};
    return success();
  }

  size_t kernelCount() const override { return steps.size(); }

  std::string source() const override { return cudaPrelude(half) + kernels; }

  llvm::Expected<std::string> compile() const override {
    return compilePtx(source(), options, half);
  }

  StringRef section() const override { return "ptx"; }

  void describeTarget(nlohmann::json &target) const override {
    target["cuda_arch"] = options.arch;
  }

  void describeStep(StringRef symbol, nlohmann::json &step) const override {
    if (auto it = steps.find(symbol.str()); it != steps.end())
      step["cuda"] = it->second;
  }

private:
  CudaOptions options;
  std::string kernels;
  bool half = false;
  std::map<std::string, nlohmann::json> steps; // symbol -> step["cuda"]
};
} // namespace

std::unique_ptr<DeviceBackend> kiln::createCudaBackend(const CudaOptions &o) {
  return std::make_unique<CudaBackend>(o);
}
