//===- Backends.cpp - the device backends kiln has ------------------------===//

#include "codegen/Backend.h"

using namespace kiln;

std::vector<std::unique_ptr<DeviceBackend>>
kiln::createDeviceBackends(const BackendOptions &options) {
  std::vector<std::unique_ptr<DeviceBackend>> backends;
  backends.push_back(createCudaBackend(options.cuda));
  return backends;
}
