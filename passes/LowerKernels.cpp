//===- LowerKernels.cpp - kernel bodies to the kernel-level primitives ----===//
//
// Algorithm: for each kiln.kernel, strip the device encoding from its block
// arguments, rebuild each graph op of the body with the lowering of its op
// family (passes/lowering/), point the yield at the new values and erase the
// graph ops. A dynamic dim is sized at run time from the kernel's input
// dims (lowering/Dims.cpp), where the op's lowering supports it. Lowerings
// build on the graph's element types, so a scalar body
// sees `ui8` and picks the unsigned arith op (divui, cmpi ult, extui, ...);
// then sums and products of half-precision types are made to accumulate in
// f32 (lowering/Accumulate.cpp), arithmetic on bfloat16 and float8 is
// widened to f32 around the
// conversions, and every unsigned type and constant in the kernel is made
// signless, as arith requires (sub-byte integers widen to i8). Then fuse the
// elementwise linalg.generic ops of each kernel into their consumers (upstream
// linalg elementwise fusion, which also folds splat constants into the loop
// body), so one kernel is one loop nest where it can be.
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
    {lowering::isResizeFamily, lowering::lowerResize},
    {lowering::isIndexedFamily, lowering::lowerIndexed},
    {lowering::isGridSampleFamily, lowering::lowerGridSample},
};

// Unsigned and sub-byte integer types (and constants of them) to their
// kernel-level twins (toSignless), in every value and nested block of `body`.
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
    if (!constant)
      return;
    auto value = cast<TypedAttr>(constant.getValue());
    Type element = getElementTypeOrSelf(value.getType());
    Type signless = toSignless(element);
    if (signless == element)
      return;
    // Sub-byte values widen as the type's signedness says.
    unsigned width = signless.getIntOrFloatBitWidth();
    bool isUnsigned = element.isUnsignedInteger();
    auto widen = [&](const APInt &v) {
      return isUnsigned ? v.zextOrTrunc(width) : v.sextOrTrunc(width);
    };
    if (auto integer = dyn_cast<IntegerAttr>(value))
      constant.setValueAttr(
          IntegerAttr::get(signless, widen(integer.getValue())));
    else if (auto dense = dyn_cast<DenseIntElementsAttr>(value))
      constant.setValueAttr(dense.mapValues(signless, widen));
  });
}

// Arithmetic on narrow floats (bfloat16, float8) is done in f32: each arith
// or math op reading or yielding one gets arith.extf'ed operands and
// arith.truncf's its results. Only the conversions (and loads and stores)
// keep narrow floats, and the kernel emitters render just those.
void widenNarrowFloats(Block &body) {
  SmallVector<Operation *> ops;
  body.walk([&](Operation *op) {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
      return;
    if ((isa<arith::ExtFOp>(op) &&
         isNarrowFloat(op->getOperand(0).getType())) ||
        (isa<arith::TruncFOp>(op) &&
         isNarrowFloat(op->getResult(0).getType())) ||
        isa<arith::BitcastOp>(op))
      return; // a conversion, or bits as they are
    if (llvm::any_of(op->getOperandTypes(), isNarrowFloat) ||
        llvm::any_of(op->getResultTypes(), isNarrowFloat))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Type f32 = b.getF32Type();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = cast<FloatAttr>(constant.getValue());
      Value wide = b.create<arith::ConstantOp>(
          loc, b.getF32FloatAttr(value.getValueAsDouble()));
      constant.replaceAllUsesWith(
          b.create<arith::TruncFOp>(loc, constant.getType(), wide).getResult());
      constant.erase();
      continue;
    }
    for (OpOperand &operand : op->getOpOperands())
      if (isNarrowFloat(operand.get().getType()))
        operand.set(b.create<arith::ExtFOp>(loc, f32, operand.get()));
    b.setInsertionPointAfter(op);
    for (OpResult result : op->getResults()) {
      Type narrow = result.getType();
      if (!isNarrowFloat(narrow))
        continue;
      result.setType(f32);
      auto trunc = b.create<arith::TruncFOp>(loc, narrow, result);
      result.replaceAllUsesExcept(trunc, trunc);
    }
  }
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
  lowering::accumulateInF32(body);
  widenNarrowFloats(body);
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
    // read, and turns a plain copy into clamped index arithmetic. Nor when
    // a reduction reads the producer too: it stays, and the consumer reads
    // what it stored instead of computing it again (softmax's exponentials,
    // read by its sum and its division).
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *operand) {
          auto consumer = dyn_cast<linalg::LinalgOp>(operand->getOwner());
          auto reduces = [](Operation *user) {
            auto linalgUser = dyn_cast<linalg::LinalgOp>(user);
            return linalgUser && linalgUser.getNumReductionLoops() > 0;
          };
          return consumer &&
                 consumer.getNumLoops() == consumer.getNumParallelLoops() &&
                 consumer.getMatchingIndexingMap(operand).isPermutation() &&
                 llvm::none_of(operand->get().getUsers(), reduces);
        });
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (auto kernel : llvm::to_vector(func.getOps<KernelOp>()))
      if (failed(applyPatternsAndFoldGreedily(kernel, frozen)))
        return signalPassFailure();
  }
};
} // namespace
