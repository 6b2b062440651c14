//===- CEmitter.cpp - the C-style base of the kernel emitters -------------===//
//
// Buffers: block argument i reads the backend's input i, yielded value j is
// written to its output j. Destination-passing ops (linalg.generic/fill)
// write their result into the buffer of their init operand; a backward pass
// pushes each output buffer up the init chain, so a chain like fill -> matmul
// accumulates straight into the output. Anything else gets a buffer the
// backend declares. Operands are read and written through their indexing
// maps on row-major strides; the scalar body becomes one statement per op.
//
//===----------------------------------------------------------------------===//

#include "codegen/CEmitter.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::cdetail;

const CStyle kiln::kCppStyle = {"std::",     "__restrict", "_Float16",
                                "kiln_expf", "kiln_erff",  "kiln_tanhf"};
const CStyle kiln::kCudaStyle = {"",      "__restrict__", "__half",
                                 nullptr, nullptr,        nullptr};

std::string kiln::cTypeName(Type t, const CStyle &style) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return style.half;  // math goes through float
  if (isNarrowFloat(t)) // bits; arithmetic is widened to f32 (LowerKernels)
    return t.getIntOrFloatBitWidth() == 16 ? "uint16_t" : "uint8_t";
  if (t.isInteger(1))
    return "bool";
  if (t.isIndex())
    return "int64_t";
  for (unsigned w : {8, 16, 32, 64})
    if (t.isInteger(w))
      return "int" + std::to_string(w) + "_t";
  if (t.isInteger() && t.getIntOrFloatBitWidth() < 8) // a value a byte
    return "int8_t";
  return "";
}

std::string kiln::narrowFloatName(Type t) {
  return llvm::TypeSwitch<Type, std::string>(t)
      .Case([](BFloat16Type) { return "bf16"; })
      .Case([](Float8E4M3FNType) { return "f8e4m3fn"; })
      .Case([](Float8E4M3FNUZType) { return "f8e4m3fnuz"; })
      .Case([](Float8E5M2Type) { return "f8e5m2"; })
      .Case([](Float8E5M2FNUZType) { return "f8e5m2fnuz"; })
      .Default([](Type) { return ""; });
}

// Narrow float conversions for the kernels: QUAL and MATH_ stand for the
// function qualifier and the math library's prefix. A float has 1 sign, E
// exponent and M mantissa bits with bias B; special 0: the top exponent
// holds Inf and NaN (IEEE: bfloat16, float8e5m2); 1: only the all-ones
// pattern is NaN, no Inf ("fn": float8e4m3fn); 2: NaN is the negative zero
// pattern, no Inf or -0 ("fnuz"). Encoding rounds to nearest even; values
// beyond the largest finite one saturate to it, or become Inf (IEEE) or NaN.
static const char kNarrowFloats[] =
    R"(QUAL double kiln_decode_narrow(uint32_t bits, int E, int M, int B, int special) {
  uint32_t sign = bits >> (E + M) & 1u, ex = bits >> M & ((1u << E) - 1u), man = bits & ((1u << M) - 1u);
  if (special == 2 && sign && !ex && !man) return NAN;
  if (special == 0 && ex == (1u << E) - 1u) return man ? NAN : sign ? -INFINITY : INFINITY;
  if (special == 1 && ex == (1u << E) - 1u && man == (1u << M) - 1u) return NAN;
  double v = ex ? MATH_ldexp(1.0 + MATH_ldexp((double)man, -M), (int)ex - B) : MATH_ldexp((double)man, 1 - B - M);
  return sign ? -v : v;
}
QUAL uint32_t kiln_encode_narrow(double x, int E, int M, int B, int special, bool saturate) {
  uint32_t top = 1u << (E + M);
  uint32_t nan = special == 0 ? ((1u << E) - 1u) << M | 1u << (M - 1) : special == 1 ? top - 1u : top;
  if (x != x) return nan;
  uint32_t maxEx = special == 0 ? (1u << E) - 2u : (1u << E) - 1u;
  uint32_t maxMan = special == 1 ? (1u << M) - 2u : (1u << M) - 1u;
  double a = MATH_fabs(x), largest = MATH_ldexp(1.0 + MATH_ldexp((double)maxMan, -M), (int)maxEx - B);
  uint32_t sign = MATH_signbit(x) && (special != 2 || a != 0) ? top : 0u;
  uint32_t overflow = saturate ? sign | maxEx << M | maxMan : special == 0 ? sign | ((1u << E) - 1u) << M : nan;
  if (MATH_isinf(a)) return overflow;
  if (a == 0) return sign;
  int e2;
  MATH_frexp(a, &e2);
  int e = e2 - 1 < 1 - B ? 1 - B : e2 - 1;
  double r = MATH_rint(MATH_ldexp(a, M - e)); // in units of 2^(e - M)
  if (MATH_ldexp(r, e - M) > largest) return overflow;
  if (r == 0) return special == 2 ? 0u : sign;
  uint32_t ri = (uint32_t)r;
  if (ri < (1u << M)) return sign | ri; // subnormal
  if (ri == 2u << M) { ri >>= 1; ++e; }
  return sign | (uint32_t)(e + B) << M | (ri - (1u << M));
}
)";

std::string kiln::narrowFloatFunctions(const std::string &qualifier,
                                       const CStyle &style) {
  std::string text = kNarrowFloats;
  auto replaceAll = [&](StringRef from, StringRef to) {
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to.str());
  };
  replaceAll("QUAL", qualifier);
  replaceAll("MATH_", style.mathPrefix);
  struct Format {
    const char *name, *bits;
    int e, m, bias, special;
  };
  for (Format f : {Format{"bf16", "uint16_t", 8, 7, 127, 0},
                   Format{"f8e4m3fn", "uint8_t", 4, 3, 7, 1},
                   Format{"f8e4m3fnuz", "uint8_t", 4, 3, 8, 2},
                   Format{"f8e5m2", "uint8_t", 5, 2, 15, 0},
                   Format{"f8e5m2fnuz", "uint8_t", 5, 2, 16, 2}}) {
    std::string args =
        llvm::formatv(", {0}, {1}, {2}, {3}", f.e, f.m, f.bias, f.special);
    text += llvm::formatv("{0} double kiln_decode_{1}({2} bits) {{ return "
                          "kiln_decode_narrow(bits{3}); }\n",
                          qualifier, f.name, f.bits, args);
    text += llvm::formatv("{0} {2} kiln_encode_{1}(double x, bool saturate) "
                          "{{ return ({2})kiln_encode_narrow(x{3}, saturate); "
                          "}\n",
                          qualifier, f.name, f.bits, args);
  }
  return text;
}

std::string kiln::iteratorList(linalg::GenericOp op) {
  return llvm::join(llvm::map_range(op.getIteratorTypesArray(),
                                    [](utils::IteratorType t) {
                                      return stringifyIteratorType(t).str();
                                    }),
                    ", ");
}

std::string kiln::cdetail::literal(Attribute attr) {
  if (auto f = dyn_cast<FloatAttr>(attr);
      f && isNarrowFloat(f.getType())) // kept as bits (folded conversions)
    return std::to_string(f.getValue().bitcastToAPInt().getZExtValue()) + "u";
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

std::string kiln::cdetail::cAffine(AffineExpr e, ArrayRef<std::string> dims,
                                   ArrayRef<std::string> syms) {
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return d.getPosition() < dims.size()
               ? dims[d.getPosition()]
               : "d" + std::to_string(d.getPosition());
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return syms[s.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return std::to_string(c.getValue());
  auto bin = cast<AffineBinaryOpExpr>(e);
  std::string l = cAffine(bin.getLHS(), dims, syms),
              r = cAffine(bin.getRHS(), dims, syms);
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

namespace {
// a * b for C expressions, folded when both are numbers.
std::string mulExpr(const std::string &a, const std::string &b) {
  int64_t x, y;
  bool constA = !StringRef(a).getAsInteger(10, x),
       constB = !StringRef(b).getAsInteger(10, y);
  if (constA && constB)
    return std::to_string(x * y);
  if (constA && x == 1)
    return b;
  if (constB && y == 1)
    return a;
  return "(" + a + " * " + b + ")";
}

// A C string literal of `text`.
std::string quoted(StringRef text) {
  std::string s = "\"";
  for (char c : text)
    s += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return s + "\"";
}
} // namespace

std::string CEmitter::nameBuffer(Value tensor) {
  std::string name = fresh("t");
  buffers[tensor] = name;
  return name;
}

std::string CEmitter::bufferFor(Value tensor) {
  auto it = buffers.find(tensor);
  if (it != buffers.end())
    return it->second;
  // Computed in another's buffer: of the same type and dims, so sized by
  // `tensor`, whose dims are known here (the owner's may be computed later).
  if (Value owner = bufferOwner(tensor); owner != tensor) {
    if (!buffers.count(owner)) {
      std::string name = fresh("t");
      declareBuffer(cast<RankedTensorType>(tensor.getType()), name,
                    numElements(tensor));
      buffers[owner] = name;
    }
    // By value: inserting `tensor` may move the map's strings.
    std::string name = buffers.lookup(owner);
    return buffers[tensor] = name;
  }
  std::string name = fresh("t");
  auto type = cast<RankedTensorType>(tensor.getType());
  auto shared = sharesWhen.find(tensor);
  if (shared != sharesWhen.end())
    declareBufferUnless(type, name, numElements(tensor), shared->second.second,
                        shared->second.first);
  else
    declareBuffer(type, name, numElements(tensor));
  buffers[tensor] = name;
  return name;
}

bool CEmitter::ownsNoBuffer(Value tensor) const {
  return !buffers.count(tensor) && !sharedWith.count(tensor) &&
         !sharesWhen.count(tensor) &&
         llvm::none_of(sharedWith, [&](const auto &shared) {
           return shared.second == tensor;
         });
}

// The row-major offset of the element at `indices` (C expressions) in
// `tensor`.
std::string
kiln::cdetail::rowMajor(ArrayRef<std::string> indices,
                        llvm::function_ref<std::string(int64_t)> dimSize) {
  std::string expr, stride = "1";
  for (int64_t i = indices.size() - 1; i >= 0; --i) {
    std::string term = indices[i];
    if (stride != "1")
      term += " * " + stride;
    expr = expr.empty() ? term : term + " + " + expr;
    stride = mulExpr(stride, dimSize(i));
  }
  return expr.empty() ? "0" : expr;
}

std::string CEmitter::index(Value tensor, AffineMap map, bool broadcast) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<std::string> indices;
  for (auto [i, e] : llvm::enumerate(map.getResults())) {
    indices.push_back(cAffine(e, dimNames));
    // A dynamic dim of size 1 repeats along its loop (numpy broadcasting
    // decided at run time); 0 is its only valid index anyway.
    if (broadcast && type.isDynamicDim(i) && isa<AffineDimExpr>(e))
      indices.back() =
          "(" + dimExpr(tensor, i) + " == 1 ? 0 : " + indices.back() + ")";
  }
  if (int64_t split = planeSplits.lookup(tensor)) {
    // The last index e lies at (e mod S, e floordiv S) in [S][ceil(W / S)].
    AffineExpr last = map.getResults().back();
    indices.back() = cAffine(last % split, dimNames);
    indices.push_back(cAffine(last.floorDiv(split), dimNames));
  }
  SmallVector<std::string> sizes = storedSizes(tensor);
  return rowMajor(ArrayRef(indices).drop_front(planeDims.lookup(tensor)),
                  [&](int64_t i) { return sizes[i]; });
}

SmallVector<std::string> CEmitter::storedSizes(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<std::string> sizes;
  for (int64_t i = planeDims.lookup(tensor); i < type.getRank(); ++i)
    sizes.push_back(dimExpr(tensor, i));
  if (int64_t rows = planeRows.lookup(tensor))
    sizes.back() = std::to_string(rows);
  if (int64_t split = planeSplits.lookup(tensor)) {
    sizes.back() =
        std::to_string(llvm::divideCeil(type.getShape().back(), split));
    sizes.insert(sizes.end() - 1, std::to_string(split));
  }
  return sizes;
}

int64_t kiln::dimsOffset(KernelOp kernel, unsigned arg) {
  SmallVector<Type> types(kernel->getOperandTypes());
  llvm::append_range(types, kernel->getResultTypes());
  int64_t offset = 0;
  for (Type type : ArrayRef(types).take_front(arg))
    offset += cast<RankedTensorType>(type).getRank();
  return offset;
}

std::string CEmitter::dimExpr(Value tensor, int64_t i) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(i))
    return std::to_string(type.getDimSize(i));
  Block &block = kernel.getBody().front();
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    if (arg.getOwner() != &block)
      return "";
    return "dims[" +
           std::to_string(dimsOffset(kernel, arg.getArgNumber()) + i) + "]";
  }
  Operation *def = tensor.getDefiningOp();
  if (auto empty = dyn_cast<tensor::EmptyOp>(def)) {
    Value size = empty.getDynamicSize(i);
    if (std::string s = scalars.lookup(size); !s.empty())
      return s;
    // A dim not emitted yet reads as it will once it is (by its
    // expression, CScalar.cpp): fusion decisions asked before it is reached
    // must see the sizes they see after. squeezenet1_1's stem conv was
    // lost so: deferred to an epilogue that a pool's planes took later.
    if (auto dim = size.getDefiningOp<tensor::DimOp>())
      if (std::optional<int64_t> at = dim.getConstantIndex())
        return dimExpr(dim.getSource(), *at);
    return "";
  }
  if (auto cast = dyn_cast<tensor::CastOp>(def)) // a view
    return dimExpr(cast.getSource(), i);
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(def))
    return dimExpr(dps.getDpsInits()[cast<OpResult>(tensor).getResultNumber()],
                   i);
  return "";
}

std::string CEmitter::numElements(Value tensor) {
  std::string n = "1";
  for (const std::string &size : storedSizes(tensor))
    n = mulExpr(n, size);
  return n;
}

std::string CEmitter::loopRange(linalg::GenericOp op, unsigned d) {
  int64_t size = op.getStaticLoopRanges()[d];
  if (!ShapedType::isDynamic(size))
    return std::to_string(size);
  // The output's size first: an input's may be 1 and broadcast.
  SmallVector<OpOperand *> operands;
  for (OpOperand &init : op.getDpsInitsMutable())
    operands.push_back(&init);
  for (OpOperand *input : op.getDpsInputOperands())
    operands.push_back(input);
  for (OpOperand *operand : operands)
    for (auto [pos, e] :
         llvm::enumerate(op.getMatchingIndexingMap(operand).getResults()))
      if (auto dim = dyn_cast<AffineDimExpr>(e); dim && dim.getPosition() == d)
        if (std::string s = dimExpr(operand->get(), pos); !s.empty())
          return s;
  return "";
}

/// The kernel's run-time checks, where it has a dims function to make them.
static SmallVector<cf::AssertOp> runTimeChecks(KernelOp kernel) {
  SmallVector<cf::AssertOp> checks;
  if (kernel.getNumResults() &&
      getDevice(kernel.getResult(0).getType()).getKind() != "cpu")
    return checks;
  llvm::append_range(checks, kernel.getBody().front().getOps<cf::AssertOp>());
  return checks;
}

bool kiln::needsDimsFunction(KernelOp kernel) {
  return hasDynamicShape(kernel) || !runTimeChecks(kernel).empty();
}

/// The ops computing the dynamic sizes of the kernel's tensors and the
/// conditions of its run-time checks, in order.
static SetVector<Operation *> sizeOps(KernelOp kernel) {
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.omitBlockArguments = true;
  auto add = [&](Value v) {
    if (Operation *def = v.getDefiningOp()) {
      getBackwardSlice(def, &slice, options);
      slice.insert(def);
    }
  };
  Block &block = kernel.getBody().front();
  for (auto empty : block.getOps<tensor::EmptyOp>())
    for (Value size : empty.getDynamicSizes())
      add(size);
  for (cf::AssertOp check : runTimeChecks(kernel))
    add(check.getArg());
  return topologicalSort(slice);
}

SmallVector<unsigned> kiln::kernelDimsData(KernelOp kernel) {
  SmallVector<unsigned> args;
  for (Operation *op : sizeOps(kernel))
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      if (auto arg = dyn_cast<BlockArgument>(extract.getTensor()))
        if (!llvm::is_contained(args, arg.getArgNumber()))
          args.push_back(arg.getArgNumber());
  llvm::sort(args);
  return args;
}

LogicalResult CEmitter::emitDimsBody(std::vector<std::string> &nodes) {
  raw_ostream &os = body();
  auto node = [&](const std::string &name) {
    auto at = llvm::find(nodes, name);
    if (at == nodes.end())
      at = nodes.insert(at, name);
    return "{node:" + std::to_string(at - nodes.begin()) + "}";
  };
  Block &block = kernel.getBody().front();
  // The inputs whose data sizes depend on (shapes and axes given as
  // tensors), then the size computations.
  for (unsigned i : kernelDimsData(kernel)) {
    BlockArgument arg = block.getArgument(i);
    std::string type =
        typeName(cast<RankedTensorType>(arg.getType()).getElementType());
    std::string name = "in" + std::to_string(i);
    os << "  const " << type << " *" << name << " = static_cast<const " << type
       << " *>(inputs[" << i << "]);\n";
    buffers[arg] = name;
  }
  for (Operation *op : sizeOps(kernel)) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(op);
        extract && !isa<BlockArgument>(extract.getTensor()))
      return op->emitOpError()
             << "sizes a tensor from data computed inside the kernel, which "
                "the kernel emitter does not support";
    if (failed(emitScalar(op, os, "  ")))
      return failure();
  }
  for (cf::AssertOp check : runTimeChecks(kernel))
    os << "  if (!" << scalars.lookup(check.getArg()) << ")\n    return "
       << quoted(node(nodeNames(check.getLoc())) + ": " + check.getMsg().str())
       << ";\n";
  // Sizes one loop reads from several operands must agree; along a
  // parallel loop an input may also have size 1 (broadcast).
  for (auto generic : block.getOps<linalg::GenericOp>()) {
    std::string name = nodeNames(generic.getLoc());
    if (name.empty()) {
      llvm::raw_string_ostream where(name);
      where << generic.getLoc();
    }
    for (unsigned d = 0; d < generic.getNumLoops(); ++d) {
      SmallVector<std::string> sizes;
      for (OpOperand &operand : generic->getOpOperands())
        for (auto [pos, e] : llvm::enumerate(
                 generic.getMatchingIndexingMap(&operand).getResults()))
          if (auto dim = dyn_cast<AffineDimExpr>(e);
              dim && dim.getPosition() == d) {
            std::string s = dimExpr(operand.get(), pos);
            if (s.empty())
              return generic.emitOpError()
                     << "has a dynamic dim the kernel emitter cannot size";
            if (!llvm::is_contained(sizes, s))
              sizes.push_back(s);
          }
      std::string range = loopRange(generic, d);
      bool parallel =
          generic.getIteratorTypesArray()[d] == utils::IteratorType::parallel;
      for (const std::string &size : sizes) {
        if (size == range)
          continue;
        os << "  if (" << size << " != " << range
           << (parallel ? " && " + size + " != 1" : "") << ")\n    return "
           << quoted(node(name) + ": argument dims " + size + " and " + range +
                     " do not " + (parallel ? "broadcast" : "match"))
           << ";\n";
      }
    }
  }
  auto yield = cast<YieldOp>(block.getTerminator());
  int64_t offset = dimsOffset(kernel, block.getNumArguments());
  for (Value value : yield.getValues()) {
    auto type = cast<RankedTensorType>(value.getType());
    for (int64_t i = 0; i < type.getRank(); ++i, ++offset) {
      if (!type.isDynamicDim(i))
        continue;
      std::string size = dimExpr(value, i);
      if (size.empty())
        return kernel.emitOpError()
               << "has a dynamic output dim the kernel emitter cannot size";
      os << "  dims[" << offset << "] = " << size << ";\n";
    }
  }
  os << "  return nullptr;\n";
  return success();
}

/// Whether the op taking `init` as its destination updates init's buffer in
/// place: init is that op's alone and made by a linalg op or an insert of
/// the kernel.
static bool updatesInPlace(Value init) {
  Operation *def = init.getDefiningOp();
  return init.hasOneUse() && def &&
         isa<linalg::LinalgOp, tensor::InsertSliceOp>(def);
}

void CEmitter::copyInit(Value init, Value result) {
  if (init.getDefiningOp<tensor::EmptyOp>())
    return;
  if (!buffers.count(result) && updatesInPlace(init)) {
    buffers[result] = bufferFor(init);
    return;
  }
  std::string from = bufferFor(init), to = bufferFor(result);
  if (from != to)
    emitCopy(to, from, cast<RankedTensorType>(result.getType()),
             numElements(result));
}

void CEmitter::emitFillOp(linalg::FillOp fill) {
  Value result = fill.getResult(0);
  emitFill(cast<RankedTensorType>(result.getType()), numElements(result),
           bufferFor(result), scalars.lookup(fill.getInputs()[0]));
}

LogicalResult CEmitter::emitInsertSlice(tensor::InsertSliceOp insert) {
  Value result = insert.getResult(), source = insert.getSource();
  auto type = insert.getResultType();
  int64_t rank = type.getRank();
  if (insert.getSourceType().getRank() != rank || !insert.hasUnitStride() ||
      ShapedType::isDynamicShape(insert.getStaticOffsets()) ||
      planeDims.count(source) || planeDims.count(result))
    return insert.emitOpError() << "with dynamic offsets, strides or a "
                                   "rank change is not supported by the "
                                   "kernel emitter yet";
  copyInit(insert.getDest(), result);
  SliceCopy copy{bufferFor(result),     bufferFor(source), "0", "1", {}, {}, {},
                 insert.getSourceType()};
  ArrayRef<int64_t> offsets = insert.getStaticOffsets();
  SmallVector<std::string> to, from;
  for (int64_t d = 0; d < rank; ++d) {
    to.push_back(dimExpr(result, d));
    from.push_back(dimExpr(source, d));
    if (to.back().empty() || from.back().empty())
      return insert.emitOpError()
             << "has a dynamic dim the kernel emitter cannot size";
  }
  // The dims after the last one that the slice does not cover whole (as far
  // as the emitter can tell) are contiguous in both: one block per index of
  // the dims up to it.
  int64_t split = rank - 1;
  while (split >= 0 && offsets[split] == 0 && to[split] == from[split])
    --split;
  std::string toStride = "1", fromStride = "1";
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (d < split) {
      copy.outer.insert(copy.outer.begin(), from[d]);
      copy.toStrides.insert(copy.toStrides.begin(), toStride);
      copy.fromStrides.insert(copy.fromStrides.begin(), fromStride);
    } else {
      copy.count = mulExpr(copy.count, from[d]);
    }
    if (offsets[d])
      copy.offset = (copy.offset == "0" ? "" : copy.offset + " + ") +
                    mulExpr(std::to_string(offsets[d]), toStride);
    toStride = mulExpr(toStride, to[d]);
    fromStride = mulExpr(fromStride, from[d]);
  }
  emitSliceCopy(copy);
  return success();
}

void CEmitter::declareOperands(linalg::GenericOp op) {
  Value result = op.getResult(0), init = op.getDpsInits()[0];
  copyInit(init, result);
  (void)bufferFor(result);
  for (OpOperand *input : op.getDpsInputOperands())
    if (!op.getMatchingBlockArgument(input).use_empty())
      (void)bufferFor(input->get());
  op.getRegion().walk(
      [&](tensor::ExtractOp e) { (void)bufferFor(e.getTensor()); });
}

LogicalResult CEmitter::emitGenericBody(linalg::GenericOp op,
                                        const std::string &indent,
                                        const std::string &accumulator) {
  raw_ostream &os = body();
  Value result = op.getResult(0);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Block &block = op.getRegion().front();
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    BlockArgument arg = block.getArgument(i);
    if (arg.use_empty())
      continue;
    bool isInput = (int64_t)i < op.getNumDpsInputs();
    if (!isInput && !accumulator.empty()) {
      scalars[arg] = accumulator;
      continue;
    }
    std::string name = fresh("a");
    auto read = reads.find(operand);
    os << indent << "const " << typeName(arg.getType()) << " " << name << " = "
       << (isInput && read != reads.end()
               ? read->second
               : bufferFor(isInput ? operand : result) + "[" +
                     index(operand, maps[i], isInput) + "]")
       << ";\n";
    scalars[arg] = name;
  }
  for (Operation &inner : block.without_terminator())
    if (failed(emitScalar(&inner, os, indent)))
      return failure();
  Value yielded = block.getTerminator()->getOperand(0);
  if (!accumulator.empty())
    os << indent << accumulator << " = " << scalars.lookup(yielded) << ";\n";
  else
    os << indent << bufferFor(result) << "[" << index(result, maps.back())
       << "] = " << scalars.lookup(yielded) << ";\n";
  return success();
}

/// Where the size of dim `i` of `tensor` comes from: a kernel argument's
/// dim, or the index value a tensor.empty was sized with (through
/// tensor.dim to the dim it reads); null when unknown.
static std::pair<Value, int64_t> dimOrigin(Value tensor, int64_t i) {
  if (isa<BlockArgument>(tensor))
    return {tensor, i};
  Operation *def = tensor.getDefiningOp();
  if (auto empty = dyn_cast<tensor::EmptyOp>(def)) {
    if (!empty.getType().isDynamicDim(i))
      return {};
    Value size = empty.getDynamicSize(i);
    if (auto dim = size.getDefiningOp<tensor::DimOp>())
      if (std::optional<int64_t> index = dim.getConstantIndex())
        return dimOrigin(dim.getSource(), *index);
    return {size, -1};
  }
  if (auto cast = dyn_cast<tensor::CastOp>(def))
    return dimOrigin(cast.getSource(), i);
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(def))
    return dimOrigin(
        dps.getDpsInits()[cast<OpResult>(tensor).getResultNumber()], i);
  return {};
}

/// Whether `a` and `b` (of one type) have the same dynamic dims at run time
/// as far as the kernel shows: a dim that may be 1 and broadcast in one of
/// them is not.
static bool sameDims(Value a, Value b) {
  auto type = cast<RankedTensorType>(a.getType());
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (!type.isDynamicDim(i))
      continue;
    std::pair<Value, int64_t> origin = dimOrigin(a, i);
    if (!origin.first || origin != dimOrigin(b, i))
      return false;
  }
  return true;
}

/// The first tensor of `value`'s chain of destinations (the tensor whose
/// buffer every op of the chain updates in place).
static Value chainRoot(Value value) {
  while (auto dps = value.getDefiningOp<DestinationStyleOpInterface>()) {
    if (value.getDefiningOp()->getNumResults() != 1)
      break;
    Value init = dps.getDpsInits()[0];
    if (!updatesInPlace(init))
      break;
    value = init;
  }
  return value;
}

std::string CEmitter::sameDimsAtRunTime(Value input, Value output) {
  Block &block = kernel.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  auto yielded = llvm::find(yield.getValues(), output);
  if (yielded == yield.getValues().end())
    return "";
  int64_t outputDims =
      dimsOffset(kernel, block.getNumArguments() +
                             std::distance(yield.getValues().begin(), yielded));
  auto type = cast<RankedTensorType>(input.getType());
  std::string same;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (!type.isDynamicDim(i))
      continue;
    auto [source, at] = dimOrigin(input, i);
    auto arg = dyn_cast_or_null<BlockArgument>(source);
    if (!arg || arg.getOwner() != &block)
      return "";
    same += llvm::formatv(
                "{0}dims[{1}] == dims[{2}]", same.empty() ? "" : " && ",
                dimsOffset(kernel, arg.getArgNumber()) + at, outputDims + i)
                .str();
  }
  return same;
}

/// The input of an elementwise generic that its output can overwrite: one
/// computed in this kernel for this generic alone, of the output's type and
/// read at the element being written (e.g. a conv's result under its bias
/// and activation), when their dims agree (sameDims). The generic must not
/// read its own init.
static Value inPlaceInput(Operation &op) {
  auto generic = dyn_cast<linalg::GenericOp>(&op);
  if (!generic || generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != generic.getNumParallelLoops())
    return {};
  OpOperand *init = generic.getDpsInitOperand(0);
  if (!generic.getMatchingBlockArgument(init).use_empty())
    return {};
  AffineMap outMap = generic.getMatchingIndexingMap(init);
  for (OpOperand *input : generic.getDpsInputOperands()) {
    Value value = input->get();
    Operation *def = value.getDefiningOp();
    if (def && isa<linalg::LinalgOp>(def) && value.hasOneUse() &&
        value.getType() == generic.getResult(0).getType() &&
        generic.getMatchingIndexingMap(input) == outMap)
      return value;
  }
  return {};
}

LogicalResult CEmitter::emitOps(ArrayRef<std::string> inputs,
                                ArrayRef<std::string> outputs) {
  Block &block = kernel.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  for (BlockArgument arg : block.getArguments())
    buffers[arg] = inputs[arg.getArgNumber()];
  // Output buffers, pushed backwards through destination-passing chains.
  for (auto [j, value] : llvm::enumerate(yield.getValues()))
    if (!buffers.count(value) && value.getDefiningOp() &&
        isa<linalg::LinalgOp, tensor::InsertSliceOp>(value.getDefiningOp()))
      buffers[value] = outputs[j];
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(&op);
    if (!dps || op.getNumResults() != 1)
      continue;
    if (!buffers.count(op.getResult(0))) {
      // A local tensor: so are the input it overwrites and, when it is
      // itself computed in another's buffer, its init; they share the
      // buffer declared on first use (bufferFor).
      Value result = op.getResult(0), init = dps.getDpsInits()[0];
      if (sharedWith.count(result) && updatesInPlace(init))
        sharedWith[init] = result;
      if (Value input = inPlaceInput(op); input && sameDims(input, result))
        sharedWith[input] = result;
      continue;
    }
    // By value: inserting into the map may move its strings.
    std::string out = buffers.lookup(op.getResult(0));
    Value init = dps.getDpsInits()[0];
    if (updatesInPlace(init) && !buffers.count(init))
      buffers[init] = out;
    Value input = inPlaceInput(op);
    if (!input)
      continue;
    // An input whose dim may be 1 and broadcast is read at index 0 along
    // it while the output is written along it: in place only when the dims
    // agree at run time.
    if (sameDims(input, op.getResult(0)))
      buffers[input] = out;
    else if (std::string same = sameDimsAtRunTime(input, op.getResult(0));
             !same.empty())
      sharesWhen[chainRoot(input)] = {out, same};
  }
  for (Operation &op : block.without_terminator()) {
    if (absorbed(&op)) {
      emitted(op);
      continue;
    }
    LogicalResult ok =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case<tensor::EmptyOp>([](auto) { return success(); })
            // Checked by the dims function before the kernel runs.
            .Case<cf::AssertOp>([](auto) { return success(); })
            .Case<tensor::CastOp>([&](tensor::CastOp c) {
              // Only the static knowledge of the type changes: a view.
              buffers[c.getResult()] = bufferFor(c.getSource());
              return success();
            })
            .Case<tensor::InsertSliceOp>([&](tensor::InsertSliceOp insert) {
              return emitInsertSlice(insert);
            })
            .Case<linalg::FillOp>([&](linalg::FillOp fill) {
              if (!defersFill(fill))
                emitFillOp(fill);
              return success();
            })
            .Case<linalg::GenericOp>([&](linalg::GenericOp g) -> LogicalResult {
              if (g.getNumDpsInits() != 1)
                return g.emitOpError() << "with several results is not "
                                          "supported by the kernel emitter yet";
              return emitGenericLoops(g);
            })
            .Case<arith::ConstantOp>([&](arith::ConstantOp c) -> LogicalResult {
              if (!isa<RankedTensorType>(c.getType()))
                return emitScalar(c, decls(), "  ");
              auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
              if (!dense || !dense.isSplat())
                return c.emitOpError() << "tensor constants inside kernels "
                                          "must be splats";
              std::string name = fresh("v");
              decls() << "  const " << typeName(dense.getElementType()) << " "
                      << name << " = "
                      << literal(dense.getSplatValue<Attribute>()) << ";\n";
              emitFill(cast<RankedTensorType>(c.getType()), numElements(c),
                       bufferFor(c), name);
              return success();
            })
            .Default([&](Operation *other) -> LogicalResult {
              // Scalars outside the loops: sizes of dynamic dims, values
              // the loop bodies capture.
              if (other->getNumResults() && other->getNumRegions() == 0 &&
                  llvm::none_of(other->getResultTypes(),
                                [](Type t) { return isa<ShapedType>(t); }))
                return emitScalar(other, decls(), "  ");
              return other->emitOpError()
                     << "is not supported by the kernel emitter";
            });
    if (failed(ok))
      return failure();
    emitted(op);
  }
  for (auto [j, value] : llvm::enumerate(yield.getValues())) {
    std::string from = bufferFor(value);
    if (from != outputs[j])
      emitCopy(outputs[j], from, cast<RankedTensorType>(value.getType()),
               numElements(value));
  }
  return success();
}

LogicalResult kiln::checkElementTypes(KernelOp kernel, const CStyle &style,
                                      StringRef backend) {
  SmallVector<Type> types(kernel->getOperandTypes());
  llvm::append_range(types, kernel->getResultTypes());
  for (Type type : types) {
    Type element = cast<RankedTensorType>(type).getElementType();
    if (cTypeName(element, style).empty())
      return kernel.emitOpError()
             << "has element type " << element << ", which the " << backend
             << " backend does not support yet";
  }
  return success();
}
