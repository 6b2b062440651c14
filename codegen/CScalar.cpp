//===- CScalar.cpp - the scalar ops of kernel bodies in C -----------------===//
//
// CEmitter::emitScalar: one C statement per arith/math op of a
// linalg.generic body, shared by the C++ and CUDA emitters (CStyle spells
// what differs). Integer arithmetic that wraps in MLIR runs on unsigned
// types; float16 and the narrow floats compute in f32.
//
//===----------------------------------------------------------------------===//

#include "codegen/CEmitter.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::cdetail;

LogicalResult CEmitter::emitScalar(Operation *op, raw_ostream &os,
                                   const std::string &indent) {
  auto math = [&](const char *name) {
    return std::string(style.mathPrefix) + name + "(";
  };
  auto v = [&](unsigned i) { return scalars.lookup(op->getOperand(i)); };
  // Operand i read as the unsigned C type of its width (bool stays bool):
  // the kernel level is signless, the unsigned arith ops say how to read it.
  auto u = [&](unsigned i) {
    Type t = op->getOperand(i).getType();
    if (t.isInteger(1))
      return v(i);
    return "static_cast<uint" + std::to_string(t.getIntOrFloatBitWidth()) +
           "_t>(" + v(i) + ")";
  };
  // A shift by the bit width or more is poison in arith: give 0, not UB.
  auto shiftLeft = [&]() {
    unsigned bits = op->getOperand(0).getType().getIntOrFloatBitWidth();
    return "(" + u(1) + " < " + std::to_string(bits) +
           "u ? static_cast<uint64_t>(" + u(0) + ") << " + u(1) + " : 0)";
  };
  auto shiftRight = [&](const std::string &value) {
    unsigned bits = op->getOperand(0).getType().getIntOrFloatBitWidth();
    return "(" + u(1) + " < " + std::to_string(bits) + "u ? " + value + " >> " +
           u(1) + " : 0)";
  };
  // Arguments of <cmath> functions: halves are widened to float (what numpy
  // does for float16 too), the result rounds back on assignment.
  auto m = [&](unsigned i) {
    return op->getOperand(i).getType().isF16()
               ? "static_cast<float>(" + v(i) + ")"
               : v(i);
  };
  // arith's integer add, sub and mul wrap; C's signed ones are undefined
  // on overflow (hashes of random draws, int32 accumulators, int64 data),
  // so 32- and 64-bit ones compute on the unsigned type. Narrower ones
  // are promoted to int and cannot overflow; index arithmetic stays signed.
  auto wrapping = [&](const char *sign) {
    Type t = op->getResult(0).getType();
    if (!t.isInteger() || t.getIntOrFloatBitWidth() < 32)
      return v(0) + sign + v(1);
    std::string bits = std::to_string(t.getIntOrFloatBitWidth());
    return "static_cast<int" + bits + "_t>(" + u(0) + sign + u(1) + ")";
  };
  std::string expr =
      llvm::TypeSwitch<Operation *, std::string>(op)
          .Case<arith::ConstantOp>(
              [&](auto c) { return literal(c.getValue()); })
          .Case<arith::AddFOp>([&](auto) { return v(0) + " + " + v(1); })
          .Case<arith::AddIOp>([&](auto) { return wrapping(" + "); })
          .Case<arith::SubFOp>([&](auto) { return v(0) + " - " + v(1); })
          .Case<arith::SubIOp>([&](auto) { return wrapping(" - "); })
          .Case<arith::MulFOp>([&](auto) { return v(0) + " * " + v(1); })
          .Case<arith::MulIOp>([&](auto) { return wrapping(" * "); })
          .Case<arith::DivFOp, arith::DivSIOp>(
              [&](auto) { return v(0) + " / " + v(1); })
          .Case<arith::RemSIOp>([&](auto) { return v(0) + " % " + v(1); })
          // Rounds toward -inf: C's quotient, less 1 when it was rounded up.
          .Case<arith::FloorDivSIOp>([&](auto) {
            return "(" + v(0) + " / " + v(1) + " - (" + v(0) + " % " + v(1) +
                   " != 0 && (" + v(0) + " < 0) != (" + v(1) + " < 0)))";
          })
          .Case<arith::DivUIOp>([&](auto) { return u(0) + " / " + u(1); })
          .Case<arith::RemUIOp>([&](auto) { return u(0) + " % " + u(1); })
          .Case<arith::ShLIOp>([&](auto) { return shiftLeft(); })
          .Case<arith::ShRUIOp>([&](auto) { return shiftRight(u(0)); })
          .Case<arith::ShRSIOp>([&](auto) { return shiftRight(v(0)); })
          .Case<arith::AndIOp>([&](auto) { return v(0) + " & " + v(1); })
          .Case<arith::OrIOp>([&](auto) { return v(0) + " | " + v(1); })
          .Case<arith::XOrIOp>([&](auto) { return v(0) + " ^ " + v(1); })
          .Case<arith::CmpIOp>([&](arith::CmpIOp c) -> std::string {
            using P = arith::CmpIPredicate;
            const char *cmp = nullptr;
            switch (c.getPredicate()) {
            case P::eq:
              cmp = "==";
              break;
            case P::ne:
              cmp = "!=";
              break;
            case P::slt:
              cmp = "<";
              break;
            case P::sle:
              cmp = "<=";
              break;
            case P::sgt:
              cmp = ">";
              break;
            case P::sge:
              cmp = ">=";
              break;
            case P::ult:
              return u(0) + " < " + u(1);
            case P::ule:
              return u(0) + " <= " + u(1);
            case P::ugt:
              return u(0) + " > " + u(1);
            case P::uge:
              return u(0) + " >= " + u(1);
            default:
              return "";
            }
            return v(0) + " " + cmp + " " + v(1);
          })
          .Case<arith::IndexCastOp>([&](Operation *c) {
            return "static_cast<" + typeName(c->getResult(0).getType()) + ">(" +
                   v(0) + ")";
          })
          .Case<tensor::ExtractOp>([&](tensor::ExtractOp e) {
            SmallVector<std::string> indices;
            for (Value i : e.getIndices())
              indices.push_back(scalars.lookup(i));
            return bufferFor(e.getTensor()) + "[" +
                   rowMajor(
                       indices,
                       [&](int64_t i) { return dimExpr(e.getTensor(), i); }) +
                   "]";
          })
          .Case<tensor::DimOp>([&](tensor::DimOp d) -> std::string {
            std::optional<int64_t> i = d.getConstantIndex();
            return i ? dimExpr(d.getSource(), *i) : "";
          })
          .Case<arith::NegFOp>([&](auto) { return "-" + v(0); })
          .Case<arith::MaximumFOp, arith::MaxSIOp>(
              [&](auto) { return "kiln_maximum(" + v(0) + ", " + v(1) + ")"; })
          .Case<arith::MinimumFOp, arith::MinSIOp>(
              [&](auto) { return "kiln_minimum(" + v(0) + ", " + v(1) + ")"; })
          .Case<arith::MaxUIOp>(
              [&](auto) { return "kiln_maximum(" + u(0) + ", " + u(1) + ")"; })
          .Case<arith::MinUIOp>(
              [&](auto) { return "kiln_minimum(" + u(0) + ", " + u(1) + ")"; })
          .Case<arith::MaxNumFOp>(
              [&](auto) { return math("fmax") + m(0) + ", " + m(1) + ")"; })
          .Case<arith::MinNumFOp>(
              [&](auto) { return math("fmin") + m(0) + ", " + m(1) + ")"; })
          .Case<arith::SelectOp>(
              [&](auto) { return v(0) + " ? " + v(1) + " : " + v(2); })
          .Case<arith::CmpFOp>([&](arith::CmpFOp c) -> std::string {
            using P = arith::CmpFPredicate;
            const char *cmp = nullptr;
            switch (c.getPredicate()) {
            case P::OEQ:
              cmp = "==";
              break;
            case P::UNE:
              cmp = "!=";
              break;
            case P::OLT:
              cmp = "<";
              break;
            case P::OLE:
              cmp = "<=";
              break;
            case P::OGT:
              cmp = ">";
              break;
            case P::OGE:
              cmp = ">=";
              break;
            default:
              return "";
            }
            return v(0) + " " + cmp + " " + v(1);
          })
          .Case<arith::ExtFOp, arith::TruncFOp>([&](Operation *c) {
            Type from = c->getOperand(0).getType(),
                 to = c->getResult(0).getType();
            if (!isNarrowFloat(from) && !isNarrowFloat(to))
              return "static_cast<" + typeName(to) + ">(" + v(0) + ")";
            // Narrow floats convert through double, exact for every source.
            std::string wide =
                isNarrowFloat(from)
                    ? "kiln_decode_" + narrowFloatName(from) + "(" + v(0) + ")"
                    : "static_cast<double>(" + v(0) + ")";
            if (!isNarrowFloat(to))
              return "static_cast<" + typeName(to) + ">(" + wide + ")";
            // Only float8 saturates (ONNX Cast); bfloat16 overflows to Inf.
            bool saturate = !isa<BFloat16Type>(to) && !c->hasAttr(kNoSaturate);
            return "kiln_encode_" + narrowFloatName(to) + "(" + wide + ", " +
                   (saturate ? "true" : "false") + ")";
          })
          .Case<arith::SIToFPOp, arith::FPToSIOp, arith::ExtSIOp,
                arith::TruncIOp>([&](Operation *c) {
            return "static_cast<" + typeName(c->getResult(0).getType()) + ">(" +
                   v(0) + ")";
          })
          .Case<arith::BitcastOp>([&](arith::BitcastOp c) {
            return "kiln_bitcast<" + typeName(c.getType()) + ">(" + v(0) + ")";
          })
          .Case<arith::ExtUIOp, arith::UIToFPOp>([&](Operation *c) {
            return "static_cast<" + typeName(c->getResult(0).getType()) + ">(" +
                   u(0) + ")";
          })
          .Case<arith::FPToUIOp>([&](arith::FPToUIOp c) {
            return "static_cast<uint" +
                   std::to_string(c.getType().getIntOrFloatBitWidth()) +
                   "_t>(" + v(0) + ")";
          })
          .Case<math::ErfOp>([&](auto) {
            if (style.erfF32 && op->getResultTypes()[0].isF32())
              return std::string(style.erfF32) + "(" + m(0) + ")";
            return math("erf") + m(0) + ")";
          })
          .Case<math::ExpOp>([&](auto) {
            if (style.expF32 && op->getResultTypes()[0].isF32())
              return std::string(style.expF32) + "(" + m(0) + ")";
            return math("exp") + m(0) + ")";
          })
          .Case<math::LogOp>([&](auto) { return math("log") + m(0) + ")"; })
          .Case<math::TanhOp>([&](auto) {
            if (style.tanhF32 && op->getResultTypes()[0].isF32())
              return std::string(style.tanhF32) + "(" + m(0) + ")";
            return math("tanh") + m(0) + ")";
          })
          .Case<math::SqrtOp>([&](auto) { return math("sqrt") + m(0) + ")"; })
          .Case<math::AbsFOp>([&](auto) { return math("fabs") + m(0) + ")"; })
          .Case<math::AbsIOp>([&](auto) {
            return "(" + v(0) + " < 0 ? -" + v(0) + " : " + v(0) + ")";
          })
          .Case<math::FloorOp>([&](auto) { return math("floor") + m(0) + ")"; })
          .Case<math::RoundEvenOp>(
              [&](auto) { return math("nearbyint") + m(0) + ")"; })
          .Case<arith::RemFOp>(
              [&](auto) { return math("fmod") + m(0) + ", " + m(1) + ")"; })
          .Case<math::CeilOp>([&](auto) { return math("ceil") + m(0) + ")"; })
          .Case<math::SinOp>([&](auto) { return math("sin") + m(0) + ")"; })
          .Case<math::CosOp>([&](auto) { return math("cos") + m(0) + ")"; })
          .Case<math::TanOp>([&](auto) { return math("tan") + m(0) + ")"; })
          .Case<math::AsinOp>([&](auto) { return math("asin") + m(0) + ")"; })
          .Case<math::AcosOp>([&](auto) { return math("acos") + m(0) + ")"; })
          .Case<math::AtanOp>([&](auto) { return math("atan") + m(0) + ")"; })
          .Case<math::SinhOp>([&](auto) { return math("sinh") + m(0) + ")"; })
          .Case<math::CoshOp>([&](auto) { return math("cosh") + m(0) + ")"; })
          .Case<math::AsinhOp>([&](auto) { return math("asinh") + m(0) + ")"; })
          .Case<math::AcoshOp>([&](auto) { return math("acosh") + m(0) + ")"; })
          .Case<math::AtanhOp>([&](auto) { return math("atanh") + m(0) + ")"; })
          .Case<math::PowFOp>(
              [&](auto) { return math("pow") + m(0) + ", " + m(1) + ")"; })
          .Case<affine::AffineApplyOp>([&](affine::AffineApplyOp a) {
            AffineMap map = a.getAffineMap();
            SmallVector<std::string> dims, syms;
            for (auto [i, operand] : llvm::enumerate(a.getMapOperands()))
              (i < map.getNumDims() ? dims : syms)
                  .push_back(scalars.lookup(operand));
            return cAffine(map.getResult(0), dims, syms);
          })
          .Case<linalg::IndexOp>([&](linalg::IndexOp i) {
            return "d" + std::to_string(i.getDim());
          })
          .Default([](Operation *) { return ""; });
  if (expr.empty() || op->getNumResults() != 1)
    return op->emitOpError() << "is not supported by the kernel emitter";
  // A dim, or an index constant, is named by its expression: equal sizes
  // then read the same, and the dims checks compare them as such.
  if (isa<tensor::DimOp>(op) ||
      (isa<arith::ConstantOp>(op) && op->getResult(0).getType().isIndex())) {
    scalars[op->getResult(0)] = expr;
    return success();
  }
  // A guarded read is performed only where the select using it picks it:
  // it stays an expression, placed inside the select's branch.
  if (op->hasAttr(kGuardedRead)) {
    for (OpOperand &use : op->getResult(0).getUses())
      if (!isa<arith::SelectOp>(use.getOwner()) || use.getOperandNumber() == 0)
        return op->emitOpError()
               << "is a guarded read used outside a select's branches";
    scalars[op->getResult(0)] = "(" + expr + ")";
    return success();
  }
  std::string name = fresh("v");
  os << indent << "const " << typeName(op->getResult(0).getType()) << " "
     << name << " = " << expr << ";\n";
  scalars[op->getResult(0)] = name;
  return success();
}
