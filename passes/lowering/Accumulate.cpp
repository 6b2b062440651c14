//===- Accumulate.cpp - half-precision sums accumulate in f32 -------------===//
//
// A reduction generic whose results are float16, bfloat16 or a float8 (a
// ReduceSum, a mean's or a softmax's sum, a MatMul, a conv, an average
// pool's window) would round its accumulator to the narrow type at every
// step: ReduceSum over 65,536 halves gave -8176 where torch and onnxruntime,
// which accumulate in float32, give -47808. Each such generic is rebuilt to
// accumulate in f32: its inits widened (a fill becomes an f32 fill), its
// body computed in f32 (inputs extended as they are read, no rounding
// between the body's ops), and its results rounded once, after it. Bodies
// of max, min, compares and selects only are exact in any precision and
// stay as they are.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace kiln;

namespace {
bool isHalfLike(Type t) { return t.isF16() || isNarrowFloat(t); }

bool isHalfLikeTensor(Type t) { return isHalfLike(getElementTypeOrSelf(t)); }

// Whether `op`'s body rounds in a way f32 accumulation changes: it has a
// half-like result and arithmetic other than max/min.
bool needsWideAccumulator(linalg::GenericOp op) {
  if (op.getNumReductionLoops() == 0 || !op.hasPureTensorSemantics() ||
      llvm::none_of(op->getResultTypes(), isHalfLikeTensor))
    return false;
  return llvm::any_of(op.getRegion().front(), [](Operation &inner) {
    return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
               arith::RemFOp>(inner) ||
           isa<math::MathDialect>(inner.getDialect());
  });
}

// `value` (a tensor of half-like elements) converted elementwise to `to`.
Value convertTensor(OpBuilder &b, Location loc, Value value, Type to) {
  auto type = cast<RankedTensorType>(value.getType());
  auto result = RankedTensorType::get(type.getShape(), to);
  bool widen = to.getIntOrFloatBitWidth() >
               type.getElementType().getIntOrFloatBitWidth();
  return lowering::buildElementwise(
      b, loc, result, value,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        if (widen)
          return nb.create<arith::ExtFOp>(l, to, args[0]);
        return nb.create<arith::TruncFOp>(l, to, args[0]);
      },
      [&](int64_t i) { return lowering::dimOf(b, loc, value, i); });
}

// The f32 init standing for half-like `init`: a fill of a constant is
// refilled in f32, anything else widened element by element.
Value wideInit(OpBuilder &b, Location loc, Value init) {
  Type f32 = b.getF32Type();
  auto type = cast<RankedTensorType>(init.getType());
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    if (auto constant = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>())
      if (auto value = dyn_cast<FloatAttr>(constant.getValue()))
        return lowering::filled(
            b, loc, RankedTensorType::get(type.getShape(), f32),
            value.getValueAsDouble(),
            [&](int64_t i) { return lowering::dimOf(b, loc, init, i); });
  return convertTensor(b, loc, init, f32);
}

// Clones `old`'s body into the new generic's block, computing every
// half-like value in f32.
struct BodyWidener {
  BodyWidener(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  OpBuilder &b;
  Location loc;
  IRMapping narrow;            // old value -> new value of the same type
  DenseMap<Value, Value> wide; // old half-like value -> its f32 value

  Type f32() { return b.getF32Type(); }

  Value wideOf(Value old) {
    if (Value w = wide.lookup(old))
      return w;
    Value w = b.create<arith::ExtFOp>(loc, f32(), narrowOf(old));
    wide[old] = w;
    return w;
  }

  // A value defined above the body (captured by it) is itself.
  Value narrowOf(Value old) {
    if (Value n = narrow.lookupOrNull(old))
      return n;
    if (!wide.count(old))
      return old;
    Value n = b.create<arith::TruncFOp>(loc, old.getType(), wide.lookup(old));
    narrow.map(old, n);
    return n;
  }

  void clone(Operation &op) {
    if (auto ext = dyn_cast<arith::ExtFOp>(op);
        ext && isHalfLike(ext.getIn().getType()) && ext.getType().isF32()) {
      narrow.map(ext.getResult(), wideOf(ext.getIn()));
      return;
    }
    if (auto trunc = dyn_cast<arith::TruncFOp>(op);
        trunc && isHalfLike(trunc.getType()) &&
        trunc.getIn().getType().isF32()) {
      wide[trunc.getResult()] = narrowOf(trunc.getIn());
      return;
    }
    if (auto constant = dyn_cast<arith::ConstantOp>(op);
        constant && isHalfLike(constant.getType())) {
      double value = cast<FloatAttr>(constant.getValue()).getValueAsDouble();
      wide[constant.getResult()] = b.create<arith::ConstantOp>(
          loc, b.getF32FloatAttr(static_cast<float>(value)));
      return;
    }
    auto halfLike = [](Value v) { return isHalfLike(v.getType()); };
    bool computes =
        isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) &&
        !isa<arith::BitcastOp>(op) &&
        (llvm::any_of(op.getOperands(), halfLike) ||
         llvm::any_of(op.getResults(), halfLike));
    if (!computes) {
      for (Value operand : op.getOperands())
        narrowOf(operand);
      b.clone(op, narrow);
      return;
    }
    // The same op on f32 values: arith and math ops are defined on any
    // float type, and those that convert to or from a half-like type
    // (sitofp, fptosi, cmpf) do so from f32 as well.
    IRMapping operands;
    for (Value operand : op.getOperands())
      operands.map(operand,
                   halfLike(operand) ? wideOf(operand) : narrowOf(operand));
    Operation *copy = b.clone(op, operands);
    for (auto [old, result] : llvm::zip(op.getResults(), copy->getResults())) {
      if (halfLike(old)) {
        result.setType(f32());
        wide[old] = result;
      } else {
        narrow.map(old, result);
      }
    }
  }
};

void widenAccumulator(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Value> inits;
  SmallVector<Type> resultTypes;
  for (Value init : op.getDpsInits()) {
    bool half = isHalfLikeTensor(init.getType());
    inits.push_back(half ? wideInit(b, loc, init) : init);
    resultTypes.push_back(inits.back().getType());
  }
  Block &old = op.getRegion().front();
  unsigned numInputs = op.getNumDpsInputs();
  auto generic = b.create<linalg::GenericOp>(
      loc, resultTypes, op.getDpsInputs(), inits, op.getIndexingMapsArray(),
      op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        BodyWidener body(nb, l);
        for (auto [i, arg] : llvm::enumerate(old.getArguments())) {
          if (i >= numInputs && isHalfLike(arg.getType()))
            body.wide[arg] = args[i]; // the f32 accumulator
          else
            body.narrow.map(arg, args[i]);
        }
        for (Operation &inner : old.without_terminator())
          body.clone(inner);
        SmallVector<Value> yields;
        for (auto [i, value] :
             llvm::enumerate(old.getTerminator()->getOperands()))
          yields.push_back(isHalfLikeTensor(op->getResult(i).getType())
                               ? body.wideOf(value)
                               : body.narrowOf(value));
        nb.create<linalg::YieldOp>(l, yields);
      });
  for (auto [old, result] : llvm::zip(op->getResults(), generic.getResults())) {
    Type element = getElementTypeOrSelf(old.getType());
    old.replaceAllUsesWith(
        isHalfLike(element) ? convertTensor(b, loc, result, element) : result);
  }
  op.erase();
}
} // namespace

void lowering::accumulateInF32(Block &body) {
  SmallVector<linalg::GenericOp> generics;
  body.walk([&](linalg::GenericOp op) {
    if (needsWideAccumulator(op))
      generics.push_back(op);
  });
  for (linalg::GenericOp op : generics)
    widenAccumulator(op);
}
