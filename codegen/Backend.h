//===- Backend.h - code generators of device kinds ----------------*- C++
//-*-===//
//
// Every kernel is emitted as C++ (the host's code; for a device kind whose
// backend is "cpp", cpu and sim, it is the kernel's only code). A device
// kind whose kernels run elsewhere names a DeviceBackend (ir/DeviceKinds.cpp):
// it emits those kernels' source, compiles it into an artifact section,
// and adds to the manifest what the runtime needs to launch them. The
// backends are listed once, in createDeviceBackends (Backends.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_BACKEND_H
#define KILN_CODEGEN_BACKEND_H

#include "codegen/cuda/Nvrtc.h"
#include "ir/KilnDialect.h"

#include "llvm/Support/Error.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;
  /// The name device kinds give as their backend; also kilnc's --emit
  /// kind for its source ("cuda").
  virtual llvm::StringRef name() const = 0;
  /// Adds `kernel`, the plan's `symbol`, to the translation unit; fails
  /// with a diagnostic at what it cannot emit.
  virtual mlir::LogicalResult addKernel(KernelOp kernel,
                                        llvm::StringRef symbol) = 0;
  /// How many kernels it holds.
  virtual size_t kernelCount() const = 0;
  /// The whole translation unit (its prelude alone when it holds none).
  virtual std::string source() const = 0;
  /// The translation unit compiled (PTX for cuda); errors carry the
  /// compiler's log.
  virtual llvm::Expected<std::string> compile() const = 0;
  /// The artifact section the compiled code goes to ("ptx").
  virtual llvm::StringRef section() const = 0;
  /// Adds its fields to the manifest's "target" (cuda_arch).
  virtual void describeTarget(nlohmann::json &target) const = 0;
  /// Adds its fields to the step of kernel `symbol` if it holds it
  /// ("cuda": slots, scratch, launches).
  virtual void describeStep(llvm::StringRef symbol,
                            nlohmann::json &step) const = 0;
};

/// What the backends are configured with (kilnc's --cuda-* flags).
struct BackendOptions {
  CudaOptions cuda;
};

/// The backends, each in its folder of codegen/.
std::unique_ptr<DeviceBackend> createCudaBackend(const CudaOptions &options);

/// One of each device backend, for one compile.
std::vector<std::unique_ptr<DeviceBackend>>
createDeviceBackends(const BackendOptions &options);

} // namespace kiln

#endif // KILN_CODEGEN_BACKEND_H
