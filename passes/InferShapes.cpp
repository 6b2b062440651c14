//===- InferShapes.cpp - refine tensor types through the graph ------------===//
//
// Algorithm: (1) bind the function arguments named in `input-shapes` to the
// given static shapes (a symbolic dim may become any size; a static one must
// match); (2) walk the body in order and give every op with
// InferTypeOpInterface the type inferred from its (possibly refined)
// operands, and every kiln.copy its input's shape; an inferred type that is
// incompatible with the declared one is an error at that op; (3) set the
// function's result types from its return operands.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/StringExtras.h"

namespace kiln {
#define GEN_PASS_DEF_KILNINFERSHAPES
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct InferShapes : kiln::impl::KilnInferShapesBase<InferShapes> {
  using KilnInferShapesBase::KilnInferShapesBase;

  LogicalResult bindInputs(func::FuncOp func) {
    // name -> (dims, as the user wrote them)
    llvm::StringMap<std::pair<SmallVector<int64_t>, std::string>> bindings;
    for (const std::string &binding : inputShapes) {
      std::string name;
      SmallVector<int64_t> dims;
      if (failed(parseShapeBinding(binding, name, dims)))
        return func.emitOpError() << "malformed input shape '" << binding
                                  << "' (expected NAME=D0xD1x...)";
      bindings[name] = {dims, StringRef(binding).rsplit('=').second.str()};
    }
    for (BlockArgument arg : func.getArguments()) {
      auto nameAttr =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "kiln.name");
      std::string name = nameAttr ? nameAttr.str()
                                  : "arg" + std::to_string(arg.getArgNumber());
      auto it = bindings.find(name);
      if (it == bindings.end())
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      ArrayRef<int64_t> dims = it->second.first;
      if (type.getRank() != (int64_t)dims.size())
        return func.emitOpError()
               << "input '" << name << "' has rank " << type.getRank()
               << " but the shape given for it has rank " << dims.size();
      SmallVector<int64_t> merged(type.getShape());
      for (auto [have, want] : llvm::zip(merged, dims)) {
        if (ShapedType::isDynamic(want))
          continue; // '?': sized at run time
        if (!ShapedType::isDynamic(have) && have != want)
          return func.emitOpError()
                 << "input '" << name << "' has static shape " << type
                 << " that the given shape " << it->second.second
                 << " contradicts";
        have = want;
      }
      arg.setType(RankedTensorType::get(merged, type.getElementType(),
                                        type.getEncoding()));
      bindings.erase(it);
    }
    if (!bindings.empty()) {
      SmallVector<StringRef> unknown;
      for (auto &entry : bindings)
        unknown.push_back(entry.first());
      llvm::sort(unknown);
      return func.emitOpError()
             << "no input named " << llvm::join(unknown, ", ");
    }
    return success();
  }

  LogicalResult refine(Operation *op) {
    if (!isa<CopyOp, InferTypeOpInterface>(op))
      return success();
    SmallVector<Type> inferred;
    if (failed(inferResultTypes(op, inferred)))
      return failure();
    for (auto [result, type] : llvm::zip(op->getResults(), inferred)) {
      if (result.getType() == type)
        continue;
      auto have = cast<RankedTensorType>(result.getType());
      auto want = cast<RankedTensorType>(type);
      if (have.getRank() != want.getRank() ||
          have.getElementType() != want.getElementType() ||
          have.getEncoding() != want.getEncoding())
        return op->emitOpError() << "result type " << have
                                 << " contradicts the inferred " << want;
      for (auto [h, w] : llvm::zip(have.getShape(), want.getShape()))
        if (!ShapedType::isDynamic(h) && !ShapedType::isDynamic(w) && h != w)
          return op->emitOpError() << "result type " << have
                                   << " contradicts the inferred " << want;
      // Keep the more static of the two in each dim.
      SmallVector<int64_t> dims;
      for (auto [h, w] : llvm::zip(have.getShape(), want.getShape()))
        dims.push_back(ShapedType::isDynamic(w) ? h : w);
      result.setType(RankedTensorType::get(dims, want.getElementType(),
                                           want.getEncoding()));
    }
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // Bindings are for the model's entry; private functions (e.g. the
    // per-chunk specialisations of data parallelism) come already bound.
    if (func.isPublic() && failed(bindInputs(func)))
      return signalPassFailure();
    WalkResult walk =
        func.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
          if (isa<KernelOp>(op))
            return WalkResult::skip();
          return failed(refine(op)) ? WalkResult::interrupt()
                                    : WalkResult::advance();
        });
    if (walk.wasInterrupted())
      return signalPassFailure();
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setType(FunctionType::get(&getContext(),
                                   func.getBody().getArgumentTypes(),
                                   ret.getOperandTypes()));
  }
};
} // namespace
