//===- CppEmitter.cpp - kernels as C++ functions for the CPU --------------===//
//
// One function per kernel, `extern "C" void SYMBOL(void **buffers)`; every
// linalg op becomes a loop nest over its loop ranges in the generic's
// dimension order, and local tensors live on the heap. A kernel with dynamic
// dims also gets `extern "C" const char *SYMBOL_dims(int64_t *dims, void
// *const *inputs)`, which computes its outputs' dims from its inputs' dims
// and data (shapes given as tensors) and checks that they agree,
// and reads all of them from `buffers[N]` (N: the number of arguments).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

std::string kiln::cppType(Type t) { return cTypeName(t, kCppStyle); }

/// How many leading loops of `op` to share out between threads: parallel
/// loops whose dim the output is indexed by (so that no two iterations write
/// one element), leaving the innermost loop whole to vectorize. In an
/// unrolledWindow that is the last parallel loop, around the taps.
static unsigned parallelPrefix(linalg::GenericOp op) {
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto iterators = op.getIteratorTypesArray();
  size_t limit = std::max<size_t>(1, iterators.size() - 1);
  if (unsigned p = unrolledWindow(op))
    limit = std::min<size_t>(limit, p - 1);
  unsigned n = 0;
  while (n < limit && iterators[n] == utils::IteratorType::parallel &&
         llvm::is_contained(out.getResults(),
                            getAffineDimExpr(n, op.getContext())))
    ++n;
  return n;
}

/// The first of `op`'s trailing reduction loops when its loops before them
/// are parallel and index its output, and the reductions do not: the
/// loops then sum into one register per output element. Else its number
/// of loops (also when every loop reduces: no loop to hold the register).
static unsigned trailingSums(linalg::GenericOp op) {
  unsigned n = op.getNumLoops(), r = n;
  auto iterators = op.getIteratorTypesArray();
  while (r > 0 && iterators[r - 1] == utils::IteratorType::reduction)
    --r;
  if (r == 0 || r == n || op.getNumDpsInits() != 1)
    return n;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  for (unsigned d = r; d < n; ++d)
    if (out.isFunctionOfDim(d))
      return n;
  return r;
}

/// The first of the trailing loops of elementwise `op`, from `from` on, that
/// can run as one loop: every operand reads them as its last dims, in
/// order, of static sizes equal to the loops' (contiguous in it), or not at
/// all; and the body reads no loop index. Else the number of loops.
unsigned cpp::flatFrom(linalg::GenericOp op, unsigned from) {
  unsigned n = op.getNumLoops();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  bool indexed = false;
  op.getRegion().walk([&](linalg::IndexOp) { indexed = true; });
  if (indexed)
    return n;
  for (unsigned d = from; d < n; ++d)
    if (ShapedType::isDynamic(ranges[d]))
      return n;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto type = cast<RankedTensorType>(operand.get().getType());
    unsigned tail = n - from, r = map.getNumResults();
    auto reads = [&](AffineExpr e) {
      for (unsigned d = from; d < n; ++d)
        if (e.isFunctionOfDim(d))
          return true;
      return false;
    };
    if (llvm::none_of(map.getResults(), reads))
      continue;
    if (r < tail)
      return n;
    for (unsigned j = 0; j < r; ++j) {
      AffineExpr e = map.getResult(j);
      unsigned d = from + j - (r - tail);
      if (j < r - tail ? reads(e)
                       : e != getAffineDimExpr(d, op.getContext()) ||
                             type.getDimSize(j) != ranges[d])
        return n;
    }
  }
  return from;
}

void CppEmitter::nameFlatDims(unsigned rank, unsigned from) {
  for (unsigned d = 0; d < rank; ++d)
    dimNames.push_back(d >= from && d + 1 < rank ? "0"
                                                 : "d" + std::to_string(d));
}

/// The leading `shared` loops of `op` shared out between the threads of the
/// OpenMP pool (the one oneDNN uses too) when there is enough work.
void CppEmitter::emitParallelFor(linalg::GenericOp op, unsigned shared) {
  std::string work = "int64_t(1)";
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    work += " * " + loopRange(op, d);
  os << llvm::formatv("#pragma omp parallel for collapse({0}) "
                      "schedule(static) if ({1} >= {2})\n",
                      shared, work, kParallelWork);
}

void CppEmitter::emitSliceCopy(const SliceCopy &copy) {
  std::string work = "int64_t(1) * " + copy.count, to = copy.offset, from = "0";
  for (auto [i, trips] : llvm::enumerate(copy.outer)) {
    work += " * " + trips;
    to += llvm::formatv(" + s{0} * {1}", i, copy.toStrides[i]).str();
    from += llvm::formatv(" + s{0} * {1}", i, copy.fromStrides[i]).str();
  }
  os << "  // tensor.insert_slice: " << copy.count << " elements a block\n";
  if (!copy.outer.empty())
    os << llvm::formatv("#pragma omp parallel for collapse({0}) "
                        "schedule(static) if ({1} >= {2})\n",
                        copy.outer.size(), work, kParallelWork);
  std::string indent = "  ";
  for (auto [i, trips] : llvm::enumerate(copy.outer)) {
    os << indent
       << llvm::formatv("for (int64_t s{0} = 0; s{0} < {1}; ++s{0})\n", i,
                        trips);
    indent += "  ";
  }
  os << indent
     << llvm::formatv("std::memcpy({0} + ({1}), {2} + ({3}), sizeof({4}) * "
                      "({5}));\n",
                      copy.to, to, copy.from, from,
                      typeName(copy.source.getElementType()), copy.count);
}

LogicalResult CppEmitter::emitGenericLoops(linalg::GenericOp op) {
  if (!rowOps.empty() && op == rowOps.back())
    return emitRows();
  // The GEMM whose epilogue `op` is comes first (CppGemm.cpp); `op`'s own
  // loops run only where the GEMM did not run it tile by tile.
  for (Value input : op.getDpsInputs())
    if (auto gemm = input.getDefiningOp<linalg::GenericOp>();
        gemm && gemmEpilogue(gemm) == op) {
      if (failed(emitLoops(gemm)))
        return failure();
      std::string flag = tiledEpilogues.lookup(op);
      tiledEpilogues.erase(op);
      if (flag.empty())
        return emitLoops(op);
      os << "  if (!" << flag << ") {\n";
      LogicalResult ok = emitLoops(op);
      os << "  }\n";
      return ok;
    }
  return emitLoops(op);
}

LogicalResult CppEmitter::emitLoops(linalg::GenericOp op) {
  Operation *prologue = windowPrologue(op);
  linalg::GenericOp epilogue = windowEpilogue(op);
  unsigned p = unrolledWindow(op);
  unsigned planes = 0;
  linalg::GenericOp producer = planeProducer(op, planes);
  if (producer) {
    // Its buffer holds one plane, declared in the loops (per thread).
    nameBuffer(producer.getResult(0));
    planeDims[producer.getResult(0)] = planes;
    for (OpOperand *input : op.getDpsInputOperands())
      if (input->get() == producer.getResult(0))
        if (int64_t split = planeSplit(op, input, p))
          planeSplits[input->get()] = split;
    declareOperands(producer);
  }
  declareOperands(op); // before the loops
  if (prologue)
    if (auto generic = dyn_cast<linalg::GenericOp>(prologue))
      declareOperands(generic);
  if (epilogue)
    declareOperands(epilogue);
  // A depthwise 3x3 conv or a 3x3 max pool through the prelude, its loops
  // only if it declines.
  bool call = emitDepthwiseCall(op) || emitMaxPoolCall(op);
  if (producer && !planeSplits.count(producer.getResult(0)) &&
      flatWindow(op, producer, planes, prologue, epilogue)) {
    if (failed(emitFlatWindow(op, producer, planes, prologue, epilogue)))
      return failure();
    if (call)
      os << "  }\n";
    return success();
  }
  bool gemm = call || emitGemmCall(op) || emitWinogradCall(op) ||
              emitRowsConvCall(op) || emitTransposeCall(op);
  SmallVector<std::string> ranges;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    ranges.push_back(loopRange(op, d));
    if (ranges.back().empty())
      return op.emitOpError()
             << "has a dynamic loop the kernel emitter cannot size";
  }
  if (producer)
    declarePlanes(producer.getResult(0));
  os << "  // linalg.generic: " << iteratorList(op) << "\n";
  unsigned shared = producer ? planes : parallelPrefix(op);
  // The last two loops of an elementwise generic run as one when the last
  // is shorter than a few vectors (rows of 7 or 14) and both are contiguous
  // in every operand: they vectorize then. The loops before stay shared out
  // between the threads.
  size_t n = ranges.size();
  bool flat = !producer && !gemm && !prologue && !epilogue && n >= 3 &&
              op.getNumParallelLoops() == n &&
              op.getStaticLoopRanges()[n - 1] < kFlatRowWidth &&
              flatFrom(op, n - 2) == n - 2;
  if (flat) {
    ranges[n - 1] = ranges[n - 2] + " * " + ranges[n - 1];
    nameFlatDims(n, n - 2);
    shared = std::min<unsigned>(shared, n - 2);
  }
  // Trailing reductions that the output does not index sum into a register
  // under `omp simd reduction` (reassociated, as numpy's and torch's
  // vectorized sums are), as one loop where they are contiguous in every
  // input: a global average pool's sum of 3,136 floats in double otherwise
  // waits on each add (efficientnet_b0's at 56x56: 4x onnxruntime's time).
  unsigned sums =
      gemm || producer || prologue || epilogue || p ? n : trailingSums(op);
  std::string simd = sums < n ? simdReduction(op) : "";
  bool flatSums = !simd.empty() && n - sums >= 2 && flatFrom(op, sums) == sums;
  if (flatSums) {
    for (unsigned d = sums; d + 1 < n; ++d)
      ranges[n - 1] = ranges[d] + " * " + ranges[n - 1];
    nameFlatDims(n, sums);
  }
  if (shared)
    emitParallelFor(op, shared);
  // With a prologue or epilogue, the last parallel loop's body holds them
  // around the reduction loops; so does a register sum's.
  bool around = prologue || epilogue || !simd.empty();
  if (!simd.empty())
    p = sums;
  std::string indent = "  ", outer, acc;
  for (auto [dim, size] : llvm::enumerate(ranges)) {
    if ((flat && dim == n - 2) || (flatSums && dim >= sums && dim + 1 < n))
      continue;
    if (!simd.empty() && dim + 1 == n)
      os << "#pragma omp simd reduction(" << simd << " : " << acc << ")\n";
    os << indent << forLoop(dim, size);
    bool opens = dim + 1 == ranges.size() || (around && dim + 1 == p);
    os << (opens || (producer && dim + 1 == planes) ? " {\n" : "\n");
    indent += "  ";
    if (producer && dim + 1 == planes &&
        failed(emitPlane(producer, planes, indent)))
      return failure();
    if (around && dim + 1 == p) {
      outer = indent;
      acc = fresh("acc");
      if (failed(emitWindowPrologue(op, prologue, indent, acc)))
        return failure();
    }
  }
  if (ranges.empty())
    os << indent << "{\n";
  LogicalResult body = emitGenericBody(op, indent, acc);
  if (flat || flatSums)
    dimNames.clear();
  if (failed(body))
    return failure();
  if (around) {
    os << outer << "}\n";
    if (failed(emitWindowEpilogue(op, epilogue, outer, acc)))
      return failure();
  }
  os << "  }\n";
  if (producer)
    os << "  }\n";
  if (gemm)
    os << "  }\n";
  return success();
}

LogicalResult CppEmitter::emitDims(StringRef symbol,
                                   std::vector<std::string> &nodes) {
  os << "extern \"C\" const char *" << symbol
     << "_dims(int64_t *dims, void *const *inputs) {\n";
  if (failed(emitDimsBody(nodes)))
    return failure();
  os << "}\n";
  return success();
}

LogicalResult CppEmitter::emit(StringRef symbol) {
  Block &block = kernel.getBody().front();
  int64_t imageBytes = perImageBytes(kernel);
  std::string image = (symbol + "_image").str();
  if (imageBytes)
    os << "static void " << image << "(void **buffers) {\n";
  else
    os << "extern \"C\" void " << symbol << "(void **buffers) {\n";
  if (hasDynamicShape(kernel))
    os << "  const int64_t *dims = static_cast<const int64_t *>(buffers["
       << block.getNumArguments() + kernel.getNumResults() << "]);\n";
  size_t slot = 0;
  SmallVector<std::string> inputs, outputs;
  for (BlockArgument arg : block.getArguments()) {
    std::string type =
        typeName(cast<RankedTensorType>(arg.getType()).getElementType());
    std::string name = "in" + std::to_string(arg.getArgNumber());
    os << llvm::formatv("  const {0} *__restrict {1} = static_cast<const {0} "
                        "*>(buffers[{2}]);\n",
                        type, name, slot++);
    inputs.push_back(name);
  }
  for (auto [j, type] : llvm::enumerate(kernel.getResultTypes())) {
    std::string name = "out" + std::to_string(j);
    os << llvm::formatv(
        "  {0} *__restrict {1} = static_cast<{0} *>(buffers[{2}]);\n",
        typeName(cast<RankedTensorType>(type).getElementType()), name, slot++);
    outputs.push_back(name);
  }
  planRows();
  if (failed(emitOps(inputs, outputs)))
    return failure();
  os << "}\n";
  if (imageBytes)
    emitImageLoop(kernel, imageBytes, symbol, image, os);
  return success();
}

void CppEmitter::planReleases() {
  Block &block = kernel.getBody().front();
  // When each op is emitted at the latest: an absorbed op inside one of
  // its users' loops (a pad in its window's, a GEMM with its epilogue) or
  // inside a window before it (an epilogue), so no later than its last
  // user; never, for rows and what the kernel yields.
  constexpr unsigned kNever = ~0u;
  DenseMap<Operation *, unsigned> position, done;
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator()) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  auto lastUse = [&](Value v) {
    unsigned last = 0;
    for (Operation *user : v.getUsers()) {
      Operation *op = block.findAncestorOpInBlock(*user);
      if (!op || !done.count(op))
        return kNever;
      last = std::max(last, done[op]);
    }
    return last;
  };
  for (Operation *op : llvm::reverse(ops)) {
    unsigned at = position[op];
    if (inRows(op))
      at = kNever;
    else if (absorbed(op))
      for (Value result : op->getResults())
        at = std::max(at, lastUse(result));
    done[op] = at;
  }
  // Each tensor is done after its last reader, or after its own op.
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (isa<RankedTensorType>(result.getType())) {
        unsigned last = std::max(position[op], lastUse(result));
        doneAt[result] = last;
        if (last != kNever)
          releaseAfter[ops[last]].push_back(result);
      }
  positionOf = std::move(position);
  releasesPlanned = true;
}

void CppEmitter::emitted(Operation &op) {
  // After emitOps has found which tensors share buffers.
  if (!releasesPlanned)
    planReleases();
  unsigned at = positionOf.lookup(&op);
  for (Value v : releaseAfter.lookup(&op)) {
    std::string name = namedBuffer(v);
    if (name.empty() || !topScratch.contains(name))
      continue;
    // A buffer goes back once every tensor computed in it is done (a
    // reduction's result lives in its fill's buffer, a GEMM's in its
    // init's): the last of them releases it.
    if (llvm::any_of(buffersNamed(name), [&](Value u) {
          auto it = doneAt.find(u);
          return it == doneAt.end() || it->second > at;
        }))
      continue;
    topScratch.erase(name);
    os << "  " << name << "_owner.release();\n";
  }
}

int CppEmitter::depth() {
  const std::string &text = os.str();
  for (size_t i = std::max(start, scanned); i < text.size(); ++i)
    braces += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
  scanned = text.size();
  return braces;
}

bool kiln::runsRowByRow(KernelOp kernel) {
  std::string text;
  llvm::raw_string_ostream os(text);
  return CppEmitter(kernel, os).runsRows();
}

FailureOr<KernelCpp> kiln::emitKernelCppParts(KernelOp kernel,
                                              StringRef symbol) {
  if (failed(checkElementTypes(kernel, kCppStyle, "C++")))
    return failure();
  KernelCpp parts;
  llvm::raw_string_ostream comment(parts.comment);
  comment << "// kiln kernel " << symbol << ", from " << kernel.getLoc()
          << "\n";
  llvm::raw_string_ostream code(parts.code);
  if (failed(CppEmitter(kernel, code).emit(symbol)))
    return failure();
  // The dims function, from a fresh emitter (its own scalar names).
  llvm::raw_string_ostream dims(parts.dims);
  if (needsDimsFunction(kernel) &&
      failed(CppEmitter(kernel, dims).emitDims(symbol, parts.dimsNodes)))
    return failure();
  return parts;
}

std::string kiln::kernelCodeKey(StringRef code, StringRef symbol) {
  StringRef rest = code;
  std::string key;
  for (size_t at; (at = rest.find(symbol)) != StringRef::npos;) {
    key += rest.take_front(at);
    rest = rest.drop_front(at + symbol.size());
    // kiln_k1 in kiln_k12 is another kernel's name.
    key += !rest.empty() && llvm::isDigit(rest.front()) ? symbol : "@";
  }
  return key + rest.str();
}

FailureOr<std::string> kiln::emitKernelCpp(KernelOp kernel, StringRef symbol) {
  FailureOr<KernelCpp> parts = emitKernelCppParts(kernel, symbol);
  if (failed(parts))
    return failure();
  return parts->comment + parts->code + parts->dims;
}
