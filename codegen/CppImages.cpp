//===- CppImages.cpp - kernels that run image by image --------------------===//
//
// A kernel of several passes (pad, im2col, GEMM, then its bias and
// activation) over a batch writes each pass's whole batch before the next
// pass reads it back; at batch 8 that is tens of MB, far past the caches.
// When every pass works on each index of the leading dynamic dim (the batch)
// on its own, the kernel's body runs once per image instead, with that dim
// set to 1 in a copy of the dims array and every batched buffer advanced to
// the image: each pass then reads what the one before it just wrote, while
// it is still in cache, and the kernel's local tensors shrink to one image.
// With at least as many images as threads, the images go round the
// threads, a whole image a thread (each pass's loops and library calls then
// run on that thread alone), even where the batch would fit the budget.
// A kernel whose GEMM has the images in its rows (a MatMul on [batch, seq,
// k] activations) runs on groups of images instead, as many as keep its
// largest tensor within the same budget: one image's rows are too few for
// the GEMM to pay for packing its weight.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CppKernel.h"

using namespace mlir;
using namespace kiln;

/// Whether `t` is a tensor whose leading dim is dynamic (a batch).
static bool batched(Type t) {
  auto type = dyn_cast<RankedTensorType>(t);
  return type && type.getRank() > 0 && type.isDynamicDim(0);
}

/// Whether `op` works on each index of its batched operands' leading dim on
/// its own: one parallel loop indexes the leading dim of every batched
/// operand and nothing else, every output is batched, and its body reads
/// batched tensors only at that loop's index.
static bool separable(linalg::GenericOp op) {
  std::optional<unsigned> loop;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!batched(operand.get().getType()))
      continue;
    auto dim = dyn_cast<AffineDimExpr>(
        op.getMatchingIndexingMap(&operand).getResult(0));
    if (!dim || (loop && *loop != dim.getPosition()))
      return false;
    loop = dim.getPosition();
  }
  // Without the loop nothing is batched (outputs are operands too): the
  // same work for every image.
  if (loop) {
    auto batchedInit = [](Value v) { return batched(v.getType()); };
    if (op.getIteratorTypesArray()[*loop] != utils::IteratorType::parallel ||
        !llvm::all_of(op.getDpsInits(), batchedInit))
      return false;
    for (OpOperand &operand : op->getOpOperands()) {
      ArrayRef<AffineExpr> results =
          op.getMatchingIndexingMap(&operand).getResults();
      if (batched(operand.get().getType()))
        results = results.drop_front();
      if (llvm::any_of(results,
                       [&](AffineExpr e) { return e.isFunctionOfDim(*loop); }))
        return false;
    }
  }
  // A batched tensor read inside the body (a pad's guarded read) must be
  // read at the image's index: without the loop, not at all.
  WalkResult walk = op.getRegion().walk([&](Operation *inner) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner);
        index && loop && index.getDim() == *loop) {
      for (OpOperand &use : index->getUses()) {
        auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
        if (!extract || use.getOperandNumber() != 1 ||
            !batched(extract.getTensor().getType()))
          return WalkResult::interrupt();
      }
    }
    if (auto extract = dyn_cast<tensor::ExtractOp>(inner);
        extract && batched(extract.getTensor().getType())) {
      auto index = extract.getIndices()[0].getDefiningOp<linalg::IndexOp>();
      if (!loop || !index || index.getDim() != *loop)
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

/// Whether `size` is only ever the leading dim of local tensors, or a
/// broadcast of such sizes: the larger of two, or `a == 1 ? b : a`
/// (lowering::broadcastDim), its compare included.
static bool sizesOnlyBatches(Value size) {
  return llvm::all_of(size.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto empty = dyn_cast<tensor::EmptyOp>(user))
      return empty.getType().isDynamicDim(0) && use.getOperandNumber() == 0;
    if (auto select = dyn_cast<arith::SelectOp>(user))
      return use.getOperandNumber() != 0 && sizesOnlyBatches(select);
    if (isa<arith::CmpIOp>(user))
      return llvm::all_of(user->getUses(), [](OpOperand &condition) {
        auto select = dyn_cast<arith::SelectOp>(condition.getOwner());
        return select && condition.getOperandNumber() == 0 &&
               sizesOnlyBatches(select);
      });
    return isa<arith::MaxSIOp>(user) && sizesOnlyBatches(user->getResult(0));
  });
}

/// Whether `v` is the leading dim of a kernel tensor or a broadcast of such
/// dims (see sizesOnlyBatches).
static bool isBatchSize(Value v) {
  if (auto dim = v.getDefiningOp<tensor::DimOp>())
    return dim.getConstantIndex() == 0;
  return v.getDefiningOp<arith::MaxSIOp>() ||
         v.getDefiningOp<arith::SelectOp>();
}

/// Whether `op`, a scalar op outside the passes, keeps to one image: a
/// constant, a tensor.dim of another dim than the leading one, or a size of
/// the leading dim (its tensor.dim, a broadcast of two) used only as one.
static bool keepsToImages(Operation &op) {
  if (isa<arith::ConstantOp>(op))
    return true;
  if (auto dim = dyn_cast<tensor::DimOp>(op)) {
    std::optional<int64_t> index = dim.getConstantIndex();
    return index && (*index != 0 || sizesOnlyBatches(dim));
  }
  if (auto max = dyn_cast<arith::MaxSIOp>(op))
    return llvm::all_of(max->getOperands(), isBatchSize) &&
           sizesOnlyBatches(max);
  if (auto select = dyn_cast<arith::SelectOp>(op))
    return select.getCondition().getDefiningOp<arith::CmpIOp>() &&
           isBatchSize(select.getTrueValue()) &&
           isBatchSize(select.getFalseValue()) && sizesOnlyBatches(select);
  if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    return isBatchSize(cmp.getLhs()) &&
           cmp.getRhs().getDefiningOp<arith::ConstantOp>() &&
           sizesOnlyBatches(cmp.getLhs());
  return false;
}

/// The elements of one image of `t`, a batched tensor; 0 when another of
/// its dims is dynamic.
static int64_t imageElements(RankedTensorType t) {
  int64_t n = 1;
  for (int64_t size : t.getShape().drop_front())
    n = ShapedType::isDynamic(size) ? 0 : n * size;
  return n;
}

/// The bytes of one image of `t`, a batched tensor; 0 when unknown.
static int64_t imageBytes(RankedTensorType t) {
  Type element = t.getElementType();
  if (!element.isIntOrFloat())
    return 0;
  return imageElements(t) *
         llvm::divideCeil(element.getIntOrFloatBitWidth(), 8);
}

int64_t kiln::separableImageBytes(KernelOp kernel) {
  if (kernel->getNumResults() == 0)
    return 0;
  int64_t largest = 0;
  for (Type type : kernel->getResultTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    // Each image's loops must stay big enough to share out among threads.
    if (!batched(tensor) || imageElements(tensor) < cpp::kParallelWork)
      return 0;
    largest = std::max(largest, imageBytes(tensor));
  }
  for (Type type : kernel->getOperandTypes())
    if (batched(type))
      largest = std::max(largest, imageBytes(cast<RankedTensorType>(type)));
  for (Operation &op : kernel.getBody().front()) {
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      if (!separable(generic))
        return 0;
    } else if (isa<arith::ConstantOp, tensor::DimOp, arith::MaxSIOp,
                   arith::SelectOp, arith::CmpIOp>(op)) {
      if (!keepsToImages(op))
        return 0;
    } else if (auto cast = dyn_cast<tensor::CastOp>(op)) {
      if (batched(cast.getSource().getType()) != batched(cast.getType()))
        return 0;
    } else if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
      if (batched(empty.getType()))
        largest = std::max(largest, imageBytes(empty.getType()));
    } else if (!isa<linalg::FillOp, YieldOp>(op)) {
      return 0;
    }
  }
  return largest;
}

int64_t cpp::perImageBytes(KernelOp kernel) {
  // One pass gains nothing from running image by image.
  Block &body = kernel.getBody().front();
  if (llvm::count_if(
          body, [](Operation &op) { return isa<linalg::GenericOp>(op); }) < 2)
    return 0;
  return separableImageBytes(kernel);
}

/// Whether a library GEMM of `kernel` has the images in its rows or
/// columns (a MatMul on [batch, seq, k] activations by a weight), not as a
/// batch of GEMMs (a conv's): with several images per call, that GEMM grows
/// and packs its other operand once for all of them. BERT's FFN at batch 32
/// ran 15.2 ms one image (128 rows) at a time and 12.4 ms in groups of 16;
/// groups of 4 gained nothing. resnet18's convs, whose images are a batch
/// of GEMMs, lost up to 18% in groups: their intermediates left the L2
/// cache (docs/performance-log.md, step 31).
static bool gemmGrowsWithImages(KernelOp kernel) {
  WalkResult walk = kernel.getBody().walk([](linalg::GenericOp op) {
    std::optional<GemmMatch> g = cpp::libraryGemm(op);
    if (!g)
      return WalkResult::advance();
    for (OpOperand *input : op.getDpsInputOperands()) {
      if (!batched(input->get().getType()))
        continue;
      auto dim = dyn_cast<AffineDimExpr>(
          op.getMatchingIndexingMap(input).getResult(0));
      if (dim && (llvm::is_contained(g->m, dim.getPosition()) ||
                  llvm::is_contained(g->n, dim.getPosition())))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return walk.wasInterrupted();
}

void cpp::emitImageLoop(KernelOp kernel, int64_t bytes, StringRef symbol,
                        StringRef imageSymbol, raw_ostream &os) {
  SmallVector<Type> types(kernel->getOperandTypes());
  llvm::append_range(types, kernel->getResultTypes());
  int64_t total = dimsOffset(kernel, types.size());
  unsigned firstResult = kernel->getNumOperands();
  bool grows = gemmGrowsWithImages(kernel);
  int64_t group = grows ? std::max<int64_t>(1, kImageLoopBytes / bytes) : 1;
  // Whole images a thread, unless a GEMM has the images in its rows (one
  // image's rows are few: it stays on all threads).
  bool share = !grows;
  os << "// Runs " << imageSymbol
     << (group == 1 ? " on each image (index" : " on groups of images (indices")
     << " of the leading dim) in turn"
     << (share ? ", whole images a thread while the images go round "
                 "the threads.\n"
               : ".\n")
     << "extern \"C\" void " << symbol << "(void **buffers) {\n"
     << "  const int64_t *dims = static_cast<const int64_t *>(buffers["
     << types.size() << "]);\n"
     << "  const int64_t images = dims[" << dimsOffset(kernel, firstResult)
     << "];\n";
  if (share)
    os << "  const int64_t threads = omp_get_max_threads();\n"
       << "  const int64_t shared = threads > 1 ? images / threads * threads "
          ": 0;\n";
  os << "  // Small batches stay in cache: one pass over all of them.\n"
     << "  if (" << (share ? "shared == 0 && " : "") << "images * " << bytes
     << " <= " << kImageLoopBytes << ")\n"
     << "    return " << imageSymbol << "(buffers);\n";
  if (group == 1)
    os << "  const auto run = [&](int64_t n) {\n";
  // In the lambda of one image, or before the loop over the groups.
  std::string lead = group == 1 ? "    " : "  ";
  os << lead << "int64_t one[" << total << "];\n"
     << lead << "std::memcpy(one, dims, sizeof(one));\n";
  // Each batched buffer's leading dim: 1, or the group's images (a leading
  // dim of 1 broadcasts: every image reads the same one).
  auto setLeadingDims = [&](StringRef indent) {
    for (auto [i, type] : llvm::enumerate(types))
      if (batched(type)) {
        int64_t at = dimsOffset(kernel, i);
        os << indent << "one[" << at << "] = ";
        if (group == 1)
          os << "1;\n";
        else
          os << "dims[" << at << "] == 1 ? 1 : group;\n";
      }
  };
  if (group == 1)
    setLeadingDims(lead);
  os << lead << "void *image[" << types.size() + 1 << "];\n"
     << lead << "image[" << types.size() << "] = one;\n";
  if (group != 1) {
    os << "  // " << group << " images at a time: within the same budget.\n"
       << "  for (int64_t n = 0; n < images; n += " << group << ") {\n"
       << "    const int64_t group = std::min<int64_t>(" << group
       << ", images - n);\n";
    setLeadingDims("    ");
  }
  for (auto [i, type] : llvm::enumerate(types)) {
    os << "    image[" << i << "] = ";
    if (!batched(type)) {
      os << "buffers[" << i << "];\n";
      continue;
    }
    auto tensor = cast<RankedTensorType>(type);
    int64_t at = dimsOffset(kernel, i);
    os << "static_cast<char *>(buffers[" << i << "]) + (dims[" << at
       << "] == 1 ? 0 : n) * int64_t(sizeof("
       << cTypeName(tensor.getElementType(), kCppStyle) << "))";
    for (int64_t d = 1; d < tensor.getRank(); ++d)
      os << " * "
         << (tensor.isDynamicDim(d) ? "dims[" + std::to_string(at + d) + "]"
                                    : std::to_string(tensor.getDimSize(d)));
    os << ";\n";
  }
  if (group != 1) {
    os << "    " << imageSymbol << "(image);\n  }\n}\n";
    return;
  }
  // As many images as threads at a time, each on one thread (its passes'
  // loops and GEMMs then run on that thread alone): no barrier between
  // passes, and each image's intermediates stay in its core's cache.
  // resnet18 at batch 8 0.93-0.97x the time of each image on all threads,
  // at batch 2 0.93-0.96x (docs/performance-log.md, step 53). The images left
  // over then run on all threads, one at a time (at batch 3, one thread
  // taking 2 of 3 images lost 11-15%).
  os << "    " << imageSymbol << "(image);\n  };\n";
  if (share)
    os << "  if (shared > 0) {\n"
       << "#pragma omp parallel for schedule(static)\n"
       << "    for (int64_t n = 0; n < shared; ++n)\n"
       << "      run(n);\n"
       << "  }\n";
  os << "  for (int64_t n = " << (share ? "shared" : "0")
     << "; n < images; ++n)\n"
     << "    run(n);\n"
     << "}\n";
}
