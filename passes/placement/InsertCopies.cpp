//===- InsertCopies.cpp - placements become device types, plus copies -----===//
//
// Algorithm, one pass over the function body in order:
//  - An op with kiln.place moves there: its result types get that device
//    and the attribute goes. Ops without one stay where their types say.
//  - Each operand on another device is replaced by a copy of it to the op's
//    device. Copies are memoised per (value, device): at most one per value
//    and destination, shared by every user there. A copy goes right after
//    the value's producer (or at the top of the body for arguments), so it
//    can start as soon as its input exists and overlap other work.
//  - A constant is never copied: each device that uses it gets its own
//    clone, so weights are on every device that needs them before the run
//    starts. Constants left without users are erased.
//  - Returned values are copied to `output-device` (default: the device the
//    function returned them on before placement), and the signature follows.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

namespace kiln {
#define GEN_PASS_DEF_KILNINSERTCOPIES
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct InsertCopies : kiln::impl::KilnInsertCopiesBase<InsertCopies> {
  using Base::Base;

  DenseMap<std::pair<Value, Attribute>, Value> moved;

  Value onDevice(Value value, DeviceAttr device) {
    if (getDevice(value.getType()) == device)
      return value;
    auto key = std::make_pair(value, Attribute(device));
    if (Value existing = moved.lookup(key))
      return existing;
    OpBuilder builder(value.getContext());
    Value result;
    Type type = withDevice(value.getType(), device);
    if (auto constant = value.getDefiningOp<ConstantOp>()) {
      builder.setInsertionPointAfter(constant);
      result = builder.create<ConstantOp>(constant.getLoc(), type,
                                          constant.getValue());
    } else {
      if (Operation *producer = value.getDefiningOp())
        builder.setInsertionPointAfter(producer);
      else
        builder.setInsertionPointToStart(value.getParentBlock());
      result = builder.create<CopyOp>(value.getLoc(), type, value);
    }
    moved[key] = result;
    return result;
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Block &body = func.getBody().front();
    DeviceAttr output;
    if (!outputDevice.empty()) {
      std::string error;
      output = DeviceAttr::parseName(&getContext(), outputDevice, error);
      if (!output) {
        emitError(func.getLoc()) << error;
        return signalPassFailure();
      }
    }
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isa<ConstantOp, CopyOp>(op))
        continue;
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (OpOperand &operand : ret->getOpOperands()) {
          DeviceAttr target =
              output ? output
                     : getDevice(
                           func.getResultTypes()[operand.getOperandNumber()]);
          if (target)
            operand.set(onDevice(operand.get(), target));
        }
        continue;
      }
      DeviceAttr device = placedDevice(op);
      if (!device) {
        for (Type t : op->getResultTypes())
          if ((device = getDevice(t)))
            break;
      }
      op->removeAttr(kPlaceAttr);
      if (!device)
        continue;
      for (OpResult result : op->getResults())
        result.setType(withDevice(result.getType(), device));
      for (OpOperand &operand : op->getOpOperands())
        if (isa<RankedTensorType>(operand.get().getType()))
          operand.set(onDevice(operand.get(), device));
    }
    for (Operation &op : llvm::make_early_inc_range(body))
      if (isa<ConstantOp>(op) && op.use_empty())
        op.erase();
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   body.getTerminator()->getOperandTypes()));
  }
};

} // namespace
