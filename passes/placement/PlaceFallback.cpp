//===- PlaceFallback.cpp - ops a device cannot run go where they can ------===//
//
// Algorithm, one walk over the placeable ops:
//  - An op's device is its kiln.place, or else the device of its result type
//    (where the importer put it).
//  - Shape arithmetic stays on the host: an op whose operands and results are
//    all integer tensors and whose results have rank <= 1 and at most 8
//    elements moves to the cpu, when the cpu is among the devices. Copying
//    a handful of indices to an accelerator and back costs more than it
//    computes, and the host needs them anyway.
//  - An op the device's profile does not support moves to the first device
//    of the list whose profile does (cuda devices run static shapes only).
// Every move is a remark naming both devices; an op that no device in the
// list can run is an error.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEFALLBACK
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

DeviceAttr currentDevice(Operation *op) {
  if (DeviceAttr placed = placedDevice(op))
    return placed;
  for (Type t : op->getResultTypes())
    if (DeviceAttr d = getDevice(t))
      return d;
  return {};
}

bool isShapeArithmetic(Operation *op) {
  auto small = [](Type t) {
    auto type = dyn_cast<RankedTensorType>(t);
    return type && type.hasStaticShape() && type.getRank() <= 1 &&
           type.getNumElements() <= 8 &&
           isa<IntegerType>(type.getElementType());
  };
  auto integer = [](Type t) {
    auto type = dyn_cast<RankedTensorType>(t);
    return type && isa<IntegerType>(type.getElementType());
  };
  return op->getNumResults() > 0 && llvm::all_of(op->getResultTypes(), small) &&
         llvm::all_of(op->getOperandTypes(), integer);
}

struct PlaceFallback : kiln::impl::KilnPlaceFallbackBase<PlaceFallback> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto loaded = loadProfiles(func.getLoc(), devices, profiles);
    if (failed(loaded))
      return signalPassFailure();
    ProfileSet known(*loaded);
    DeviceAttr cpu = DeviceAttr::getCPU(&getContext());
    bool haveCpu = llvm::any_of(
        *loaded, [&](const DeviceProfile &p) { return p.device == cpu; });

    WalkResult result =
        func.walk([&](Operation *op) {
          if (!isPlaceable(op))
            return WalkResult::advance();
          DeviceAttr device = currentDevice(op);
          if (!device)
            return WalkResult::advance();
          if (haveCpu && device != cpu && isShapeArithmetic(op)) {
            op->emitRemark() << "shape arithmetic stays on the host: placed on "
                                "cpu instead of "
                             << device.str();
            op->setAttr(kPlaceAttr, cpu);
            return WalkResult::advance();
          }
          if (known.get(device).supports(op))
            return WalkResult::advance();
          // The reason the device cannot run it, when it is the shapes.
          bool shapesTooDynamic =
              kindOf(device)->needsStaticShapes && hasDynamicShape(op);
          for (const DeviceProfile &p : *loaded)
            if (p.supports(op)) {
              op->emitRemark()
                  << device.str() << " cannot run "
                  << op->getName().getStringRef()
                  << (shapesTooDynamic ? " with dynamic shapes" : "")
                  << ": placed on " << p.device.str();
              op->setAttr(kPlaceAttr, p.device);
              return WalkResult::advance();
            }
          std::string names;
          for (const DeviceProfile &p : *loaded)
            names += (names.empty() ? "" : ", ") + p.device.str();
          if (shapesTooDynamic) {
            op->emitOpError()
                << "has dynamic shapes, which " << device.str()
                << " cannot run yet; add the cpu to the devices (--devices "
                << names << ",cpu) for it to run there, or bind the symbolic "
                << "input dims (kilnc --input-shape NAME=D0xD1...)";
            return WalkResult::interrupt();
          }
          op->emitOpError()
              << "cannot run on " << device.str()
              << ", nor on any other device in use (" << names << ")";
          return WalkResult::interrupt();
        });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
