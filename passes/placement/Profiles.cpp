//===- Profiles.cpp - device profiles and the per-op cost model -----------===//
//
// Defaults (see Profiles.h for the JSON form):
//  - cpu: kiln's generated C++ on this machine kind (2 AVX-512 cores):
//    the MLP 784-1024-1024-10 at batch 64 (238 MFLOP) runs in about 7 ms,
//    about 34 GFLOP/s; a streaming copy measures about 12 GB/s.
//  - sim: a host-memory device on its own thread; it computes like the cpu
//    and copies at memcpy speed with a thread hand-off (about 5 us).
//  - cuda: one H200: 67 TFLOP/s FP32 (non-tensor-core), 4.8 TB/s HBM3e,
//    141 GB, PCIe 5 x16 about 50 GB/s host link, about 10 us per transfer
//    and 5 us per kernel launch.
//
//===----------------------------------------------------------------------===//

#include "passes/placement/Profiles.h"

#include "llvm/Support/MemoryBuffer.h"

#include <nlohmann/json.hpp>

#include <cmath>

using namespace mlir;
using namespace kiln;

static double numElements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

bool kiln::isPlaceable(Operation *op) {
  return isa<KilnDialect>(op->getDialect()) &&
         !isa<ConstantOp, CopyOp, KernelOp, YieldOp>(op) &&
         !op->getParentOfType<KernelOp>();
}

DeviceAttr kiln::placedDevice(Operation *op) {
  return op->getAttrOfType<DeviceAttr>(kPlaceAttr);
}

OpCost kiln::estimateCost(Operation *op) {
  OpCost cost;
  for (Value v : op->getOperands())
    cost.bytes += tensorBytes(v);
  for (Value v : op->getResults())
    cost.bytes += tensorBytes(v);
  if (op->getNumResults() == 0)
    return cost;
  double out = numElements(op->getResult(0));
  if (isa<ReshapeOp>(op)) {
    cost.bytes = 0; // a view
  } else if (auto matmul = dyn_cast<MatMulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    cost.flops = 2 * out * (lhs.getRank() ? lhs.getShape().back() : 1);
  } else if (auto gemm = dyn_cast<GemmOp>(op)) {
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    int64_t k = a.getRank() == 2 ? a.getDimSize(gemm.getTransA() ? 0 : 1) : 1;
    cost.flops = 2 * out * k;
  } else if (auto conv = dyn_cast<ConvOp>(op)) {
    auto w = cast<RankedTensorType>(conv.getWeight().getType());
    double perOutput = w.getDimSize(0) > 0
                           ? numElements(conv.getWeight()) / w.getDimSize(0)
                           : 0;
    cost.flops = 2 * out * perOutput;
  } else if (isa<ReduceOp, MaxPoolOp, AvgPoolOp>(op)) {
    cost.flops = std::max(out, numElements(op->getOperand(0)));
  } else if (isElementwise(op)) {
    cost.flops = out;
  }
  return cost;
}

bool DeviceProfile::supports(Operation *op) const {
  StringRef name = op->getName().stripDialect();
  if (kindOf(device)->needsStaticShapes && hasDynamicShape(op))
    return false;
  if (llvm::is_contained(unsupportedOps, name.str()))
    return false;
  return ops.empty() || llvm::is_contained(ops, "*") ||
         llvm::is_contained(ops, name.str());
}

double DeviceProfile::seconds(Operation *op) const {
  OpCost cost = estimateCost(op);
  double compute = peakGflops > 0 ? cost.flops / (peakGflops * 1e9) : 0;
  double memory = memoryGbps > 0 ? cost.bytes / (memoryGbps * 1e9) : 0;
  return std::max(compute, memory) + launchUs * 1e-6;
}

double DeviceProfile::transferSeconds(uint64_t bytes,
                                      const DeviceProfile &other) const {
  if (device == other.device)
    return 0;
  // The slower of the two host links, and both latencies when neither end
  // is the host itself.
  auto link = [](const DeviceProfile &p) {
    return kindOf(p.device)->host ? 0.0 : p.linkGbps;
  };
  double gbps = link(*this) && link(other) ? std::min(link(*this), link(other))
                                           : std::max(link(*this), link(other));
  double latency = linkLatencyUs + other.linkLatencyUs;
  return (gbps > 0 ? bytes / (gbps * 1e9) : 0) + latency * 1e-6;
}

DeviceProfile kiln::defaultProfile(DeviceAttr device) {
  DeviceProfile p;
  p.device = device;
  const DeviceKind &kind = *kindOf(device);
  p.peakGflops = kind.peakGflops;
  p.memoryGbps = kind.memoryGbps;
  p.capacityBytes = kind.capacityBytes;
  p.linkGbps = kind.linkGbps;
  p.linkLatencyUs = kind.linkLatencyUs;
  p.launchUs = kind.launchUs;
  return p;
}

static LogicalResult applyOverride(Location loc, DeviceProfile &p,
                                   StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(loc) << "cannot read device profile '" << path
                          << "': " << buffer.getError().message();
  nlohmann::json j = nlohmann::json::parse((*buffer)->getBuffer().begin(),
                                           (*buffer)->getBuffer().end(),
                                           nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return emitError(loc) << "device profile '" << path
                          << "' is not valid JSON (or holds a number out of "
                             "double's range)";
  if (!j.is_object())
    return emitError(loc) << "device profile '" << path
                          << "' is not a JSON object";
  for (auto &[key, value] : j.items()) {
    auto number = [&](double &field) -> LogicalResult {
      if (!value.is_number() || !(value.get<double>() >= 0) ||
          !std::isfinite(value.get<double>()))
        return emitError(loc) << "device profile '" << path << "': '" << key
                              << "' must be a non-negative finite number";
      field = value.get<double>();
      return success();
    };
    auto names = [&](std::vector<std::string> &field) -> LogicalResult {
      field.clear();
      if (!value.is_array())
        return emitError(loc) << "device profile '" << path << "': '" << key
                              << "' must be a list of op names";
      for (auto &n : value) {
        if (!n.is_string())
          return emitError(loc) << "device profile '" << path << "': '" << key
                                << "' must be a list of op names";
        std::string name = n.get<std::string>();
        field.push_back(StringRef(name).starts_with("kiln.") ? name.substr(5)
                                                             : name);
      }
      return success();
    };
    double capacity = 0;
    LogicalResult ok = success();
    if (key == "peak_gflops")
      ok = number(p.peakGflops);
    else if (key == "memory_gbps")
      ok = number(p.memoryGbps);
    else if (key == "link_gbps")
      ok = number(p.linkGbps);
    else if (key == "link_latency_us")
      ok = number(p.linkLatencyUs);
    else if (key == "launch_us")
      ok = number(p.launchUs);
    else if (key == "capacity_bytes") {
      ok = number(capacity);
      // 2^64 and above do not fit the field (the cast would be undefined).
      if (succeeded(ok) && capacity >= 18446744073709551616.0)
        return emitError(loc) << "device profile '" << path
                              << "': 'capacity_bytes' is more than 2^64";
      p.capacityBytes = static_cast<uint64_t>(capacity);
    } else if (key == "ops")
      ok = names(p.ops);
    else if (key == "unsupported_ops")
      ok = names(p.unsupportedOps);
    else if (key != "device" && key != "comment")
      return emitError(loc) << "device profile '" << path
                            << "': unknown field '" << key << "'";
    if (failed(ok))
      return failure();
  }
  return success();
}

FailureOr<std::vector<DeviceProfile>>
kiln::loadProfiles(Location loc, ArrayRef<std::string> devices,
                   ArrayRef<std::string> overrides) {
  std::vector<DeviceProfile> profiles;
  MLIRContext *ctx = loc.getContext();
  for (const std::string &name : devices) {
    std::string error;
    DeviceAttr device = DeviceAttr::parseName(ctx, name, error);
    if (!device)
      return emitError(loc) << error;
    if (llvm::any_of(profiles, [&](const DeviceProfile &p) {
          return p.device == device;
        }))
      return emitError(loc) << "device '" << name << "' is listed twice";
    profiles.push_back(defaultProfile(device));
  }
  if (profiles.empty())
    profiles.push_back(defaultProfile(DeviceAttr::getCPU(ctx)));
  for (StringRef entry : overrides) {
    auto [name, path] = entry.split('=');
    auto it = llvm::find_if(profiles, [&](const DeviceProfile &p) {
      return p.device.str() == name;
    });
    if (path.empty() || it == profiles.end())
      return emitError(loc) << "device profile '" << entry
                            << "' must be DEVICE=FILE.json for a device of "
                               "--devices (a device only pins name must be "
                               "listed there to get a profile)";
    if (failed(applyOverride(loc, *it, path)))
      return failure();
  }
  return profiles;
}
