//===- kiln/tensor_io.h - tensors from and to files ---------------*- C++
//-*-===//
//
// .npy (format 1.0/2.0/3.0, little-endian, C order) and ONNX TensorProto
// .pb files (raw_data or the typed repeated fields), parsed without protobuf
// or numpy. Malformed files throw kiln::Error naming the file and the problem.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TENSOR_IO_H
#define KILN_TENSOR_IO_H

#include "kiln/runtime.h"

namespace kiln {

/// Reads a .npy file. numpy saves ml_dtypes arrays (bfloat16, float8,
/// int4, ...) as untyped bytes ('<V2', '|V1'): those are read as `untyped`
/// when it is a type of that size (e.g. the model input's), else refused.
Tensor readNpy(const std::string &path, DType untyped = DType::U8);
/// Writes a .npy file; narrow types under the names ml_dtypes gives numpy
/// ('bfloat16', 'float8_e4m3fn', 'int4', ...), which np.load reads once
/// ml_dtypes is imported.
void writeNpy(const std::string &path, const Tensor &tensor);
/// Reads an ONNX TensorProto; `name`, when given, receives its name field.
Tensor readTensorProto(const std::string &path, std::string *name = nullptr);
/// Reads the tensors of an ONNX SequenceProto (a sequence of tensors).
std::vector<Tensor> readSequenceProto(const std::string &path);
/// What an ONNX OptionalProto holds: nothing, a tensor or a sequence.
struct OptionalValue {
  enum class Kind { None, Tensor, Sequence };
  Kind kind = Kind::None;
  std::vector<Tensor> tensors;
};
OptionalValue readOptionalProto(const std::string &path);
/// Picks the reader by extension: .npy, .pb.
Tensor readTensorFile(const std::string &path, DType untyped = DType::U8);

} // namespace kiln

#endif // KILN_TENSOR_IO_H
