//===- PackWeights.cpp - constant GEMM weights packed for small M ---------===//
//
// A CPU GEMM C[M, N] = A[M, K] * B[K, N] whose B is a constant and whose M
// is small (a batch of a few rows through a linear layer) is bound by
// reading B: oneDNN runs [8 x 784] x [784 x 1024] 3-5x slower than it
// streams the same B for one row. Such a GEMM also gets B packed once, here,
// as [ceil(N / 16)][K][16] panels (zero-padded past N), passed to its kernel
// as one more input; the generic names that input in kPackedB, and the C++
// kernel (kiln_sgemm_packed) runs M <= kPackedRows through the panels, and
// larger M through oneDNN on B as it was (docs/performance.md, step 17).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "codegen/Gemm.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPACKWEIGHTS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
/// Below this K or N, B is small enough to stay in cache and packing gains
/// nothing.
constexpr int64_t kMinPackedDim = 64;

/// The product of `dims`' loop ranges, dynamic ones counted as 1.
int64_t staticProduct(ArrayRef<int64_t> ranges, ArrayRef<unsigned> dims) {
  int64_t product = 1;
  for (unsigned d : dims)
    if (!ShapedType::isDynamic(ranges[d]))
      product *= ranges[d];
  return product;
}

/// The constant B of `gemm` in `kernel` packed for it, or null when the
/// GEMM does not qualify. `packed` caches one packing per constant.
Value packedB(KernelOp kernel, linalg::GenericOp gemm,
              DenseMap<Operation *, Value> &packed) {
  std::optional<GemmMatch> g = matchGemm(gemm);
  if (!g || !g->element.isF32() || g->transA || g->transB || g->batchedB)
    return {};
  auto arg = dyn_cast<BlockArgument>(gemm.getDpsInputs()[1 - g->a]);
  if (!arg || arg.getOwner() != &kernel.getBody().front())
    return {};
  auto constant =
      kernel.getOperand(arg.getArgNumber()).getDefiningOp<ConstantOp>();
  if (!constant)
    return {};
  SmallVector<int64_t> ranges = gemm.getStaticLoopRanges();
  auto dynamic = [&](unsigned d) { return ShapedType::isDynamic(ranges[d]); };
  int64_t m = staticProduct(ranges, g->m), k = staticProduct(ranges, g->k),
          n = staticProduct(ranges, g->n);
  // M's static dims alone above kPackedRows: the packed path never runs.
  if (llvm::any_of(g->k, dynamic) || llvm::any_of(g->n, dynamic) ||
      k < kMinPackedDim || n < kMinPackedDim || m > kPackedRows)
    return {};
  if (Value done = packed.lookup(constant))
    return done;
  auto type = cast<RankedTensorType>(constant.getType());
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  if (!type.hasStaticShape() || bytes.size() != size_t(k * n) * sizeof(float))
    return {};
  const int64_t panels = (n + kPackedColumns - 1) / kPackedColumns;
  std::vector<char> out(size_t(panels * k * kPackedColumns) * sizeof(float), 0);
  auto *from = reinterpret_cast<const float *>(bytes.data());
  auto *to = reinterpret_cast<float *>(out.data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      to[((j / kPackedColumns) * k + i) * kPackedColumns + j % kPackedColumns] =
          from[i * n + j];
  auto outType = RankedTensorType::get(
      {panels, k, kPackedColumns}, type.getElementType(), type.getEncoding());
  std::string name = "packed";
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
    name = resource.getRawHandle().getKey().str() + "_packed";
  OpBuilder b(constant);
  b.setInsertionPointAfter(constant);
  Value result = b.create<ConstantOp>(constant.getLoc(), outType,
                                      makeConstantAttr(outType, out, name));
  packed[constant] = result;
  return result;
}

struct PackWeights : kiln::impl::KilnPackWeightsBase<PackWeights> {
  void runOnOperation() override {
    DenseMap<Operation *, Value> packed;
    getOperation().walk([&](KernelOp kernel) {
      DeviceAttr device = kernel.getNumResults()
                              ? getDevice(kernel.getResult(0).getType())
                              : DeviceAttr();
      // sim devices run the C++ kernels too, and must match cpu bit for bit.
      if (!device || (device.getKind() != "cpu" && device.getKind() != "sim"))
        return;
      Block &body = kernel.getBody().front();
      for (auto gemm : llvm::to_vector(body.getOps<linalg::GenericOp>())) {
        Value b = packedB(kernel, gemm, packed);
        if (!b)
          continue;
        // One input per packed constant, however many GEMMs read it.
        auto operands = kernel->getOperands();
        unsigned input = llvm::find(operands, b) - operands.begin();
        if (input == operands.size()) {
          kernel->insertOperands(input, b);
          body.addArgument(withDevice(b.getType(), nullptr), b.getLoc());
        }
        gemm->setAttr(
            kPackedB,
            IntegerAttr::get(IntegerType::get(&getContext(), 64), input));
      }
    });
  }
};
} // namespace
