//===- Plan.h - the host-side plan of a compiled function ---------*- C++
//-*-===//
//
// After the compile pipeline a function holds only arguments, constants,
// kernels and a return. The plan numbers every tensor value (graph inputs,
// constants, kernel results), packs the constants into one weights blob and
// lists the kernel calls in order: the manifest the runtime executes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_PLAN_H
#define KILN_CODEGEN_PLAN_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <nlohmann/json.hpp>

namespace kiln {

struct Plan {
  /// values, inputs, outputs, steps (see runtime/Artifact.h).
  nlohmann::json manifest;
  std::vector<char> weights;
  /// Kernels in step order with their symbols.
  std::vector<std::pair<KernelOp, std::string>> kernels;
  /// The devices the plan uses; a device's index is its role.
  std::vector<DeviceAttr> roles;
};

/// Builds the plan of `func`; fails with a diagnostic at the first op it
/// cannot place in a plan. Roles follow `deviceOrder` (device names) where
/// it names a device the plan uses, then first use.
mlir::FailureOr<Plan> buildPlan(mlir::func::FuncOp func,
                                llvm::ArrayRef<std::string> deviceOrder = {});

/// "f32", "i64", ... as the runtime spells them; "" when unsupported.
std::string dtypeName(mlir::Type element);

} // namespace kiln

#endif // KILN_CODEGEN_PLAN_H
