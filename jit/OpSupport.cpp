//===- OpSupport.cpp - what the tracer's ops share ------------------------===//
//
// Type promotion as torch.result_type (bool < integers < floats; within a
// kind the wider type wins, u8 with i8 gives i16), numpy broadcasting on
// dims that may be symbols, casts, and reshapes whose target is read at
// run time.
//
//===----------------------------------------------------------------------===//

#include "jit/OpSupport.h"

#include <cmath>

namespace kiln::detail {

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
static bool isSigned(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 ||
         t == DType::I64;
}

static DType signedOfSize(size_t bytes) {
  return bytes <= 1   ? DType::I8
         : bytes == 2 ? DType::I16
         : bytes == 4 ? DType::I32
                      : DType::I64;
}

DType promote(DType a, DType b) {
  if (a == b)
    return a;
  if ((a == DType::U64 && isSigned(b)) || (b == DType::U64 && isSigned(a)))
    throw Error("u64 and a signed integer type have no common type; cast "
                "one of them first");
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

DType resultType(const Proxy &a, const Proxy &b) {
  DType ta = val(a).dtype, tb = val(b).dtype;
  bool za = val(a).shape.empty(), zb = val(b).shape.empty();
  if (za == zb)
    return promote(ta, tb);
  // A zero-dim tensor (or a number) decides only when its kind is higher.
  DType zero = za ? ta : tb, dimensioned = za ? tb : ta;
  return kindOf(zero) > kindOf(dimensioned) ? zero : dimensioned;
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
    else if (x.isSymbolic() && y.isSymbolic())
      out[i] = Dim(int64_t(-1)); // two symbols: either may be 1
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

// The dtype a Python scalar `v` gives beside a tensor of `t`.
DType scalarType(DType t, double v) {
  if (isFloat(t))
    return t;
  if (!std::isfinite(v) || std::floor(v) != v)
    return DType::F32;
  return t == DType::Bool ? DType::I64 : t;
}

// One entry of a reshape target: a size, or dim `index` of ONNX value
// `source` read at run time.

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

} // namespace kiln::detail
