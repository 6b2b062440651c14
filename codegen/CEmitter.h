//===- CEmitter.h - the C-style base of the CPU and CUDA emitters -*- C++
//-*-===//
//
// One kiln.kernel (lowered to linalg/tensor/arith/math on plain tensors)
// becomes C-family source. A dynamic dim is read at run time: a kernel input's
// from the `dims` array (every argument's dims, inputs then outputs), any
// other tensor's from the index value its tensor.empty was sized with.
// Everything both backends share lives here: the spelling of scalar types,
// literals, affine index expressions and every scalar op, the buffer of each
// tensor (destination-passing chains write straight into the output), the
// operand reads and the yield write of a linalg.generic body. A backend says
// how loops run (CppEmitter.cpp: nested loops in one function; CudaEmitter.cpp:
// grid-stride loops in one
// __global__ function per linalg op) and how memory is named.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CEMITTER_H
#define KILN_CODEGEN_CEMITTER_H

#include "ir/KilnDialect.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kiln {

/// The small, data-like differences between the C dialects.
struct CStyle {
  const char *mathPrefix; // "std::" (C++) or "" (CUDA's overloads)
  const char *restrict;   // "__restrict" or "__restrict__"
  const char *half;       // the float16 type
  /// f32 exp, erf and tanh, when the backend has its own vectorizable ones
  /// (else the math library's, by mathPrefix).
  const char *expF32, *erfF32, *tanhF32;
};

extern const CStyle kCppStyle, kCudaStyle;

/// "parallel, reduction, ...": a generic's iterators, for comments.
std::string iteratorList(mlir::linalg::GenericOp op);

/// "bf16", "f8e4m3fn", ...: the name of a narrow float (isNarrowFloat) in
/// the kernels' conversion functions kiln_decode_NAME / kiln_encode_NAME.
std::string narrowFloatName(mlir::Type t);
/// Those conversion functions, as C source, each declared `qualifier`
/// ("inline", "__device__ inline").
std::string narrowFloatFunctions(const std::string &qualifier,
                                 const CStyle &style);

/// The spelling of a scalar element type, or "" when unsupported.
std::string cTypeName(mlir::Type element, const CStyle &style);

/// Where argument `arg` (inputs, then outputs) starts in `kernel`'s dims
/// array: the ranks of the arguments before it.
int64_t dimsOffset(KernelOp kernel, unsigned arg);

class CEmitter {
public:
  CEmitter(KernelOp kernel, const CStyle &style)
      : kernel(kernel), style(style) {}
  virtual ~CEmitter() = default;

protected:
  /// Emits the kernel body's ops in order through the hooks below, after
  /// naming the inputs (`inputs[i]`) and outputs (`outputs[j]`).
  mlir::LogicalResult emitOps(llvm::ArrayRef<std::string> inputs,
                              llvm::ArrayRef<std::string> outputs);

  // --- What a backend provides. ---
  /// Declares memory for `type` named `name` (in the declarations); `count`
  /// is its number of elements, a C expression.
  virtual void declareBuffer(mlir::RankedTensorType type,
                             const std::string &name,
                             const std::string &count) = 0;
  /// `out[i] = value` for every element of `type` (`value` names a scalar;
  /// `count` as above).
  virtual void emitFill(mlir::RankedTensorType type, const std::string &count,
                        const std::string &out, const std::string &value) = 0;
  /// `to[i] = from[i]` for every element of `type`.
  virtual void emitCopy(const std::string &to, const std::string &from,
                        mlir::RankedTensorType type,
                        const std::string &count) = 0;
  /// A block copy (a tensor.insert_slice): for each index of the loops
  /// `outer` (their trip counts, outermost first), `count` contiguous
  /// elements from `from` + the sum of index * fromStrides to `to` +
  /// `offset` + the sum of index * toStrides. All are C expressions;
  /// `source` is the type of what is copied.
  struct SliceCopy {
    std::string to, from, offset, count;
    llvm::SmallVector<std::string> outer, toStrides, fromStrides;
    mlir::RankedTensorType source;
  };
  virtual void emitSliceCopy(const SliceCopy &copy) = 0;
  /// Loops of `op` around emitGenericBody().
  virtual mlir::LogicalResult emitGenericLoops(mlir::linalg::GenericOp op) = 0;
  /// Whether `fill` is left to its user (which then calls emitFillOp() only
  /// where it needs the filled memory).
  virtual bool defersFill(mlir::linalg::FillOp fill) { return false; }
  /// Whether `op` is emitted inside another op's loops (by
  /// emitGenericLoops), not on its own.
  virtual bool absorbed(mlir::Operation *op) { return false; }
  /// Called after each op of the body in turn (absorbed ones too).
  virtual void emitted(mlir::Operation &op) {}
  /// Where declarations (buffers, scalars outside loops) go.
  virtual llvm::raw_ostream &decls() = 0;
  /// Where statements go.
  virtual llvm::raw_ostream &body() = 0;
  /// Like declareBuffer, but `name` is to point at the buffer `other`
  /// whenever `same` (a C condition on the dims) holds at run time: an
  /// elementwise op's input that its output overwrites when their dims
  /// agree, and a dim of 1 does not broadcast. By default `name` gets its
  /// own memory always.
  virtual void declareBufferUnless(mlir::RankedTensorType type,
                                   const std::string &name,
                                   const std::string &count,
                                   const std::string &same,
                                   const std::string &other) {
    declareBuffer(type, name, count);
  }

  // --- Shared pieces for the hooks. ---
  std::string typeName(mlir::Type element) const {
    return cTypeName(element, style);
  }
  std::string fresh(llvm::StringRef prefix) {
    return (prefix + llvm::Twine(counter++)).str();
  }
  /// The pointer expression holding `tensor`, declared on first use.
  std::string bufferFor(mlir::Value tensor);
  /// The name of `tensor`'s buffer if it has one yet, else "".
  std::string namedBuffer(mlir::Value tensor) const {
    return buffers.lookup(tensor);
  }
  /// The tensors whose buffer is `name` so far.
  llvm::SmallVector<mlir::Value> buffersNamed(llvm::StringRef name) const {
    llvm::SmallVector<mlir::Value> named;
    for (auto &[tensor, buffer] : buffers)
      if (buffer == name)
        named.push_back(tensor);
    return named;
  }
  /// Names `tensor`'s buffer without declaring it: the caller declares it
  /// where it belongs (a plane buffer inside the loops).
  std::string nameBuffer(mlir::Value tensor);
  /// Tensors held one plane at a time (a pad run plane by plane): index()
  /// leaves out their first N indices, numElements() their first N dims.
  llvm::DenseMap<mlir::Value, unsigned> planeDims;
  /// Plane buffers whose last dim is stored split by a stride S: the
  /// elements at positions q, q + S, q + 2S, ... together, q = 0..S-1 (as
  /// [S][ceil(W / S)]), so that a window of stride S reads each tap's row
  /// contiguously. index() and numElements() follow.
  llvm::DenseMap<mlir::Value, int64_t> planeSplits;
  /// Plane buffers whose rows are this wide, wider than the tensor's last
  /// dim (a window's outputs computed at its input plane's row width).
  llvm::DenseMap<mlir::Value, int64_t> planeRows;
  /// What index() calls loop dim i, when set (default "di").
  llvm::SmallVector<std::string> dimNames;
  /// Points `tensor` at the buffer `name` (the caller restores it).
  void bindBuffer(mlir::Value tensor, const std::string &name) {
    buffers[tensor] = name;
  }
  /// Undoes bindBuffer: `tensor` gets its buffer on next use again.
  void unbindBuffer(mlir::Value tensor) { buffers.erase(tensor); }
  /// Whether `tensor` has no buffer yet and shares none: not an argument or
  /// result of the kernel, not computed in another's buffer, none in its.
  bool ownsNoBuffer(mlir::Value tensor) const;
  /// The row-major offset of `map`'s result in `tensor`; with `broadcast`
  /// (reads of inputs), a dynamic dim that is 1 at run time reads index 0.
  /// How emitGenericBody reads these inputs instead of by their maps (an
  /// epilogue reading the element its window just computed).
  llvm::DenseMap<mlir::Value, std::string> reads;
  /// The C expression or name of a scalar already emitted.
  std::string scalarOf(mlir::Value v) const { return scalars.lookup(v); }
  std::string index(mlir::Value tensor, mlir::AffineMap map,
                    bool broadcast = false);
  /// The size of dim `i` of `tensor` as a C expression: a number when
  /// static, else `dims[k]` for a kernel argument's dim or the scalar its
  /// tensor.empty was sized with; "" when unknown.
  std::string dimExpr(mlir::Value tensor, int64_t i);
  /// The sizes of `tensor` as its buffer stores it (planeDims, planeRows,
  /// planeSplits applied), C expressions.
  llvm::SmallVector<std::string> storedSizes(mlir::Value tensor);
  /// The number of elements of `tensor`, a C expression.
  std::string numElements(mlir::Value tensor);
  /// The trip count of loop `d` of `op`, a C expression ("" when unknown).
  std::string loopRange(mlir::linalg::GenericOp op, unsigned d);
  /// The body of the kernel's dims function: computes the dynamic dims of
  /// the outputs into `dims` from those of the inputs (and the data of the
  /// inputs in kernelDimsData, from `inputs`), returning an error message
  /// when the inputs' dims disagree where the kernel needs them equal (e.g.
  /// two operands of an add), else nullptr. A message names its node as
  /// {node:K}, K its place in `nodes` (a kernel's dims function can then
  /// serve every kernel of the same code: the runtime puts the name of the
  /// step's own node in).
  mlir::LogicalResult emitDimsBody(std::vector<std::string> &nodes);
  /// The fill's emitFill().
  void emitFillOp(mlir::linalg::FillOp fill);
  /// The insert's emitSliceCopy(), into its dest's buffer (copied first
  /// where that buffer is not the result's).
  mlir::LogicalResult emitInsertSlice(mlir::tensor::InsertSliceOp insert);
  /// Declares the buffers the generic's body reads, before its loops.
  void declareOperands(mlir::linalg::GenericOp op);
  /// The generic's body at loop variables d0, d1, ...: operand reads, scalar
  /// ops, and the yield. With `accumulator` set, the output operand is read
  /// from and written to that variable instead of memory.
  mlir::LogicalResult emitGenericBody(mlir::linalg::GenericOp op,
                                      const std::string &indent,
                                      const std::string &accumulator = "");
  mlir::LogicalResult emitScalar(mlir::Operation *op, llvm::raw_ostream &os,
                                 const std::string &indent);

  /// Gives `result` its init's contents: `init`'s buffer itself where it
  /// may be updated in place, else a copy (nothing for tensor.empty).
  void copyInit(mlir::Value init, mlir::Value result);

  KernelOp kernel;
  const CStyle &style;

private:
  /// The condition under which an output's buffer is overwritten in place
  /// from a tensor whose dims may differ (see declareBufferUnless).
  std::string sameDimsAtRunTime(mlir::Value input, mlir::Value output);

  unsigned counter = 0;
  llvm::DenseMap<mlir::Value, std::string> buffers; // tensor -> pointer
  /// Tensors that share an output's buffer only when their dims turn out
  /// the same at run time: (the output's buffer, the condition).
  llvm::DenseMap<mlir::Value, std::pair<std::string, std::string>> sharesWhen;
  llvm::DenseMap<mlir::Value, std::string> scalars; // scalar -> expression
  /// Local tensors computed in the buffer of another, which overwrites
  /// them in place (emitOps decides before the first op).
  llvm::DenseMap<mlir::Value, mlir::Value> sharedWith;
  /// The last of `tensor`'s chain in sharedWith.
  mlir::Value bufferOwner(mlir::Value tensor) const {
    while (mlir::Value owner = sharedWith.lookup(tensor))
      tensor = owner;
    return tensor;
  }
};

/// The inputs (block argument numbers) whose data the kernel's dynamic sizes
/// (and its run-time checks) are computed from (a shape or axes given as a
/// tensor).
llvm::SmallVector<unsigned> kernelDimsData(KernelOp kernel);

/// Whether the kernel has a dims function: for its dynamic sizes, or for
/// its run-time checks (cf.assert: sizes that must agree, indices that must
/// have somewhere to point). A CPU kernel's dims function runs before each
/// launch; a cuda kernel (static shapes) has none, and its checks are left
/// out.
bool needsDimsFunction(KernelOp kernel);

/// Fails with a diagnostic at `kernel` when a value's element type has no
/// spelling in `style`; `backend` names it ("C++", "CUDA").
mlir::LogicalResult checkElementTypes(KernelOp kernel, const CStyle &style,
                                      llvm::StringRef backend);

/// What CEmitter.cpp and CScalar.cpp share.
namespace cdetail {
/// `attr` as a C literal ("" when it has none).
std::string literal(mlir::Attribute attr);
/// `e` in C, dim i spelled dims[i] (loop variables d0, d1, ... by default)
/// and symbol j spelled syms[j].
std::string cAffine(mlir::AffineExpr e, llvm::ArrayRef<std::string> dims = {},
                    llvm::ArrayRef<std::string> syms = {});
/// The row-major offset of `indices` in C, dim i's size spelled dimSize(i).
std::string rowMajor(llvm::ArrayRef<std::string> indices,
                     llvm::function_ref<std::string(int64_t)> dimSize);
} // namespace cdetail

} // namespace kiln

#endif // KILN_CODEGEN_CEMITTER_H
