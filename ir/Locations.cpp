//===- Locations.cpp - ONNX node names and op types in MLIR locations -----===//
//
// An imported op's location is NameLoc(node name, fused<"OpType">[file]): the
// node name is what diagnostics show and what placement pins match, the
// ONNX op type (fused-location metadata) what `"op"` pins match. Fused
// kernels carry a FusedLoc of their members' locations.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"

using namespace mlir;

Location kiln::makeNodeLoc(MLIRContext *ctx, StringRef name, StringRef opType,
                           Location file) {
  Location inner =
      opType.empty() ? file
                     : FusedLoc::get(ctx, {file}, StringAttr::get(ctx, opType));
  return NameLoc::get(StringAttr::get(ctx, name), inner);
}

std::string kiln::nodeNames(Location loc) {
  std::string names;
  SmallVector<StringRef> seen;
  loc->walk([&](Location l) {
    if (auto name = dyn_cast<NameLoc>(l))
      if (!llvm::is_contained(seen, name.getName().getValue())) {
        seen.push_back(name.getName().getValue());
        names += (names.empty() ? "" : ",") + name.getName().str();
      }
    return WalkResult::advance();
  });
  return names;
}

std::string kiln::onnxOpType(Location loc) {
  std::string type;
  loc->walk([&](Location l) {
    if (auto fused = dyn_cast<FusedLoc>(l))
      if (auto text = dyn_cast_or_null<StringAttr>(fused.getMetadata())) {
        type = text.str();
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return type;
}
