//===- Ops.cpp - PyTorch's tensor ops, spelled as ONNX nodes --------------===//
//
// Each op checks its operands, computes the result dtype and shape the way
// PyTorch does, and records ONNX nodes (Trace.cpp). Type promotion follows
// torch.result_type: bool < integers < floats; within a kind the wider type
// wins (u8 with i8 gives i16). A C++ number stands for a Python scalar: it
// takes the tensor's dtype, except that a non-integral number with an
// integer or bool tensor gives f32. `/` is true division.
//
//===----------------------------------------------------------------------===//

#include "jit/Trace.h"

#include <cmath>
#include <numeric>

namespace kiln {
namespace {
using detail::Graph;

int kindOf(DType t) {
  switch (t) {
  case DType::Bool:
    return 0;
  case DType::F16:
  case DType::F32:
  case DType::F64:
    return 2;
  default:
    return 1;
  }
}
bool isFloat(DType t) { return kindOf(t) == 2; }
bool isSigned(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 ||
         t == DType::I64;
}

DType signedOfSize(size_t bytes) {
  return bytes <= 1   ? DType::I8
         : bytes == 2 ? DType::I16
         : bytes == 4 ? DType::I32
                      : DType::I64;
}

DType promote(DType a, DType b) {
  if (a == b)
    return a;
  if (kindOf(a) != kindOf(b))
    return kindOf(a) > kindOf(b) ? a : b;
  if (kindOf(a) == 2)
    return dtypeSize(a) >= dtypeSize(b) ? a : b;
  if (isSigned(a) == isSigned(b))
    return dtypeSize(a) >= dtypeSize(b) ? a : b;
  DType s = isSigned(a) ? a : b, u = isSigned(a) ? b : a;
  if (dtypeSize(s) > dtypeSize(u))
    return s;
  return signedOfSize(std::min<size_t>(8, dtypeSize(u) * 2));
}

Graph &graphOf(const Proxy &p) { return p.graph(); }
const Graph::Value &val(const Proxy &p) { return p.graph().value(p); }

std::string shapeText(const Proxy &p) {
  return describe(val(p).dtype, val(p).shape);
}

[[noreturn]] void fail(const std::string &op, const std::string &message) {
  throw Error(op + ": " + message);
}

int64_t axis(const std::string &op, int64_t d, int64_t rank) {
  if (d < -rank || d >= rank)
    fail(op, "dim " + std::to_string(d) + " is out of range for rank " +
                 std::to_string(rank));
  return d < 0 ? d + rank : d;
}

void setInts(onnx::NodeProto &n, const std::string &name,
             const std::vector<int64_t> &values) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a->add_ints(v);
}
void setInt(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void setFloat(onnx::NodeProto &n, const std::string &name, double v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

// Broadcast shapes as numpy does; a symbol meets 1 or itself, a size meets 1.
std::vector<Dim> broadcast(const std::string &op, const std::vector<Dim> &a,
                           const std::vector<Dim> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> out(rank, Dim(1));
  for (size_t i = 0; i < rank; ++i) {
    Dim x = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    Dim y = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (x == Dim(1))
      out[i] = y;
    else if (y == Dim(1) || x == y)
      out[i] = x;
    else if (!x.isSymbolic() && !y.isSymbolic() && x.size() >= 0 &&
             y.size() >= 0)
      fail(op, "shapes cannot broadcast: dim " + std::to_string(i) + " is " +
                   std::to_string(x.size()) + " and " +
                   std::to_string(y.size()));
    else // a symbol or unknown meets a size: the size (checked at run time)
      out[i] = (x.isSymbolic() || x.size() < 0) ? y : x;
  }
  return out;
}

std::string castTo(const Proxy &p, DType dtype) {
  const Graph::Value &v = val(p);
  if (v.dtype == dtype)
    return v.name;
  return val(graphOf(p).node("Cast", {v.name}, dtype, v.shape,
                             [&](onnx::NodeProto &n) {
                               setInt(n, "to", onnxDataType(dtype));
                             }))
      .name;
}

Graph &same(const Proxy &a, const Proxy &b) {
  if (&a.graph() != &b.graph())
    throw Error("proxies from two different traces were combined");
  return a.graph();
}

Proxy binary(const std::string &op, const Proxy &a, const Proxy &b,
             DType compute, DType result) {
  Graph &g = same(a, b);
  std::vector<Dim> shape = broadcast(op, val(a).shape, val(b).shape);
  return g.node(op, {castTo(a, compute), castTo(b, compute)}, result, shape);
}

Proxy arith(const std::string &op, const Proxy &a, const Proxy &b) {
  DType t = promote(val(a).dtype, val(b).dtype);
  if (op == "Div" && !isFloat(t))
    t = DType::F32;
  if (t == DType::Bool && op != "Mul")
    t = DType::I64;
  return binary(op, a, b, t, t);
}

// The dtype a Python scalar `v` gives beside a tensor of `t`.
DType scalarType(DType t, double v) {
  if (isFloat(t))
    return t;
  if (std::floor(v) != v)
    return DType::F32;
  return t == DType::Bool ? DType::I64 : t;
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

// One entry of a reshape target: a size, or dim `index` of ONNX value
// `source` read at run time.
struct Piece {
  int64_t size;
  std::string source;
  int64_t index = 0;
};

Proxy reshapeTo(const Proxy &x, const std::vector<Piece> &pieces,
                std::vector<Dim> shape) {
  Graph &g = graphOf(x);
  bool dynamic = std::any_of(pieces.begin(), pieces.end(),
                             [](const Piece &p) { return !p.source.empty(); });
  std::string target;
  if (!dynamic) {
    std::vector<int64_t> sizes;
    for (const Piece &p : pieces)
      sizes.push_back(p.size);
    target = g.ints(sizes);
  } else {
    std::vector<std::string> parts;
    for (const Piece &p : pieces) {
      if (p.source.empty()) {
        parts.push_back(g.ints({p.size}));
        continue;
      }
      std::string shapeOf =
          val(g.node("Shape", {p.source}, DType::I64, {Dim(-1)})).name;
      parts.push_back(
          val(g.node("Gather", {shapeOf, g.ints({p.index})}, DType::I64,
                     {Dim(1)},
                     [](onnx::NodeProto &n) { setInt(n, "axis", 0); }))
              .name);
    }
    target =
        val(g.node("Concat", parts, DType::I64, {Dim(int64_t(pieces.size()))},
                   [](onnx::NodeProto &n) { setInt(n, "axis", 0); }))
            .name;
  }
  return g.node("Reshape", {val(x).name, target}, val(x).dtype,
                std::move(shape));
}

// The static element count of `dims`, or -1.
int64_t staticCount(const std::vector<Dim> &dims) {
  int64_t n = 1;
  for (const Dim &d : dims) {
    if (d.isSymbolic() || d.size() < 0)
      return -1;
    n *= d.size();
  }
  return n;
}

std::vector<int64_t> pair(const std::string &op, const std::string &what,
                          std::vector<int64_t> v) {
  if (v.size() == 1)
    v.push_back(v[0]);
  if (v.size() != 2)
    fail(op, what + " needs one or two values");
  return v;
}

Dim windowed(const Dim &in, int64_t kernel, int64_t stride, int64_t pad,
             int64_t dilation) {
  if (in.isSymbolic() || in.size() < 0)
    return Dim(int64_t(-1));
  return Dim((in.size() + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1);
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
        windowed(x.shape()[2 + i], kernel[i], stride[i], padding[i], 1));
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
    inputs.push_back(castTo(*bias, t));
  const Dim &c = x.shape()[1], &wc = w.shape()[1];
  if (!c.isSymbolic() && c.size() >= 0 && !wc.isSymbolic() &&
      c.size() != wc.size() * groups)
    fail("conv2d", "input " + shapeText(x) + " has " +
                       std::to_string(c.size()) + " channels, weight " +
                       shapeText(w) + " with groups=" + std::to_string(groups) +
                       " expects " + std::to_string(wc.size() * groups));
  std::vector<Dim> shape = {x.shape()[0], w.shape()[0]};
  for (int i = 0; i < 2; ++i)
    shape.push_back(windowed(x.shape()[2 + i], w.shape()[2 + i].size(),
                             stride[i], padding[i], dilation[i]));
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
  DType t = val(x).dtype;
  return g.node("Clip", {val(x).name, g.scalar(t, min), g.scalar(t, max)}, t,
                val(x).shape);
}

Proxy eq(const Proxy &a, const Proxy &b) {
  return binary("Equal", a, b, promote(val(a).dtype, val(b).dtype),
                DType::Bool);
}
Proxy gt(const Proxy &a, const Proxy &b) {
  return binary("Greater", a, b, promote(val(a).dtype, val(b).dtype),
                DType::Bool);
}
Proxy lt(const Proxy &a, const Proxy &b) {
  return binary("Less", a, b, promote(val(a).dtype, val(b).dtype), DType::Bool);
}
Proxy where(const Proxy &condition, const Proxy &a, const Proxy &b) {
  same(condition, a);
  Graph &g = same(a, b);
  DType t = promote(val(a).dtype, val(b).dtype);
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
    const Dim &d = x.shape()[rank - k + i];
    if (!d.isSymbolic() && d.size() >= 0 && d.size() != normalizedShape[i])
      fail("layer_norm", "normalized_shape does not match the trailing dims "
                         "of " +
                             shapeText(x));
  }
  DType t = val(x).dtype;
  Graph &g = same(x, weight);
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
    const Dim &k = x.shape()[1], &kw = weight.shape()[1];
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

Proxy reshape(const Proxy &x, const std::vector<Dim> &shape) {
  Graph &g = graphOf(x);
  std::vector<Piece> pieces;
  std::vector<Dim> out;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim &d = shape[i];
    if (d.isSymbolic()) {
      auto it = g.symbols.find(d.symbol());
      if (it == g.symbols.end())
        fail("reshape", "'" + d.symbol() + "' is no symbol of the inputs");
      pieces.push_back({0, it->second.first, it->second.second});
      out.push_back(d);
      known = -1;
    } else if (d.size() == -1) {
      if (inferred >= 0)
        fail("reshape", "only one dim may be -1");
      inferred = int(i);
      pieces.push_back({-1, "", 0});
      out.push_back(Dim(int64_t(-1)));
    } else if (d.size() < 0) {
      fail("reshape", "dim " + std::to_string(d.size()) + " is invalid");
    } else {
      pieces.push_back({d.size(), "", 0});
      out.push_back(d);
      if (known >= 0)
        known *= d.size();
    }
  }
  int64_t total = staticCount(val(x).shape);
  if (total >= 0 && known >= 0) {
    if (inferred >= 0) {
      if (known == 0 || total % known)
        fail("reshape", "shape cannot hold the " + std::to_string(total) +
                            " elements of " + shapeText(x));
      out[inferred] = Dim(total / known);
    } else if (total != known) {
      fail("reshape", "shape has " + std::to_string(known) + " elements, " +
                          shapeText(x) + " has " + std::to_string(total));
    }
  } else if (inferred >= 0) {
    // -1 with a symbolic count: if the symbolic dims agree on both sides,
    // the rest is static.
    std::vector<Dim> rest = val(x).shape;
    int64_t restCount = 1;
    bool ok = true;
    for (const Dim &d : out) {
      if (!d.isSymbolic())
        continue;
      auto it = std::find(rest.begin(), rest.end(), d);
      if (it == rest.end())
        ok = false;
      else
        rest.erase(it);
    }
    int64_t restStatic = staticCount(rest);
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i].isSymbolic() && int(i) != inferred)
        restCount *= out[i].size();
    if (ok && restStatic >= 0 && restCount > 0 && restStatic % restCount == 0)
      out[inferred] = Dim(restStatic / restCount);
  }
  // A -1 the trace could size is spelled out, so the importer need not
  // divide symbolic counts.
  if (inferred >= 0 && !out[inferred].isSymbolic() && out[inferred].size() >= 0)
    pieces[inferred].size = out[inferred].size();
  return reshapeTo(x, pieces, out);
}
Proxy transpose(const Proxy &x, int64_t dim0, int64_t dim1) {
  int64_t rank = x.dim();
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[axis("transpose", dim0, rank)],
            perm[axis("transpose", dim1, rank)]);
  return permute(x, perm);
}
Proxy permute(const Proxy &x, const std::vector<int64_t> &dims) {
  int64_t rank = x.dim();
  if (int64_t(dims.size()) != rank)
    fail("permute",
         "needs " + std::to_string(rank) + " dims for " + shapeText(x));
  std::vector<int64_t> perm;
  std::vector<Dim> shape;
  for (int64_t d : dims) {
    perm.push_back(axis("permute", d, rank));
    shape.push_back(x.shape()[perm.back()]);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail("permute", "a dim is named twice");
  return graphOf(x).node("Transpose", {val(x).name}, val(x).dtype, shape,
                         [&](onnx::NodeProto &n) { setInts(n, "perm", perm); });
}
Proxy flatten(const Proxy &x, int64_t startDim, int64_t endDim) {
  int64_t rank = x.dim();
  if (rank == 0)
    return reshape(x, {1});
  int64_t s = axis("flatten", startDim, rank),
          e = axis("flatten", endDim, rank);
  if (s > e)
    fail("flatten", "start_dim comes after end_dim");
  std::vector<Dim> spec, shape;
  std::vector<Piece> pieces;
  std::vector<Dim> middle(x.shape().begin() + s, x.shape().begin() + e + 1);
  int64_t count = staticCount(middle);
  for (int64_t i = 0; i < rank; ++i) {
    const Dim &d = x.shape()[i];
    if (i > s && i <= e)
      continue;
    if (i == s) {
      pieces.push_back({count >= 0 ? count : -1, "", 0});
      shape.push_back(count >= 0 ? Dim(count) : Dim(int64_t(-1)));
      continue;
    }
    if (d.isSymbolic() || d.size() < 0)
      pieces.push_back({0, val(x).name, i});
    else
      pieces.push_back({d.size(), "", 0});
    shape.push_back(d);
  }
  return reshapeTo(x, pieces, shape);
}
Proxy unsqueeze(const Proxy &x, int64_t dim) {
  int64_t a = axis("unsqueeze", dim, x.dim() + 1);
  std::vector<Dim> shape = x.shape();
  shape.insert(shape.begin() + a, Dim(1));
  Graph &g = graphOf(x);
  return g.node("Unsqueeze", {val(x).name, g.ints({a})}, val(x).dtype, shape);
}
Proxy squeeze(const Proxy &x, int64_t dim) {
  int64_t a = axis("squeeze", dim, x.dim());
  const Dim &d = x.shape()[a];
  if (d != Dim(1))
    return x; // torch: squeezing a dim that is not 1 changes nothing
  std::vector<Dim> shape = x.shape();
  shape.erase(shape.begin() + a);
  Graph &g = graphOf(x);
  return g.node("Squeeze", {val(x).name, g.ints({a})}, val(x).dtype, shape);
}
Proxy slice(const Proxy &x, int64_t dim, int64_t start, int64_t end,
            int64_t step) {
  int64_t a = axis("slice", dim, x.dim());
  if (step <= 0)
    fail("slice", "step must be positive");
  std::vector<Dim> shape = x.shape();
  const Dim &d = shape[a];
  if (!d.isSymbolic() && d.size() >= 0) {
    int64_t n = d.size();
    auto clampIndex = [n](int64_t i) {
      if (i < 0)
        i += n;
      return std::clamp<int64_t>(i, 0, n);
    };
    int64_t b = clampIndex(start), e = clampIndex(end);
    shape[a] = Dim(e > b ? (e - b + step - 1) / step : 0);
  } else {
    shape[a] = Dim(int64_t(-1));
  }
  Graph &g = graphOf(x);
  return g.node("Slice",
                {val(x).name, g.ints({start}), g.ints({end}), g.ints({a}),
                 g.ints({step})},
                val(x).dtype, shape);
}
Proxy cat(const std::vector<Proxy> &xs, int64_t dim) {
  if (xs.empty())
    fail("cat", "needs at least one tensor");
  Graph &g = graphOf(xs[0]);
  int64_t rank = xs[0].dim();
  int64_t a = axis("cat", dim, rank);
  DType t = val(xs[0]).dtype;
  for (const Proxy &x : xs) {
    same(xs[0], x);
    if (x.dim() != rank)
      fail("cat", "tensors have different ranks");
    t = promote(t, val(x).dtype);
  }
  std::vector<Dim> shape = xs[0].shape();
  int64_t total = 0;
  std::vector<std::string> names;
  for (const Proxy &x : xs) {
    const Dim &d = x.shape()[a];
    total =
        (total < 0 || d.isSymbolic() || d.size() < 0) ? -1 : total + d.size();
    names.push_back(castTo(x, t));
  }
  shape[a] = Dim(total);
  return g.node("Concat", names, t, shape,
                [&](onnx::NodeProto &n) { setInt(n, "axis", a); });
}
Proxy to(const Proxy &x, DType dtype) {
  if (val(x).dtype == dtype)
    return x;
  return graphOf(x).node(
      "Cast", {val(x).name}, dtype, x.shape(),
      [&](onnx::NodeProto &n) { setInt(n, "to", onnxDataType(dtype)); });
}

Proxy Proxy::to(DType dtype) const { return kiln::to(*this, dtype); }
Proxy Proxy::reshape(const std::vector<Dim> &s) const {
  return kiln::reshape(*this, s);
}
Proxy Proxy::transpose(int64_t d0, int64_t d1) const {
  return kiln::transpose(*this, d0, d1);
}
Proxy Proxy::permute(const std::vector<int64_t> &d) const {
  return kiln::permute(*this, d);
}
Proxy Proxy::flatten(int64_t s, int64_t e) const {
  return kiln::flatten(*this, s, e);
}
Proxy Proxy::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Proxy Proxy::squeeze(int64_t d) const { return kiln::squeeze(*this, d); }
Proxy Proxy::sum(const std::vector<int64_t> &d, bool k) const {
  return kiln::sum(*this, d, k);
}
Proxy Proxy::mean(const std::vector<int64_t> &d, bool k) const {
  return kiln::mean(*this, d, k);
}
Proxy Proxy::amax(const std::vector<int64_t> &d, bool k) const {
  return kiln::amax(*this, d, k);
}
Proxy Proxy::softmax(int64_t d) const { return kiln::softmax(*this, d); }

Proxy parameter(const std::string &name, const std::vector<int64_t> &shape,
                DType dtype) {
  Graph &g = Graph::active();
  std::vector<Dim> dims(shape.begin(), shape.end());
  for (int64_t d : shape)
    if (d < 0)
      fail("parameter", "'" + name + "' has a negative dim");
  if (auto it = g.paramIds.find(name); it != g.paramIds.end()) {
    const Graph::Value &v = g.values[it->second];
    if (v.dtype != dtype || v.shape != dims)
      fail("parameter", "'" + name + "' was declared as " +
                            describe(v.dtype, v.shape) + " and now as " +
                            describe(dtype, dims));
    return Proxy(g.shared_from_this(), it->second);
  }
  for (const TensorSpec &in : g.inputs)
    if (in.name == name)
      fail("parameter", "'" + name + "' is also the name of an input");
  g.params.push_back({name, dims, dtype});
  detail::setValueInfo(*g.proto.add_input(), name, dtype, dims);
  Proxy p = g.add(name, dtype, dims);
  g.paramIds[name] = p.id();
  return p;
}
Proxy constant(const Tensor &value) {
  Graph &g = Graph::active();
  std::vector<Dim> dims(value.shape().begin(), value.shape().end());
  return g.add(g.constant(value), value.dtype(), dims);
}

template <typename T>
Tensor tensor(const std::vector<int64_t> &shape, const std::vector<T> &values) {
  DType dtype = std::is_same_v<T, float>     ? DType::F32
                : std::is_same_v<T, double>  ? DType::F64
                : std::is_same_v<T, int32_t> ? DType::I32
                : std::is_same_v<T, int64_t> ? DType::I64
                : std::is_same_v<T, uint8_t> ? DType::U8
                                             : DType::I8;
  return Tensor::fromBytes(dtype, shape, values.data(),
                           values.size() * sizeof(T));
}
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<float> &);
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<double> &);
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<int32_t> &);
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<int64_t> &);
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<uint8_t> &);
template Tensor tensor(const std::vector<int64_t> &,
                       const std::vector<int8_t> &);

} // namespace kiln
