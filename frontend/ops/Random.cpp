//===- Random.cpp - random generators, Bernoulli, training Dropout --------===//
//
// Random numbers from a counter-based generator built of ordinary integer
// ops, so no kernel keeps state: element i of a draw is splitmix64(i * phi +
// key), key mixing the seed and a stream number; the top 53 bits give a
// uniform double in [0, 1). Normal draws use Box-Muller on two streams.
//
// The seed is the node's `seed` attribute; without one it is a hash of the
// node's output name, so two generators in a model draw different numbers.
// Either way a compiled model draws the same numbers on every run (kiln has
// no run-time entropy source).
//
//   RandomUniform(Like)  low + (high - low) u
//   RandomNormal(Like)   mean + scale sqrt(-2 ln(1 - u1)) cos(2 pi u2)
//   Bernoulli            u < p
//   Dropout (training)   mask = u >= ratio, y = mask ? x / (1 - ratio) : 0;
//                        with training_mode known only at run time, selected
//                        against the inference result.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/bit.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

class Generator {
public:
  Generator(NodeContext &c, OpChain &g) : c(c), g(g) {
    const onnx::AttributeProto *seed = c.attr("seed");
    key = seed ? llvm::bit_cast<uint32_t>(seed->f()) * 0x2545F4914F6CDD1Dull
               : (uint64_t)llvm::hash_value(
                     c.node.output_size() ? c.node.output(0) : "random");
  }

  /// Uniform doubles in [0, 1) of `shape` (static dims), or shaped like
  /// `like` when given.
  Value uniform(Value like, ArrayRef<int64_t> shape, uint64_t stream) {
    Value index = flatIndex(like, shape);
    Type u64 =
        IntegerType::get(c.builder.getContext(), 64, IntegerType::Unsigned);
    Value z = g.cast(index, u64);
    z = g.add(g.mul(z, constant(0x9E3779B97F4A7C15ull)),
              constant(key + stream * 0xD1B54A32D192ED03ull));
    z = g.mul(g.op<XorOp>({z, shiftRight(z, 30)}),
              constant(0xBF58476D1CE4E5B9ull));
    z = g.mul(g.op<XorOp>({z, shiftRight(z, 27)}),
              constant(0x94D049BB133111EBull));
    z = g.op<XorOp>({z, shiftRight(z, 31)});
    Type f64 = c.builder.getF64Type();
    return g.mul(g.cast(shiftRight(z, 11), f64),
                 g.scalar(f64, 1.0 / 9007199254740992.0)); // 2^-53
  }

  /// Standard normal doubles (Box-Muller).
  Value normal(Value like, ArrayRef<int64_t> shape) {
    Type f64 = c.builder.getF64Type();
    Value u1 = uniform(like, shape, 0), u2 = uniform(like, shape, 1);
    Value radius =
        g.unary(SqrtOp::getOperationName(),
                g.mul(g.scalar(f64, -2), g.unary(LogOp::getOperationName(),
                                                 g.sub(g.scalar(f64, 1), u1))));
    return g.mul(radius, g.unary(CosOp::getOperationName(),
                                 g.mul(u2, g.scalar(f64, 2 * M_PI))));
  }

private:
  Value constant(uint64_t v) {
    Type u64 =
        IntegerType::get(c.builder.getContext(), 64, IntegerType::Unsigned);
    auto plain = RankedTensorType::get({}, u64);
    return c.builder.create<ConstantOp>(
        c.loc, RankedTensorType::get({}, u64, c.device),
        DenseElementsAttr::get(plain,
                               c.builder.getIntegerAttr(u64, APInt(64, v))));
  }
  Value shiftRight(Value z, uint64_t by) {
    return g.op<ShiftRightOp>({z, constant(by)});
  }
  // The row-major position of each element: sum over axes of iota * stride.
  Value flatIndex(Value like, ArrayRef<int64_t> shape) {
    int64_t rank = like ? typeOf(like).getRank() : shape.size();
    if (rank == 0)
      return g.i64Constant({}, {0}, "index");
    Value index, stride = g.i64Constant({}, {1}, "stride");
    for (int64_t i = rank - 1; i >= 0; --i) {
      Value iota;
      if (like) {
        auto along = iotaAlong(c, like, i, rank, i);
        iota = failed(along) ? Value() : *along;
      } else {
        SmallVector<int64_t> dims(rank, 1);
        dims[i] = shape[i];
        iota = g.i64Constant(
            dims, llvm::to_vector(llvm::seq<int64_t>(0, shape[i])), "iota");
      }
      Value term = g.mul(iota, stride);
      index = index ? g.add(term, index) : term;
      if (i > 0)
        stride = g.mul(stride, like ? g.dim(like, i)
                                    : g.i64Constant({}, {shape[i]}, "dim"));
    }
    return index;
  }

  NodeContext &c;
  OpChain &g;
  uint64_t key;
};

// The node's dtype attribute as an element type, or `fallback`.
FailureOr<Type> dtypeOf(NodeContext &c, Type fallback) {
  const onnx::AttributeProto *a = c.attr("dtype");
  if (!a)
    return fallback;
  Type t = elementType(c.builder.getContext(), a->i());
  if (!t)
    return c.error(c.node.op_type() + " dtype " + Twine(a->i()) +
                   " is not supported");
  return t;
}

enum class Distribution { Uniform, Normal };

FailureOr<Values> generate(NodeContext &c, Distribution d, bool like) {
  if (failed(arity(c, like ? 1 : 0, like ? 1 : 0)))
    return failure();
  Value input = like ? c.inputs[0] : Value();
  std::vector<int64_t> shape;
  if (!like) {
    const onnx::AttributeProto *a = c.attr("shape");
    if (!a)
      return c.error(c.node.op_type() + " needs a shape attribute");
    shape.assign(a->ints().begin(), a->ints().end());
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
      return c.error(c.node.op_type() + " shape has a negative dim");
  }
  auto type = dtypeOf(c, like && isa<FloatType>(typeOf(input).getElementType())
                             ? typeOf(input).getElementType()
                             : c.builder.getF32Type());
  if (failed(type))
    return failure();
  if (!isa<FloatType>(*type))
    return c.error(c.node.op_type() + " draws floating-point values only");
  OpChain g(c);
  Generator gen(c, g);
  Type f64 = c.builder.getF64Type();
  Value v;
  if (d == Distribution::Uniform) {
    double low = c.getFloat("low", 0), high = c.getFloat("high", 1);
    v = g.add(g.scalar(f64, low),
              g.mul(g.scalar(f64, high - low), gen.uniform(input, shape, 0)));
  } else {
    double mean = c.getFloat("mean", 0), scale = c.getFloat("scale", 1);
    v = g.add(g.scalar(f64, mean),
              g.mul(g.scalar(f64, scale), gen.normal(input, shape)));
  }
  v = g.cast(v, *type);
  if (g.failed())
    return failure();
  return Values{v};
}

} // namespace

FailureOr<Values> kiln::onnx_import::convertRandomUniform(NodeContext &c) {
  return generate(c, Distribution::Uniform, /*like=*/false);
}
FailureOr<Values> kiln::onnx_import::convertRandomUniformLike(NodeContext &c) {
  return generate(c, Distribution::Uniform, /*like=*/true);
}
FailureOr<Values> kiln::onnx_import::convertRandomNormal(NodeContext &c) {
  return generate(c, Distribution::Normal, /*like=*/false);
}
FailureOr<Values> kiln::onnx_import::convertRandomNormalLike(NodeContext &c) {
  return generate(c, Distribution::Normal, /*like=*/true);
}

FailureOr<Values> kiln::onnx_import::convertBernoulli(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value p = c.inputs[0];
  auto type = dtypeOf(c, typeOf(p).getElementType());
  if (failed(type))
    return failure();
  OpChain g(c);
  Generator gen(c, g);
  Value drawn =
      g.op<LessOp>({gen.uniform(p, {}, 0), g.cast(p, c.builder.getF64Type())});
  Value out = g.cast(drawn, *type);
  if (g.failed())
    return failure();
  return Values{out};
}

FailureOr<Values> kiln::onnx_import::trainingDropout(NodeContext &c,
                                                     Value training) {
  Value x = c.inputs[0];
  Type f64 = c.builder.getF64Type(), t = typeOf(x).getElementType();
  OpChain g(c);
  Generator gen(c, g);
  Value ratio = c.inputs.size() > 1 && c.inputs[1]
                    ? g.cast(g.reshape(c.inputs[1], {}), f64)
                    : g.scalar(f64, c.getFloat("ratio", 0.5));
  Value mask = g.op<GreaterEqualOp>({gen.uniform(x, {}, 0), ratio});
  Value y = g.where(mask, g.div(x, g.cast(g.sub(g.scalar(f64, 1), ratio), t)),
                    g.scalar(t, 0));
  if (training) { // known only at run time
    Value on = g.reshape(training, {});
    y = g.where(on, y, x);
    mask = g.op<OrOp>({mask, g.op<NotOp>({on})});
  }
  if (g.failed())
    return failure();
  Values out = {y};
  if (c.node.output_size() > 1 && !c.node.output(1).empty())
    out.push_back(mask);
  return out;
}

void kiln::onnx_import::addRandomConverters(ConverterTable &table) {
  addRows(table, {
                     {"RandomUniform", convertRandomUniform},
                     {"RandomUniformLike", convertRandomUniformLike},
                     {"RandomNormal", convertRandomNormal},
                     {"RandomNormalLike", convertRandomNormalLike},
                     {"Bernoulli", convertBernoulli},
                 });
}
