//===- LowerKernels.cpp - kernel bodies to the kernel-level primitives ----===//
//
// Algorithm: for each kiln.kernel, strip the device encoding from its block
// arguments, rebuild each graph op of the body with the lowering of its op
// family (passes/lowering/), point the yield at the new values and erase the
// graph ops. A dynamic dim is sized at run time from the kernel's input
// dims (lowering/Dims.cpp), where the op's lowering supports it. Lowerings
// build on the graph's element types, so a scalar body
// sees `ui8` and picks the unsigned arith op (divui, cmpi ult, extui, ...);
// then every unsigned type and constant in the kernel is made signless, as
// arith requires. Then fuse the elementwise linalg.generic ops of each kernel
// into their consumers (upstream linalg elementwise fusion, which also folds
// splat constants into the loop body), so one kernel is one loop nest where
// it can be.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lowering/Lowering.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERKERNELS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

// The op families and their lowerings (passes/lowering/).
struct Family {
  bool (*matches)(Operation *);
  FailureOr<Value> (*lower)(OpBuilder &, Operation *, ValueRange);
};
constexpr Family kFamilies[] = {
    {lowering::isElementwiseFamily, lowering::lowerElementwise},
    {lowering::isContractionFamily, lowering::lowerContraction},
    {lowering::isWindowFamily, lowering::lowerWindow},
    {lowering::isReductionFamily, lowering::lowerReduction},
    {lowering::isMovementFamily, lowering::lowerMovement},
    {lowering::isDataShapeFamily, lowering::lowerDataShape},
};

// Unsigned integer types (and constants of them) to their signless twins,
// in every value and nested block of `body`.
void makeSignless(Block &body) {
  auto convert = [](Value v) {
    Type type = toSignless(v.getType());
    if (type != v.getType())
      v.setType(type);
  };
  for (BlockArgument arg : body.getArguments())
    convert(arg);
  body.walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          convert(arg);
    for (Value result : op->getResults())
      convert(result);
    auto constant = dyn_cast<arith::ConstantOp>(op);
    if (!constant || !isUnsignedInteger(constant.getValue().getType()))
      return;
    Attribute value = constant.getValue();
    Type type = toSignless(cast<TypedAttr>(value).getType());
    if (auto integer = dyn_cast<IntegerAttr>(value))
      constant.setValueAttr(IntegerAttr::get(type, integer.getValue()));
    else if (auto dense = dyn_cast<DenseIntElementsAttr>(value))
      constant.setValueAttr(
          dense.bitcast(cast<ShapedType>(type).getElementType()));
  });
}

FailureOr<Value> lowerOp(OpBuilder &b, Operation *op, ValueRange operands) {
  for (const Family &family : kFamilies)
    if (family.matches(op))
      return family.lower(b, op, operands);
  return op->emitOpError() << "has no kernel lowering";
}

LogicalResult lowerKernel(KernelOp kernel) {
  Block &body = kernel.getBody().front();
  for (Operation &op : body.without_terminator())
    if (failed(lowering::checkDynamicSupport(&op)))
      return failure();
  for (BlockArgument arg : body.getArguments())
    arg.setType(withDevice(arg.getType(), nullptr));
  OpBuilder builder(kernel.getContext());
  IRMapping mapping;
  SmallVector<Operation *> graphOps;
  for (Operation &op : body.without_terminator()) {
    if (!isa<KilnDialect>(op.getDialect()))
      continue; // already at kernel level
    graphOps.push_back(&op);
    builder.setInsertionPoint(&op);
    SmallVector<Value> operands = llvm::to_vector(llvm::map_range(
        op.getOperands(), [&](Value v) { return mapping.lookupOrDefault(v); }));
    FailureOr<Value> lowered = lowerOp(builder, &op, operands);
    if (failed(lowered))
      return failure();
    mapping.map(op.getResult(0), *lowered);
  }
  Operation *yield = body.getTerminator();
  for (OpOperand &operand : yield->getOpOperands())
    operand.set(mapping.lookupOrDefault(operand.get()));
  for (Operation *op : llvm::reverse(graphOps))
    op->erase();
  makeSignless(body);
  return success();
}

struct LowerKernels : kiln::impl::KilnLowerKernelsBase<LowerKernels> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    WalkResult walk = func.walk([&](KernelOp kernel) {
      return failed(lowerKernel(kernel)) ? WalkResult::interrupt()
                                         : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    // Only into all-parallel consumers that read each element of the
    // producer once: fusing a producer (e.g. padding) into a reduction, a
    // window gather (im2col) or a broadcast would redo its work for every
    // read, and turns a plain copy into clamped index arithmetic.
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *operand) {
          auto consumer = dyn_cast<linalg::LinalgOp>(operand->getOwner());
          return consumer &&
                 consumer.getNumLoops() == consumer.getNumParallelLoops() &&
                 consumer.getMatchingIndexingMap(operand).isPermutation();
        });
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (auto kernel : llvm::to_vector(func.getOps<KernelOp>()))
      if (failed(applyPatternsAndFoldGreedily(kernel, frozen)))
        return signalPassFailure();
  }
};
} // namespace
