//===- Trace.h - the graph a trace records (internal) -------------*- C++
//-*-===//

#ifndef KILN_JIT_TRACE_H
#define KILN_JIT_TRACE_H

#include "frontend/OnnxImporter.h"
#include "kiln/kiln.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <set>

namespace kiln::detail {

/// One trace: an ONNX graph being built, and the dtype and shape of every
/// value in it (PyTorch's view of them).
struct Graph : std::enable_shared_from_this<Graph> {
  struct Value {
    std::string name; // the ONNX value
    DType dtype;
    std::vector<Dim> shape;
  };
  onnx::GraphProto proto;
  std::vector<Value> values; // by Proxy::id
  std::vector<TensorSpec> inputs, params;
  std::map<std::string, size_t> paramIds;
  /// Symbol -> the input and dim that define it.
  std::map<std::string, std::pair<std::string, int64_t>> symbols;
  std::vector<std::string> lines; // Traced::str
  size_t counter = 0;
  bool open = true;

  /// The graph of the trace running on this thread; throws when none.
  static Graph &active();
  /// `p`'s value; throws for proxies of other or ended traces.
  const Value &value(const Proxy &p);
  std::string fresh(const std::string &prefix);
  Proxy add(const std::string &name, DType dtype, std::vector<Dim> shape);
  /// Appends node `op` with one output.
  Proxy node(const std::string &op, const std::vector<std::string> &inputs,
             DType dtype, std::vector<Dim> shape,
             const std::function<void(onnx::NodeProto &)> &attributes = {});
  /// An initializer holding `t`; returns its name.
  std::string constant(const Tensor &t, const std::string &prefix = "const");
  /// A rank-0 initializer of `dtype`.
  std::string scalar(DType dtype, double v);
  /// A 1-D int64 initializer.
  std::string ints(const std::vector<int64_t> &values);
  /// The graph as a model (opset 17).
  onnx::ModelProto model() const;
};

/// Refuses empty names and those the trace gives its own values.
void checkUserName(const std::string &what, const std::string &name);

void setValueInfo(onnx::ValueInfoProto &info, const std::string &name,
                  DType dtype, const std::vector<Dim> &shape);

} // namespace kiln::detail

#endif // KILN_JIT_TRACE_H
