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

Tensor readNpy(const std::string &path);
void writeNpy(const std::string &path, const Tensor &tensor);
/// Reads an ONNX TensorProto; `name`, when given, receives its name field.
Tensor readTensorProto(const std::string &path, std::string *name = nullptr);
/// Picks the reader by extension: .npy, .pb.
Tensor readTensorFile(const std::string &path);

} // namespace kiln

#endif // KILN_TENSOR_IO_H
