//===- OnnxBuilder.h - small ONNX models built in tests -----------*- C++
//-*-===//

#ifndef KILN_TESTS_ONNXBUILDER_H
#define KILN_TESTS_ONNXBUILDER_H

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::testing {

/// Builds a model of the default domain's `opset` one call at a time.
class OnnxBuilder {
public:
  explicit OnnxBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
  }
  OnnxBuilder &input(const std::string &name, std::vector<int64_t> dims,
                     int type = onnx::TensorProto::FLOAT) {
    value(model_.mutable_graph()->add_input(), name, dims, type);
    return *this;
  }
  OnnxBuilder &output(const std::string &name) {
    model_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }
  OnnxBuilder &weight(const std::string &name, std::vector<int64_t> dims,
                      const std::vector<float> &data) {
    onnx::TensorProto *t = initializer(name, dims, onnx::TensorProto::FLOAT);
    t->set_raw_data(std::string(reinterpret_cast<const char *>(data.data()),
                                data.size() * sizeof(float)));
    return *this;
  }
  OnnxBuilder &int64Weight(const std::string &name, std::vector<int64_t> dims,
                           const std::vector<int64_t> &data) {
    onnx::TensorProto *t = initializer(name, dims, onnx::TensorProto::INT64);
    for (int64_t v : data)
      t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto &node(const std::string &opType, const std::string &name,
                        std::vector<std::string> inputs,
                        std::vector<std::string> outputs) {
    onnx::NodeProto *n = model_.mutable_graph()->add_node();
    n->set_op_type(opType);
    n->set_name(name);
    for (auto &i : inputs)
      n->add_input(i);
    for (auto &o : outputs)
      n->add_output(o);
    return *n;
  }
  static void intAttr(onnx::NodeProto &n, const std::string &name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  const onnx::ModelProto &model() const { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

private:
  onnx::TensorProto *initializer(const std::string &name,
                                 const std::vector<int64_t> &dims, int type) {
    onnx::TensorProto *t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims)
      t->add_dims(d);
    return t;
  }
  static void value(onnx::ValueInfoProto *v, const std::string &name,
                    const std::vector<int64_t> &dims, int type) {
    v->set_name(name);
    auto *tensor = v->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    auto *shape = tensor->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0)
        shape->add_dim()->set_dim_param("N");
      else
        shape->add_dim()->set_dim_value(d);
    }
  }
  onnx::ModelProto model_;
};

} // namespace kiln::testing

#endif // KILN_TESTS_ONNXBUILDER_H
