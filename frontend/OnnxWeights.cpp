//===- OnnxWeights.cpp - weights from outside the ONNX file ---------------===//
//
// kilnc --weights and kiln::jit::compile bind tensors by name (read from a
// safetensors file, keys already remapped) to an ONNX model before import:
//
//  * a name that is an initializer replaces its data (and any external-data
//    reference); the shape must match exactly;
//  * a name that is a graph input without an initializer supplies it: the
//    input becomes a constant, its static dims checked;
//  * any other name is an error, all of them listed, with a hint when they
//    share the "module." prefix torch.nn.DataParallel adds.
//
// The dtype must match, except that f16 and f64 weights bound to an f32
// tensor are converted, as torch's load_state_dict copies them.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/OnnxOps.h"
#include "kiln/runtime.h"
#include "runtime/SubByte.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/APFloat.h"

#include <onnx/onnx_pb.h>

#include <cstring>

using namespace mlir;

namespace kiln {
namespace {

float halfToFloat(uint16_t h) {
  llvm::APFloat f(llvm::APFloat::IEEEhalf(), llvm::APInt(16, h));
  bool inexact = false; // exact: every half is a float
  f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &inexact);
  return f.convertToFloat();
}

// `t`'s bytes as ONNX type `to`: itself (sub-byte integers packed, as
// ONNX stores them), or f16/f64 converted to f32.
std::optional<std::string> bytesAs(const Tensor &t, int to) {
  const char *raw = static_cast<const char *>(t.raw());
  if (onnxDataType(t.dtype()) == to) {
    unsigned bits = t.dtype() == DType::I4 || t.dtype() == DType::U4   ? 4
                    : t.dtype() == DType::I2 || t.dtype() == DType::U2 ? 2
                                                                       : 0;
    if (!bits)
      return std::string(raw, t.nbytes());
    std::string out(subbyte::packedSize(t.numElements(), bits), '\0');
    subbyte::pack(reinterpret_cast<const uint8_t *>(raw), t.numElements(), bits,
                  reinterpret_cast<uint8_t *>(out.data()));
    return out;
  }
  if (to != onnx::TensorProto::FLOAT ||
      (t.dtype() != DType::F16 && t.dtype() != DType::F64))
    return std::nullopt;
  std::string out(t.numElements() * 4, '\0');
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float f = t.dtype() == DType::F16 ? halfToFloat(t.data<uint16_t>()[i])
                                      : float(t.data<double>()[i]);
    std::memcpy(&out[i * 4], &f, 4);
  }
  return out;
}

std::string typeName(int type) {
  if (!onnx::TensorProto::DataType_IsValid(type))
    return std::to_string(type);
  std::string name = onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(type));
  for (char &c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string shapeText(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + (dims[i] < 0 ? "?" : std::to_string(dims[i]));
  return s + "]";
}

void setData(onnx::TensorProto &init, const std::string &name,
             const std::vector<int64_t> &shape, int type, std::string bytes) {
  std::string keep = init.doc_string();
  init.Clear();
  init.set_name(name);
  init.set_doc_string(keep);
  init.set_data_type(type);
  for (int64_t d : shape)
    init.add_dims(d);
  init.set_raw_data(std::move(bytes));
}
} // namespace

int onnxDataType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return onnx::TensorProto::FLOAT;
  case DType::F64:
    return onnx::TensorProto::DOUBLE;
  case DType::F16:
    return onnx::TensorProto::FLOAT16;
  case DType::I8:
    return onnx::TensorProto::INT8;
  case DType::I16:
    return onnx::TensorProto::INT16;
  case DType::I32:
    return onnx::TensorProto::INT32;
  case DType::I64:
    return onnx::TensorProto::INT64;
  case DType::U8:
    return onnx::TensorProto::UINT8;
  case DType::Bool:
    return onnx::TensorProto::BOOL;
  case DType::U16:
    return onnx::TensorProto::UINT16;
  case DType::U32:
    return onnx::TensorProto::UINT32;
  case DType::U64:
    return onnx::TensorProto::UINT64;
  case DType::BF16:
    return onnx::TensorProto::BFLOAT16;
  case DType::F8E4M3FN:
    return onnx_import::kOnnxFloat8E4M3FN;
  case DType::F8E4M3FNUZ:
    return onnx_import::kOnnxFloat8E4M3FNUZ;
  case DType::F8E5M2:
    return onnx_import::kOnnxFloat8E5M2;
  case DType::F8E5M2FNUZ:
    return onnx_import::kOnnxFloat8E5M2FNUZ;
  case DType::I4:
    return onnx_import::kOnnxInt4;
  case DType::U4:
    return onnx_import::kOnnxUint4;
  case DType::I2:
    return onnx_import::kOnnxInt2;
  case DType::U2:
    return onnx_import::kOnnxUint2;
  }
  return onnx::TensorProto::UNDEFINED;
}

LogicalResult applyWeights(onnx::ModelProto &model,
                           const std::map<std::string, Tensor> &weights,
                           Location loc) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::map<std::string, onnx::TensorProto *> inits;
  for (onnx::TensorProto &init : *graph.mutable_initializer())
    inits[init.name()] = &init;
  std::map<std::string, const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &input : graph.input())
    if (!inits.count(input.name()))
      inputs[input.name()] = &input;

  std::vector<std::string> problems, unexpected;
  for (const auto &[name, tensor] : weights) {
    std::string given =
        std::string(dtypeName(tensor.dtype())) + shapeText(tensor.shape());
    if (auto it = inits.find(name); it != inits.end()) {
      onnx::TensorProto &init = *it->second;
      std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
      auto bytes = bytesAs(tensor, init.data_type());
      if (dims != tensor.shape() || !bytes) {
        problems.push_back("'" + name + "' is " + given +
                           " but the model's initializer has shape " +
                           shapeText(dims) + " and type " +
                           typeName(init.data_type()));
        continue;
      }
      setData(init, name, dims, init.data_type(), std::move(*bytes));
      continue;
    }
    auto in = inputs.find(name);
    if (in == inputs.end()) {
      unexpected.push_back(name);
      continue;
    }
    const onnx::TypeProto::Tensor &type = in->second->type().tensor_type();
    std::vector<int64_t> dims;
    for (const auto &d : type.shape().dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    bool fits = dims.size() == tensor.shape().size();
    for (size_t i = 0; fits && i < dims.size(); ++i)
      fits = dims[i] < 0 || dims[i] == tensor.shape()[i];
    auto bytes = bytesAs(tensor, type.elem_type());
    if (!fits || !bytes) {
      problems.push_back("'" + name + "' is " + given +
                         " but the model's input has shape " + shapeText(dims) +
                         " and type " + typeName(type.elem_type()));
      continue;
    }
    setData(*graph.add_initializer(), name, tensor.shape(), type.elem_type(),
            std::move(*bytes));
  }
  if (!unexpected.empty()) {
    std::string list;
    bool allModule = true;
    for (const std::string &name : unexpected) {
      list += (list.empty() ? "'" : ", '") + name + "'";
      allModule &= name.rfind("module.", 0) == 0;
    }
    problems.push_back("the model has no initializer or input named " + list +
                       (allModule
                            ? " (saved from torch.nn.DataParallel? strip the "
                              "'module.' prefix: --strip-prefix module.)"
                            : ""));
  }
  if (problems.empty())
    return success();
  InFlightDiagnostic diag = emitError(loc) << "weights do not fit the model: "
                                           << problems.front();
  for (size_t i = 1; i < problems.size(); ++i)
    diag.attachNote(loc) << problems[i];
  return failure();
}

} // namespace kiln
