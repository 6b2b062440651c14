//===- Trace.cpp - record C++ tensor programs as ONNX graphs --------------===//
//
// kiln::trace runs a callable over Proxy values. Each op on proxies appends
// an ONNX node (opset 17) to the trace's graph and computes its result's
// dtype and shape with PyTorch's rules, so that later ops (reshape,
// transpose with negative dims, type promotion) can be checked and spelled
// at trace time. The graph then takes the same road as a model file:
// ONNX -> kiln dialect (frontend/) -> passes -> codegen. One converter per
// ONNX op stays the single home of each op's semantics; the tracer only
// chooses ONNX spellings for PyTorch's ops (Ops.cpp).
//
// Symbolic input dims ("N") stay symbolic: a reshape that names one reads it
// at run time with Shape -> Gather -> Concat, which the importer folds into
// affine expressions of the input's dims.
//
//===----------------------------------------------------------------------===//

#include "jit/Trace.h"

#include "frontend/OnnxImporter.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace kiln {
namespace detail {

namespace {
thread_local std::shared_ptr<Graph> current;
} // namespace

Graph &Graph::active() {
  if (!current)
    throw Error("kiln::parameter and kiln::constant are only available "
                "while kiln::trace runs a function");
  return *current;
}

const Graph::Value &Graph::value(const Proxy &p) {
  if (&p.graph() != this)
    throw Error("a proxy from another trace was used in this one");
  if (!open)
    throw Error("a proxy was used after its trace ended");
  return values.at(p.id());
}

std::string Graph::fresh(const std::string &prefix) {
  return "/" + prefix + "_" + std::to_string(counter++);
}

Proxy Graph::add(const std::string &name, DType dtype, std::vector<Dim> shape) {
  values.push_back({name, dtype, std::move(shape)});
  return Proxy(shared_from_this(), values.size() - 1);
}

void setValueInfo(onnx::ValueInfoProto &info, const std::string &name,
                  DType dtype, const std::vector<Dim> &shape) {
  info.set_name(name);
  auto *tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnxDataType(dtype));
  auto *dims = tensor->mutable_shape();
  for (const Dim &d : shape) {
    auto *dim = dims->add_dim();
    if (d.isSymbolic())
      dim->set_dim_param(d.symbol());
    else if (d.size() >= 0)
      dim->set_dim_value(d.size());
  }
}

Proxy Graph::node(const std::string &op, const std::vector<std::string> &inputs,
                  DType dtype, std::vector<Dim> shape,
                  const std::function<void(onnx::NodeProto &)> &attributes) {
  onnx::NodeProto &n = *proto.add_node();
  std::string name = fresh(op);
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string &in : inputs)
    n.add_input(in);
  n.add_output(name);
  if (attributes)
    attributes(n);
  std::string line = name + " = " + op + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    line += (i ? ", " : "") + inputs[i];
  lines.push_back(line + ") : " + describe(dtype, shape));
  return add(name, dtype, std::move(shape));
}

std::string Graph::constant(const Tensor &t, const std::string &prefix) {
  onnx::TensorProto &init = *proto.add_initializer();
  std::string name = fresh(prefix);
  init.set_name(name);
  init.set_data_type(onnxDataType(t.dtype()));
  for (int64_t d : t.shape())
    init.add_dims(d);
  init.set_raw_data(
      std::string(static_cast<const char *>(t.raw()), t.nbytes()));
  return name;
}

namespace {
// IEEE binary16 bits of `v`, rounded to nearest even (once, from double).
uint16_t toHalf(double v) {
  llvm::APFloat f(v);
  bool inexact = false;
  f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven,
            &inexact);
  return uint16_t(f.bitcastToAPInt().getZExtValue());
}
} // namespace

std::string Graph::scalar(DType dtype, double v) {
  if (dtypeSize(dtype) == 1 && dtype != DType::I8 && dtype != DType::U8 &&
      dtype != DType::Bool)
    throw Error(std::string("the tracer has no scalars of dtype ") +
                dtypeName(dtype));
  if (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::F16 &&
      dtype != DType::Bool) {
    bool isUnsigned = dtype == DType::U8 || dtype == DType::U16 ||
                      dtype == DType::U32 || dtype == DType::U64;
    double bits = double(dtypeSize(dtype) * 8);
    double lo = isUnsigned ? 0 : -std::ldexp(1.0, int(bits) - 1);
    double hi = std::ldexp(1.0, int(bits) - (isUnsigned ? 0 : 1));
    if (!std::isfinite(v) || v < lo || v >= hi)
      throw Error("the number " + std::to_string(v) + " does not fit " +
                  dtypeName(dtype) + ", the dtype it takes beside the tensor");
  }
  Tensor t = Tensor::empty(dtype, {});
  switch (dtype) {
  case DType::F32:
    *t.data<float>() = float(v);
    break;
  case DType::F64:
    *t.data<double>() = v;
    break;
  case DType::I8:
    *t.data<int8_t>() = int8_t(v);
    break;
  case DType::I16:
    *t.data<int16_t>() = int16_t(v);
    break;
  case DType::I32:
    *t.data<int32_t>() = int32_t(v);
    break;
  case DType::I64:
    *t.data<int64_t>() = int64_t(v);
    break;
  case DType::U8:
    *t.data<uint8_t>() = uint8_t(v);
    break;
  case DType::U16:
    *t.data<uint16_t>() = uint16_t(v);
    break;
  case DType::U32:
    *t.data<uint32_t>() = uint32_t(v);
    break;
  case DType::U64:
    *t.data<uint64_t>() = uint64_t(v);
    break;
  case DType::Bool:
    *t.data<uint8_t>() = v != 0;
    break;
  case DType::F16:
    *t.data<uint16_t>() = toHalf(v);
    break;
  default:
    throw Error(std::string("the tracer has no scalars of dtype ") +
                dtypeName(dtype));
  }
  return constant(t, "scalar");
}

std::string Graph::ints(const std::vector<int64_t> &values) {
  Tensor t = Tensor::empty(DType::I64, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.data<int64_t>()[i] = values[i];
  return constant(t, "ints");
}

void checkUserName(const std::string &what, const std::string &name) {
  if (name.empty())
    throw Error("every traced " + what + " needs a name");
  // Generated values are named "/<op>_<n>" and outputs "output_<n>".
  bool output = name.rfind("output_", 0) == 0 && name.size() > 7 &&
                name.find_first_not_of("0123456789", 7) == std::string::npos;
  if (name[0] == '/' || output)
    throw Error("the " + what + " name '" + name +
                "' is reserved for values the trace names itself");
}

std::vector<Proxy> beginTrace(const std::vector<TensorSpec> &inputs) {
  if (current)
    throw Error("kiln::trace was called while another trace runs on this "
                "thread");
  // The trace becomes current only once its inputs are known to be good.
  auto graph = std::make_shared<Graph>();
  Graph &g = *graph;
  std::vector<Proxy> proxies;
  for (const TensorSpec &spec : inputs) {
    checkUserName("input", spec.name);
    for (size_t i = 0; i < spec.shape.size(); ++i) {
      const Dim &d = spec.shape[i];
      if (!d.isSymbolic() && d.size() < 0)
        throw Error("input '" + spec.name + "' dim " + std::to_string(i) +
                    " is negative; use a symbol (\"N\") for a size known "
                    "only when called");
      if (d.isSymbolic() && !g.symbols.count(d.symbol()))
        g.symbols[d.symbol()] = {spec.name, int64_t(i)};
    }
    for (const TensorSpec &seen : g.inputs)
      if (seen.name == spec.name)
        throw Error("two traced inputs are named '" + spec.name + "'");
    g.inputs.push_back(spec);
    setValueInfo(*g.proto.add_input(), spec.name, spec.dtype, spec.shape);
    proxies.push_back(g.add(spec.name, spec.dtype, spec.shape));
  }
  current = graph;
  return proxies;
}

void abandonTrace() {
  if (current)
    current->open = false;
  current.reset();
}

Traced endTrace(const std::vector<Proxy> &inputs,
                const std::vector<Proxy> &outputs) {
  std::shared_ptr<Graph> g = current;
  if (!g)
    throw Error("no trace is running");
  if (outputs.empty()) {
    abandonTrace();
    throw Error("the traced function returned no values");
  }
  std::set<std::string> used;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Graph::Value v = g->value(outputs[i]); // a copy: node() adds values
    std::string name = "output_" + std::to_string(i);
    // Each output its own value: an input or a repeated value goes through
    // an Identity.
    Proxy out = g->node("Identity", {v.name}, v.dtype, v.shape);
    g->proto.mutable_node(g->proto.node_size() - 1)->set_output(0, name);
    g->lines.back() += "  -> " + name;
    setValueInfo(*g->proto.add_output(), name, v.dtype, v.shape);
    (void)out;
  }
  g->proto.set_name("traced");
  g->open = false;
  current.reset();
  return Traced(g);
}

} // namespace detail

std::string describe(DType dtype, const std::vector<Dim> &shape) {
  std::string s = std::string(dtypeName(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i].isSymbolic() ? shape[i].symbol()
                           : shape[i].size() < 0
                               ? std::string("?")
                               : std::to_string(shape[i].size()));
  return s + "]";
}

DType Proxy::dtype() const { return graph_->value(*this).dtype; }
std::vector<Dim> Proxy::shape() const { return graph_->value(*this).shape; }
Dim Proxy::size(int64_t d) const {
  int64_t rank = dim();
  if (d < -rank || d >= rank)
    throw Error("dim " + std::to_string(d) + " is out of range for " +
                describe(dtype(), shape()));
  return shape()[d < 0 ? d + rank : d];
}

const std::vector<TensorSpec> &Traced::inputs() const { return graph_->inputs; }
const std::vector<TensorSpec> &Traced::parameters() const {
  return graph_->params;
}

std::string Traced::onnx() const {
  onnx::ModelProto model = graph_->model();
  return model.SerializeAsString();
}

onnx::ModelProto detail::Graph::model() const {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln::trace");
  auto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  *model.mutable_graph() = proto;
  return model;
}

void Traced::saveOnnx(const std::string &path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << onnx();
  if (!out.flush())
    throw Error(path + ": cannot write file");
}

std::string Traced::str() const {
  std::string text;
  for (const TensorSpec &in : graph_->inputs)
    text += "input " + in.name + " : " + describe(in.dtype, in.shape) + "\n";
  for (const TensorSpec &p : graph_->params)
    text += "parameter " + p.name + " : " + describe(p.dtype, p.shape) + "\n";
  for (const std::string &line : graph_->lines)
    text += line + "\n";
  return text;
}

} // namespace kiln
