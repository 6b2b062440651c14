//===- Recurrent.cpp - RNN, GRU, LSTM -------------------------------------===//
//
// The recurrence is unrolled over the (static) sequence length, as
// onnx/reference/ops/op_{rnn,gru,lstm}.py compute it. Per direction d, with
// G gates (RNN 1, GRU 3: z r h, LSTM 4: i o f c) of hidden size h:
//
//   XW = X @ W[d]^T + biases          all steps at once: [seq, batch, G h]
//   per step t: x = XW[t], hr = H @ R[d]^T
//   RNN:  H = f(x + hr)
//   GRU:  z = f(x_z + hr_z), r = f(x_r + hr_r),
//         h~ = g(x_h + (r * H) @ R_h^T + Rb_h)       (linear_before_reset 0)
//            = g(x_h + r * (hr_h + Rb_h))            (linear_before_reset 1)
//         H = (1 - z) * h~ + z * H
//   LSTM: i = f(x_i + hr_i + P_i * C), f = f(x_f + hr_f + P_f * C)
//         (f = 1 - i with input_forget), C = f * C + i * g(x_c + hr_c),
//         o = f(x_o + hr_o + P_o * C), H = o * h(C)
//
// activations (default Sigmoid for f, Tanh for g and h; RNN Tanh) may be
// Tanh, Sigmoid, Relu, HardSigmoid, LeakyRelu, ThresholdedRelu, ScaledTanh,
// Elu, Softsign, Softplus or Affine, with activation_alpha/beta; clip clamps
// the pre-activations. Reverse runs the steps backwards; with
// sequence_lens, steps past a batch entry's length keep its state and
// output 0 (reverse reverses each entry's valid prefix first). Outputs Y
// [seq, dirs, batch, h], Y_h and Y_c [dirs, batch, h]; layout 1 puts batch
// first in X, the initial states and the outputs.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

// Default alphas and betas of the activations that take them.
Activation activationOf(const std::string &name, std::optional<double> alpha,
                        std::optional<double> beta) {
  Activation a{name};
  if (name == "HardSigmoid")
    a.alpha = 0.2, a.beta = 0.5;
  else if (name == "LeakyRelu")
    a.alpha = 0.01;
  else if (name == "ThresholdedRelu" || name == "Elu")
    a.alpha = 1.0;
  else if (name == "ScaledTanh" || name == "Affine")
    a.alpha = 1.0;
  if (alpha)
    a.alpha = *alpha;
  if (beta)
    a.beta = *beta;
  return a;
}

Value apply(OpChain &g, Type t, const Activation &a, Value x) {
  auto k = [&](double v) { return g.scalar(t, v); };
  const std::string &n = a.name;
  if (n == "Tanh")
    return g.unary(TanhOp::getOperationName(), x);
  if (n == "Sigmoid")
    return g.unary(SigmoidOp::getOperationName(), x);
  if (n == "Relu")
    return g.unary(ReluOp::getOperationName(), x);
  if (n == "Affine")
    return g.add(g.mul(x, k(a.alpha)), k(a.beta));
  if (n == "ScaledTanh")
    return g.mul(g.unary(TanhOp::getOperationName(), g.mul(x, k(a.beta))),
                 k(a.alpha));
  if (n == "HardSigmoid")
    return g.op<MaxOp>(
        {g.op<MinOp>({g.add(g.mul(x, k(a.alpha)), k(a.beta)), k(1)}), k(0)});
  if (n == "LeakyRelu")
    return g.where(g.op<LessOp>({x, k(0)}), g.mul(x, k(a.alpha)), x);
  if (n == "ThresholdedRelu")
    return g.where(g.op<GreaterOp>({x, k(a.alpha)}), x, k(0));
  if (n == "Elu")
    return g.where(
        g.op<LessOp>({x, k(0)}),
        g.mul(g.sub(g.unary(ExpOp::getOperationName(), x), k(1)), k(a.alpha)),
        x);
  if (n == "Softsign")
    return g.div(x, g.add(g.unary(AbsOp::getOperationName(), x), k(1)));
  // Softplus: log(1 + exp(x))
  return g.unary(LogOp::getOperationName(),
                 g.add(g.unary(ExpOp::getOperationName(), x), k(1)));
}

bool knownActivation(const std::string &n) {
  return llvm::is_contained({"Tanh", "Sigmoid", "Relu", "Affine", "ScaledTanh",
                             "HardSigmoid", "LeakyRelu", "ThresholdedRelu",
                             "Elu", "Softsign", "Softplus"},
                            n);
}

} // namespace

FailureOr<Values> convertRecurrent(NodeContext &c) {
  StringRef kind = c.node.op_type();
  bool lstm = kind == "LSTM", gru = kind == "GRU";
  int64_t gates = lstm ? 4 : gru ? 3 : 1;
  int perDirection = lstm ? 3 : gru ? 2 : 1;
  if (failed(arity(c, 3, lstm ? 8 : 6)))
    return failure();
  auto input = [&](size_t i) {
    return i < c.inputs.size() ? c.inputs[i] : Value();
  };
  Value x = c.inputs[0], w = c.inputs[1], r = c.inputs[2], b = input(3),
        lengths = input(4), h0 = input(5), c0 = input(6), p = input(7);
  Type t = typeOf(x).getElementType();
  if (!isa<FloatType>(t) || typeOf(x).getRank() != 3)
    return c.error("'" + kind + "' needs a 3-D floating-point input");
  bool layout = c.getInt("layout", 0) != 0;
  // The batch may be symbolic; the steps, unrolled, and the weights not.
  // (The initial states are checked against them below.)
  const char *inputNames[] = {
      "X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  int64_t batchDims[] = {layout ? 0 : 1, -1, -1, -1, 0, layout ? 0 : 1,
                         layout ? 0 : 1, -1};
  for (auto [i, v] : llvm::enumerate(c.inputs)) {
    auto type = v ? typeOf(v) : RankedTensorType();
    for (int64_t d = 0; type && i < 8 && i != 5 && i != 6 && d < type.getRank();
         ++d)
      if (d != batchDims[i] && type.isDynamicDim(d))
        return c.error("'" + kind + "' input " + inputNames[i] +
                       " has a symbolic dim " + Twine(d) +
                       ": only the batch may be symbolic (the sequence is "
                       "unrolled); bind symbolic dims with --input-shape");
  }
  std::string direction = c.getString("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return c.error("'" + kind + "' direction '" + direction +
                   "' is not one of forward, reverse, bidirectional");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  int64_t hidden = typeOf(r).getShape().back();
  if (typeOf(w).getRank() != 3 || typeOf(w).getDimSize(0) != dirs ||
      typeOf(w).getDimSize(1) != gates * hidden)
    return c.error("'" + kind + "' W must be [" + Twine(dirs) + ", " +
                   Twine(gates * hidden) + ", input_size]");
  int64_t seq = typeOf(x).getDimSize(layout ? 1 : 0),
          batch = typeOf(x).getDimSize(layout ? 0 : 1);
  if (ShapedType::isDynamic(batch) && seq == 0 && (!h0 || (lstm && !c0)))
    return c.error("'" + kind +
                   "' needs a step or initial states to size a symbolic "
                   "batch's states");
  // Initial states made from the batch at run time (ConstantOfShape of a
  // Concat of Shape's dims) can come with every dim symbolic: they take
  // their known shape, [dirs, batch, hidden] ([batch, dirs, hidden] with
  // layout 1), the batch X's.
  SmallVector<int64_t> stateDims =
      layout ? SmallVector<int64_t>{batch, dirs, hidden}
             : SmallVector<int64_t>{dirs, batch, hidden};
  for (Value *state : {&h0, &c0}) {
    if (!*state)
      continue;
    auto type = typeOf(*state);
    bool fits = type.getRank() == 3;
    for (int64_t d = 0; fits && d < 3; ++d)
      fits = type.isDynamicDim(d) || ShapedType::isDynamic(stateDims[d]) ||
             type.getDimSize(d) == stateDims[d];
    if (!fits)
      return c.error("'" + kind + "' initial state " +
                     (state == &h0 ? "initial_h" : "initial_c") + " is not [" +
                     (layout ? "batch, " + Twine(dirs) + ", " + Twine(hidden)
                             : Twine(dirs) + ", batch, " + Twine(hidden)) +
                     "]");
    if (!type.hasStaticShape()) {
      auto refined = reshapeToDims(c, *state, stateDims);
      if (failed(refined))
        return failure();
      *state = *refined;
    }
  }
  // Activations, perDirection per direction.
  std::vector<std::string> names;
  if (const auto *a = c.attr("activations"))
    for (const auto &s : a->strings())
      names.push_back(s);
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d) {
      if (lstm)
        names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      else if (gru)
        names.insert(names.end(), {"Sigmoid", "Tanh"});
      else
        names.push_back("Tanh");
    }
  if ((int64_t)names.size() != perDirection * dirs)
    return c.error("'" + kind + "' needs " + Twine(perDirection * dirs) +
                   " activations, got " + Twine(names.size()));
  std::vector<float> alphas, betas;
  if (const auto *a = c.attr("activation_alpha"))
    alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto *a = c.attr("activation_beta"))
    betas.assign(a->floats().begin(), a->floats().end());
  std::vector<Activation> acts;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!knownActivation(names[i]))
      return c.error("'" + kind + "' activation '" + names[i] +
                     "' is not supported");
    acts.push_back(activationOf(
        names[i],
        i < alphas.size() ? std::optional<double>(alphas[i]) : std::nullopt,
        i < betas.size() ? std::optional<double>(betas[i]) : std::nullopt));
  }
  std::optional<double> clip;
  if (c.attr("clip"))
    clip = c.getFloat("clip", 0);
  bool linearBeforeReset = c.getInt("linear_before_reset", 0) != 0;
  bool inputForget = c.getInt("input_forget", 0) != 0;

  OpChain g(c);
  // Time-major X [seq, batch, in] and states [dirs, batch, h].
  if (layout) {
    x = g.transpose(x, {1, 0, 2});
    if (h0)
      h0 = g.transpose(h0, {1, 0, 2});
    if (c0)
      c0 = g.transpose(c0, {1, 0, 2});
  }
  if (g.failed())
    return failure();
  auto pick = [&](Value v, int64_t d) { // v[d]
    return g.op<GatherOp>(
        {v, g.i64Constant({}, {d}, "direction")},
        {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(0))});
  };
  // A symbolic batch starts from one row of zeros, broadcast by the first
  // step's sums.
  Value zeros =
      g.splat({ShapedType::isDynamic(batch) ? 1 : batch, hidden}, t, 0);
  // sequence_lens as [batch, 1] int64, made once for every step.
  Value lengthColumn =
      lengths ? g.reshape(g.cast(lengths, c.builder.getI64Type()), {batch, 1})
              : Value();
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    bool backward = direction == "reverse" || d == 1;
    const Activation *f = &acts[d * perDirection];
    Value xd = x;
    if (backward && lengths) {
      auto flipped = reverseByLengths(c, x, lengths, 1, 0);
      if (failed(flipped))
        return failure();
      xd = *flipped;
    }
    Value wT = g.transpose(pick(w, d), {1, 0});
    Value rT = g.transpose(pick(r, d), {1, 0}); // [h, G h]
    Value xw = g.matmul(xd, wT);                // [seq, batch, G h]
    Value rb;
    if (b) {
      Value bd = pick(b, d);
      Value wb = g.sliceLast(bd, 0, gates * hidden);
      rb = g.sliceLast(bd, gates * hidden, gates * hidden);
      // GRU keeps Rb_h apart (it is inside the reset gate's product).
      xw = g.add(xw, wb);
      xw = g.add(xw, gru ? g.concat({g.sliceLast(rb, 0, 2 * hidden),
                                     g.splat({hidden}, t, 0)},
                                    0)
                         : rb);
    }
    Value h = h0 ? pick(h0, d) : zeros;
    Value cell = c0 ? pick(c0, d) : zeros;
    Value peep = p ? pick(p, d) : Value();
    auto clipped = [&](Value v) {
      if (!clip)
        return v;
      return g.op<MinOp>(
          {g.op<MaxOp>({v, g.scalar(t, -*clip)}), g.scalar(t, *clip)});
    };
    SmallVector<Value> steps(seq);
    for (int64_t s = 0; s < seq; ++s) {
      // With sequence_lens a backward pass reads its reversed input in
      // order; without, it walks the steps from the end.
      int64_t step = backward && !lengths ? seq - 1 - s : s;
      Value xt = g.reshape(g.slice(xw, 0, step, 1), {batch, gates * hidden});
      Value hr = g.matmul(h, rT);
      Value next, nextCell;
      if (!lstm && !gru) {
        next = apply(g, t, f[0], clipped(g.add(xt, hr)));
      } else if (gru) {
        Value zr = g.add(g.sliceLast(xt, 0, 2 * hidden),
                         g.sliceLast(hr, 0, 2 * hidden));
        Value z = apply(g, t, f[0], clipped(g.sliceLast(zr, 0, hidden)));
        Value rg = apply(g, t, f[0], clipped(g.sliceLast(zr, hidden, hidden)));
        Value xh = g.sliceLast(xt, 2 * hidden, hidden);
        Value rbh = rb ? g.sliceLast(rb, 2 * hidden, hidden) : Value();
        Value candidate;
        if (linearBeforeReset) {
          Value hh = g.sliceLast(hr, 2 * hidden, hidden);
          if (rbh)
            hh = g.add(hh, rbh);
          candidate = g.add(xh, g.mul(rg, hh));
        } else {
          Value rhT = g.sliceLast(rT, 2 * hidden, hidden);
          candidate = g.add(xh, g.matmul(g.mul(rg, h), rhT));
          if (rbh)
            candidate = g.add(candidate, rbh);
        }
        Value hTilde = apply(g, t, f[1], clipped(candidate));
        next = g.add(g.mul(g.sub(g.scalar(t, 1), z), hTilde), g.mul(z, h));
      } else {
        Value all = g.add(xt, hr);
        auto gate = [&](int64_t k) {
          return g.sliceLast(all, k * hidden, hidden);
        };
        auto peephole = [&](int64_t k, Value state, Value v) {
          return peep ? g.add(v, g.mul(g.sliceLast(peep, k * hidden, hidden),
                                       state))
                      : v;
        };
        Value i = apply(g, t, f[0], clipped(peephole(0, cell, gate(0))));
        Value fg = inputForget
                       ? g.sub(g.scalar(t, 1), i)
                       : apply(g, t, f[0], clipped(peephole(2, cell, gate(2))));
        Value cand = apply(g, t, f[1], clipped(gate(3)));
        nextCell = g.add(g.mul(fg, cell), g.mul(i, cand));
        Value o = apply(g, t, f[0], clipped(peephole(1, nextCell, gate(1))));
        next = g.mul(o, apply(g, t, f[2], nextCell));
      }
      Value out = next;
      if (lengths) {
        // active[b] = step < sequence_lens[b]
        Value active =
            g.op<LessOp>({g.i64Constant({}, {s}, "step"), lengthColumn});
        next = g.where(active, next, h);
        if (lstm)
          nextCell = g.where(active, nextCell, cell);
        out = g.where(active, out, g.scalar(t, 0));
      }
      h = next;
      if (lstm)
        cell = nextCell;
      steps[step] = g.reshape(out, {1, 1, batch, hidden});
    }
    Value y = g.concat(steps, 0); // [seq, 1, batch, h]
    if (backward && lengths) {
      auto back = g.failed() ? FailureOr<Value>(failure())
                             : reverseByLengths(c, y, lengths, 2, 0);
      if (failed(back))
        return failure();
      y = *back;
    }
    ys.push_back(y);
    hs.push_back(g.reshape(h, {1, batch, hidden}));
    if (lstm)
      cs.push_back(g.reshape(cell, {1, batch, hidden}));
    if (g.failed())
      return failure();
  }
  Value y = dirs == 1 ? ys[0] : g.concat(ys, 1);
  Value yh = dirs == 1 ? hs[0] : g.concat(hs, 0);
  Value yc = !lstm ? Value() : dirs == 1 ? cs[0] : g.concat(cs, 0);
  if (layout) {
    y = g.transpose(y, {2, 0, 1, 3});
    yh = g.transpose(yh, {1, 0, 2});
    if (yc)
      yc = g.transpose(yc, {1, 0, 2});
  }
  if (g.failed())
    return failure();
  Values results{y, yh};
  if (lstm)
    results.push_back(yc);
  results.resize(std::max<int64_t>(1, c.node.output_size()));
  return results;
}

void addRecurrentConverters(ConverterTable &table) {
  addRows(table, {
                     {"RNN", convertRecurrent},
                     {"GRU", convertRecurrent},
                     {"LSTM", convertRecurrent},
                 });
}

} // namespace kiln::onnx_import
