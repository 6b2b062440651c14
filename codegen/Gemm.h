//===- Gemm.h - contractions a GEMM library can run --------------*- C++
//-*-===//
//
// Both backends hand the contractions they can to a vendor GEMM (cuBLAS on
// cuda devices, oneDNN's sgemm on the CPU) and emit loops for the rest. This
// is the one place that decides which linalg.generic is such a GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_GEMM_H
#define KILN_CODEGEN_GEMM_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace kiln {

/// A generic computing C[batch, M, N] (+)= sum_K A[batch?, M, K] * B[batch?,
/// K, N] on dense row-major tensors, where each of batch, M, N and K is a
/// group of loop dims (flattened in memory order) and A and B may each be
/// stored transposed ([K, M] and [N, K]) or shared by every batch. Loop dims
/// of static size 1 belong to no group. An operand index d_i * S + d_j,
/// where S is d_j's static size, is the two dims [d_i, d_j] (a flattened
/// pair: a grouped conv's channel, group * channels per group + channel).
struct GemmMatch {
  mlir::Type element; // f32 or f64
  unsigned a = 0;     // the input that is A; the other is B
  llvm::SmallVector<unsigned> batch, m, n, k;
  bool transA = false, transB = false;
  bool batchedA = false, batchedB = false;
  // When nonzero, that operand is the same for the first `shared` batch
  // dims and a batch over the others (a grouped conv's weight: one matrix
  // per group, the same for every image; batch [image, group]). At most one
  // operand is so; batchedA/B are false for it.
  unsigned sharedLeadA = 0, sharedLeadB = 0;
  // Indexed by a loop dim of static size 1 that C is indexed by and the
  // other operand is not: an image of a batch of one (a conv's input at a
  // static batch of 1), not a matrix every image shares (a weight).
  bool perImageA = false, perImageB = false;
};

/// The GEMM `op` computes, or nullopt. The body must be exactly `acc + a * b`
/// (either operand order), K must not be empty, nor both M and N.
std::optional<GemmMatch> matchGemm(mlir::linalg::GenericOp op);

/// Whether `op` is a conv the lowering chose Winograd for (kConvKind
/// "winograd", ir/KilnDialect.h) in the form that takes: a direct f32 conv
/// with a 3x3 window, stride and dilation 1 and no groups, loops [n, m, c,
/// kh, kw, oh, ow] computing out[n, m, oh, ow] += in[n, c, oh + kh, ow + kw]
/// * w[m, c, kh, kw] (input 0 the padded input, input 1 the weight of static
/// shape). The CPU runs it as Winograd F(2x2, 3x3) with the weight
/// kiln-pack-weights transformed (kWinogradU).
bool matchWinograd(mlir::linalg::GenericOp op);

/// A depthwise conv's window and strides.
struct DepthwiseConv {
  int64_t kh, kw, sh, sw;
};
/// A depthwise f32 conv, stride 1 or 2 in each dim, no dilation, its taps
/// innermost: loops [n, ch, oh, ow, g, kh, kw] (g of size 1) computing
/// out[n, ch, oh, ow] += in[n, ch + g, oh * sh + kh, ow * sw + kw] * w[ch,
/// g, kh, kw] (input 0 the padded input, input 1 the weight of static shape
/// [C, 1, KH, KW]). Its window and strides when it is one. The CPU runs it
/// from the unpadded input (kiln_dwconv3x3 for a 3x3 window of equal
/// strides, kiln_dwconv otherwise).
std::optional<DepthwiseConv> matchDepthwise(mlir::linalg::GenericOp op);

/// A 3x3 max pool, stride 1 or 2 in both spatial dims: y[n][c][h][w] = max
/// over i, j < 3 of x[n][c][h * s + i][w * s + j], with a 3x3 window operand
/// (what pooling lowers to). Its stride when `op` is one.
std::optional<int64_t> matchMaxPool3x3(mlir::linalg::GenericOp op);

/// A direct conv's strides and groups.
struct DirectConv {
  int64_t sh, sw, groups;
};
/// A conv the lowering chose to run by output rows (kConvKind "rows", or the
/// CPU twin's kConvTwinKind: a stem, few input channels and a large window,
/// or groups of few channels) in the form that takes: a direct f32 conv,
/// stride 1 or 2 in each spatial dim, no dilation, loops [n, m, c, kh, kw,
/// oh, ow] computing out[n, m, oh, ow] += in[n, g * C + c, oh * sh + kh, ow
/// * sw + kw] * w[m, c, kh, kw], g = m floordiv (M / groups), with a static
/// weight and output planes (input 0 the padded input). Its strides and
/// groups when it is one. The CPU runs it by output rows (kiln_conv_rows):
/// im2col's K (c * kh * kw) is too small for a GEMM.
std::optional<DirectConv> matchRowsConv(mlir::linalg::GenericOp op);

/// The zero fill that only initialises `op` (its init, with no other use).
/// A library GEMM or conv overwrites it instead of accumulating, so only
/// generated fallback loops need the fill.
mlir::linalg::FillOp zeroFillOf(mlir::linalg::GenericOp op);

/// A conv the lowering left for a library (kConvKind "library") that cuDNN
/// can run: a direct f32 2-D conv of static shapes on an input already
/// padded, loops [n, m, c, kh, kw, oh, ow] computing out[n,
/// m, oh, ow] += in[n, g * cg + c, oh * sh + kh * dh, ow * sw + kw * dw] *
/// w[m, c, kh, kw], where g = m / (M / groups) and cg = w's dim 1 (input 0
/// the padded input, input 1 the weight), and the output's spatial sizes
/// are the ones the window fits: (in - d * (k - 1) - 1) / s + 1. Not a
/// depthwise conv (one input channel per group of several).
struct ConvMatch {
  int64_t strides[2] = {1, 1}, dilations[2] = {1, 1}, groups = 1;
};
std::optional<ConvMatch> matchLibraryConv(mlir::linalg::GenericOp op);

/// The elementwise op after a conv that cuDNN's fused conv (conv, bias,
/// optional residual and ReLU in one call) can do instead: the conv's only
/// user, all parallel over the conv's output with a fresh init, computing
/// max(conv + bias[c] (+ z), 0) for a per-channel `bias` and an optional
/// `z` shaped like the output, the adds in either order.
struct ConvEpilogue {
  mlir::linalg::GenericOp op;
  mlir::Value bias, z; // z may be null
};
std::optional<ConvEpilogue> matchConvEpilogue(mlir::linalg::GenericOp conv);

} // namespace kiln

#endif // KILN_CODEGEN_GEMM_H
