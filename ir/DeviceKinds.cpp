//===- DeviceKinds.cpp - the kinds of devices kiln compiles for -----------===//

#include "ir/DeviceKinds.h"

using namespace kiln;

namespace {
// The default profiles: a 2-core CPU of the project's machine kind, and an
// H200-class GPU behind a PCIe 5 link; sim is the CPU's numbers behind a
// slow link, so that placement tests see transfers cost something.
const DeviceKind kKinds[] = {
    // name, numbered, host, backend, static shapes, library convs,
    // then the profile: GFLOP/s, GB/s, capacity, link GB/s, link us,
    // launch us.
    {"cpu", false, true, "cpp", false, false, 34, 12, 0, 0, 0, 0},
    {"cuda", true, false, "cuda", true, true, 67000, 4800, 141ull << 30, 50, 10,
     5},
    {"sim", true, false, "cpp", false, false, 34, 12, 0, 12, 5, 2},
};
} // namespace

llvm::ArrayRef<DeviceKind> kiln::deviceKinds() { return kKinds; }

const DeviceKind *kiln::lookupDeviceKind(llvm::StringRef name) {
  for (const DeviceKind &kind : kKinds)
    if (kind.name == name)
      return &kind;
  return nullptr;
}

std::string kiln::deviceNameForms() {
  std::string text;
  llvm::ArrayRef<DeviceKind> kinds = deviceKinds();
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i)
      text += i + 1 == kinds.size() ? " or " : ", ";
    text += kinds[i].name.str() + (kinds[i].numbered ? ":N" : "");
  }
  return text;
}
