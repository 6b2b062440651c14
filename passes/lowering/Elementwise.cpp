//===- Elementwise.cpp - elementwise ops to linalg.generic ----------------===//
//
// Each op becomes one all-parallel linalg.generic whose indexing maps do the
// broadcasting and whose body is the op's scalar function in arith/math.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

Value lowering::scalar(OpBuilder &b, Location loc, Type type, double value) {
  if (isa<FloatType>(type))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(type, value));
  return b.create<arith::ConstantOp>(
      loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value lowering::buildElementwise(OpBuilder &b, Location loc,
                                 RankedTensorType type, ValueRange inputs,
                                 ScalarBody body, SizeFn size) {
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps;
  for (Value input : inputs) {
    auto inType = cast<RankedTensorType>(input.getType());
    SmallVector<AffineExpr> exprs;
    int64_t offset = rank - inType.getRank();
    for (int64_t i = 0; i < inType.getRank(); ++i) {
      bool repeat =
          inType.getDimSize(i) == 1 && type.getDimSize(offset + i) != 1;
      exprs.push_back(repeat ? b.getAffineConstantExpr(0)
                             : b.getAffineDimExpr(offset + i));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, b.getContext()));
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  Value init = emptyTensor(b, loc, type, [&](int64_t i) -> Value {
    if (Value s = broadcastDim(b, loc, inputs, rank, i))
      return s;
    return size(i);
  });
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{type}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value out = body(nb, nloc, args.drop_back());
        nb.create<linalg::YieldOp>(nloc, out);
      });
  return generic.getResult(0);
}

Value lowering::filled(OpBuilder &b, Location loc, RankedTensorType type,
                       double value, SizeFn size) {
  return fill(b, loc, emptyTensor(b, loc, type, size), value);
}

Value lowering::fill(OpBuilder &b, Location loc, Value empty, double value) {
  Type element = cast<RankedTensorType>(empty.getType()).getElementType();
  Value v = scalar(b, loc, element, value);
  return b.create<linalg::FillOp>(loc, v, empty).getResult(0);
}

RankedTensorType lowering::plainResultType(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  return RankedTensorType::get(type.getShape(), type.getElementType());
}

bool lowering::isElementwiseFamily(Operation *op) {
  return isElementwise(op) || isa<ConstantOp>(op);
}

namespace {
bool isFloat(Value v) { return isa<FloatType>(v.getType()); }
// Bodies are built on the graph's element types: ui8..ui64 pick the unsigned
// arith ops here, and LowerKernels makes the types signless afterwards.
bool isUnsigned(Value v) { return v.getType().isUnsignedInteger(); }

// Integers of 2 to 7 bits (ONNX's int2/int4/uint2/uint4), held a value a
// byte at the kernel level (toSignless).
bool isSubByte(Type t) {
  return t.isInteger() && t.getIntOrFloatBitWidth() > 1 &&
         t.getIntOrFloatBitWidth() < 8;
}

// `x` converted to `to` (ONNX Cast): floats round to nearest even, floats
// to integers truncate toward zero, integers wrap.
Value castScalar(OpBuilder &nb, Location l, Value x, Type to, bool saturate) {
  Type from = x.getType();
  if (from == to)
    return x;
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(to);
  // To bool is "not zero" (NaN included), never a truncation to the low bit:
  // 64 and 0.5 are true.
  if (to.isInteger(1)) {
    if (fromFloat)
      return nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::UNE, x,
                                      lowering::scalar(nb, l, from, 0.0));
    return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, x,
                                    lowering::scalar(nb, l, from, 0));
  }
  unsigned fromBits = from.getIntOrFloatBitWidth(),
           toBits = to.getIntOrFloatBitWidth();
  if (fromFloat && toFloat) {
    if (fromBits == toBits) // bf16 <-> f16, between float8s: through f32
      x = nb.create<arith::ExtFOp>(l, nb.getF32Type(), x);
    if (fromBits < toBits)
      return nb.create<arith::ExtFOp>(l, to, x);
    auto trunc = nb.create<arith::TruncFOp>(l, to, x);
    if (!saturate && isNarrowFloat(to) && !isa<BFloat16Type>(to))
      trunc->setAttr(kNoSaturate, nb.getUnitAttr());
    return trunc;
  }
  // Sub-byte integers go through i32: the value wraps to the type's range
  // (as numpy's astype does).
  if (isSubByte(from) || isSubByte(to)) {
    Type i32 = nb.getI32Type();
    Value wide = !isSubByte(from) ? castScalar(nb, l, x, i32, saturate)
                 : from.isUnsignedInteger()
                     ? nb.create<arith::ExtUIOp>(l, i32, x).getResult()
                     : nb.create<arith::ExtSIOp>(l, i32, x).getResult();
    if (!isSubByte(to))
      return castScalar(nb, l, wide, to, saturate);
    auto shift = nb.create<arith::ConstantOp>(
        l, nb.getI32IntegerAttr(32 - static_cast<int32_t>(toBits)));
    Value wrapped =
        to.isUnsignedInteger()
            ? nb.create<arith::AndIOp>(
                    l, wide,
                    nb.create<arith::ConstantOp>(
                        l, nb.getI32IntegerAttr((1 << toBits) - 1)))
                  .getResult()
            : nb.create<arith::ShRSIOp>(
                    l, nb.create<arith::ShLIOp>(l, wide, shift), shift)
                  .getResult();
    return nb.create<arith::TruncIOp>(l, to, wrapped);
  }
  // A bool is 0 or 1: read it unsigned (true is not -1).
  bool fromUnsigned = from.isUnsignedInteger() || from.isInteger(1);
  if (!fromFloat && toFloat)
    return fromUnsigned ? nb.create<arith::UIToFPOp>(l, to, x).getResult()
                        : nb.create<arith::SIToFPOp>(l, to, x).getResult();
  if (fromFloat)
    return to.isUnsignedInteger()
               ? nb.create<arith::FPToUIOp>(l, to, x).getResult()
               : nb.create<arith::FPToSIOp>(l, to, x).getResult();
  if (fromBits == toBits) // e.g. i32 <-> ui32: the same bits
    return x;
  if (fromBits > toBits)
    return nb.create<arith::TruncIOp>(l, to, x);
  return fromUnsigned ? nb.create<arith::ExtUIOp>(l, to, x).getResult()
                      : nb.create<arith::ExtSIOp>(l, to, x).getResult();
}

template <typename FOp, typename IOp>
Value arithBinary(OpBuilder &b, Location loc, ValueRange a) {
  if (isFloat(a[0]))
    return b.create<FOp>(loc, a[0], a[1]);
  return b.create<IOp>(loc, a[0], a[1]);
}

// Like arithBinary, with UOp for unsigned integers.
template <typename FOp, typename SOp, typename UOp>
Value signedBinary(OpBuilder &b, Location loc, ValueRange a) {
  if (isUnsigned(a[0]))
    return b.create<UOp>(loc, a[0], a[1]);
  return arithBinary<FOp, SOp>(b, loc, a);
}

arith::CmpIPredicate unsignedPredicate(arith::CmpIPredicate p) {
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::slt:
    return P::ult;
  case P::sle:
    return P::ule;
  case P::sgt:
    return P::ugt;
  case P::sge:
    return P::uge;
  default:
    return p;
  }
}

template <typename MathOp>
Value unaryMath(OpBuilder &b, Location loc, ValueRange a) {
  return b.create<MathOp>(loc, a[0]);
}

// Signed integer predicates I become their unsigned twins on unsigned types.
template <arith::CmpFPredicate F, arith::CmpIPredicate I>
Value compare(OpBuilder &b, Location loc, ValueRange a) {
  if (isFloat(a[0]))
    return b.create<arith::CmpFOp>(loc, F, a[0], a[1]);
  return b.create<arith::CmpIOp>(
      loc, isUnsigned(a[0]) ? unsignedPredicate(I) : I, a[0], a[1]);
}

// ONNX BitShift, as numpy does it: a shift count that is negative or at
// least the bit width (out of range: arith would give poison) shifts every
// bit out, giving 0, or -1 for an arithmetic right shift of a negative value.
Value shift(OpBuilder &b, Location loc, ValueRange a, bool left) {
  Type t = a[0].getType();
  unsigned bits = t.getIntOrFloatBitWidth();
  // Unsigned compare: a negative count is out of range too.
  Value outOfRange = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::uge, a[1], lowering::scalar(b, loc, t, bits));
  Value zero = lowering::scalar(b, loc, t, 0);
  if (left)
    return b.create<arith::SelectOp>(loc, outOfRange, zero,
                                     b.create<arith::ShLIOp>(loc, a[0], a[1]));
  if (isUnsigned(a[0]))
    return b.create<arith::SelectOp>(loc, outOfRange, zero,
                                     b.create<arith::ShRUIOp>(loc, a[0], a[1]));
  Value count = b.create<arith::SelectOp>(
      loc, outOfRange, lowering::scalar(b, loc, t, bits - 1), a[1]);
  return b.create<arith::ShRSIOp>(loc, a[0], count);
}

// x * Phi(x): exact with erf, or the tanh approximation.
Value gelu(OpBuilder &b, Location loc, Value x, bool approximateTanh) {
  Type t = x.getType();
  Value half = lowering::scalar(b, loc, t, 0.5);
  Value one = lowering::scalar(b, loc, t, 1.0);
  Value phi;
  if (approximateTanh) {
    Value x3 =
        b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, x), x);
    Value inner = b.create<arith::AddFOp>(
        loc, x,
        b.create<arith::MulFOp>(loc, lowering::scalar(b, loc, t, 0.044715),
                                x3));
    Value scaled = b.create<arith::MulFOp>(
        loc, lowering::scalar(b, loc, t, 0.7978845608028654), inner);
    phi = b.create<math::TanhOp>(loc, scaled);
  } else {
    Value scaled = b.create<arith::MulFOp>(
        loc, x, lowering::scalar(b, loc, t, 0.7071067811865476));
    phi = b.create<math::ErfOp>(loc, scaled);
  }
  Value onePlus = b.create<arith::AddFOp>(loc, one, phi);
  return b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, half, x),
                                 onePlus);
}

} // namespace

FailureOr<Value> lowering::lowerElementwise(OpBuilder &b, Operation *op,
                                            ValueRange operands) {
  Location loc = op->getLoc();
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto type = cast<RankedTensorType>(constant.getType());
    auto plain = RankedTensorType::get(type.getShape(), type.getElementType());
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense)
      return op->emitOpError() << "inside a kernel must be dense elements";
    return b.create<arith::ConstantOp>(loc, plain, dense.reshape(plain))
        .getResult();
  }
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  auto plain = RankedTensorType::get(type.getShape(), type.getElementType());
  Type element = type.getElementType();
  bool floating = isa<FloatType>(element);
  auto needFloat = [&]() -> LogicalResult {
    if (floating)
      return success();
    return op->emitOpError()
           << "needs a floating-point element type, got " << element;
  };
  using Body = std::function<Value(OpBuilder &, Location, ValueRange)>;
  Body body =
      llvm::TypeSwitch<Operation *, Body>(op)
          .Case([](AddOp) { return arithBinary<arith::AddFOp, arith::AddIOp>; })
          .Case([](SubOp) { return arithBinary<arith::SubFOp, arith::SubIOp>; })
          .Case([](MulOp) { return arithBinary<arith::MulFOp, arith::MulIOp>; })
          .Case([](DivOp) {
            return signedBinary<arith::DivFOp, arith::DivSIOp, arith::DivUIOp>;
          })
          .Case([&](ExpandOp) -> Body {
            return [](OpBuilder &, Location, ValueRange a) -> Value {
              return a[0];
            };
          })
          .Case([&](BitcastOp bop) -> Body {
            Type to = bop.getTo();
            return [to](OpBuilder &nb, Location l, ValueRange a) -> Value {
              Value x = a[0];
              if (x.getType().isInteger(1)) // a bool's byte
                return nb.create<arith::ExtUIOp>(l, to, x);
              if (!isa<FloatType>(x.getType()) && !isa<FloatType>(to))
                return x; // e.g. ui32 <-> i32: the same bits
              return nb.create<arith::BitcastOp>(l, to, x);
            };
          })
          .Case([&](CastOp cop) -> Body {
            Type to = cop.getTo();
            bool saturate = cop.getSaturate();
            return [to, saturate](OpBuilder &nb, Location l,
                                  ValueRange a) -> Value {
              return castScalar(nb, l, a[0], to, saturate);
            };
          })
          .Case([&](LogOp) { return unaryMath<math::LogOp>; })
          .Case([&](FloorOp) { return unaryMath<math::FloorOp>; })
          .Case([&](CeilOp) { return unaryMath<math::CeilOp>; })
          .Case([&](SinOp) { return unaryMath<math::SinOp>; })
          .Case([&](CosOp) { return unaryMath<math::CosOp>; })
          .Case([&](TanOp) { return unaryMath<math::TanOp>; })
          .Case([&](AsinOp) { return unaryMath<math::AsinOp>; })
          .Case([&](AcosOp) { return unaryMath<math::AcosOp>; })
          .Case([&](AtanOp) { return unaryMath<math::AtanOp>; })
          .Case([&](SinhOp) { return unaryMath<math::SinhOp>; })
          .Case([&](CoshOp) { return unaryMath<math::CoshOp>; })
          .Case([&](AsinhOp) { return unaryMath<math::AsinhOp>; })
          .Case([&](AcoshOp) { return unaryMath<math::AcoshOp>; })
          .Case([&](AtanhOp) { return unaryMath<math::AtanhOp>; })
          .Case([&](AbsOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              if (isFloat(a[0]))
                return nb.create<math::AbsFOp>(l, a[0]);
              if (isUnsigned(a[0]))
                return a[0];
              return nb.create<math::AbsIOp>(l, a[0]);
            };
          })
          .Case([&](NotOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              // All ones: logical not of i1, bitwise not of other integers.
              return nb.create<arith::XOrIOp>(
                  l, a[0], scalar(nb, l, a[0].getType(), -1));
            };
          })
          .Case([](MaxOp) {
            return signedBinary<arith::MaximumFOp, arith::MaxSIOp,
                                arith::MaxUIOp>;
          })
          .Case([](MinOp) {
            return signedBinary<arith::MinimumFOp, arith::MinSIOp,
                                arith::MinUIOp>;
          })
          .Case([&](ShiftLeftOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return shift(nb, l, a, /*left=*/true);
            };
          })
          .Case([&](ShiftRightOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return shift(nb, l, a, /*left=*/false);
            };
          })
          .Case([](AndOp) { return arithBinary<arith::AndIOp, arith::AndIOp>; })
          .Case([](OrOp) { return arithBinary<arith::OrIOp, arith::OrIOp>; })
          .Case([](XorOp) { return arithBinary<arith::XOrIOp, arith::XOrIOp>; })
          .Case([](EqualOp) {
            return compare<arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq>;
          })
          .Case([](LessOp) {
            return compare<arith::CmpFPredicate::OLT,
                           arith::CmpIPredicate::slt>;
          })
          .Case([](LessEqualOp) {
            return compare<arith::CmpFPredicate::OLE,
                           arith::CmpIPredicate::sle>;
          })
          .Case([](GreaterOp) {
            return compare<arith::CmpFPredicate::OGT,
                           arith::CmpIPredicate::sgt>;
          })
          .Case([](GreaterEqualOp) {
            return compare<arith::CmpFPredicate::OGE,
                           arith::CmpIPredicate::sge>;
          })
          .Case([&](SignOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              Type t = a[0].getType();
              Value zero = scalar(nb, l, t, 0), one = scalar(nb, l, t, 1),
                    minus = scalar(nb, l, t, -1);
              Value pos =
                  compare<arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt>(
                      nb, l, {a[0], zero});
              Value neg =
                  compare<arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt>(
                      nb, l, {a[0], zero});
              // NaN (neither): x itself; zero: x (keeps -0).
              Value v = nb.create<arith::SelectOp>(l, neg, minus, a[0]);
              return nb.create<arith::SelectOp>(l, pos, one, v);
            };
          })
          .Case([&](RoundOp) { return unaryMath<math::RoundEvenOp>; })
          .Case([&](ModOp mop) -> Body {
            bool fmod = mop.getFmod();
            return [fmod](OpBuilder &nb, Location l, ValueRange a) -> Value {
              if (isUnsigned(a[0])) // both conventions agree
                return nb.create<arith::RemUIOp>(l, a[0], a[1]);
              Value r =
                  isFloat(a[0])
                      ? nb.create<arith::RemFOp>(l, a[0], a[1]).getResult()
                      : nb.create<arith::RemSIOp>(l, a[0], a[1]).getResult();
              if (fmod)
                return r;
              // Python's %: a nonzero remainder takes the divisor's sign.
              Type t = r.getType();
              Value zero = scalar(nb, l, t, 0);
              auto lt = [&](Value x, Value y) {
                return compare<arith::CmpFPredicate::OLT,
                               arith::CmpIPredicate::slt>(nb, l, {x, y});
              };
              Value differ =
                  nb.create<arith::XOrIOp>(l, lt(r, zero), lt(a[1], zero));
              Value nonzero = nb.create<arith::XOrIOp>(
                  l,
                  compare<arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq>(
                      nb, l, {r, zero}),
                  scalar(nb, l, nb.getI1Type(), 1));
              Value fix = nb.create<arith::AndIOp>(l, differ, nonzero);
              Value adjusted =
                  isFloat(r) ? nb.create<arith::AddFOp>(l, r, a[1]).getResult()
                             : nb.create<arith::AddIOp>(l, r, a[1]).getResult();
              return nb.create<arith::SelectOp>(l, fix, adjusted, r);
            };
          })
          .Case([&](WhereOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<arith::SelectOp>(l, a[0], a[1], a[2]);
            };
          })
          .Case([&](PowOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<math::PowFOp>(l, a[0], a[1]);
            };
          })
          .Case([&](ReluOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              if (isUnsigned(a[0])) // never negative
                return a[0];
              Value zero = scalar(nb, l, a[0].getType(), 0);
              if (isFloat(a[0]))
                return nb.create<arith::MaximumFOp>(l, a[0], zero);
              return nb.create<arith::MaxSIOp>(l, a[0], zero);
            };
          })
          .Case([&](NegOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              if (isFloat(a[0]))
                return nb.create<arith::NegFOp>(l, a[0]);
              return nb.create<arith::SubIOp>(
                  l, scalar(nb, l, a[0].getType(), 0), a[0]);
            };
          })
          .Case([&](ErfOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<math::ErfOp>(l, a[0]);
            };
          })
          .Case([&](TanhOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<math::TanhOp>(l, a[0]);
            };
          })
          .Case([&](ExpOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<math::ExpOp>(l, a[0]);
            };
          })
          .Case([&](SqrtOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return nb.create<math::SqrtOp>(l, a[0]);
            };
          })
          .Case([&](SigmoidOp) -> Body {
            return [](OpBuilder &nb, Location l, ValueRange a) -> Value {
              Type t = a[0].getType();
              Value e =
                  nb.create<math::ExpOp>(l, nb.create<arith::NegFOp>(l, a[0]));
              return nb.create<arith::DivFOp>(
                  l, scalar(nb, l, t, 1),
                  nb.create<arith::AddFOp>(l, scalar(nb, l, t, 1), e));
            };
          })
          .Case([&](ClipOp cop) -> Body {
            std::optional<double> lo, hi;
            if (auto a = cop.getMinAttr())
              lo = a.getValueAsDouble();
            if (auto a = cop.getMaxAttr())
              hi = a.getValueAsDouble();
            // max/min as reductions take them: NaN-propagating on floats,
            // signed or unsigned on integers.
            return [lo, hi](OpBuilder &nb, Location l, ValueRange a) -> Value {
              Value v = a[0];
              Type t = v.getType();
              if (lo)
                v = combine(nb, l, "max", v, scalar(nb, l, t, *lo));
              if (hi)
                v = combine(nb, l, "min", v, scalar(nb, l, t, *hi));
              return v;
            };
          })
          .Case([&](GeluOp gop) -> Body {
            bool approx = gop.getApproximateTanh();
            return [approx](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return gelu(nb, l, a[0], approx);
            };
          })
          .Default([](Operation *) { return Body(); });
  if (!body)
    return op->emitOpError() << "has no elementwise lowering";
  bool integerOk =
      isa<AddOp, SubOp, MulOp, DivOp, ReluOp, NegOp, CastOp, BitcastOp, AbsOp,
          NotOp, MaxOp, MinOp, AndOp, OrOp, XorOp, EqualOp, LessOp, LessEqualOp,
          GreaterOp, GreaterEqualOp, WhereOp, ExpandOp, SignOp, ModOp,
          ShiftLeftOp, ShiftRightOp, ClipOp>(op);
  if (!integerOk && failed(needFloat()))
    return failure();
  return buildElementwise(b, loc, plain, operands, body, [&](int64_t i) {
    return resultDim(b, op, operands, i);
  });
}
