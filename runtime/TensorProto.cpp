//===- TensorProto.cpp - tensors from ONNX protobuf files ----------------===//
//
// The TensorProto, SequenceProto and OptionalProto readers of
// kiln/tensor_io.h, decoded straight from the protobuf wire format with
// nothing but the standard library: dims, data_type, name, raw_data and the
// typed repeated fields (float_data, int32_data, int64_data, double_data),
// packed or not. Unknown fields are skipped by wire type. Every read is
// bounds-checked; malformed, truncated or unsupported input throws
// kiln::Error("<path>: <problem>").
//
//===----------------------------------------------------------------------===//

#include "kiln/tensor_io.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/FileRead.h"
#include "runtime/SubByte.h"
#include "runtime/TensorIOCommon.h"

namespace kiln {
using namespace tensor_io;

namespace {
//===----------------------------------------------------------------------===//
// Protobuf wire format (just enough for TensorProto)
//===----------------------------------------------------------------------===//

enum WireType {
  Varint = 0,
  Fixed64 = 1,
  LengthDelimited = 2,
  StartGroup = 3,
  EndGroup = 4,
  Fixed32 = 5
};

/// A bounds-checked cursor over protobuf bytes.
class ProtoReader {
public:
  ProtoReader(const std::string &filePath, const uint8_t *begin,
              const uint8_t *limit)
      : path(filePath), cur(begin), end(limit) {}

  bool atEnd() const { return cur == end; }
  size_t remaining() const { return static_cast<size_t>(end - cur); }

  uint64_t varint(const char *what) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (cur == end)
        truncated(what);
      uint8_t byte = *cur++;
      // The 10th byte may only carry the top bit of a 64-bit value.
      if (shift == 63 && (byte & 0x7e))
        malformed(std::string("varint too long in ") + what);
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return value;
    }
    malformed(std::string("varint too long in ") + what);
  }

  uint32_t fixed32(const char *what) {
    if (remaining() < 4)
      truncated(what);
    uint32_t value = loadLE32(cur);
    cur += 4;
    return value;
  }

  uint64_t fixed64(const char *what) {
    if (remaining() < 8)
      truncated(what);
    uint64_t value = loadLE64(cur);
    cur += 8;
    return value;
  }

  /// A length-delimited payload; returns a reader over it and advances past.
  ProtoReader bytes(const char *what) {
    uint64_t length = varint(what);
    if (length > remaining())
      truncated(what);
    ProtoReader sub(path, cur, cur + length);
    cur += length;
    return sub;
  }

  void skip(unsigned wireType, uint64_t field) {
    switch (wireType) {
    case Varint:
      varint("an unknown field");
      return;
    case Fixed64:
      fixed64("an unknown field");
      return;
    case LengthDelimited:
      bytes("an unknown field");
      return;
    case Fixed32:
      fixed32("an unknown field");
      return;
    case StartGroup:
    case EndGroup:
      malformed("field " + std::to_string(field) +
                " uses protobuf groups (wire type " + std::to_string(wireType) +
                "), which are not supported");
    default:
      malformed("invalid wire type " + std::to_string(wireType) +
                " for field " + std::to_string(field));
    }
  }

  const uint8_t *data() const { return cur; }

  [[noreturn]] void truncated(const std::string &what) const {
    fail(path, "truncated protobuf: unexpected end of data in " + what);
  }
  [[noreturn]] void malformed(const std::string &what) const {
    fail(path, "malformed protobuf: " + what);
  }

private:
  const std::string &path;
  const uint8_t *cur;
  const uint8_t *end;
};

/// Reads one occurrence of a repeated scalar field: a packed run (wire type
/// 2) or a single unpacked value (wire type `scalarWire`).
template <typename ReadOne>
void readRepeated(ProtoReader &reader, unsigned wireType, unsigned scalarWire,
                  size_t fixedSize, const char *field, ReadOne readOne) {
  if (wireType == LengthDelimited) {
    ProtoReader packed = reader.bytes(field);
    if (fixedSize && packed.remaining() % fixedSize)
      reader.malformed(std::string("packed ") + field + " has " +
                       std::to_string(packed.remaining()) +
                       " bytes, not a multiple of " +
                       std::to_string(fixedSize));
    while (!packed.atEnd())
      readOne(packed);
    return;
  }
  if (wireType == scalarWire) {
    readOne(reader);
    return;
  }
  reader.malformed(std::string(field) + " has wire type " +
                   std::to_string(wireType) + ", expected " +
                   std::to_string(scalarWire) + " or 2");
}

struct OnnxType {
  int code;
  const char *name;
  bool supported;
  DType dtype;
};

const OnnxType kOnnxTypes[] = {
    {1, "FLOAT", true, DType::F32},
    {2, "UINT8", true, DType::U8},
    {3, "INT8", true, DType::I8},
    {4, "UINT16", true, DType::U16},
    {5, "INT16", true, DType::I16},
    {6, "INT32", true, DType::I32},
    {7, "INT64", true, DType::I64},
    {8, "STRING", false, DType::F32},
    {9, "BOOL", true, DType::Bool},
    {10, "FLOAT16", true, DType::F16},
    {11, "DOUBLE", true, DType::F64},
    {12, "UINT32", true, DType::U32},
    {13, "UINT64", true, DType::U64},
    {14, "COMPLEX64", false, DType::F32},
    {15, "COMPLEX128", false, DType::F32},
    {16, "BFLOAT16", true, DType::BF16},
    {17, "FLOAT8E4M3FN", true, DType::F8E4M3FN},
    {18, "FLOAT8E4M3FNUZ", true, DType::F8E4M3FNUZ},
    {19, "FLOAT8E5M2", true, DType::F8E5M2},
    {20, "FLOAT8E5M2FNUZ", true, DType::F8E5M2FNUZ},
    {21, "UINT4", true, DType::U4},
    {22, "INT4", true, DType::I4},
    {23, "FLOAT4E2M1", false, DType::F32},
    {24, "FLOAT8E8M0", false, DType::F32},
    {25, "UINT2", true, DType::U2},
    {26, "INT2", true, DType::I2},
};

const OnnxType &onnxType(const std::string &path, bool seen, uint64_t code) {
  if (!seen || code == 0)
    fail(path, "tensor has no data_type (is this an onnx TensorProto file?)");
  for (const OnnxType &type : kOnnxTypes) {
    if (static_cast<uint64_t>(type.code) != code)
      continue;
    if (!type.supported)
      fail(path, "unsupported data_type " + std::to_string(code) + " (" +
                     type.name +
                     "); supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, "
                     "FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, "
                     "FLOAT8E5M2FNUZ, INT2, INT4, INT8, INT16, INT32, INT64, "
                     "UINT2, UINT4, UINT8, UINT16, UINT32, UINT64, BOOL");
    return type;
  }
  fail(path, "unknown data_type " + std::to_string(code));
}

/// Narrows a value widened into int32_data back to the tensor's type.
void storeInt32Data(const std::string &path, Tensor &tensor,
                    const std::vector<int32_t> &values) {
  auto outOfRange = [&](size_t i, const char *type) {
    fail(path, "int32_data[" + std::to_string(i) + "] = " +
                   std::to_string(values[i]) + " is out of range for " + type);
  };
  for (size_t i = 0; i < values.size(); ++i) {
    int32_t v = values[i];
    switch (tensor.dtype()) {
    case DType::I32:
      tensor.data<int32_t>()[i] = v;
      break;
    case DType::I16:
      if (v < -32768 || v > 32767)
        outOfRange(i, "INT16");
      tensor.data<int16_t>()[i] = static_cast<int16_t>(v);
      break;
    case DType::I8:
      if (v < -128 || v > 127)
        outOfRange(i, "INT8");
      tensor.data<int8_t>()[i] = static_cast<int8_t>(v);
      break;
    case DType::U8:
      if (v < 0 || v > 255)
        outOfRange(i, "UINT8");
      tensor.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::U16:
      if (v < 0 || v > 65535)
        outOfRange(i, "UINT16");
      tensor.data<uint16_t>()[i] = static_cast<uint16_t>(v);
      break;
    case DType::Bool:
      tensor.data<uint8_t>()[i] = v != 0;
      break;
    case DType::F16:
    case DType::BF16:
      // The bit pattern, normally as an unsigned 16-bit value; accept a
      // sign-extended one too.
      if (v < -32768 || v > 65535)
        outOfRange(i, "16-bit float bits");
      tensor.data<uint16_t>()[i] = static_cast<uint16_t>(v);
      break;
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
      if (v < -128 || v > 255)
        outOfRange(i, "8-bit float bits");
      tensor.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    default:
      fail(path, "int32_data cannot hold this data_type");
    }
  }
}

/// A TensorProto from `reader` (a file, or a message inside one).
Tensor parseTensorProto(ProtoReader reader, const std::string &path,
                        std::string *name) {

  std::vector<int64_t> dims;
  bool seenType = false;
  uint64_t dataType = 0;
  std::string tensorName;
  bool seenRaw = false;
  const uint8_t *raw = nullptr;
  size_t rawSize = 0;
  std::vector<float> floatData;
  std::vector<int32_t> int32Data;
  std::vector<int64_t> int64Data;
  std::vector<double> doubleData;
  std::vector<uint64_t> uint64Data;

  while (!reader.atEnd()) {
    uint64_t tag = reader.varint("a field tag");
    uint64_t field = tag >> 3;
    unsigned wire = static_cast<unsigned>(tag & 7);
    if (field == 0 || field > 0x1fffffff)
      reader.malformed("invalid field number " + std::to_string(field));
    auto expectWire = [&](unsigned expected, const char *fieldName) {
      if (wire != expected)
        reader.malformed(std::string(fieldName) + " has wire type " +
                         std::to_string(wire) + ", expected " +
                         std::to_string(expected));
    };
    switch (field) {
    case 1: // dims: repeated int64
      readRepeated(reader, wire, Varint, 0, "dims", [&](ProtoReader &r) {
        dims.push_back(static_cast<int64_t>(r.varint("dims")));
      });
      break;
    case 2: // data_type: int32
      expectWire(Varint, "data_type");
      dataType = reader.varint("data_type");
      seenType = true;
      break;
    case 3: // segment
      fail(path, "segmented tensors are not supported");
    case 4: // float_data: repeated float
      readRepeated(reader, wire, Fixed32, 4, "float_data", [&](ProtoReader &r) {
        uint32_t bits = r.fixed32("float_data");
        float value;
        std::memcpy(&value, &bits, sizeof(value));
        floatData.push_back(value);
      });
      break;
    case 5: // int32_data: repeated int32 (negative values sign-extended)
      readRepeated(reader, wire, Varint, 0, "int32_data", [&](ProtoReader &r) {
        uint64_t value = r.varint("int32_data");
        int32Data.push_back(static_cast<int32_t>(static_cast<uint32_t>(value)));
      });
      break;
    case 7: // int64_data: repeated int64
      readRepeated(reader, wire, Varint, 0, "int64_data", [&](ProtoReader &r) {
        int64Data.push_back(static_cast<int64_t>(r.varint("int64_data")));
      });
      break;
    case 8: { // name: string
      expectWire(LengthDelimited, "name");
      ProtoReader text = reader.bytes("name");
      tensorName.assign(reinterpret_cast<const char *>(text.data()),
                        text.remaining());
      break;
    }
    case 9: { // raw_data: bytes
      expectWire(LengthDelimited, "raw_data");
      ProtoReader data = reader.bytes("raw_data");
      seenRaw = true;
      raw = data.data();
      rawSize = data.remaining();
      break;
    }
    case 10: // double_data: repeated double
      readRepeated(reader, wire, Fixed64, 8, "double_data",
                   [&](ProtoReader &r) {
                     uint64_t bits = r.fixed64("double_data");
                     double value;
                     std::memcpy(&value, &bits, sizeof(value));
                     doubleData.push_back(value);
                   });
      break;
    case 11: // uint64_data: repeated uint64 (UINT32, UINT64)
      readRepeated(reader, wire, Varint, 0, "uint64_data", [&](ProtoReader &r) {
        uint64Data.push_back(r.varint("uint64_data"));
      });
      break;
    case 13: // external_data
      fail(path, "external data is not supported (the tensor's data lives "
                 "in a separate file); re-save it with the data embedded");
    case 14: // data_location: 0 DEFAULT, 1 EXTERNAL
      expectWire(Varint, "data_location");
      if (reader.varint("data_location") != 0)
        fail(path, "external data is not supported (data_location is "
                   "EXTERNAL); re-save it with the data embedded");
      break;
    default: // doc_string, string_data, metadata_props, ...
      reader.skip(wire, field);
      break;
    }
  }

  const OnnxType &type = onnxType(path, seenType, dataType);
  DType dtype = type.dtype;
  size_t count = checkedNumElements(path, dims, dtypeSize(dtype));
  std::string where = std::string(" (") + type.name + " tensor of shape " +
                      shapeString(dims) + ")";

  // Exactly one source of data: raw_data or the field matching the type.
  struct TypedField {
    const char *name;
    size_t size;
    bool matches;
  };
  bool usesUint64 = dtype == DType::U32 || dtype == DType::U64;
  bool usesInt32 = dtype != DType::F32 && dtype != DType::F64 &&
                   dtype != DType::I64 && !usesUint64;
  const TypedField fields[] = {
      {"float_data", floatData.size(), dtype == DType::F32},
      {"int32_data", int32Data.size(), usesInt32},
      {"int64_data", int64Data.size(), dtype == DType::I64},
      {"double_data", doubleData.size(), dtype == DType::F64},
      {"uint64_data", uint64Data.size(), usesUint64},
  };
  const TypedField *typed = nullptr;
  for (const TypedField &f : fields) {
    if (f.matches)
      typed = &f;
    else if (f.size)
      fail(path, std::string(f.name) + " is set but the tensor is a " +
                     type.name + " tensor");
  }

  // INT4/UINT4 pack two values a byte, INT2/UINT2 four (low bits first),
  // in raw_data or one packed byte per int32_data entry.
  if (unsigned bits = dtype == DType::I4 || dtype == DType::U4   ? 4
                      : dtype == DType::I2 || dtype == DType::U2 ? 2
                                                                 : 0) {
    size_t packedSize = subbyte::packedSize(count, bits);
    std::vector<uint8_t> packed;
    if (seenRaw && !int32Data.empty())
      fail(path, "both raw_data and int32_data are set");
    if (seenRaw)
      packed.assign(raw, raw + rawSize);
    for (size_t i = 0; i < int32Data.size(); ++i) {
      if (int32Data[i] < -128 || int32Data[i] > 255)
        fail(path, "int32_data[" + std::to_string(i) +
                       "] = " + std::to_string(int32Data[i]) +
                       " is not a packed byte" + where);
      packed.push_back(static_cast<uint8_t>(int32Data[i]));
    }
    if (packed.size() != packedSize)
      fail(path, std::string(seenRaw ? "raw_data" : "int32_data") + " has " +
                     std::to_string(packed.size()) +
                     " packed bytes, expected " + std::to_string(packedSize) +
                     where);
    Tensor tensor = Tensor::empty(dtype, dims);
    bool isSigned = dtype == DType::I4 || dtype == DType::I2;
    for (size_t i = 0; i < count; ++i)
      tensor.data<uint8_t>()[i] =
          subbyte::unpack(packed.data(), i, bits, isSigned);
    if (name)
      *name = tensorName;
    return tensor;
  }

  if (seenRaw) {
    if (typed->size)
      fail(path, std::string("both raw_data and ") + typed->name + " are set");
    size_t expected = count * dtypeSize(dtype);
    if (rawSize != expected)
      fail(path, "raw_data has " + std::to_string(rawSize) +
                     " bytes, expected " + std::to_string(expected) + where);
    Tensor tensor = Tensor::fromBytes(dtype, dims, raw, rawSize);
    normalizeBools(tensor);
    if (name)
      *name = tensorName;
    return tensor;
  }

  if (typed->size != count) {
    if (typed->size == 0)
      fail(path, "tensor has no data: expected " + std::to_string(count) +
                     " values in raw_data or " + typed->name + where);
    fail(path, std::string(typed->name) + " has " +
                   std::to_string(typed->size) + " values, expected " +
                   std::to_string(count) + where);
  }
  Tensor tensor = Tensor::empty(dtype, dims);
  if (count != 0) {
    switch (dtype) {
    case DType::F32:
      std::memcpy(tensor.raw(), floatData.data(), count * sizeof(float));
      break;
    case DType::F64:
      std::memcpy(tensor.raw(), doubleData.data(), count * sizeof(double));
      break;
    case DType::I64:
      std::memcpy(tensor.raw(), int64Data.data(), count * sizeof(int64_t));
      break;
    case DType::U64:
      std::memcpy(tensor.raw(), uint64Data.data(), count * sizeof(uint64_t));
      break;
    case DType::U32:
      for (size_t i = 0; i < count; ++i) {
        if (uint64Data[i] > UINT32_MAX)
          fail(path, "uint64_data[" + std::to_string(i) +
                         "] = " + std::to_string(uint64Data[i]) +
                         " is out of range for UINT32");
        tensor.data<uint32_t>()[i] = static_cast<uint32_t>(uint64Data[i]);
      }
      break;
    default:
      storeInt32Data(path, tensor, int32Data);
      break;
    }
  }
  if (name)
    *name = tensorName;
  return tensor;
}

/// The tensors of a SequenceProto (field 3, tensor_values) from `reader`.
std::vector<Tensor> parseSequenceProto(ProtoReader reader,
                                       const std::string &path) {
  std::vector<Tensor> tensors;
  while (!reader.atEnd()) {
    uint64_t tag = reader.varint("a field tag");
    uint64_t field = tag >> 3;
    unsigned wire = static_cast<unsigned>(tag & 7);
    if (field == 3 && wire == LengthDelimited)
      tensors.push_back(
          parseTensorProto(reader.bytes("tensor_values"), path, nullptr));
    else if (field >= 4 && field <= 7)
      fail(path, "the sequence holds sparse tensors, sequences, maps or "
                 "optionals; kiln reads sequences of tensors only");
    else
      reader.skip(wire, field);
  }
  return tensors;
}

} // namespace

Tensor readTensorProto(const std::string &path, std::string *name) {
  std::vector<uint8_t> bytes = readWholeFile(path);
  return parseTensorProto(
      ProtoReader(path, bytes.data(), bytes.data() + bytes.size()), path, name);
}

std::vector<Tensor> readSequenceProto(const std::string &path) {
  std::vector<uint8_t> bytes = readWholeFile(path);
  return parseSequenceProto(
      ProtoReader(path, bytes.data(), bytes.data() + bytes.size()), path);
}

OptionalValue readOptionalProto(const std::string &path) {
  std::vector<uint8_t> bytes = readWholeFile(path);
  ProtoReader reader(path, bytes.data(), bytes.data() + bytes.size());
  OptionalValue value;
  while (!reader.atEnd()) {
    uint64_t tag = reader.varint("a field tag");
    uint64_t field = tag >> 3;
    unsigned wire = static_cast<unsigned>(tag & 7);
    if (field == 3 && wire == LengthDelimited) { // tensor_value
      value.kind = OptionalValue::Kind::Tensor;
      value.tensors = {
          parseTensorProto(reader.bytes("tensor_value"), path, nullptr)};
    } else if (field == 5 && wire == LengthDelimited) { // sequence_value
      value.kind = OptionalValue::Kind::Sequence;
      value.tensors = parseSequenceProto(reader.bytes("sequence_value"), path);
    } else if (field == 4 || field == 6 || field == 7) {
      fail(path, "the optional holds a sparse tensor, map or optional; kiln "
                 "reads optional tensors and sequences only");
    } else {
      reader.skip(wire, field);
    }
  }
  return value;
}

} // namespace kiln
