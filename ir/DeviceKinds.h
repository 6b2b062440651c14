//===- DeviceKinds.h - what the compiler knows of each device kind -------===//
//
// One row per kind of device (DeviceKinds.cpp): how it is named, whether it
// is the host, whether its kernels are the generated C++ run by host
// threads, what its kernels need, and its default cost profile. The
// dialect's device attribute, placement and lowering read these traits
// instead of comparing kind names. A new kind of device is a row here, a
// row in the runtime's table (runtime/DeviceKinds.cpp), and, unless its
// kernels are the generated C++, its backend (codegen/Backends.cpp) and its
// runtime memory, copies and launches (docs/architecture.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_DEVICEKINDS_H
#define KILN_IR_DEVICEKINDS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace kiln {

struct DeviceKind {
  /// The kind as devices are named: "cpu", "cuda" (cuda:0), "sim".
  llvm::StringLiteral name;
  /// Named KIND:N, with an ordinal (cuda:0), rather than KIND alone (cpu).
  bool numbered;
  /// The host itself: data moves to and from it over no link.
  bool host;
  /// The code generator of its kernels: "cpp" for the generated C++, run
  /// by host threads (every kernel also gets it as the host's twin); else
  /// a device backend's name (codegen/Backend.h).
  llvm::StringLiteral backend;
  /// Its kernels need every dim at compile time (launch sizes fixed in the
  /// generated code), so ops with dynamic shapes fall back elsewhere.
  bool needsStaticShapes;
  /// Its 2-D f32 convs of static shapes run through a vendor library
  /// (cuDNN): lowering keeps them as direct windows for it.
  bool libraryConvs;
  /// The default cost profile (kilnc --device-profile overrides it): peak
  /// compute, memory bandwidth, capacity (0: unlimited), the link to the
  /// host and its latency, and the cost of launching a kernel.
  double peakGflops;
  double memoryGbps;
  uint64_t capacityBytes;
  double linkGbps;
  double linkLatencyUs;
  double launchUs;
};

/// Every kind, in the order messages list them.
llvm::ArrayRef<DeviceKind> deviceKinds();
/// The kind named `name` ("cuda"), or null.
const DeviceKind *lookupDeviceKind(llvm::StringRef name);
/// "cpu, cuda:N or sim:N": the device names messages offer.
std::string deviceNameForms();

} // namespace kiln

#endif // KILN_IR_DEVICEKINDS_H
