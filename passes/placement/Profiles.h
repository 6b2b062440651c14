//===- Profiles.h - device profiles and the per-op cost model -----*- C++
//-*-===//
//
// What placement knows about devices: peak FLOP/s, memory bandwidth and
// capacity, the link to the host, and which ops a device can run. Built-in
// defaults exist for each kind (cpu measured on this machine kind, cuda for
// an H200, sim like the host it emulates); a JSON file overrides any field:
//
//   {"peak_gflops": 30, "memory_gbps": 12, "capacity_bytes": 1073741824,
//    "link_gbps": 10, "link_latency_us": 5, "launch_us": 2,
//    "ops": ["*"], "unsupported_ops": ["conv"]}
//
// The cost model turns an op into FLOPs and bytes moved, and those into an
// estimated time on a device (a roofline plus a launch overhead).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_PLACEMENT_PROFILES_H
#define KILN_PASSES_PLACEMENT_PROFILES_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <deque>
#include <string>
#include <vector>

namespace kiln {

struct DeviceProfile {
  DeviceAttr device;
  double peakGflops = 0;
  double memoryGbps = 0;
  uint64_t capacityBytes = 0; // 0: unlimited
  double linkGbps = 0;        // to and from the host
  double linkLatencyUs = 0;
  double launchUs = 0;
  /// kiln op names without the prefix ("gemm"); "*" or empty: every op.
  std::vector<std::string> ops;
  std::vector<std::string> unsupportedOps;

  /// Whether the device can run `op` (its profile's op lists; kinds that
  /// need static shapes, cuda, not an op with dynamic shapes).
  bool supports(mlir::Operation *op) const;
  /// Estimated seconds for `op` on this device.
  double seconds(mlir::Operation *op) const;
  /// Estimated seconds to move `bytes` between this device and another.
  double transferSeconds(uint64_t bytes, const DeviceProfile &other) const;
};

/// The built-in profile of `device`'s kind.
DeviceProfile defaultProfile(DeviceAttr device);

/// Profiles by device: those given, and the built-in default for any other
/// device asked about (a device only a pin names). References stay valid.
class ProfileSet {
public:
  explicit ProfileSet(llvm::ArrayRef<DeviceProfile> given)
      : profiles(given.begin(), given.end()) {}
  const DeviceProfile &get(DeviceAttr device) {
    for (const DeviceProfile &p : profiles)
      if (p.device == device)
        return p;
    return profiles.emplace_back(defaultProfile(device));
  }

private:
  std::deque<DeviceProfile> profiles;
};

/// The profiles of the devices placement may use, in order (the first is
/// the default device). `overrides` holds "DEVICE=FILE.json". Fails with a
/// diagnostic at `loc` on a bad device name, file or field.
mlir::FailureOr<std::vector<DeviceProfile>>
loadProfiles(mlir::Location loc, llvm::ArrayRef<std::string> devices,
             llvm::ArrayRef<std::string> overrides);

struct OpCost {
  double flops = 0;
  double bytes = 0; // operands read plus results written
};
OpCost estimateCost(mlir::Operation *op);

/// The attribute placement passes put on an op before copies are inserted.
inline constexpr llvm::StringLiteral kPlaceAttr = "kiln.place";
/// Ops placement assigns a device to: every kiln op at graph level but
/// constants (which follow their users) and copies.
bool isPlaceable(mlir::Operation *op);
/// The device an op has been placed on (its kiln.place, else null).
DeviceAttr placedDevice(mlir::Operation *op);

} // namespace kiln

#endif // KILN_PASSES_PLACEMENT_PROFILES_H
