//===- CppRows.cpp - kernels of row reductions, run row by row -----------===//
//
// A kernel whose generics all share their leading loops as parallel rows
// (softmax, layer normalisation: reductions over the last dim and the
// elementwise ops around them, grouped by kiln-fuse-elementwise) runs as one
// loop over the rows, shared out between the threads, with each generic's
// last loop inside it in turn: a row's intermediates stay in L1 and one
// parallel region replaces one per generic. Each generic may only read the
// kernel's own intermediates in the row it is at; a run-time guard checks
// the dynamic dims that the rows depend on, and the kernel falls back to one
// loop nest per generic where it fails.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// Whether the results of `map` are d0, ..., d(rows - 1), then at most one
/// more: d(rows) or the constant 0.
static bool rowMap(AffineMap map, unsigned rows) {
  ArrayRef<AffineExpr> results = map.getResults();
  if (results.size() < rows || results.size() > rows + 1)
    return false;
  for (unsigned d = 0; d < rows; ++d)
    if (results[d] != getAffineDimExpr(d, map.getContext()))
      return false;
  if (results.size() == rows)
    return true;
  AffineExpr last = results.back();
  if (auto c = dyn_cast<AffineConstantExpr>(last))
    return c.getValue() == 0;
  return last == getAffineDimExpr(rows, map.getContext());
}

/// The OpenMP reduction identifier that vectorizes reduction `op`'s row
/// (omp simd), or "": "+" when it yields its output element plus a value of
/// its inputs alone, kiln_max or kiln_min (the prelude's, NaN-propagating)
/// for maximumf or minimumf on f32 or f64. Partial results are combined in
/// another order than the sequential one: float sums round differently, as
/// numpy's and torch's vectorized sums do.
std::string cpp::simdReduction(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  BlockArgument out = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
  Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
  if (!combine || !out.hasOneUse() || *out.getUsers().begin() != combine)
    return "";
  if (isa<arith::AddFOp, arith::AddIOp>(combine))
    return "+";
  if (!out.getType().isF32() && !out.getType().isF64())
    return "";
  if (isa<arith::MaximumFOp>(combine))
    return "kiln_max";
  if (isa<arith::MinimumFOp>(combine))
    return "kiln_min";
  return "";
}

void CppEmitter::planRows() {
  Block &block = kernel.getBody().front();
  SmallVector<Operation *> ops;
  unsigned generics = 0, loops = 0;
  for (Operation &op : block.without_terminator()) {
    if (isa<tensor::EmptyOp>(op))
      continue;
    if (auto fill = dyn_cast<linalg::FillOp>(op)) {
      // Only as a reduction's init.
      Value result = fill.getResult(0);
      if (!result.hasOneUse())
        return;
      auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
      if (!user || user.getNumReductionLoops() == 0 ||
          user.getDpsInits()[0] != result)
        return;
      ops.push_back(&op);
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic) {
      // Scalars (sizes, captured values) only.
      if (op.getNumRegions() || llvm::any_of(op.getResultTypes(), [](Type t) {
            return isa<ShapedType>(t);
          }))
        return;
      continue;
    }
    unsigned n = generic.getNumLoops();
    if (generic.getNumDpsInits() != 1 || n < 2 || (loops && n != loops) ||
        libraryGemm(generic) || unrolledWindow(generic))
      return;
    loops = n;
    // Inits that hold nothing the rows must copy in first.
    if (!generic.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() &&
        !generic.getDpsInits()[0].getDefiningOp<linalg::FillOp>())
      return;
    auto iterators = generic.getIteratorTypesArray();
    for (unsigned d = 0; d + 1 < n; ++d)
      if (iterators[d] != utils::IteratorType::parallel)
        return;
    if (!rowMap(generic.getMatchingIndexingMap(generic.getDpsInitOperand(0)),
                n - 1))
      return;
    // The kernel's own intermediates are read in the row being computed.
    for (OpOperand *input : generic.getDpsInputOperands())
      if (!isa<BlockArgument>(input->get()) &&
          !rowMap(generic.getMatchingIndexingMap(input), n - 1))
        return;
    ops.push_back(&op);
    ++generics;
  }
  if (generics >= 2)
    rowOps = std::move(ops);
}

bool CppEmitter::inRows(Operation *op) {
  return !rowOps.empty() && op != rowOps.back() &&
         llvm::is_contained(rowOps, op);
}

LogicalResult CppEmitter::emitRows() {
  auto first = cast<linalg::GenericOp>(*llvm::find_if(
      rowOps, [](Operation *op) { return isa<linalg::GenericOp>(op); }));
  unsigned rows = first.getNumLoops() - 1;
  SmallVector<std::string> ranges;
  for (unsigned d = 0; d < rows; ++d) {
    ranges.push_back(loopRange(first, d));
    if (ranges.back().empty())
      return first.emitOpError()
             << "has a dynamic loop the kernel emitter cannot size";
  }
  // Intermediates computed and read only here (a softmax's exps, a
  // reduction's result) live on the thread's stack, one row at a time,
  // while the rows run: no whole tensor is written and read back from L2 or
  // beyond. Their rows must be of static size, at most 16 KiB each and
  // 64 KiB together.
  SmallVector<std::pair<SmallVector<Value>, std::string>> local;
  int64_t stackBytes = 0;
  for (Operation *op : rowOps) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || op == rowOps.back())
      continue;
    Value result = generic.getResult(0), init = generic.getDpsInits()[0];
    bool filled = init.getDefiningOp<linalg::FillOp>() != nullptr;
    auto type = cast<RankedTensorType>(result.getType());
    auto here = [&](Operation *user) {
      return llvm::is_contained(rowOps, user);
    };
    if (!ownsNoBuffer(result) || (filled && !ownsNoBuffer(init)) ||
        !llvm::all_of(result.getUsers(), here) ||
        !type.getElementType().isIntOrFloat() ||
        llvm::any_of(type.getShape().drop_front(rows), ShapedType::isDynamic))
      continue;
    int64_t elements = 1;
    for (int64_t size : type.getShape().drop_front(rows))
      elements *= size;
    int64_t bytes =
        elements * std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
    if (elements == 0 || bytes > 16384 || stackBytes + bytes > 65536)
      continue;
    stackBytes += bytes;
    std::string name = fresh("row");
    SmallVector<Value> bound{result};
    if (filled)
      bound.push_back(init);
    for (Value value : bound) {
      bindBuffer(value, name);
      planeDims[value] = rows;
    }
    local.push_back({bound, typeName(type.getElementType()) + " " + name + "[" +
                                std::to_string(elements) + "];"});
  }
  // Every generic's rows and every intermediate's leading dims must be the
  // same at run time.
  // (Each check once; compared whole, as "5 == dims[0]" is also the tail
  // of "v5 == dims[0]".)
  std::string guard;
  llvm::StringSet<> checks;
  auto same = [&](const std::string &a, unsigned d) -> LogicalResult {
    if (a.empty())
      return failure();
    std::string check = a + " == " + ranges[d] + " && ";
    if (a != ranges[d] && checks.insert(check).second)
      guard += check;
    return success();
  };
  for (Operation *op : rowOps) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      continue;
    declareOperands(generic);
    for (unsigned d = 0; d < rows; ++d)
      if (failed(same(loopRange(generic, d), d)))
        return generic.emitOpError()
               << "has a dynamic loop the kernel emitter cannot size";
    for (OpOperand *input : generic.getDpsInputOperands())
      if (!isa<BlockArgument>(input->get()))
        for (unsigned d = 0; d < rows; ++d)
          if (failed(same(dimExpr(input->get(), d), d)))
            return generic.emitOpError() << "has an operand of unknown size";
  }
  std::string work = "int64_t(1)";
  for (unsigned d = 0; d <= rows; ++d)
    work += " * " + loopRange(first, d);
  os << "  if (" << guard << "true) {\n  // rows: " << rowOps.size()
     << " ops, each row's in turn\n";
  os << llvm::formatv("#pragma omp parallel for collapse({0}) "
                      "schedule(static) if ({1} >= {2})\n",
                      rows, work, kParallelWork);
  std::string indent = "  ";
  for (unsigned d = 0; d < rows; ++d) {
    os << indent << forLoop(d, ranges[d]) << (d + 1 == rows ? " {\n" : "\n");
    indent += "  ";
  }
  for (auto &[bound, declaration] : local)
    os << indent << declaration << "\n";
  for (Operation *op : rowOps) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      continue; // a fill, the prologue of the reduction after it
    // Inputs the same along the row (a reduction's result, a row's scale)
    // are read once before its loop. Read in the loop just after the store
    // of that result, GCC 12 took them for a dependence and left a
    // softmax's exp loop scalar whenever the sizes were static (BERT at a
    // static batch of 1: 133 us a softmax against 35; docs/performance-log.md,
    // step 52).
    SmallVector<Value> hoisted;
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    for (OpOperand *input : generic.getDpsInputOperands()) {
      Value value = input->get();
      // Not a value read otherwise already, or also read along the row.
      auto alsoRead = [&](OpOperand *other) {
        return other != input && other->get() == value;
      };
      if (generic.getMatchingBlockArgument(input).use_empty() ||
          maps[input->getOperandNumber()].isFunctionOfDim(rows) ||
          reads.count(value) ||
          llvm::any_of(generic.getDpsInputOperands(), alsoRead))
        continue;
      std::string name = fresh("r");
      os << indent << "const "
         << typeName(generic.getMatchingBlockArgument(input).getType()) << " "
         << name << " = " << bufferFor(value) << "["
         << index(value, maps[input->getOperandNumber()], true) << "];\n";
      reads[value] = name;
      hoisted.push_back(value);
    }
    // A reduction sums the row in a register, from its fill or its
    // output's element.
    std::string acc;
    if (generic.getNumReductionLoops()) {
      acc = fresh("acc");
      Operation *fill =
          generic.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
      if (failed(emitWindowPrologue(generic, fill, indent, acc)))
        return failure();
      if (std::string simd = simdReduction(generic); !simd.empty())
        os << "#pragma omp simd reduction(" << simd << " : " << acc << ")\n";
    }
    os << indent << forLoop(rows, loopRange(generic, rows)) << " {\n";
    LogicalResult body = emitGenericBody(generic, indent + "  ", acc);
    for (Value value : hoisted)
      reads.erase(value);
    if (failed(body))
      return failure();
    os << indent << "}\n";
    if (!acc.empty() && failed(emitWindowEpilogue(generic, {}, indent, acc)))
      return failure();
  }
  os << "  }\n  } else {\n";
  // Where the guard fails, whole tensors as usual.
  for (auto &[bound, declaration] : local)
    for (Value value : bound) {
      unbindBuffer(value);
      planeDims.erase(value);
    }
  for (Operation *op : rowOps) {
    if (auto fill = dyn_cast<linalg::FillOp>(op))
      emitFillOp(fill);
    else if (failed(emitLoops(cast<linalg::GenericOp>(op))))
      return failure();
  }
  os << "  }\n";
  return success();
}
