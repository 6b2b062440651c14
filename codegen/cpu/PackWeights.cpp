//===- PackWeights.cpp - constant GEMM weights packed for small M ---------===//
//
// A CPU GEMM C[M, N] = A[M, K] * B[K, N] whose B is a constant and whose M
// is small (a batch of a few rows through a linear layer) is bound by
// reading B: oneDNN runs [8 x 784] x [784 x 1024] 3-5x slower than it
// streams the same B for one row. Such a GEMM also gets B packed once, here,
// as [ceil(N / 16)][K][16] panels (zero-padded past N), passed to its kernel
// as one more input; the generic names that input in kPackedB, and the C++
// kernel (kiln_sgemm_packed) runs M <= kPackedRows through the panels, and
// larger M through oneDNN on B as it was (docs/performance-log.md, step 17).
// Up to 256 rows (a sequence of 128 through a transformer's linear layers)
// the panels beat oneDNN packing B on every call, without AVX-512 (step 56).
//
// A 3x3 conv that codegen/Gemm.h's matchWinograd accepts, with a constant
// weight w[M][C][3][3], gets it transformed for Winograd F(2x2, 3x3) as
// U[16][M][C] (U = G w G^T per (m, c), in float64, then rounded), named by
// kWinogradU (docs/performance-log.md, step 21).
//
// A conv in groups that matchRowsConv accepts (run by flattened planes)
// with a constant weight gets it as blocks of kPackedColumns output
// channels of a group, tap by tap (kGroupedPanels): packed by each call,
// the weights of regnet_x_400mf's 7x7 groups cost as much as half the conv
// (docs/performance-log.md, step 65).
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Passes.h"

#include "codegen/Gemm.h"
#include "codegen/cpu/Tuning.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPACKWEIGHTS
#include "codegen/cpu/Passes.h.inc"
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

/// A new constant of `constant`'s element type and device, of shape `shape`,
/// holding `out`, after `constant` and named after it with `suffix`.
Value derivedConstant(ConstantOp constant, ArrayRef<int64_t> shape,
                      const std::vector<char> &out, StringRef suffix) {
  auto type = cast<RankedTensorType>(constant.getType());
  auto outType =
      RankedTensorType::get(shape, type.getElementType(), type.getEncoding());
  std::string name = suffix.str();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
    name = resource.getRawHandle().getKey().str() + "_" + name;
  OpBuilder b(constant);
  b.setInsertionPointAfter(constant);
  return b.create<ConstantOp>(constant.getLoc(), outType,
                              makeConstantAttr(outType, out, name));
}

/// The constant weight of conv `conv` (input 1), or null, and what
/// `packed` holds for it already (null when nothing).
std::pair<ConstantOp, Value> convWeight(linalg::GenericOp conv,
                                        DenseMap<Operation *, Value> &packed) {
  ConstantOp constant = boundConstant(conv.getDpsInputs()[1]);
  return {constant, constant ? packed.lookup(constant) : Value()};
}

/// The constant weight of Winograd conv `conv` transformed for it, or null
/// when the conv does not qualify. `packed` caches one per constant.
Value winogradU(linalg::GenericOp conv, DenseMap<Operation *, Value> &packed) {
  if (!matchWinograd(conv))
    return {};
  auto [constant, done] = convWeight(conv, packed);
  if (!constant || done)
    return done;
  auto type = cast<RankedTensorType>(constant.getType());
  int64_t m = type.getDimSize(0), c = type.getDimSize(1);
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  if (bytes.size() != size_t(m * c * 9) * sizeof(float))
    return {};
  std::vector<char> out(size_t(16 * m * c) * sizeof(float));
  auto *from = reinterpret_cast<const float *>(bytes.data());
  auto *to = reinterpret_cast<float *>(out.data());
  const double g[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  for (int64_t i = 0; i < m * c; ++i) {
    const float *w = from + i * 9;
    double t[4][3]; // G w
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 3; ++j)
        t[r][j] = g[r][0] * w[j] + g[r][1] * w[3 + j] + g[r][2] * w[6 + j];
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j)
        to[(r * 4 + j) * m * c + i] =
            float(t[r][0] * g[j][0] + t[r][1] * g[j][1] + t[r][2] * g[j][2]);
  }
  Value result = derivedConstant(constant, {16, m, c}, out, "winograd");
  packed[constant] = result;
  return result;
}

/// The constant weight of grouped conv `conv` (matchRowsConv) packed for
/// kiln_conv_flat (kGroupedPanels), or null when the conv does not qualify.
/// `packed` caches one per constant.
Value groupedPanels(linalg::GenericOp conv,
                    DenseMap<Operation *, Value> &packed) {
  std::optional<DirectConv> match = matchRowsConv(conv);
  if (!match || match->groups < 2)
    return {};
  auto [constant, done] = convWeight(conv, packed);
  if (!constant || done)
    return done;
  auto type = cast<RankedTensorType>(constant.getType());
  int64_t m = type.getDimSize(0), groups = match->groups, mg = m / groups,
          taps = type.getNumElements() / m;
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  if (bytes.size() != size_t(m * taps) * sizeof(float))
    return {};
  const int64_t blocks = (mg + kPackedColumns - 1) / kPackedColumns;
  std::vector<char> out(
      size_t(groups * blocks * taps * kPackedColumns) * sizeof(float), 0);
  auto *from = reinterpret_cast<const float *>(bytes.data());
  auto *to = reinterpret_cast<float *>(out.data());
  for (int64_t o = 0; o < m; ++o) {
    int64_t g = o / mg, block = o % mg / kPackedColumns,
            lane = o % mg % kPackedColumns;
    for (int64_t t = 0; t < taps; ++t)
      to[((g * blocks + block) * taps + t) * kPackedColumns + lane] =
          from[o * taps + t];
  }
  Value result = derivedConstant(
      constant, {groups, blocks, taps, kPackedColumns}, out, "grouped");
  packed[constant] = result;
  return result;
}

/// The constant B of `gemm` packed for it, or null when the
/// GEMM does not qualify. `packed` caches one packing per constant.
Value packedB(linalg::GenericOp gemm, DenseMap<Operation *, Value> &packed) {
  std::optional<GemmMatch> g = matchGemm(gemm);
  if (!g || !g->element.isF32() || g->transA || g->transB || g->batchedB ||
      g->sharedLeadA || g->sharedLeadB)
    return {};
  ConstantOp constant = boundConstant(gemm.getDpsInputs()[1 - g->a]);
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
  Value result =
      derivedConstant(constant, {panels, k, kPackedColumns}, out, "packed");
  packed[constant] = result;
  return result;
}

struct PackWeights : kiln::impl::KilnPackWeightsBase<PackWeights> {
  void runOnOperation() override {
    DenseMap<Operation *, Value> packed, transformed, grouped;
    getOperation().walk([&](KernelOp kernel) {
      if (!kernel.getNumResults() ||
          !runsCppKernels(getDevice(kernel.getResult(0).getType())))
        return;
      Block &body = kernel.getBody().front();
      for (auto op : llvm::to_vector(body.getOps<linalg::GenericOp>())) {
        StringRef attr = kPackedB;
        Value b = packedB(op, packed);
        if (!b) {
          attr = kWinogradU;
          b = winogradU(op, transformed);
        }
        if (!b) {
          attr = kGroupedPanels;
          b = groupedPanels(op, grouped);
        }
        if (!b)
          continue;
        // One input per packed constant, however many ops read it.
        auto operands = kernel->getOperands();
        unsigned input = llvm::find(operands, b) - operands.begin();
        if (input == operands.size()) {
          kernel->insertOperands(input, b);
          body.addArgument(withDevice(b.getType(), nullptr), b.getLoc());
        }
        op->setAttr(
            attr, IntegerAttr::get(IntegerType::get(&getContext(), 64), input));
      }
    });
  }
};
} // namespace
