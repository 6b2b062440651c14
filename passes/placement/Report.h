//===- Report.h - placement tables, saved placements, dot pictures -*- C++
//-*-===//

#ifndef KILN_PASSES_PLACEMENT_REPORT_H
#define KILN_PASSES_PLACEMENT_REPORT_H

#include "passes/placement/Profiles.h"

#include <nlohmann/json.hpp>

namespace kiln {

/// The placement table of a placed graph-level function (after copy
/// insertion): op -> device with its estimated time, every copy with its
/// bytes, and per device the op count, estimated busy time, weights and
/// peak memory (by liveness over the op order, views free).
std::string placementTable(mlir::func::FuncOp func,
                           llvm::ArrayRef<DeviceProfile> profiles);

/// The placement as pins rules that reproduce it when fed back through
/// `kilnc --pin`: one rule per ONNX node whose ops share a device, one per
/// (node, op) otherwise.
nlohmann::json placementRules(mlir::func::FuncOp func);

/// Graphviz of a placed, fused function: one coloured cluster per device
/// holding its kernels, views, inputs and outputs; copies are edges
/// labelled with their bytes.
std::string placementDot(mlir::func::FuncOp func);

} // namespace kiln

#endif // KILN_PASSES_PLACEMENT_REPORT_H
