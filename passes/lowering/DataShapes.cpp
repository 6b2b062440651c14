//===- DataShapes.cpp - ops whose shapes come from data -------------------===//
//
// expand_to, constant_of_shape, reshape_to and reduce_by take a shape or
// axes as a 1-D integer tensor. Their result sizes are index values computed
// in the kernel from that tensor's elements (tensor.extract), so the
// kernel's dims function reads them at run time (Dims.cpp, CEmitter).
//
// - expand_to: one generic broadcasting the input; each result dim is the
//   shape's entry, or the input's dim where the entry is 1 (a dynamic 1
//   repeats); a cf.assert per dim checks that the two broadcast.
// - constant_of_shape: a fill.
// - reshape_to: the ONNX Reshape / Unsqueeze / Squeeze sizes as select
//   chains over the spec's elements, then one generic over the result that
//   reads the input at the same row-major position (a copy).
// - pad: begin and end pads of each dim read from the pads (summed over
//   the axes that name it, when axes are given); each element reads the
//   input at its index minus the begin pad, clamped (constant: the value
//   outside), repeated at the edge, reflected or wrapped.
// - slice_by: ONNX's clamping of starts and ends per sliced axis, as index
//   arithmetic; each element reads the input at start + d * step.
// - range: max(ceil((limit - start) / delta), 0) elements, start + i * delta.
// - reduce_by: whether dim i is reduced is data (is i in axes?). One generic
//   per dim folds dim i into size 1 or keeps it: result dim i has size
//   (reduced ? 1 : n) and a reduction loop k of size (reduced ? n : 1), and
//   the input is read at d_i + k, so either loop is trivial. Without
//   keepdims, a reshape_to-style copy drops the reduced dims.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace kiln;

bool lowering::isDataShapeFamily(Operation *op) {
  return isa<ExpandToOp, ConstantOfShapeOp, ReshapeToOp, ReduceByOp, PadOp,
             SliceByOp, RangeOp>(op);
}

namespace {
using Iter = utils::IteratorType;

struct IndexMath {
  OpBuilder &b;
  Location loc;

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, p, x, y);
  }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value select(Value c, Value x, Value y) {
    return b.create<arith::SelectOp>(loc, c, x, y);
  }
  Value add(Value x, Value y) { return b.create<arith::AddIOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulIOp>(loc, x, y); }
  // Element i of the 1-D integer tensor `spec`, as an index.
  Value element(Value spec, int64_t i) { return elementAt(spec, index(i)); }
  Value elementAt(Value spec, Value at) {
    Value e = b.create<tensor::ExtractOp>(loc, spec, at);
    return b.create<arith::IndexCastOp>(loc, b.getIndexType(), e);
  }
  // Element `at` of a spec of `length` known only at run time, the position
  // clamped into it (callers guard what they do with entries past the end).
  Value clampedElement(Value spec, Value at, Value length) {
    Value last = b.create<arith::MaxSIOp>(
        loc, b.create<arith::SubIOp>(loc, length, index(1)), index(0));
    return elementAt(spec, b.create<arith::MinSIOp>(loc, at, last));
  }
  // An axis in [-rank, rank) made non-negative.
  Value normalized(Value axis, int64_t rank) {
    return select(cmp(arith::CmpIPredicate::slt, axis, index(0)),
                  add(axis, index(rank)), axis);
  }
  // The axes of `spec`, normalized for `rank`.
  SmallVector<Value> axes(Value spec, int64_t rank) {
    SmallVector<Value> out;
    int64_t n = cast<RankedTensorType>(spec.getType()).getDimSize(0);
    for (int64_t k = 0; k < n; ++k)
      out.push_back(normalized(element(spec, k), rank));
    return out;
  }
  // Whether `i` is one of `axes`, and how many of them are below it.
  std::pair<Value, Value> position(ArrayRef<Value> axes, int64_t i) {
    Value is = b.create<arith::ConstantIntOp>(loc, 0, 1), below = index(0);
    for (Value a : axes) {
      is = b.create<arith::OrIOp>(loc, is, eq(a, index(i)));
      below = add(below, select(cmp(arith::CmpIPredicate::slt, a, index(i)),
                                index(1), index(0)));
    }
    return {is, below};
  }
  SmallVector<Value> dims(Value t) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < cast<RankedTensorType>(t.getType()).getRank(); ++i)
      out.push_back(lowering::dimOf(b, loc, t, i));
    return out;
  }
};

// A generic over every element of `init` (no inputs) yielding `element`.
Value generateOver(OpBuilder &b, Location loc, Value init,
                   function_ref<Value(OpBuilder &, Location)> element) {
  int64_t rank = cast<RankedTensorType>(init.getType()).getRank();
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{init.getType()}, ValueRange{}, ValueRange{init},
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
          SmallVector<Iter>(rank, Iter::parallel),
          [&](OpBuilder &nb, Location l, ValueRange) {
            nb.create<linalg::YieldOp>(l, element(nb, l));
          })
      .getResult(0);
}

// `input`'s elements in row-major order as a tensor of `type` with dims
// `sizes` (a generic over the result reading the input at the same flat
// position).
Value copyReshaped(IndexMath &h, Value input, RankedTensorType type,
                   ArrayRef<Value> sizes) {
  OpBuilder &b = h.b;
  SmallVector<Value> inDims = h.dims(input);
  Value init = lowering::emptyTensor(b, h.loc, type,
                                     [&](int64_t i) { return sizes[i]; });
  int64_t rank = type.getRank();
  // Sizes that hold another number of elements (a Squeeze of a dim that is
  // 0 at run time, a Reshape to a shape given as data) would read past the
  // input, or divide by its 0 dim: the spec's error, checked at run time.
  Value in = h.index(1), out = h.index(1);
  for (Value d : inDims)
    in = h.mul(in, d);
  for (Value s : sizes)
    out = h.mul(out, s);
  b.create<cf::AssertOp>(
      h.loc, b.create<arith::CmpIOp>(h.loc, arith::CmpIPredicate::eq, in, out),
      b.getStringAttr("reshape: the new shape does not hold the input's "
                      "element count"));
  return generateOver(b, h.loc, init, [&](OpBuilder &nb, Location l) -> Value {
    IndexMath n{nb, l};
    Value flat = n.index(0);
    for (int64_t i = 0; i < rank; ++i)
      flat = n.add(n.mul(flat, sizes[i]), nb.create<linalg::IndexOp>(l, i));
    SmallVector<Value> at(inDims.size());
    for (int64_t i = (int64_t)inDims.size() - 1; i >= 0; --i) {
      at[i] = nb.create<arith::RemSIOp>(l, flat, inDims[i]);
      flat = nb.create<arith::DivSIOp>(l, flat, inDims[i]);
    }
    return Value(nb.create<tensor::ExtractOp>(l, input, at));
  });
}

// The sizes reshape_to (or reduce_by without keepdims) gives `input`.
SmallVector<Value> reshapedSizes(IndexMath &h, Value input, Value spec,
                                 StringRef mode, int64_t outRank) {
  SmallVector<Value> in = h.dims(input), out;
  int64_t rank = in.size();
  if (mode == "reshape" || mode == "reshape_allowzero") {
    // 0 copies the input's dim (allowzero: is 0), -1 is what the others
    // leave.
    Value total = h.index(1), known = h.index(1);
    for (Value d : in)
      total = h.mul(total, d);
    for (int64_t j = 0; j < outRank; ++j) {
      Value e = h.element(spec, j);
      Value copy = j < rank ? in[j] : h.index(0);
      out.push_back(mode == "reshape" ? h.select(h.eq(e, h.index(0)), copy, e)
                                      : e);
      known = h.mul(
          known, h.select(h.eq(out.back(), h.index(-1)), h.index(1), out[j]));
    }
    Value safe = h.select(h.eq(known, h.index(0)), h.index(1), known);
    Value inferred = h.b.create<arith::DivSIOp>(h.loc, total, safe);
    for (Value &d : out)
      d = h.select(h.eq(d, h.index(-1)), inferred, d);
    return out;
  }
  if (mode == "flatten") {
    // The dims before the axis, then the rest, multiplied out.
    Value axis = h.normalized(h.element(spec, 0), rank);
    Value left = h.index(1), right = h.index(1);
    for (int64_t i = 0; i < rank; ++i) {
      Value before = h.cmp(arith::CmpIPredicate::slt, h.index(i), axis);
      left = h.mul(left, h.select(before, in[i], h.index(1)));
      right = h.mul(right, h.select(before, h.index(1), in[i]));
    }
    return {left, right};
  }
  if (mode == "unsqueeze") {
    SmallVector<Value> axes = h.axes(spec, outRank);
    for (int64_t j = 0; j < outRank; ++j) {
      auto [isAxis, below] = h.position(axes, j);
      // Input dim j - below, picked by a select chain.
      Value from = h.b.create<arith::SubIOp>(h.loc, h.index(j), below);
      Value picked = h.index(1);
      for (int64_t i = 0; i < rank; ++i)
        picked = h.select(h.eq(from, h.index(i)), in[i], picked);
      out.push_back(h.select(isAxis, h.index(1), picked));
    }
    return out;
  }
  // squeeze: output j is the input dim kept j-th.
  SmallVector<Value> axes = h.axes(spec, rank);
  out.assign(outRank, h.index(1));
  for (int64_t i = 0; i < rank; ++i) {
    auto [isAxis, below] = h.position(axes, i);
    Value at = h.b.create<arith::SubIOp>(h.loc, h.index(i), below);
    Value kept = h.b.create<arith::XOrIOp>(
        h.loc, isAxis, h.b.create<arith::ConstantIntOp>(h.loc, 1, 1));
    for (int64_t j = 0; j < outRank; ++j)
      out[j] =
          h.select(h.b.create<arith::AndIOp>(h.loc, kept, h.eq(at, h.index(j))),
                   in[i], out[j]);
  }
  return out;
}

Value lowerExpandTo(IndexMath &h, ExpandToOp op, Value input, Value shape) {
  OpBuilder &b = h.b;
  auto outType = lowering::plainResultType(op);
  auto inType = cast<RankedTensorType>(input.getType());
  int64_t rank = outType.getRank(), inRank = inType.getRank();
  int64_t length = cast<RankedTensorType>(shape.getType()).getDimSize(0);
  Value init = lowering::emptyTensor(b, h.loc, outType, [&](int64_t j) {
    Value size;
    if (j >= rank - length)
      size = h.element(shape, j - (rank - length));
    int64_t i = j - (rank - inRank);
    if (i >= 0) {
      Value d = lowering::dimOf(b, h.loc, input, i);
      // The shape's entry, unless it is 1 (then the input's dim: 0 stays 0).
      if (size)
        size = b.create<arith::SelectOp>(
            h.loc,
            b.create<arith::CmpIOp>(h.loc, arith::CmpIPredicate::eq, size,
                                    b.create<arith::ConstantIndexOp>(h.loc, 1)),
            d, size);
      else
        size = d;
    }
    return size;
  });
  // That is the broadcast only where one side is 1 or both agree; anything
  // else (a dim of 0 against 312, say) is the spec's error, and the reads
  // below would leave the input.
  for (int64_t j = std::max(rank - length, rank - inRank); j < rank; ++j) {
    int64_t i = j - (rank - inRank);
    if (inType.getDimSize(i) == 1)
      continue;
    Value d = lowering::dimOf(b, h.loc, input, i);
    Value s = h.element(shape, j - (rank - length));
    Value one = b.create<arith::ConstantIndexOp>(h.loc, 1);
    auto eq = [&](Value x, Value y) {
      return b.create<arith::CmpIOp>(h.loc, arith::CmpIPredicate::eq, x, y);
    };
    Value ok = b.create<arith::OrIOp>(
        h.loc, b.create<arith::OrIOp>(h.loc, eq(d, s), eq(s, one)), eq(d, one));
    b.create<cf::AssertOp>(
        h.loc, ok,
        b.getStringAttr("expand: input dim " + Twine(i) + " and shape entry " +
                        Twine(j - (rank - length)) + " do not broadcast"));
  }
  // The input is read through tensor.extract at (d == 1 ? 0 : i) per dim:
  // an identity-mapped copy would read a dynamic dim of size 1 out of
  // bounds (and linalg takes a same-typed identity copy for a no-op).
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < inRank; ++i)
    sizes.push_back(lowering::dimOf(b, h.loc, input, i));
  return b
      .create<linalg::GenericOp>(
          h.loc, TypeRange{outType}, ValueRange{}, ValueRange{init},
          SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
          SmallVector<Iter>(rank, Iter::parallel),
          [&](OpBuilder &nb, Location l, ValueRange) {
            SmallVector<Value> at;
            for (int64_t i = 0; i < inRank; ++i) {
              Value zero = nb.create<arith::ConstantIndexOp>(l, 0);
              if (inType.getDimSize(i) == 1) {
                at.push_back(zero);
                continue;
              }
              Value j = nb.create<linalg::IndexOp>(l, i + rank - inRank);
              if (!inType.isDynamicDim(i)) {
                at.push_back(j);
                continue;
              }
              Value one = nb.create<arith::CmpIOp>(
                  l, arith::CmpIPredicate::eq, sizes[i],
                  nb.create<arith::ConstantIndexOp>(l, 1));
              at.push_back(nb.create<arith::SelectOp>(l, one, zero, j));
            }
            nb.create<linalg::YieldOp>(
                l, Value(nb.create<tensor::ExtractOp>(l, input, at)));
          })
      .getResult(0);
}

Value lowerPad(IndexMath &h, PadOp op, ValueRange operands) {
  OpBuilder &b = h.b;
  Value input = operands[0], pads = operands[1];
  Value value = op.getValue() ? operands[2] : Value();
  Value axesSpec = op.getAxes() ? operands.back() : Value();
  auto inType = cast<RankedTensorType>(input.getType());
  int64_t rank = inType.getRank();
  SmallVector<Value> in = h.dims(input), begin, end;
  if (!axesSpec) {
    for (int64_t i = 0; i < rank; ++i) {
      begin.push_back(h.element(pads, i));
      end.push_back(h.element(pads, rank + i));
    }
  } else if (!cast<RankedTensorType>(axesSpec.getType()).isDynamicDim(0)) {
    SmallVector<Value> axes = h.axes(axesSpec, rank);
    int64_t n = axes.size();
    for (int64_t i = 0; i < rank; ++i) {
      Value bi = h.index(0), ei = h.index(0);
      for (int64_t k = 0; k < n; ++k) {
        Value is = h.eq(axes[k], h.index(i));
        bi = h.add(bi, h.select(is, h.element(pads, k), h.index(0)));
        ei = h.add(ei, h.select(is, h.element(pads, n + k), h.index(0)));
      }
      begin.push_back(bi);
      end.push_back(ei);
    }
  } else {
    // Axes of a length known only at run time: distinct, so at most `rank`
    // of them; entries past the length count for nothing.
    Value n = b.create<tensor::DimOp>(h.loc, axesSpec, 0);
    Value padCount = h.add(n, n);
    for (int64_t i = 0; i < rank; ++i) {
      Value bi = h.index(0), ei = h.index(0);
      for (int64_t k = 0; k < rank; ++k) {
        Value axis =
            h.normalized(h.clampedElement(axesSpec, h.index(k), n), rank);
        Value is = b.create<arith::AndIOp>(
            h.loc, h.eq(axis, h.index(i)),
            h.cmp(arith::CmpIPredicate::slt, h.index(k), n));
        bi =
            h.add(bi, h.select(is, h.clampedElement(pads, h.index(k), padCount),
                               h.index(0)));
        ei = h.add(
            ei,
            h.select(is, h.clampedElement(pads, h.add(n, h.index(k)), padCount),
                     h.index(0)));
      }
      begin.push_back(bi);
      end.push_back(ei);
    }
  }
  auto outType = lowering::plainResultType(op);
  Value init = lowering::emptyTensor(b, h.loc, outType, [&](int64_t i) {
    return h.add(in[i], h.add(begin[i], end[i]));
  });
  Type element = inType.getElementType();
  Value fillValue =
      value ? b.create<tensor::ExtractOp>(
                   h.loc, value,
                   SmallVector<Value>(
                       cast<RankedTensorType>(value.getType()).getRank(),
                       h.index(0)))
                  .getResult()
            : lowering::scalar(b, h.loc, element, 0);
  StringRef mode = op.getMode();
  return generateOver(b, h.loc, init, [&](OpBuilder &nb, Location l) -> Value {
    IndexMath n{nb, l};
    using P = arith::CmpIPredicate;
    Value inside = nb.create<arith::ConstantIntOp>(l, 1, 1);
    SmallVector<Value> at;
    for (int64_t i = 0; i < rank; ++i) {
      Value last = nb.create<arith::SubIOp>(l, in[i], n.index(1));
      Value src = nb.create<arith::SubIOp>(l, nb.create<linalg::IndexOp>(l, i),
                                           begin[i]);
      if (mode == "constant")
        inside = nb.create<arith::AndIOp>(
            l, inside,
            nb.create<arith::AndIOp>(l, n.cmp(P::sge, src, n.index(0)),
                                     n.cmp(P::slt, src, in[i])));
      else if (mode == "reflect")
        src = n.select(
            n.cmp(P::slt, src, n.index(0)),
            nb.create<arith::SubIOp>(l, n.index(0), src),
            n.select(n.cmp(P::sgt, src, last),
                     nb.create<arith::SubIOp>(l, n.add(last, last), src), src));
      else if (mode == "wrap")
        src = nb.create<arith::RemSIOp>(
            l, n.add(nb.create<arith::RemSIOp>(l, src, in[i]), in[i]), in[i]);
      // Clamped: every read stays in bounds (edge mode is this).
      at.push_back(nb.create<arith::MaxSIOp>(
          l, n.index(0), nb.create<arith::MinSIOp>(l, src, last)));
    }
    Value read = nb.create<tensor::ExtractOp>(l, input, at);
    return mode == "constant"
               ? Value(nb.create<arith::SelectOp>(l, inside, read, fillValue))
               : read;
  });
}

Value lowerSliceBy(IndexMath &h, SliceByOp op, ValueRange operands) {
  OpBuilder &b = h.b;
  using P = arith::CmpIPredicate;
  Value input = operands[0], starts = operands[1], ends = operands[2];
  size_t next = 3;
  Value axesSpec = op.getAxes() ? operands[next++] : Value();
  Value stepsSpec = op.getSteps() ? operands[next++] : Value();
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  int64_t n = cast<RankedTensorType>(starts.getType()).getDimSize(0);
  // Specs whose length is known only at run time name distinct axes, so at
  // most `rank` of them: entry k counts only below that length, and reads
  // stay inside it.
  Value length;
  if (ShapedType::isDynamic(n)) {
    n = rank;
    length = b.create<tensor::DimOp>(h.loc, starts, 0);
  }
  auto entry = [&](Value spec, int64_t k) -> Value {
    return length ? h.clampedElement(spec, h.index(k), length)
                  : h.element(spec, k);
  };
  SmallVector<Value> in = h.dims(input);
  SmallVector<Value> axes;
  for (int64_t k = 0; k < n; ++k)
    axes.push_back(axesSpec ? h.normalized(entry(axesSpec, k), rank)
                            : h.index(k));
  auto clamp = [&](Value v, Value lo, Value hi) -> Value {
    return b.create<arith::MaxSIOp>(h.loc, lo,
                                    b.create<arith::MinSIOp>(h.loc, v, hi));
  };
  auto sub = [&](Value x, Value y) -> Value {
    return b.create<arith::SubIOp>(h.loc, x, y);
  };
  // Per dim: start, step, size (the whole dim unless an axis names it).
  SmallVector<Value> start(rank, h.index(0)), step(rank, h.index(1)),
      size(in.begin(), in.end());
  for (int64_t k = 0; k < n; ++k) {
    Value s = entry(starts, k), e = entry(ends, k);
    Value t = stepsSpec ? entry(stepsSpec, k) : h.index(1);
    Value counted = length ? h.cmp(P::slt, h.index(k), length) : Value();
    if (counted) // an entry past the length divides by a step of 1
      t = h.select(counted, t, h.index(1));
    for (int64_t i = 0; i < rank; ++i) {
      Value dim = in[i], is = h.eq(axes[k], h.index(i));
      if (counted)
        is = b.create<arith::AndIOp>(h.loc, is, counted);
      Value zero = h.index(0), one = h.index(1), last = sub(dim, one);
      Value sn = h.select(h.cmp(P::slt, s, zero), h.add(s, dim), s);
      Value en = h.select(h.cmp(P::slt, e, zero), h.add(e, dim), e);
      Value forward = h.cmp(P::sgt, t, zero);
      Value s0 = h.select(forward, clamp(sn, zero, dim), clamp(sn, zero, last));
      Value e0 =
          h.select(forward, clamp(en, zero, dim), clamp(en, h.index(-1), last));
      // ceil((e0 - s0) / t), at least 0, for either sign of t.
      Value span = h.select(forward, sub(e0, s0), sub(s0, e0));
      Value stride = h.select(forward, t, sub(zero, t));
      Value count = b.create<arith::DivSIOp>(
          h.loc, h.add(span, sub(stride, one)), stride);
      // Never more than the dim: a backward slice of an empty dim clamps
      // its start to 0 and its end to -1, which would count 1.
      count = b.create<arith::MinSIOp>(
          h.loc, b.create<arith::MaxSIOp>(h.loc, count, zero), dim);
      start[i] = h.select(is, s0, start[i]);
      step[i] = h.select(is, t, step[i]);
      size[i] = h.select(is, count, size[i]);
    }
  }
  auto outType = lowering::plainResultType(op);
  Value init = lowering::emptyTensor(b, h.loc, outType,
                                     [&](int64_t i) { return size[i]; });
  return generateOver(b, h.loc, init, [&](OpBuilder &nb, Location l) -> Value {
    IndexMath m{nb, l};
    SmallVector<Value> at;
    for (int64_t i = 0; i < rank; ++i)
      at.push_back(
          m.add(start[i], m.mul(nb.create<linalg::IndexOp>(l, i), step[i])));
    return Value(nb.create<tensor::ExtractOp>(l, input, at));
  });
}

Value lowerRange(IndexMath &h, RangeOp op, ValueRange operands) {
  OpBuilder &b = h.b;
  Location loc = h.loc;
  auto read = [&](Value v) -> Value {
    return b.create<tensor::ExtractOp>(loc, v, ValueRange{});
  };
  Value start = read(operands[0]), limit = read(operands[1]),
        delta = read(operands[2]);
  Type t = start.getType();
  Value count; // as i64
  if (isa<FloatType>(t)) {
    Value steps = b.create<arith::DivFOp>(
        loc, b.create<arith::SubFOp>(loc, limit, start), delta);
    count = b.create<arith::FPToSIOp>(loc, b.getI64Type(),
                                      b.create<math::CeilOp>(loc, steps));
  } else {
    // ceil((limit - start) / delta) for either sign of delta.
    Value span = b.create<arith::SubIOp>(loc, limit, start);
    Value zero = lowering::scalar(b, loc, t, 0),
          one = lowering::scalar(b, loc, t, 1);
    Value up =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, delta, zero);
    Value bias = b.create<arith::SelectOp>(
        loc, up, b.create<arith::SubIOp>(loc, delta, one),
        b.create<arith::AddIOp>(loc, delta, one));
    count = b.create<arith::DivSIOp>(
        loc, b.create<arith::AddIOp>(loc, span, bias), delta);
    if (!t.isInteger(64))
      count = b.create<arith::ExtSIOp>(loc, b.getI64Type(), count);
  }
  Value size = b.create<arith::MaxSIOp>(
      loc, b.create<arith::IndexCastOp>(loc, b.getIndexType(), count),
      h.index(0));
  auto outType = lowering::plainResultType(op);
  Value init =
      lowering::emptyTensor(b, loc, outType, [&](int64_t) { return size; });
  return generateOver(b, loc, init, [&](OpBuilder &nb, Location l) -> Value {
    Value i = nb.create<arith::IndexCastOp>(l, nb.getI64Type(),
                                            nb.create<linalg::IndexOp>(l, 0));
    if (isa<FloatType>(t))
      return nb.create<arith::AddFOp>(
          l, start,
          nb.create<arith::MulFOp>(l, nb.create<arith::SIToFPOp>(l, t, i),
                                   delta));
    if (!t.isInteger(64))
      i = nb.create<arith::TruncIOp>(l, t, i);
    return nb.create<arith::AddIOp>(l, start,
                                    nb.create<arith::MulIOp>(l, i, delta));
  });
}

FailureOr<Value> lowerReduceBy(IndexMath &h, ReduceByOp op, Value input,
                               Value axesSpec) {
  OpBuilder &b = h.b;
  auto inType = cast<RankedTensorType>(input.getType());
  Type element = inType.getElementType();
  StringRef kind = op.getKind();
  int64_t rank = inType.getRank();
  SmallVector<Value> axes = h.axes(axesSpec, rank);
  Value current = input, count = h.index(1);
  for (int64_t i = 0; i < rank; ++i) {
    if (inType.getDimSize(i) == 1)
      continue; // reduced or not, it stays 1
    Value isAxis = h.position(axes, i).first;
    Value n = lowering::dimOf(b, h.loc, current, i);
    Value kept = h.select(isAxis, h.index(1), n);
    Value folded = h.select(isAxis, n, h.index(1));
    count = h.mul(count, folded);
    auto curType = cast<RankedTensorType>(current.getType());
    SmallVector<int64_t> shape(curType.getShape());
    shape[i] = ShapedType::kDynamic;
    auto stepType = RankedTensorType::get(shape, element);
    Value init = lowering::fillIdentity(
        b, h.loc,
        lowering::emptyTensor(b, h.loc, stepType,
                              [&](int64_t j) {
                                return j == i ? kept
                                              : lowering::dimOf(b, h.loc,
                                                                current, j);
                              }),
        kind);
    // The window operand gives the reduction loop its size.
    Value window = b.create<tensor::EmptyOp>(
        h.loc, RankedTensorType::get({ShapedType::kDynamic}, element),
        ValueRange{folded});
    SmallVector<AffineExpr> inExprs, outExprs;
    for (int64_t j = 0; j < rank; ++j) {
      AffineExpr d = b.getAffineDimExpr(j);
      inExprs.push_back(j == i ? d + b.getAffineDimExpr(rank) : d);
      outExprs.push_back(d);
    }
    SmallVector<Iter> iterators(rank, Iter::parallel);
    iterators.push_back(Iter::reduction);
    MLIRContext *ctx = b.getContext();
    current =
        b.create<linalg::GenericOp>(
             h.loc, TypeRange{stepType}, ValueRange{current, window},
             ValueRange{init},
             SmallVector<AffineMap>{
                 AffineMap::get(rank + 1, 0, inExprs, ctx),
                 AffineMap::get(rank + 1, 0, {b.getAffineDimExpr(rank)}, ctx),
                 AffineMap::get(rank + 1, 0, outExprs, ctx)},
             iterators,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               nb.create<linalg::YieldOp>(
                   l, lowering::combine(nb, l, kind, a[2], a[0]));
             })
            .getResult(0);
  }
  if (kind == "mean" && !isa<FloatType>(element)) {
    auto divisor = lowering::integerCount(b, op, element, 1, count);
    if (failed(divisor))
      return failure();
    current = lowering::buildElementwise(
        b, h.loc, cast<RankedTensorType>(current.getType()), current,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          return lowering::integerMean(nb, l, a[0], *divisor);
        });
  } else if (kind == "mean") {
    Value n = b.create<arith::IndexCastOp>(h.loc, b.getI64Type(), count);
    Value divisor = b.create<arith::SIToFPOp>(h.loc, element, n);
    current = lowering::buildElementwise(
        b, h.loc, cast<RankedTensorType>(current.getType()), current,
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          return nb.create<arith::DivFOp>(l, a[0], divisor);
        });
  }
  auto outType = lowering::plainResultType(op);
  if (op.getKeepdims()) {
    // Static 1s of the result type where the input had them.
    if (current.getType() == outType)
      return current;
    return copyReshaped(h, current, outType, h.dims(current));
  }
  return copyReshaped(
      h, current, outType,
      reshapedSizes(h, current, axesSpec, "squeeze", outType.getRank()));
}
} // namespace

FailureOr<Value> lowering::lowerDataShape(OpBuilder &b, Operation *op,
                                          ValueRange operands) {
  IndexMath h{b, op->getLoc()};
  auto outType = plainResultType(op);
  if (auto expand = dyn_cast<ExpandToOp>(op))
    return lowerExpandTo(h, expand, operands[0], operands[1]);
  if (auto constant = dyn_cast<ConstantOfShapeOp>(op)) {
    Value empty = emptyTensor(b, h.loc, outType, [&](int64_t i) {
      return h.element(operands[0], i);
    });
    Value v = b.create<arith::ConstantOp>(h.loc, constant.getValue());
    return b.create<linalg::FillOp>(h.loc, v, empty).getResult(0);
  }
  if (auto range = dyn_cast<RangeOp>(op))
    return lowerRange(h, range, operands);
  if (auto slice = dyn_cast<SliceByOp>(op))
    return lowerSliceBy(h, slice, operands);
  if (auto pad = dyn_cast<PadOp>(op))
    return lowerPad(h, pad, operands);
  if (auto reshape = dyn_cast<ReshapeToOp>(op))
    return copyReshaped(h, operands[0], outType,
                        reshapedSizes(h, operands[0], operands[1],
                                      reshape.getMode(), outType.getRank()));
  return lowerReduceBy(h, cast<ReduceByOp>(op), operands[0], operands[1]);
}
