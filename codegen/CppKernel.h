//===- CppKernel.h - the C++ kernel emitter, inside codegen -----*- C++ -*-===//
//
// Private to codegen: the emitter class behind emitKernelCpp(), whose loops
// live in CppEmitter.cpp, its library calls (GEMMs, with their epilogues on
// tiles, and Winograd convs) in CppGemm.cpp, and whose windows (small conv
// and pool windows: taps innermost, planes made per thread, split or
// flattened) in CppWindow.cpp (their pads in CppPad.cpp, 3x3 max pools
// through the prelude in CppPool.cpp); kernels run image by image in
// CppImages.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPPKERNEL_H
#define KILN_CODEGEN_CPPKERNEL_H

#include "codegen/CEmitter.h"
#include "codegen/Gemm.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

namespace kiln::cpp {

/// Loops with fewer iterations than this run on one thread.
inline constexpr int64_t kParallelWork = 32768;

/// `for (int64_t dD = 0; dD < SIZE; ++dD)`, the header of loop dim `d`.
inline std::string forLoop(unsigned d, llvm::StringRef size) {
  return llvm::formatv("for (int64_t d{0} = 0; d{0} < {1}; ++d{0})", d, size);
}

/// The f32 GEMM (Gemm.h) `op` is, if any.
std::optional<GemmMatch> libraryGemm(mlir::linalg::GenericOp op);

/// The number of leading loops of `op` when they are parallel, index its
/// output in order (d0, d1, ...), and are followed only by reductions that
/// unroll (kUnrolledTaps); else 0 (CppWindow.cpp).
unsigned unrolledWindow(mlir::linalg::GenericOp op);
/// The fill or generic that only initialises window `op`, computed per
/// element inside its loops.
mlir::Operation *windowPrologue(mlir::linalg::GenericOp op);
/// The elementwise generic applied to each element of window `op`,
/// computed inside the window's loops.
mlir::linalg::GenericOp windowEpilogue(mlir::linalg::GenericOp op);
/// The stride by which window `op` (with `p` parallel loops) steps through
/// `input`'s last dim when its plane is to be stored split; else 0.
int64_t planeSplit(mlir::linalg::GenericOp op, mlir::OpOperand *input,
                   unsigned p);
/// Whether window `op` runs its rows flattened over the plane `producer`
/// makes per (image, channel).
bool flatWindow(mlir::linalg::GenericOp op, mlir::linalg::GenericOp producer,
                unsigned planes, mlir::Operation *prologue,
                mlir::linalg::GenericOp epilogue);

/// A constant pad: lowering::padTensor's generic, which reads `input` at
/// each index less `begin` and is `value` outside it (CppPad.cpp).
struct PadMatch {
  mlir::Value input;
  llvm::SmallVector<int64_t> begin;
  mlir::Value value;
};
std::optional<PadMatch> matchPad(mlir::linalg::GenericOp op);
/// The pad `op` is when it pads only the planes of a 4-D tensor (its batch
/// and channels as they are), with any value.
std::optional<PadMatch> planePad(mlir::linalg::GenericOp op);
/// What a prelude window over 4-D planes (kiln_dwconv3x3, kiln_maxpool3x3)
/// reads through its input 0: a whole tensor, with the rows and columns of
/// a pad before it and the pad's value (null without a pad), and `sizes`,
/// the template arguments <S, H, W, HO, WO, Top, Left> (CppPool.cpp).
struct PlaneSource {
  mlir::Value input, padValue;
  int64_t top = 0, left = 0;
  std::string sizes;
};
/// The generic that pads the input of stem conv `conv` (matchRowsConv) with
/// zeros along its planes alone, and nothing else reads: kiln_conv_rows
/// reads the unpadded input and writes the zeros as it copies it
/// (CppGemm.cpp); null if there is none.
mlir::linalg::GenericOp rowsConvPad(mlir::linalg::GenericOp conv);

/// Whether `op` is all-parallel over `p` loops, writes its output in loop
/// order, and does not read its init: elementwise over another op's loops
/// (a window's, CppWindow.cpp; a GEMM's tiles, CppGemm.cpp).
bool fitsWindowLoops(mlir::linalg::GenericOp op, unsigned p);

/// The first of the trailing loops of elementwise `op`, from `from` on, that
/// run as one loop (contiguous in every operand), or its number of loops.
/// An elementwise generic's rows shorter than kFlatRowWidth run so with the
/// dim before them.
unsigned flatFrom(mlir::linalg::GenericOp op, unsigned from);
inline constexpr int64_t kFlatRowWidth = 16;

/// The OpenMP reduction identifier that vectorizes reduction `op`'s
/// trailing loops (omp simd), or "" (CppRows.cpp).
std::string simdReduction(mlir::linalg::GenericOp op);

/// A kernel runs image by image only when the largest tensor it makes or
/// reads is larger than this for the whole batch (a quarter of the L3 cache
/// of the machines measured): smaller ones stay in cache between passes.
inline constexpr int64_t kImageLoopBytes = 8 << 20;

/// The bytes of one image of the largest batched tensor (its leading dim
/// dynamic) `kernel` reads or makes, when it can run its body once per image
/// (index of that dim) and gains from it: it has several passes, each works
/// on every image on its own, and one image's loops are still big enough to
/// share out among threads; else 0 (CppImages.cpp).
int64_t perImageBytes(KernelOp kernel);
/// `extern "C" void SYMBOL(void **buffers)`, which calls `imageSymbol` (the
/// kernel's body) on each image in turn with the leading dims set to 1 (on
/// groups of images, when a GEMM of the kernel has them in its rows), when
/// the batch's `bytes` per image (perImageBytes) add up to more than
/// kImageLoopBytes; on the whole batch at once otherwise.
void emitImageLoop(KernelOp kernel, int64_t bytes, llvm::StringRef symbol,
                   llvm::StringRef imageSymbol, llvm::raw_ostream &os);

class CppEmitter : public CEmitter {
public:
  CppEmitter(KernelOp kernel, llvm::raw_string_ostream &os)
      : CEmitter(kernel, kCppStyle), os(os), start(os.str().size()) {}
  mlir::LogicalResult emit(llvm::StringRef symbol);
  /// The dims function `symbol`_dims; `nodes` the nodes its messages name
  /// (emitDimsBody).
  mlir::LogicalResult emitDims(llvm::StringRef symbol,
                               std::vector<std::string> &nodes);
  /// Whether the kernel runs row by row (CppRows.cpp).
  bool runsRows() {
    planRows();
    return !rowOps.empty();
  }

private:
  llvm::raw_ostream &decls() override { return os; }
  llvm::raw_ostream &body() override { return os; }
  void declareBuffer(mlir::RankedTensorType type, const std::string &name,
                     const std::string &count) override {
    if (depth() == 1)
      topScratch.insert(name);
    std::string n =
        type.hasStaticShape()
            ? std::to_string(std::max<int64_t>(type.getNumElements(), 1))
            : "std::max<int64_t>(" + count + ", 1)";
    os << llvm::formatv(
        "  kiln_scratch {1}_owner(sizeof({0}) * {2});\n"
        "  {0} *__restrict {1} = static_cast<{0} *>({1}_owner.data);\n",
        typeName(type.getElementType()), name, n);
  }
  void declareBufferUnless(mlir::RankedTensorType type, const std::string &name,
                           const std::string &count, const std::string &same,
                           const std::string &other) override {
    // Not __restrict: it may alias `other`. Never released early (not in
    // topScratch).
    os << llvm::formatv(
        "  kiln_scratch {1}_owner(sizeof({0}) * ({2} ? 1 : "
        "std::max<int64_t>({3}, 1)));\n"
        "  {0} *{1} = {2} ? {4} : static_cast<{0} *>({1}_owner.data);\n",
        typeName(type.getElementType()), name, same, count, other);
  }
  void emitFill(mlir::RankedTensorType, const std::string &count,
                const std::string &out, const std::string &value) override {
    os << llvm::formatv(
        "  for (int64_t i = 0; i < {0}; ++i)\n    {1}[i] = {2};\n", count, out,
        value);
  }
  void emitCopy(const std::string &to, const std::string &from,
                mlir::RankedTensorType type,
                const std::string &count) override {
    os << llvm::formatv("  std::memcpy({0}, {1}, sizeof({2}) * {3});\n", to,
                        from, typeName(type.getElementType()), count);
  }
  void emitSliceCopy(const SliceCopy &copy) override;
  mlir::LogicalResult emitGenericLoops(mlir::linalg::GenericOp op) override;
  /// Names loop dims [from, rank - 1) "0" and the others dD in dimNames: the
  /// last dim's loop then runs over all of [from, rank) flattened
  /// (flatFrom); the caller clears dimNames after the body.
  void nameFlatDims(unsigned rank, unsigned from);
  /// The loops of `op` (and its library call), where it stands.
  mlir::LogicalResult emitLoops(mlir::linalg::GenericOp op);
  bool defersFill(mlir::linalg::FillOp fill) override;
  bool absorbed(mlir::Operation *op) override;
  bool emitGemmCall(mlir::linalg::GenericOp op);
  /// The elementwise generic run on each tile of GEMM `op` as it is
  /// computed (CppGemm.cpp), if any.
  mlir::linalg::GenericOp gemmEpilogue(mlir::linalg::GenericOp op);
  std::string emitTiledGemm(mlir::linalg::GenericOp op, const GemmMatch &g,
                            mlir::linalg::GenericOp epilogue,
                            const std::string &check, const std::string &args,
                            const std::string &m,
                            llvm::StringRef callee = "kiln_sgemm_tiles",
                            llvm::ArrayRef<mlir::Value> reads = {});
  /// Epilogues run tile by tile when the flag they map to is true at run
  /// time: their own loops run only when it is false.
  llvm::DenseMap<mlir::Operation *, std::string> tiledEpilogues;
  bool emitWinogradCall(mlir::linalg::GenericOp op);
  bool emitRowsConvCall(mlir::linalg::GenericOp op);
  bool emitDepthwiseCall(mlir::linalg::GenericOp op);
  bool emitMaxPoolCall(mlir::linalg::GenericOp op);
  /// `if (!kiln_transpose2d(...)) {` in front of the loops of a generic
  /// that swaps the last two dims (CppTranspose.cpp). True when emitted.
  bool emitTransposeCall(mlir::linalg::GenericOp op);
  std::optional<PlaneSource> planeSource(mlir::linalg::GenericOp op,
                                         int64_t stride);
  void emitParallelFor(mlir::linalg::GenericOp op, unsigned shared);
  mlir::LogicalResult emitWindowPrologue(mlir::linalg::GenericOp op,
                                         mlir::Operation *prologue,
                                         const std::string &indent,
                                         const std::string &acc);
  mlir::LogicalResult emitWindowEpilogue(mlir::linalg::GenericOp op,
                                         mlir::linalg::GenericOp epilogue,
                                         const std::string &indent,
                                         const std::string &acc);
  mlir::linalg::GenericOp planeProducer(mlir::linalg::GenericOp op,
                                        unsigned &planes);
  void declarePlanes(mlir::Value plane);
  mlir::LogicalResult emitPlane(mlir::linalg::GenericOp producer,
                                unsigned planes, std::string indent);
  bool emitPadPlane(mlir::linalg::GenericOp producer, const PadMatch &pad,
                    unsigned planes, const std::string &name, int64_t split,
                    const std::string &indent);
  mlir::LogicalResult emitFlatWindow(mlir::linalg::GenericOp op,
                                     mlir::linalg::GenericOp producer,
                                     unsigned planes, mlir::Operation *prologue,
                                     mlir::linalg::GenericOp epilogue);

  /// The fills and generics of a kernel that runs row by row
  /// (CppRows.cpp), in order, or none; the last emits them all.
  llvm::SmallVector<mlir::Operation *> rowOps;
  void planRows();
  /// Whether `op` is emitted by emitRows, at the last of rowOps.
  bool inRows(mlir::Operation *op);
  mlir::LogicalResult emitRows();

  llvm::raw_string_ostream &os;

  // Scratch buffers handed back to the cache once read for the last time
  // (CppEmitter.cpp): the next buffer of about their size reuses their
  // memory, still in cache, as a chain of several kernels' bodies needs.
  /// Fills releaseAfter, before the first op is emitted.
  void planReleases();
  void emitted(mlir::Operation &op) override;
  /// The nesting depth of braces where the text now ends: 1 at the top of
  /// the kernel function.
  int depth();
  bool releasesPlanned = false;
  size_t start, scanned = 0;
  int braces = 0;
  /// Buffers declared (declareBuffer) at the top of the function: the ones
  /// that may be released.
  llvm::StringSet<> topScratch;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value>>
      releaseAfter;
  /// Where each op of the body is, and after which op each tensor is read
  /// for the last time (~0u: never, for rows and what the kernel yields).
  llvm::DenseMap<mlir::Operation *, unsigned> positionOf;
  llvm::DenseMap<mlir::Value, unsigned> doneAt;
};

} // namespace kiln::cpp

#endif // KILN_CODEGEN_CPPKERNEL_H
