//===- KernelShapes.h - how lowering shapes windows for the emitters ------===//
//
// The sizes at which kiln-lower-kernels shapes a window's generic for one
// of the C++ emitter's ways of running it (taps innermost, a plane split by
// its stride, a conv by output rows). The emitter's loops over such windows
// use the same constants, read from here (codegen/CppWindow.cpp); which
// kernel a conv runs as the lowering names on its generic instead
// (kConvKind, ir/KilnDialect.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_LOWERING_KERNELSHAPES_H
#define KILN_PASSES_LOWERING_KERNELSHAPES_H

#include <cstdint>

namespace kiln {

/// Trailing reductions of at most this many static iterations (a small conv
/// window's taps) unroll into their loop body: the lowering puts such taps
/// innermost, and the C++ emitter then vectorizes the loop around them.
inline constexpr int64_t kUnrolledTaps = 32;

/// A depthwise conv window on the CPU of at most this many taps (7x7, a
/// ConvNeXt's) loops them innermost too: the C++ kernel runs it with its
/// channels innermost (kiln_dwconv), with its init and epilogue per element
/// as for windows of kUnrolledTaps.
inline constexpr int64_t kDepthwiseTaps = 49;

/// A window with such taps whose innermost output dim has a static stride
/// S > 1 in its input and at least this many outputs reads a padded plane
/// that the C++ emitter stores split by S, so that each tap's row is
/// contiguous (a narrower row gains less than the copy costs). Max pools
/// that qualify put their taps innermost too.
inline constexpr int64_t kSplitPlaneWidth = 24;

/// A CPU conv over at most this many input channels (a network's stem: RGB
/// images), stride 1 or 2, a window of at least kRowsConvMinTaps taps and
/// static output planes at least kRowsConvMinWidth wide, stays a direct
/// window that the C++ kernel runs by output rows (kiln.conv "rows"), with
/// no im2col: resnet18's 7x7 stem took 1.03-1.13 ms
/// against 1.15-1.21 (docs/performance-log.md, step 33), and mobilenet_v2's
/// 3x3 one, once the kernel ran all channels of a row in turn, 174 against
/// 218 us with its pad (step 35).
inline constexpr int64_t kRowsConvChannels = 4;
inline constexpr int64_t kRowsConvMinTaps = 9;
inline constexpr int64_t kRowsConvMinWidth = 16;
/// Whether a conv of these sizes qualifies.
inline bool rowsConvSizes(int64_t channels, int64_t kh, int64_t kw,
                          int64_t outWidth) {
  return channels <= kRowsConvChannels && kh * kw >= kRowsConvMinTaps &&
         outWidth >= kRowsConvMinWidth;
}

/// A CPU conv in groups of several input and output channels, each output
/// summing at most this many taps (a group's input channels x its window),
/// stride 1 or 2, runs so too, by flattened output planes (kiln_conv_flat):
/// the im2col GEMMs of such groups are too small for the library (regnet's
/// 16 channels per group at 7x7 to 56x56 ran 1.4-5x faster so in a harness
/// on 2 AVX-512 cores, resnext50's 4 to 32 1.8-6x; docs/performance-log.md,
/// step 65). Past it, the weights of a block of channels leave the caches
/// and the GEMM wins (a dense 512-channel 3x3 conv at 7x7 ran 0.34x).
inline constexpr int64_t kGroupedRowsMaxTaps = 576;
/// Whether a grouped conv of these sizes (per group) qualifies.
inline bool groupedRowsConvSizes(int64_t channels, int64_t outputs, int64_t kh,
                                 int64_t kw) {
  return channels > 1 && outputs > 1 &&
         channels * kh * kw <= kGroupedRowsMaxTaps;
}

} // namespace kiln

#endif // KILN_PASSES_LOWERING_KERNELSHAPES_H
