//===- Ops.cpp - PyTorch's computing ops, spelled as ONNX nodes -----------===//
//
// Each op checks its operands, computes the result dtype and shape the way
// PyTorch does, and records ONNX nodes (Trace.cpp). Type promotion follows
// torch.result_type: bool < integers < floats; within a kind the wider type
// wins (u8 with i8 gives i16). A C++ number stands for a Python scalar: it
// takes the tensor's dtype, except that a non-integral number with an
// integer or bool tensor gives f32. `/` is true division.
//
//===----------------------------------------------------------------------===//

#include "jit/OpSupport.h"

#include <cmath>
#include <numeric>

namespace kiln {
namespace {
using namespace detail;

Proxy binary(const std::string &op, const Proxy &a, const Proxy &b,
             DType compute, DType result) {
  Graph &g = same(a, b);
  std::vector<Dim> shape = broadcast(op, val(a).shape, val(b).shape);
  return g.node(op, {castTo(a, compute), castTo(b, compute)}, result, shape);
}

Proxy arith(const std::string &op, const Proxy &a, const Proxy &b) {
  DType t = resultType(a, b);
  if (op == "Div" && !isFloat(t))
    t = DType::F32;
  if (t != DType::Bool)
    return binary(op, a, b, t, t);
  // On bools torch's + and max are or, * and min are and; - is an error.
  if (op == "Sub")
    fail("sub", "subtracting bool tensors is not defined (as in torch); use "
                "logical ops or cast first");
  return binary(op == "Add" || op == "Max" ? "Or" : "And", a, b, t, t);
}

Proxy scalarProxy(const Proxy &like, double v) {
  Graph &g = graphOf(like);
  DType t = scalarType(val(like).dtype, v);
  return g.add(g.scalar(t, v), t, {});
}

// Float-valued functions of integer tensors compute in f32, as torch does.
Proxy unaryFloat(const std::string &op, const Proxy &x) {
  DType t = isFloat(val(x).dtype) ? val(x).dtype : DType::F32;
  return graphOf(x).node(op, {castTo(x, t)}, t, val(x).shape);
}

std::vector<int64_t> reduceAxes(const std::string &op, const Proxy &x,
                                const std::vector<int64_t> &dims) {
  int64_t rank = x.dim();
  std::vector<int64_t> axes;
  if (dims.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t d : dims)
    axes.push_back(axis(op, d, rank));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    fail(op, "a dim is named twice");
  return axes;
}

std::vector<Dim> reducedShape(const Proxy &x, const std::vector<int64_t> &axes,
                              bool keepdim) {
  std::vector<Dim> shape;
  for (int64_t i = 0; i < x.dim(); ++i) {
    bool reduced = std::count(axes.begin(), axes.end(), i);
    if (!reduced)
      shape.push_back(x.shape()[i]);
    else if (keepdim)
      shape.push_back(Dim(1));
  }
  return shape;
}

Proxy reduce(const std::string &op, const Proxy &x,
             const std::vector<int64_t> &dims, bool keepdim, DType t) {
  std::vector<int64_t> axes = reduceAxes(op, x, dims);
  Graph &g = graphOf(x);
  std::vector<std::string> inputs = {castTo(x, t)};
  if (op == "ReduceSum") // opset 13+: axes as an input
    inputs.push_back(g.ints(axes));
  return g.node(op, inputs, t, reducedShape(x, axes, keepdim),
                [&](onnx::NodeProto &n) {
                  setInt(n, "keepdims", keepdim);
                  if (op != "ReduceSum")
                    setInts(n, "axes", axes);
                });
}

std::vector<int64_t> pair(const std::string &op, const std::string &what,
                          std::vector<int64_t> v) {
  if (v.size() == 1)
    v.push_back(v[0]);
  if (v.size() != 2)
    fail(op, what + " needs one or two values");
  return v;
}

Dim windowed(const std::string &op, const Dim &in, int64_t kernel,
             int64_t stride, int64_t pad, int64_t dilation) {
  if (in.isSymbolic() || in.size() < 0)
    return Dim(int64_t(-1));
  int64_t span = in.size() + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0 || stride <= 0)
    fail(op, "output size is too small: a window of " +
                 std::to_string(dilation * (kernel - 1) + 1) + " over " +
                 std::to_string(in.size()) + " padded by " +
                 std::to_string(pad));
  return Dim(span / stride + 1);
}

Proxy pool(const std::string &op, const std::string &name, const Proxy &x,
           std::vector<int64_t> kernel, std::vector<int64_t> stride,
           std::vector<int64_t> padding) {
  if (x.dim() != 4)
    fail(name, "needs an NCHW input, got " + shapeText(x));
  kernel = pair(name, "kernel_size", kernel);
  stride = stride.empty() ? kernel : pair(name, "stride", stride);
  padding = pair(name, "padding", padding);
  std::vector<Dim> shape = {x.shape()[0], x.shape()[1]};
  for (int i = 0; i < 2; ++i)
    shape.push_back(
        windowed(name, x.shape()[2 + i], kernel[i], stride[i], padding[i], 1));
  return graphOf(x).node(
      op, {val(x).name}, val(x).dtype, shape, [&](onnx::NodeProto &n) {
        setInts(n, "kernel_shape", kernel);
        setInts(n, "strides", stride);
        setInts(n, "pads", {padding[0], padding[1], padding[0], padding[1]});
        if (op == "AveragePool")
          setInt(n, "count_include_pad", 1);
      });
}

Proxy conv(const Proxy &x, const Proxy &w, const Proxy *bias,
           std::vector<int64_t> stride, std::vector<int64_t> padding,
           std::vector<int64_t> dilation, int64_t groups) {
  Graph &g = same(x, w);
  if (x.dim() != 4 || w.dim() != 4)
    fail("conv2d", "needs an NCHW input and an OIHW weight, got " +
                       shapeText(x) + " and " + shapeText(w));
  stride = pair("conv2d", "stride", stride);
  padding = pair("conv2d", "padding", padding);
  dilation = pair("conv2d", "dilation", dilation);
  DType t = promote(val(x).dtype, val(w).dtype);
  if (!isFloat(t))
    fail("conv2d", "needs floating-point tensors");
  std::vector<std::string> inputs = {castTo(x, t), castTo(w, t)};
  if (bias)
    inputs.push_back(castTo(*bias, (same(x, *bias), t)));
  Dim c = x.shape()[1], wc = w.shape()[1];
  if (!c.isSymbolic() && c.size() >= 0 && !wc.isSymbolic() &&
      c.size() != wc.size() * groups)
    fail("conv2d", "input " + shapeText(x) + " has " +
                       std::to_string(c.size()) + " channels, weight " +
                       shapeText(w) + " with groups=" + std::to_string(groups) +
                       " expects " + std::to_string(wc.size() * groups));
  std::vector<Dim> shape = {x.shape()[0], w.shape()[0]};
  for (int i = 0; i < 2; ++i)
    shape.push_back(windowed("conv2d", x.shape()[2 + i],
                             w.shape()[2 + i].size(), stride[i], padding[i],
                             dilation[i]));
  return g.node("Conv", inputs, t, shape, [&](onnx::NodeProto &n) {
    setInts(n, "strides", stride);
    setInts(n, "pads", {padding[0], padding[1], padding[0], padding[1]});
    setInts(n, "dilations", dilation);
    setInt(n, "group", groups);
  });
}
} // namespace

Proxy operator+(const Proxy &a, const Proxy &b) { return arith("Add", a, b); }
Proxy operator-(const Proxy &a, const Proxy &b) { return arith("Sub", a, b); }
Proxy operator*(const Proxy &a, const Proxy &b) { return arith("Mul", a, b); }
Proxy operator/(const Proxy &a, const Proxy &b) { return arith("Div", a, b); }
Proxy operator+(const Proxy &a, double b) { return a + scalarProxy(a, b); }
Proxy operator-(const Proxy &a, double b) { return a - scalarProxy(a, b); }
Proxy operator*(const Proxy &a, double b) { return a * scalarProxy(a, b); }
Proxy operator/(const Proxy &a, double b) { return a / scalarProxy(a, b); }
Proxy operator+(double a, const Proxy &b) { return scalarProxy(b, a) + b; }
Proxy operator-(double a, const Proxy &b) { return scalarProxy(b, a) - b; }
Proxy operator*(double a, const Proxy &b) { return scalarProxy(b, a) * b; }
Proxy operator/(double a, const Proxy &b) { return scalarProxy(b, a) / b; }
Proxy operator-(const Proxy &a) {
  if (val(a).dtype == DType::Bool)
    fail("neg", "is not defined for bool tensors");
  return graphOf(a).node("Neg", {val(a).name}, val(a).dtype, val(a).shape);
}

Proxy pow(const Proxy &a, double exponent) {
  DType t = scalarType(val(a).dtype, exponent);
  Graph &g = graphOf(a);
  return g.node("Pow", {castTo(a, t), g.scalar(t, exponent)}, t, val(a).shape);
}
Proxy maximum(const Proxy &a, const Proxy &b) { return arith("Max", a, b); }
Proxy minimum(const Proxy &a, const Proxy &b) { return arith("Min", a, b); }
Proxy clamp(const Proxy &x, double min, double max) {
  Graph &g = graphOf(x);
  // Bounds promote like any other number beside the tensor.
  DType t =
      promote(scalarType(val(x).dtype, min), scalarType(val(x).dtype, max));
  return g.node("Clip", {castTo(x, t), g.scalar(t, min), g.scalar(t, max)}, t,
                val(x).shape);
}

Proxy eq(const Proxy &a, const Proxy &b) {
  return binary("Equal", a, b, resultType(a, b), DType::Bool);
}
Proxy gt(const Proxy &a, const Proxy &b) {
  return binary("Greater", a, b, resultType(a, b), DType::Bool);
}
Proxy lt(const Proxy &a, const Proxy &b) {
  return binary("Less", a, b, resultType(a, b), DType::Bool);
}
Proxy where(const Proxy &condition, const Proxy &a, const Proxy &b) {
  same(condition, a);
  Graph &g = same(a, b);
  DType t = resultType(a, b);
  std::vector<Dim> shape =
      broadcast("where", val(condition).shape,
                broadcast("where", val(a).shape, val(b).shape));
  return g.node("Where",
                {castTo(condition, DType::Bool), castTo(a, t), castTo(b, t)}, t,
                shape);
}

Proxy relu(const Proxy &x) {
  return graphOf(x).node("Relu", {val(x).name}, val(x).dtype, val(x).shape);
}
Proxy sigmoid(const Proxy &x) { return unaryFloat("Sigmoid", x); }
Proxy tanh(const Proxy &x) { return unaryFloat("Tanh", x); }
Proxy exp(const Proxy &x) { return unaryFloat("Exp", x); }
Proxy log(const Proxy &x) { return unaryFloat("Log", x); }
Proxy sqrt(const Proxy &x) { return unaryFloat("Sqrt", x); }
Proxy erf(const Proxy &x) { return unaryFloat("Erf", x); }
Proxy abs(const Proxy &x) {
  return graphOf(x).node("Abs", {val(x).name}, val(x).dtype, val(x).shape);
}
Proxy gelu(const Proxy &x, const std::string &approximate) {
  if (approximate == "none")
    return x * 0.5 * (erf(x * M_SQRT1_2) + 1.0);
  if (approximate == "tanh")
    return x * 0.5 *
           (tanh((x + pow(x, 3.0) * 0.044715) * std::sqrt(2.0 / M_PI)) + 1.0);
  fail("gelu",
       "approximate must be 'none' or 'tanh', not '" + approximate + "'");
}
Proxy silu(const Proxy &x) { return x * sigmoid(x); }

Proxy sum(const Proxy &x, const std::vector<int64_t> &dims, bool keepdim) {
  DType t = isFloat(val(x).dtype) ? val(x).dtype : DType::I64;
  return reduce("ReduceSum", x, dims, keepdim, t);
}
Proxy mean(const Proxy &x, const std::vector<int64_t> &dims, bool keepdim) {
  if (!isFloat(val(x).dtype))
    fail("mean", "needs a floating-point tensor, got " + shapeText(x));
  return reduce("ReduceMean", x, dims, keepdim, val(x).dtype);
}
Proxy amax(const Proxy &x, const std::vector<int64_t> &dims, bool keepdim) {
  return reduce("ReduceMax", x, dims, keepdim, val(x).dtype);
}
Proxy softmax(const Proxy &x, int64_t dim) {
  int64_t a = axis("softmax", dim, x.dim());
  DType t = isFloat(val(x).dtype) ? val(x).dtype : DType::F32;
  return graphOf(x).node("Softmax", {castTo(x, t)}, t, val(x).shape,
                         [&](onnx::NodeProto &n) { setInt(n, "axis", a); });
}
Proxy log_softmax(const Proxy &x, int64_t dim) {
  int64_t a = axis("log_softmax", dim, x.dim());
  DType t = isFloat(val(x).dtype) ? val(x).dtype : DType::F32;
  return graphOf(x).node("LogSoftmax", {castTo(x, t)}, t, val(x).shape,
                         [&](onnx::NodeProto &n) { setInt(n, "axis", a); });
}
Proxy layer_norm(const Proxy &x, const std::vector<int64_t> &normalizedShape,
                 const Proxy &weight, const Proxy &bias, double eps) {
  int64_t rank = x.dim(), k = normalizedShape.size();
  if (k == 0 || k > rank)
    fail("layer_norm", "normalized_shape must name 1 to " +
                           std::to_string(rank) + " trailing dims");
  for (int64_t i = 0; i < k; ++i) {
    Dim d = x.shape()[rank - k + i];
    if (!d.isSymbolic() && d.size() >= 0 && d.size() != normalizedShape[i])
      fail("layer_norm", "normalized_shape does not match the trailing dims "
                         "of " +
                             shapeText(x));
  }
  DType t = val(x).dtype;
  Graph &g = same(x, weight);
  same(x, bias);
  return g.node("LayerNormalization",
                {val(x).name, castTo(weight, t), castTo(bias, t)}, t,
                val(x).shape, [&](onnx::NodeProto &n) {
                  setInt(n, "axis", rank - k);
                  setFloat(n, "epsilon", eps);
                });
}
Proxy batch_norm(const Proxy &x, const Proxy &runningMean,
                 const Proxy &runningVar, const Proxy &weight,
                 const Proxy &bias, double eps) {
  if (x.dim() < 2)
    fail("batch_norm", "needs at least 2 dims, got " + shapeText(x));
  DType t = val(x).dtype;
  Graph &g = same(x, weight);
  same(x, bias);
  same(x, runningMean);
  same(x, runningVar);
  return g.node("BatchNormalization",
                {val(x).name, castTo(weight, t), castTo(bias, t),
                 castTo(runningMean, t), castTo(runningVar, t)},
                t, val(x).shape,
                [&](onnx::NodeProto &n) { setFloat(n, "epsilon", eps); });
}

Proxy matmul(const Proxy &a, const Proxy &b) {
  Graph &g = same(a, b);
  std::vector<Dim> sa = val(a).shape, sb = val(b).shape;
  if (sa.empty() || sb.empty())
    fail("matmul", "needs tensors of rank 1 or more, got " + shapeText(a) +
                       " and " + shapeText(b));
  const Dim &ka = sa.back(), &kb = sb.size() == 1 ? sb[0] : sb[sb.size() - 2];
  if (!ka.isSymbolic() && !kb.isSymbolic() && ka.size() >= 0 &&
      kb.size() >= 0 && ka.size() != kb.size())
    fail("matmul", "inner dims differ: " + shapeText(a) + " @ " + shapeText(b));
  std::vector<Dim> batchA(sa.begin(),
                          sa.end() - std::min<size_t>(2, sa.size()));
  std::vector<Dim> batchB(sb.begin(),
                          sb.end() - std::min<size_t>(2, sb.size()));
  std::vector<Dim> shape = broadcast("matmul", batchA, batchB);
  if (sa.size() >= 2)
    shape.push_back(sa[sa.size() - 2]);
  if (sb.size() >= 2)
    shape.push_back(sb.back());
  DType t = promote(val(a).dtype, val(b).dtype);
  return g.node("MatMul", {castTo(a, t), castTo(b, t)}, t, shape);
}
Proxy linear(const Proxy &x, const Proxy &weight) {
  if (weight.dim() != 2)
    fail("linear", "weight must be [out, in], got " + shapeText(weight));
  return matmul(x, weight.t());
}
Proxy linear(const Proxy &x, const Proxy &weight, const Proxy &bias) {
  if (x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 &&
      val(x).dtype == val(weight).dtype && val(x).dtype == val(bias).dtype &&
      isFloat(val(x).dtype)) {
    same(x, weight);
    same(x, bias);
    Dim k = x.shape()[1], kw = weight.shape()[1];
    if (!k.isSymbolic() && k.size() >= 0 && k.size() != kw.size())
      fail("linear", "input " + shapeText(x) + " does not fit weight " +
                         shapeText(weight));
    std::vector<Dim> shape = {x.shape()[0], weight.shape()[0]};
    return graphOf(x).node(
        "Gemm", {val(x).name, val(weight).name, val(bias).name}, val(x).dtype,
        shape, [](onnx::NodeProto &n) { setInt(n, "transB", 1); });
  }
  return linear(x, weight) + bias;
}
Proxy conv2d(const Proxy &x, const Proxy &weight, std::vector<int64_t> stride,
             std::vector<int64_t> padding, std::vector<int64_t> dilation,
             int64_t groups) {
  return conv(x, weight, nullptr, stride, padding, dilation, groups);
}
Proxy conv2d(const Proxy &x, const Proxy &weight, const Proxy &bias,
             std::vector<int64_t> stride, std::vector<int64_t> padding,
             std::vector<int64_t> dilation, int64_t groups) {
  return conv(x, weight, &bias, stride, padding, dilation, groups);
}
Proxy max_pool2d(const Proxy &x, std::vector<int64_t> kernel,
                 std::vector<int64_t> stride, std::vector<int64_t> padding) {
  return pool("MaxPool", "max_pool2d", x, kernel, stride, padding);
}
Proxy avg_pool2d(const Proxy &x, std::vector<int64_t> kernel,
                 std::vector<int64_t> stride, std::vector<int64_t> padding) {
  return pool("AveragePool", "avg_pool2d", x, kernel, stride, padding);
}
Proxy adaptive_avg_pool2d(const Proxy &x, std::vector<int64_t> outputSize) {
  if (x.dim() != 4)
    fail("adaptive_avg_pool2d", "needs an NCHW input, got " + shapeText(x));
  if (pair("adaptive_avg_pool2d", "output_size", outputSize) !=
      std::vector<int64_t>{1, 1})
    fail("adaptive_avg_pool2d", "only output size 1x1 is supported");
  return graphOf(x).node("GlobalAveragePool", {val(x).name}, val(x).dtype,
                         {x.shape()[0], x.shape()[1], Dim(1), Dim(1)});
}
Proxy embedding(const Proxy &indices, const Proxy &weight) {
  Graph &g = same(indices, weight);
  if (isFloat(val(indices).dtype) || val(indices).dtype == DType::Bool)
    fail("embedding", "indices must be integers, got " + shapeText(indices));
  if (weight.dim() != 2)
    fail("embedding", "weight must be [num, dim], got " + shapeText(weight));
  std::vector<Dim> shape = val(indices).shape;
  shape.push_back(weight.shape()[1]);
  return g.node("Gather", {val(weight).name, val(indices).name},
                val(weight).dtype, shape,
                [](onnx::NodeProto &n) { setInt(n, "axis", 0); });
}

} // namespace kiln
