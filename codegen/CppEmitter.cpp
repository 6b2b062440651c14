//===- CppEmitter.cpp - kernel-level IR to readable C++ -------------------===//
//
// Buffers: block argument i reads `in<i>`, yielded value j is written to
// `out<j>`. Destination-passing ops (linalg.generic/fill) write their result
// into the buffer of their init operand; a backward pass pushes each output
// buffer up the init chain, so a chain like fill -> matmul accumulates
// straight into the output. Anything else gets a local buffer.
// Loops: one loop nest per linalg.generic over its static loop ranges, in
// the generic's dimension order; operands are read and written through their
// indexing maps on row-major strides; the scalar body becomes one statement
// per op.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

std::string kiln::cppType(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return "_Float16"; // GCC and Clang on x86-64; math goes through float
  if (t.isInteger(1))
    return "bool";
  if (t.isIndex())
    return "int64_t";
  for (unsigned w : {8, 16, 32, 64})
    if (t.isInteger(w))
      return "int" + std::to_string(w) + "_t";
  return "";
}

namespace {

constexpr const char *kPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

namespace {
// NaN-propagating max/min, as arith.maximumf/minimumf (and torch) define them.
template <typename T> inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
} // namespace
)";

std::string literal(Attribute attr) {
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    double v = f.getValueAsDouble();
    bool single = f.getType().isF32();
    if (std::isnan(v))
      return single ? "NAN" : "double(NAN)";
    if (std::isinf(v))
      return std::string(v < 0 ? "-" : "") +
             (single ? "INFINITY" : "double(INFINITY)");
    std::string s = llvm::formatv(single ? "{0:e9}" : "{0:e17}", v).str();
    return single ? s + "f" : s;
  }
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    if (i.getType().isInteger(1))
      return i.getValue().isZero() ? "false" : "true";
    return "INT64_C(" + std::to_string(i.getValue().getSExtValue()) + ")";
  }
  return "";
}

// `e` in C, dim i spelled dims[i] (loop variables d0, d1, ... by default)
// and symbol j spelled syms[j].
std::string affine(AffineExpr e, ArrayRef<std::string> dims = {},
                   ArrayRef<std::string> syms = {}) {
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return d.getPosition() < dims.size()
               ? dims[d.getPosition()]
               : "d" + std::to_string(d.getPosition());
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return syms[s.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return std::to_string(c.getValue());
  auto bin = cast<AffineBinaryOpExpr>(e);
  std::string l = affine(bin.getLHS(), dims, syms),
              r = affine(bin.getRHS(), dims, syms);
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return "(" + l + " + " + r + ")";
  case AffineExprKind::Mul:
    return "(" + l + " * " + r + ")";
  case AffineExprKind::Mod:
    return "(" + l + " % " + r + ")";
  case AffineExprKind::FloorDiv:
  case AffineExprKind::CeilDiv:
  default:
    return "(" + l + " / " + r + ")"; // non-negative indices only
  }
}

class Emitter {
public:
  Emitter(KernelOp kernel, raw_ostream &os) : kernel(kernel), os(os) {}
  LogicalResult emit(StringRef symbol);

private:
  std::string fresh(StringRef prefix) {
    return (prefix + Twine(counter++)).str();
  }
  LogicalResult emitScalar(Operation *op, std::string indent);
  LogicalResult emitGeneric(linalg::GenericOp op);
  LogicalResult emitFill(linalg::FillOp op);
  std::string bufferFor(Value tensor);
  std::string index(Value tensor, AffineMap map);
  void copyInit(Value init, Value result);

  KernelOp kernel;
  raw_ostream &os;
  unsigned counter = 0;
  DenseMap<Value, std::string> buffers; // tensor -> pointer expression
  DenseMap<Value, std::string> scalars; // scalar -> C expression
};

std::string Emitter::bufferFor(Value tensor) {
  auto it = buffers.find(tensor);
  if (it != buffers.end())
    return it->second;
  auto type = cast<RankedTensorType>(tensor.getType());
  std::string name = fresh("t");
  os << llvm::formatv("  std::unique_ptr<{0}[]> {1}_owner(new {0}[{2}]);\n"
                      "  {0} *__restrict {1} = {1}_owner.get();\n",
                      cppType(type.getElementType()), name,
                      std::max<int64_t>(type.getNumElements(), 1));
  buffers[tensor] = name;
  return name;
}

std::string Emitter::index(Value tensor, AffineMap map) {
  auto shape = cast<RankedTensorType>(tensor.getType()).getShape();
  std::string expr;
  int64_t stride = 1;
  for (int64_t i = shape.size() - 1; i >= 0; --i) {
    std::string term = affine(map.getResult(i));
    if (stride != 1)
      term += " * " + std::to_string(stride);
    expr = expr.empty() ? term : term + " + " + expr;
    stride *= shape[i];
  }
  return expr.empty() ? "0" : expr;
}

void Emitter::copyInit(Value init, Value result) {
  if (init.getDefiningOp<tensor::EmptyOp>())
    return;
  std::string from = bufferFor(init), to = bufferFor(result);
  if (from == to)
    return;
  auto type = cast<RankedTensorType>(result.getType());
  os << llvm::formatv("  std::memcpy({0}, {1}, sizeof({2}) * {3});\n", to, from,
                      cppType(type.getElementType()), type.getNumElements());
}

LogicalResult Emitter::emitScalar(Operation *op, std::string indent) {
  auto v = [&](unsigned i) { return scalars.lookup(op->getOperand(i)); };
  // Arguments of <cmath> functions: halves are widened to float (what numpy
  // does for float16 too), the result rounds back on assignment.
  auto m = [&](unsigned i) {
    return op->getOperand(i).getType().isF16()
               ? "static_cast<float>(" + v(i) + ")"
               : v(i);
  };
  std::string expr =
      llvm::TypeSwitch<Operation *, std::string>(op)
          .Case<arith::ConstantOp>(
              [&](auto c) { return literal(c.getValue()); })
          .Case<arith::AddFOp, arith::AddIOp>(
              [&](auto) { return v(0) + " + " + v(1); })
          .Case<arith::SubFOp, arith::SubIOp>(
              [&](auto) { return v(0) + " - " + v(1); })
          .Case<arith::MulFOp, arith::MulIOp>(
              [&](auto) { return v(0) + " * " + v(1); })
          .Case<arith::DivFOp, arith::DivSIOp>(
              [&](auto) { return v(0) + " / " + v(1); })
          .Case<arith::RemSIOp>([&](auto) { return v(0) + " % " + v(1); })
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
            default:
              return "";
            }
            return v(0) + " " + cmp + " " + v(1);
          })
          .Case<arith::IndexCastOp>([&](Operation *c) {
            return "static_cast<" + cppType(c->getResult(0).getType()) + ">(" +
                   v(0) + ")";
          })
          .Case<tensor::ExtractOp>([&](tensor::ExtractOp e) {
            auto shape = e.getTensor().getType().getShape();
            std::string expr;
            int64_t stride = 1;
            for (int64_t i = shape.size() - 1; i >= 0; --i) {
              std::string term = scalars.lookup(e.getIndices()[i]);
              if (stride != 1)
                term += " * " + std::to_string(stride);
              expr = expr.empty() ? term : term + " + " + expr;
              stride *= shape[i];
            }
            return bufferFor(e.getTensor()) + "[" +
                   (expr.empty() ? "0" : expr) + "]";
          })
          .Case<arith::NegFOp>([&](auto) { return "-" + v(0); })
          .Case<arith::MaximumFOp, arith::MaxSIOp>(
              [&](auto) { return "kiln_maximum(" + v(0) + ", " + v(1) + ")"; })
          .Case<arith::MinimumFOp, arith::MinSIOp>(
              [&](auto) { return "kiln_minimum(" + v(0) + ", " + v(1) + ")"; })
          .Case<arith::MaxNumFOp>(
              [&](auto) { return "std::fmax(" + m(0) + ", " + m(1) + ")"; })
          .Case<arith::MinNumFOp>(
              [&](auto) { return "std::fmin(" + m(0) + ", " + m(1) + ")"; })
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
          .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp,
                arith::FPToSIOp, arith::ExtSIOp, arith::TruncIOp>(
              [&](Operation *c) {
                return "static_cast<" + cppType(c->getResult(0).getType()) +
                       ">(" + v(0) + ")";
              })
          .Case<math::ErfOp>([&](auto) { return "std::erf(" + m(0) + ")"; })
          .Case<math::ExpOp>([&](auto) { return "std::exp(" + m(0) + ")"; })
          .Case<math::LogOp>([&](auto) { return "std::log(" + m(0) + ")"; })
          .Case<math::TanhOp>([&](auto) { return "std::tanh(" + m(0) + ")"; })
          .Case<math::SqrtOp>([&](auto) { return "std::sqrt(" + m(0) + ")"; })
          .Case<math::AbsFOp>([&](auto) { return "std::fabs(" + m(0) + ")"; })
          .Case<math::AbsIOp>([&](auto) {
            return "(" + v(0) + " < 0 ? -" + v(0) + " : " + v(0) + ")";
          })
          .Case<math::FloorOp>([&](auto) { return "std::floor(" + m(0) + ")"; })
          .Case<math::RoundEvenOp>(
              [&](auto) { return "std::nearbyint(" + m(0) + ")"; })
          .Case<arith::RemFOp>(
              [&](auto) { return "std::fmod(" + m(0) + ", " + m(1) + ")"; })
          .Case<math::CeilOp>([&](auto) { return "std::ceil(" + m(0) + ")"; })
          .Case<math::SinOp>([&](auto) { return "std::sin(" + m(0) + ")"; })
          .Case<math::CosOp>([&](auto) { return "std::cos(" + m(0) + ")"; })
          .Case<math::TanOp>([&](auto) { return "std::tan(" + m(0) + ")"; })
          .Case<math::AsinOp>([&](auto) { return "std::asin(" + m(0) + ")"; })
          .Case<math::AcosOp>([&](auto) { return "std::acos(" + m(0) + ")"; })
          .Case<math::AtanOp>([&](auto) { return "std::atan(" + m(0) + ")"; })
          .Case<math::SinhOp>([&](auto) { return "std::sinh(" + m(0) + ")"; })
          .Case<math::CoshOp>([&](auto) { return "std::cosh(" + m(0) + ")"; })
          .Case<math::AsinhOp>([&](auto) { return "std::asinh(" + m(0) + ")"; })
          .Case<math::AcoshOp>([&](auto) { return "std::acosh(" + m(0) + ")"; })
          .Case<math::AtanhOp>([&](auto) { return "std::atanh(" + m(0) + ")"; })
          .Case<math::PowFOp>(
              [&](auto) { return "std::pow(" + m(0) + ", " + m(1) + ")"; })
          .Case<affine::AffineApplyOp>([&](affine::AffineApplyOp a) {
            AffineMap map = a.getAffineMap();
            SmallVector<std::string> dims, syms;
            for (auto [i, operand] : llvm::enumerate(a.getMapOperands()))
              (i < map.getNumDims() ? dims : syms)
                  .push_back(scalars.lookup(operand));
            return affine(map.getResult(0), dims, syms);
          })
          .Case<linalg::IndexOp>([&](linalg::IndexOp i) {
            return "d" + std::to_string(i.getDim());
          })
          .Default([](Operation *) { return ""; });
  if (expr.empty() || op->getNumResults() != 1)
    return op->emitOpError() << "is not supported by the C++ kernel emitter";
  std::string name = fresh("v");
  os << indent << "const " << cppType(op->getResult(0).getType()) << " " << name
     << " = " << expr << ";\n";
  scalars[op->getResult(0)] = name;
  return success();
}

LogicalResult Emitter::emitFill(linalg::FillOp op) {
  Value result = op.getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  std::string out = bufferFor(result);
  os << llvm::formatv(
      "  for (int64_t i = 0; i < {0}; ++i)\n    {1}[i] = {2};\n",
      type.getNumElements(), out, scalars.lookup(op.getInputs()[0]));
  return success();
}

LogicalResult Emitter::emitGeneric(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return op.emitOpError() << "with several results is not supported by "
                               "the C++ kernel emitter yet";
  Value result = op.getResult(0), init = op.getDpsInits()[0];
  copyInit(init, result);
  std::string out = bufferFor(result);
  for (OpOperand *input : op.getDpsInputOperands())
    if (!op.getMatchingBlockArgument(input).use_empty())
      (void)bufferFor(input->get()); // declared before the loops
  op.getRegion().walk(
      [&](tensor::ExtractOp e) { (void)bufferFor(e.getTensor()); });
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  os << "  // linalg.generic: "
     << llvm::join(llvm::map_range(op.getIteratorTypesArray(),
                                   [](utils::IteratorType t) {
                                     return stringifyIteratorType(t).str();
                                   }),
                   ", ")
     << "\n";
  std::string indent = "  ";
  for (auto [dim, size] : llvm::enumerate(ranges)) {
    os << indent
       << llvm::formatv("for (int64_t d{0} = 0; d{0} < {1}; ++d{0})", dim,
                        size);
    os << (dim + 1 == ranges.size() ? " {\n" : "\n");
    indent += "  ";
  }
  if (ranges.empty())
    os << indent << "{\n";
  Block &body = op.getRegion().front();
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    BlockArgument arg = body.getArgument(i);
    if (arg.use_empty())
      continue;
    std::string name = fresh("a");
    os << indent << "const " << cppType(arg.getType()) << " " << name << " = "
       << bufferFor((int64_t)i < op.getNumDpsInputs() ? operand : result) << "["
       << index(operand, maps[i]) << "];\n";
    scalars[arg] = name;
  }
  for (Operation &inner : body.without_terminator())
    if (failed(emitScalar(&inner, indent)))
      return failure();
  Value yielded = body.getTerminator()->getOperand(0);
  os << indent << out << "[" << index(result, maps.back())
     << "] = " << scalars.lookup(yielded) << ";\n";
  os << "  }\n";
  return success();
}

LogicalResult Emitter::emit(StringRef symbol) {
  Block &body = kernel.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());

  os << "// kiln kernel " << symbol << ", from " << kernel.getLoc() << "\n";
  os << "extern \"C\" void " << symbol << "(void **buffers) {\n";
  size_t slot = 0;
  for (BlockArgument arg : body.getArguments()) {
    std::string type =
        cppType(cast<RankedTensorType>(arg.getType()).getElementType());
    std::string name = "in" + std::to_string(arg.getArgNumber());
    os << llvm::formatv("  const {0} *__restrict {1} = static_cast<const {0} "
                        "*>(buffers[{2}]);\n",
                        type, name, slot++);
    buffers[arg] = name;
  }
  // Output buffers, pushed backwards through destination-passing chains.
  SmallVector<std::string> outs;
  for (auto [j, value] : llvm::enumerate(yield.getValues())) {
    std::string type =
        cppType(cast<RankedTensorType>(value.getType()).getElementType());
    std::string name = "out" + std::to_string(j);
    os << llvm::formatv(
        "  {0} *__restrict {1} = static_cast<{0} *>(buffers[{2}]);\n", type,
        name, slot++);
    outs.push_back(name);
    if (!buffers.count(value) && value.getDefiningOp() &&
        isa<linalg::LinalgOp>(value.getDefiningOp()))
      buffers[value] = name;
  }
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(&op);
    if (!dps || op.getNumResults() != 1 || !buffers.count(op.getResult(0)))
      continue;
    Value init = dps.getDpsInits()[0];
    Operation *def = init.getDefiningOp();
    if (init.hasOneUse() && def && isa<linalg::LinalgOp>(def) &&
        !buffers.count(init))
      buffers[init] = buffers[op.getResult(0)];
  }
  for (Operation &op : body.without_terminator()) {
    LogicalResult ok =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case<tensor::EmptyOp>([](auto) { return success(); })
            .Case<linalg::FillOp>([&](auto fill) { return emitFill(fill); })
            .Case<linalg::GenericOp>([&](auto g) { return emitGeneric(g); })
            .Case<arith::ConstantOp>([&](arith::ConstantOp c) -> LogicalResult {
              if (!isa<RankedTensorType>(c.getType()))
                return emitScalar(c, "  ");
              auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
              if (!dense || !dense.isSplat())
                return c.emitOpError() << "tensor constants inside kernels "
                                          "must be splats";
              std::string name = fresh("v");
              Type element = dense.getElementType();
              os << "  const " << cppType(element) << " " << name << " = "
                 << literal(dense.getSplatValue<Attribute>()) << ";\n";
              os << llvm::formatv(
                  "  for (int64_t i = 0; i < {0}; ++i)\n    {1}[i] = {2};\n",
                  dense.getNumElements(), bufferFor(c), name);
              return success();
            })
            .Default([](Operation *other) {
              return other->emitOpError()
                     << "is not supported by the C++ kernel emitter";
            });
    if (failed(ok))
      return failure();
  }
  for (auto [j, value] : llvm::enumerate(yield.getValues())) {
    std::string from = bufferFor(value);
    if (from == outs[j])
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    os << llvm::formatv("  std::memcpy({0}, {1}, sizeof({2}) * {3});\n",
                        outs[j], from, cppType(type.getElementType()),
                        type.getNumElements());
  }
  os << "}\n";
  return success();
}
} // namespace

std::string kiln::kernelPrelude() { return kPrelude; }

FailureOr<std::string> kiln::emitKernelCpp(KernelOp kernel, StringRef symbol) {
  SmallVector<Type> types(kernel->getOperandTypes());
  llvm::append_range(types, kernel->getResultTypes());
  for (Type type : types)
    if (cppType(cast<RankedTensorType>(type).getElementType()).empty())
      return kernel.emitOpError()
             << "has element type "
             << cast<RankedTensorType>(type).getElementType()
             << ", which the C++ backend does not support yet";
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(Emitter(kernel, os).emit(symbol)))
    return failure();
  return text;
}
