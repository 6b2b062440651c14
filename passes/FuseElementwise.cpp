//===- FuseElementwise.cpp - form kernels, fusing elementwise chains ------===//
//
// Algorithm, one pass over the function body in order:
//  - Each compute op (any kiln op but constant, copy, reshape, kernel) starts
//    a group. Reshapes stay outside kernels: they are views in the plan.
//  - An elementwise op joins the groups of its elementwise producers, one by
//    one, when that is legal; also the group of a conv, matmul or gemm
//    producer (an anchor) whose result has the op's type, as its epilogue
//    (bias, activation, residual add), at most one anchor per group. The
//    backends then write the anchor's result and run the epilogue in place,
//    with no kernel boundary or temporary in between. A group becomes one
//    kernel placed right after its last member, so joining is legal only if
//    no member's result has a user outside the joined group that comes
//    before the joining op. By induction every external user of a group
//    comes after the group's last member, and every external producer before
//    it: dominance holds and no two kernels depend on each other in a cycle.
//  - On CPUs, a reduction over the last axis (keepdims) joins the group of
//    its producer, and an elementwise op the group of a reduction producer,
//    when every member of both is such a reduction or elementwise, all
//    their results have the same rank and the same dims but the last, and
//    neither group has an anchor: softmax and layer normalisation become one
//    kernel, which the C++ emitter runs row by row (codegen/CppRows.cpp).
//  - Each group becomes a kiln.kernel whose inputs are the values it uses
//    from outside (splat constants are cloned in instead) and whose results
//    are the members' values used outside.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

bool isComputeOp(Operation *op) {
  return isa<KilnDialect>(op->getDialect()) &&
         !isa<ConstantOp, CopyOp, KernelOp, YieldOp, ReshapeOp>(op);
}

/// Ops whose elementwise consumers may join their kernel as an epilogue.
bool isAnchor(Operation *op) { return isa<ConvOp, MatMulOp, GemmOp>(op); }

/// A reduction over the last axis of a rank-2-or-more tensor, keeping it.
bool isRowReduction(Operation *op) {
  auto reduce = dyn_cast<ReduceOp>(op);
  if (!reduce || !reduce.getKeepdims())
    return false;
  auto type = cast<RankedTensorType>(reduce.getInput().getType());
  int64_t rank = type.getRank();
  ArrayRef<int64_t> axes = reduce.getAxes();
  return rank >= 2 && axes.size() == 1 && axes[0] == rank - 1;
}

/// The result type of row-fusable op `op` (elementwise or isRowReduction,
/// one ranked result of rank 2 or more, on a CPU), or null.
RankedTensorType rowType(Operation *op) {
  if (op->getNumResults() != 1 || (!isElementwise(op) && !isRowReduction(op)))
    return {};
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getRank() < 2 || !runsCppKernels(getDevice(type)))
    return {};
  return type;
}

bool isSplatConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  return dense && dense.isSplat();
}

struct FuseElementwise : kiln::impl::KilnFuseElementwiseBase<FuseElementwise> {
  // Position of each op in the block; groups of compute ops in `classes`.
  DenseMap<Operation *, unsigned> order;
  llvm::EquivalenceClasses<Operation *> classes;

  bool has(Operation *op) { return classes.findValue(op) != classes.end(); }

  unsigned anchors(Operation *leader) {
    return llvm::count_if(members(leader), isAnchor);
  }

  SmallVector<Operation *> members(Operation *leader) {
    return SmallVector<Operation *>(
        classes.member_begin(classes.findValue(leader)), classes.member_end());
  }

  /// Whether the groups of `a` and `b` together are rows (see the file
  /// comment) with at least one reduction. rowType admits no anchor, and
  /// the members share one device: each reads another's result.
  bool rowsTogether(Operation *a, Operation *b) {
    SmallVector<Operation *> all = members(classes.getLeaderValue(a));
    llvm::append_range(all, members(classes.getLeaderValue(b)));
    if (!llvm::any_of(all, isRowReduction))
      return false;
    RankedTensorType first = rowType(all.front());
    if (!first)
      return false;
    for (Operation *member : all) {
      RankedTensorType type = rowType(member);
      if (!type || type.getRank() != first.getRank() ||
          type.getShape().drop_back() != first.getShape().drop_back())
        return false;
    }
    return true;
  }

  // Can `op` join the group led by `leader` (together with `joined`, the
  // groups it has already merged with)?
  bool canJoin(Operation *op, Operation *leader) {
    for (Operation *member : members(leader))
      for (Operation *user : member->getUsers()) {
        if (user == op)
          continue;
        if (isComputeOp(user) && has(user) && classes.isEquivalent(user, op))
          continue;
        if (isComputeOp(user) && has(user) &&
            classes.isEquivalent(user, leader))
          continue;
        if (order.lookup(user) < order.lookup(op))
          return false;
      }
    return true;
  }

  void buildKernel(ArrayRef<Operation *> group) {
    SmallPtrSet<Operation *, 8> inGroup(group.begin(), group.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    SmallVector<Operation *> clonedConstants;
    for (Operation *op : group) {
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && inGroup.contains(def))
          continue;
        if (isElementwise(op) && isSplatConstant(operand)) {
          if (!llvm::is_contained(clonedConstants, def))
            clonedConstants.push_back(def);
          continue;
        }
        inputs.insert(operand);
      }
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !inGroup.contains(user);
            }))
          outputs.push_back(result);
    }
    Operation *last = group.back();
    OpBuilder builder(last->getContext());
    builder.setInsertionPointAfter(last);
    Location loc =
        group.size() == 1
            ? group.front()->getLoc()
            : builder.getFusedLoc(llvm::to_vector(llvm::map_range(
                  group, [](Operation *op) { return op->getLoc(); })));
    auto kernel = builder.create<KernelOp>(loc, TypeRange(ValueRange(outputs)),
                                           inputs.getArrayRef());
    Block &body = kernel.getBody().front();
    IRMapping mapping;
    for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
      mapping.map(input, arg);
    builder.setInsertionPointToStart(&body);
    for (Operation *constant : clonedConstants)
      builder.clone(*constant, mapping);
    for (Operation *op : group)
      builder.clone(*op, mapping);
    SmallVector<Value> yielded;
    for (Value output : outputs)
      yielded.push_back(mapping.lookup(output));
    builder.create<YieldOp>(loc, yielded);
    for (auto [output, result] : llvm::zip(outputs, kernel.getResults()))
      output.replaceUsesWithIf(result, [&](OpOperand &use) {
        return !inGroup.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(group))
      op->erase();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &block = func.getBody().front();
    SmallVector<Operation *> computeOps;
    for (Operation &op : block)
      order[&op] = order.size();
    for (Operation &op : block) {
      if (!isComputeOp(&op))
        continue;
      computeOps.push_back(&op);
      classes.insert(&op);
      if (!isElementwise(&op) && !isRowReduction(&op))
        continue;
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !has(producer) || classes.isEquivalent(producer, &op))
          continue;
        bool epilogue = isAnchor(producer) &&
                        operand.getType() == op.getResult(0).getType();
        bool chain =
            isElementwise(&op) && (isElementwise(producer) || epilogue);
        if (!chain && !rowsTogether(producer, &op))
          continue;
        Operation *leader = classes.getLeaderValue(producer);
        if (anchors(leader) + anchors(classes.getLeaderValue(&op)) > 1)
          continue;
        if (canJoin(&op, leader))
          classes.unionSets(&op, leader);
      }
    }
    // Emit one kernel per group, members in program order.
    SmallPtrSet<Operation *, 16> done;
    for (Operation *op : computeOps) {
      if (done.contains(op))
        continue;
      SmallVector<Operation *> group;
      for (Operation *candidate : computeOps)
        if (classes.isEquivalent(candidate, op))
          group.push_back(candidate);
      done.insert(group.begin(), group.end());
      buildKernel(group);
    }
    // Splat constants that were cloned into every user are dead now.
    for (Operation &op : llvm::make_early_inc_range(block))
      if (isa<ConstantOp>(op) && op.use_empty())
        op.erase();
  }
};
} // namespace
