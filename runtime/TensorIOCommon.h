//===- TensorIOCommon.h - helpers of the tensor file readers -------*- C++
//-*-===//
//
// What TensorIO.cpp (.npy) and TensorProto.cpp (ONNX protobuf files) share:
// errors that name the file, sizes checked for overflow, little-endian
// loads and the normalisations every read applies. Runtime-internal.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TENSORIOCOMMON_H
#define KILN_RUNTIME_TENSORIOCOMMON_H

#include "kiln/tensor_io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::tensor_io {

/// Throws kiln::Error("<path>: <message>").
[[noreturn]] void fail(const std::string &path, const std::string &message);
/// strerror(err) with a lower-case first letter, to match our messages.
std::string systemError(int err);
/// "[2,3]".
std::string shapeString(const std::vector<int64_t> &shape);
/// The number of elements of `shape`; fails on negative dims, or when the
/// byte size (with `elemSize`-byte elements) could overflow later arithmetic.
size_t checkedNumElements(const std::string &path,
                          const std::vector<int64_t> &shape, size_t elemSize);
/// Booleans are stored one byte each; anything non-zero reads as true (1).
void normalizeBools(Tensor &tensor);
uint32_t loadLE32(const uint8_t *p);
uint64_t loadLE64(const uint8_t *p);
std::string lowerCase(std::string text);

} // namespace kiln::tensor_io

#endif // KILN_RUNTIME_TENSORIOCOMMON_H
