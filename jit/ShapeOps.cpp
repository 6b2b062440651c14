//===- ShapeOps.cpp - PyTorch's shape and movement ops, parameters --------===//
//
// reshape/view (with the trace's symbols: Shape -> Gather -> Concat read
// them at run time), transpose, permute, flatten, squeeze, slice, cat and
// casts; named parameters and constants of the running trace.
//
//===----------------------------------------------------------------------===//

#include "jit/OpSupport.h"

#include <numeric>

namespace kiln {
using namespace detail;

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
    } else if (d.size() == 0) {
      fail("reshape", "a dim of size 0 is not supported by the tracer yet");
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
  std::vector<Dim> all = x.shape();
  std::vector<Dim> middle(all.begin() + s, all.begin() + e + 1);
  int64_t count = staticCount(middle);
  for (int64_t i = 0; i < rank; ++i) {
    Dim d = x.shape()[i];
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
  Dim d = x.shape()[a];
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
    Dim d = x.shape()[a];
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
  checkUserName("parameter", name);
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
