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

/// The f32 GEMM (Gemm.h) `op` is, if any.
std::optional<GemmMatch> cpp::libraryGemm(linalg::GenericOp op) {
  std::optional<GemmMatch> g = matchGemm(op);
  if (!g || !g->element.isF32())
    return std::nullopt;
  return g;
}

/// The zero fill that only initialises `op`. When `op` is a library GEMM,
/// the GEMM overwrites instead of accumulating, and only its fallback loops
/// need the fill.
static linalg::FillOp zeroFillOf(linalg::GenericOp op) {
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getResult(0).hasOneUse())
    return {};
  auto zero = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto value = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
  if (!value || !value.getValue().isZero())
    return {};
  return fill;
}

/// The kernel input holding the transformed weight of Winograd conv `op`
/// (kWinogradU), when its zero init is only for its fallback loops.
static std::optional<unsigned> winogradWeight(linalg::GenericOp op) {
  auto input = op->getAttrOfType<IntegerAttr>(kWinogradU);
  if (!input || !zeroFillOf(op) || !matchWinograd(op))
    return std::nullopt;
  return input.getInt();
}

bool CppEmitter::defersFill(linalg::FillOp fill) {
  if (!fill.getResult(0).hasOneUse())
    return false;
  auto user = dyn_cast<linalg::GenericOp>(*fill->getUsers().begin());
  return user && zeroFillOf(user) == fill &&
         (libraryGemm(user) || winogradWeight(user));
}

/// `if (!kiln_winograd3x3(...)) {` in front of the loops of a 3x3 conv with
/// a transformed weight (kWinogradU): the loops run only without oneDNN.
/// True when emitted.
bool CppEmitter::emitWinogradCall(linalg::GenericOp op) {
  std::optional<unsigned> u = winogradWeight(op);
  if (!u)
    return false;
  Value in = op.getDpsInputs()[0];
  os << llvm::formatv(
      "  if (!kiln_winograd3x3({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
      "{9})) {\n",
      loopRange(op, 0), loopRange(op, 2), loopRange(op, 1), dimExpr(in, 2),
      dimExpr(in, 3), loopRange(op, 5), loopRange(op, 6), bufferFor(in),
      bufferFor(kernel.getBody().front().getArgument(*u)),
      bufferFor(op.getResult(0)));
  emitFillOp(zeroFillOf(op));
  return true;
}

/// `if (!kiln_sgemm(...)) {` in front of the loops of an f32 GEMM (Gemm.h):
/// the loops run only without oneDNN, or when a dynamic dim of an operand is
/// not the loop's size (a dim of 1 broadcasting). True when emitted.
bool CppEmitter::emitGemmCall(linalg::GenericOp op) {
  std::optional<GemmMatch> g = libraryGemm(op);
  if (!g)
    return false;
  linalg::FillOp fill = zeroFillOf(op);
  auto size = [&](ArrayRef<unsigned> dims) {
    std::string product = "int64_t(1)";
    for (unsigned d : dims)
      product += " * " + loopRange(op, d);
    return product;
  };
  std::string m = fresh("m"), n = fresh("n"), k = fresh("k");
  os << llvm::formatv("  const int64_t {0} = {1}, {2} = {3}, {4} = {5};\n", m,
                      size(g->m), n, size(g->n), k, size(g->k));
  std::string check;
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto type = cast<RankedTensorType>(input->get().getType());
    AffineMap map = op.getMatchingIndexingMap(input);
    for (auto [i, e] : llvm::enumerate(map.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && type.isDynamicDim(i)) {
        std::string dim = dimExpr(input->get(), i),
                    range = loopRange(op, d.getPosition());
        if (dim != range)
          check += dim + " == " + range + " && ";
      }
  }
  std::string strideA = g->batchedA ? m + " * " + k : "0";
  std::string strideB = g->batchedB ? k + " * " + n : "0";
  std::string call = llvm::formatv(
      "kiln_sgemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
      "{11})",
      size(g->batch), g->transA, g->transB, m, n, k,
      bufferFor(op.getDpsInputs()[g->a]), strideA,
      bufferFor(op.getDpsInputs()[1 - g->a]), strideB,
      bufferFor(op.getResult(0)), !fill);
  // B packed by kiln-pack-weights: small M streams the panels first.
  if (auto input = op->getAttrOfType<IntegerAttr>(kPackedB))
    call = llvm::formatv(
        "(kiln_sgemm_packed({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}) "
        "|| {10})",
        size(g->batch), m, n, k, bufferFor(op.getDpsInputs()[g->a]), strideA,
        bufferFor(kernel.getBody().front().getArgument(input.getInt())),
        bufferFor(op.getResult(0)), !fill, kPackedRows, call);
  os << "  if (!(" << check << call << ")) {\n";
  if (fill)
    emitFillOp(fill);
  return true;
}

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

LogicalResult CppEmitter::emitGenericLoops(linalg::GenericOp op) {
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
  if (producer && !planeSplits.count(producer.getResult(0)) &&
      flatWindow(op, producer, planes, prologue, epilogue))
    return emitFlatWindow(op, producer, planes, prologue, epilogue);
  bool gemm = emitGemmCall(op) || emitWinogradCall(op);
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
  if (unsigned shared = producer ? planes : parallelPrefix(op))
    emitParallelFor(op, shared);
  // With a prologue or epilogue, the last parallel loop's body holds them
  // around the reduction loops.
  bool around = prologue || epilogue;
  std::string indent = "  ", outer;
  for (auto [dim, size] : llvm::enumerate(ranges)) {
    os << indent << forLoop(dim, size);
    bool opens = dim + 1 == ranges.size() || (around && dim + 1 == p);
    os << (opens || (producer && dim + 1 == planes) ? " {\n" : "\n");
    indent += "  ";
    if (producer && dim + 1 == planes &&
        failed(emitPlane(producer, planes, indent)))
      return failure();
    if (around && dim + 1 == p) {
      outer = indent;
      if (failed(emitWindowPrologue(op, prologue, indent)))
        return failure();
    }
  }
  if (ranges.empty())
    os << indent << "{\n";
  if (failed(emitGenericBody(op, indent)))
    return failure();
  if (around) {
    os << outer << "}\n";
    if (failed(emitWindowEpilogue(op, epilogue, outer)))
      return failure();
  }
  os << "  }\n";
  if (producer)
    os << "  }\n";
  if (gemm)
    os << "  }\n";
  return success();
}

LogicalResult CppEmitter::emitDims(StringRef symbol) {
  os << "extern \"C\" const char *" << symbol
     << "_dims(int64_t *dims, void *const *inputs) {\n";
  if (failed(emitDimsBody(symbol.str())))
    return failure();
  os << "}\n";
  return success();
}

LogicalResult CppEmitter::emit(StringRef symbol) {
  Block &block = kernel.getBody().front();
  os << "// kiln kernel " << symbol << ", from " << kernel.getLoc() << "\n";
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
  if (failed(emitOps(inputs, outputs)))
    return failure();
  os << "}\n";
  if (imageBytes)
    emitImageLoop(kernel, imageBytes, symbol, image, os);
  return success();
}

FailureOr<std::string> kiln::emitKernelCpp(KernelOp kernel, StringRef symbol) {
  if (failed(checkElementTypes(kernel, kCppStyle, "C++")))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  CppEmitter emitter(kernel, os);
  if (failed(emitter.emit(symbol)))
    return failure();
  // The dims function, from a fresh emitter (its own scalar names).
  if (hasDynamicShape(kernel) &&
      failed(CppEmitter(kernel, os).emitDims(symbol)))
    return failure();
  return text;
}
