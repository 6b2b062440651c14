//===- KilnDialect.h - the kiln dialect ---------------------------*- C++
//-*-===//
//
// Public header of the IR: the dialect, the #kiln.device attribute, the op
// traits (SameDevice, Elementwise) and the ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/DeviceKinds.h"

#include "ir/KilnDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.h.inc"

namespace kiln {

/// The largest cuda/sim ordinal (the runtime's limit too).
inline constexpr int64_t kMaxDeviceOrdinal = 1 << 20;

/// In kiln.reshape's shape: the result dim is the input's dim at the same
/// index (ONNX Reshape's 0, which kiln.reshape reads as a size).
inline constexpr int64_t kReshapeCopy = -2;

/// A unit attribute on a kernel-level tensor.extract whose indices may lie
/// outside the tensor: it is only read where the arith.select using it
/// picks it (a pad's interior), and the kernel emitters read it only there.
inline constexpr llvm::StringLiteral kGuardedRead = "kiln.guarded_read";

/// A unit attribute on a kernel-level arith.truncf to a float8 type: values
/// beyond its range become Inf or NaN instead of its largest finite value
/// (ONNX Cast's saturate=0).
inline constexpr llvm::StringLiteral kNoSaturate = "kiln.no_saturate";

/// A string attribute on the kernel-level generic of a conv: how the
/// lowering chose to run it, which the code generators follow instead of
/// deriving it again from sizes. "gemm": a GEMM over im2col windows or the
/// input itself; "winograd": a direct stride-1 3x3 window for Winograd
/// F(2x2, 3x3); "rows": a direct window of a stem, run by output rows;
/// "library": a direct window for a vendor library (cuDNN); "direct": loops.
inline constexpr llvm::StringLiteral kConvKind = "kiln.conv";
/// Beside kConvKind "library": how the kernel's CPU twin (the generated C++
/// every kernel also gets, run where the device is absent) runs the same
/// window: "rows" or "direct".
inline constexpr llvm::StringLiteral kConvTwinKind = "kiln.conv_twin";

/// Whether `type` is a float kept in memory as bits and computed on as f32
/// (bfloat16, the float8 types): the kernel level converts it with
/// arith.extf/truncf around every arithmetic op.
bool isNarrowFloat(mlir::Type type);

/// The device a tensor type carries, or null when it carries none.
DeviceAttr getDevice(mlir::Type type);
/// Bytes of a tensor value with a static shape (i1 as one byte); 0 when
/// the shape is dynamic.
uint64_t tensorBytes(mlir::Value value);

/// Whether a tensor operand or result of `op` has a dynamic dim.
bool hasDynamicShape(mlir::Operation *op);
/// `type` with its encoding replaced by `device` (null removes it).
mlir::RankedTensorType withDevice(mlir::Type type, mlir::Attribute device);

namespace OpTrait {
mlir::LogicalResult verifySameDevice(mlir::Operation *op);

/// Every tensor operand and result is on the same #kiln.device. Only
/// kiln.copy lacks this trait, so only it can move data between devices.
template <typename ConcreteType>
class SameDevice : public mlir::OpTrait::TraitBase<ConcreteType, SameDevice> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifySameDevice(op);
  }
};

/// Applies one scalar function at every index (with broadcasting); the
/// fusion pass groups chains of these into one kernel.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {
};
} // namespace OpTrait

bool isElementwise(mlir::Operation *op);

/// Whether `type` (a scalar or the element of a shaped type) is an unsigned
/// integer (ONNX's uint8..uint64: `ui8`..`ui64`).
bool isUnsignedInteger(mlir::Type type);
/// `type` with every signed or unsigned integer (scalar, or the element of a
/// ranked tensor) replaced by its signless twin: the kernel level is signless
/// like arith, signedness lives in the choice of ops (docs/architecture.md).
/// Sub-byte integers (ONNX's int2/int4/uint2/uint4) become i8: they are held
/// one value a byte, sign- or zero-extended.
mlir::Type toSignless(mlir::Type type);

} // namespace kiln

#define GET_OP_CLASSES
#include "ir/KilnOps.h.inc"

namespace kiln {
/// The kind of `device` (ir/DeviceKinds.h); null for no device.
const DeviceKind *kindOf(DeviceAttr device);
/// Whether kernels on `device` run as generated C++ (cpu, and sim, which
/// must match cpu bit for bit); false for cuda and for no device.
bool runsCppKernels(DeviceAttr device);
/// The kiln.constant that `v`, an argument of a kiln.kernel's body, is
/// bound to; null for anything else.
ConstantOp boundConstant(mlir::Value v);

/// The result types `op` infers from its operands and attributes (kiln.copy:
/// its input's shape on its result's device). Fails, with a diagnostic at the
/// op, when the operands do not fit the op.
mlir::LogicalResult inferResultTypes(mlir::Operation *op,
                                     llvm::SmallVectorImpl<mlir::Type> &types);

/// Parses "NAME=D0xD1x..." ("NAME=scalar" for rank 0; "?" for a dim sized
/// at run time), as kilnc's
/// --input-shape takes it.
mlir::LogicalResult parseShapeBinding(llvm::StringRef text, std::string &name,
                                      llvm::SmallVectorImpl<int64_t> &dims);

/// The location of an imported ONNX node: its name, its op type, the file.
mlir::Location makeNodeLoc(mlir::MLIRContext *ctx, llvm::StringRef name,
                           llvm::StringRef opType, mlir::Location file);
/// The ONNX node names a location carries, comma-separated, each once.
std::string nodeNames(mlir::Location loc);
/// The ONNX op type recorded in an imported op's location ("" when none).
std::string onnxOpType(mlir::Location loc);

/// The raw little-endian bytes of a constant (splats expanded).
std::vector<char> getConstantBytes(mlir::ElementsAttr attr);
/// A constant attribute for `bytes` of `type`: a dense resource blob named
/// `name` when large, dense elements when small.
mlir::ElementsAttr makeConstantAttr(mlir::RankedTensorType type,
                                    llvm::ArrayRef<char> bytes,
                                    llvm::StringRef name);
} // namespace kiln

#endif // KILN_IR_KILNDIALECT_H
