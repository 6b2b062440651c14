//===- TensorIO.cpp - tensors from and to .npy and TensorProto files ------===//
//
// Implements kiln/tensor_io.h with nothing but the standard library:
//
//  * .npy files, format versions 1.0, 2.0 and 3.0: the header dict is parsed
//    by a small tokenizer for the Python literals numpy writes; data must be
//    little-endian (or single-byte) and in C order. writeNpy writes version
//    1.0 (2.0 only when the header would not fit), padded like numpy does.
//  * ONNX TensorProto files (.pb, e.g. test_data_set_*/input_0.pb), decoded
//    straight from the protobuf wire format: dims, data_type, name, raw_data
//    and the typed repeated fields (float_data, int32_data, int64_data,
//    double_data), packed or not. Unknown fields are skipped by wire type.
//
// Every read is bounds-checked. Malformed, truncated or unsupported input
// throws kiln::Error("<path>: <problem>"); nothing here aborts or reads out
// of bounds on bad input.
//
//===----------------------------------------------------------------------===//

#include "kiln/tensor_io.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "runtime/FileRead.h"
#include "runtime/SubByte.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's tensor I/O assumes a little-endian host"
#endif

namespace kiln {
namespace {

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

[[noreturn]] void fail(const std::string &path, const std::string &message) {
  throw Error(path + ": " + message);
}

/// strerror(err) with a lower-case first letter, to match our messages.
std::string systemError(int err) {
  std::string text = std::strerror(err);
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z')
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The number of elements of `shape`; fails on negative dims, or when the
/// byte size (with `elemSize`-byte elements) could overflow later arithmetic.
size_t checkedNumElements(const std::string &path,
                          const std::vector<int64_t> &shape, size_t elemSize) {
  const uint64_t limit = std::numeric_limits<int64_t>::max() / 16;
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      fail(path, "negative dimension in shape " + shapeString(shape));
    if (dim != 0 && count > limit / static_cast<uint64_t>(dim))
      fail(path, "shape " + shapeString(shape) + " is too large");
    count *= static_cast<uint64_t>(dim);
  }
  if (count > limit / elemSize)
    fail(path, "shape " + shapeString(shape) + " is too large");
  if (count > std::numeric_limits<size_t>::max() / elemSize)
    fail(path, "shape " + shapeString(shape) + " is too large");
  return static_cast<size_t>(count);
}

/// Booleans are stored one byte each; anything non-zero reads as true (1).
void normalizeBools(Tensor &tensor) {
  if (tensor.dtype() != DType::Bool || tensor.nbytes() == 0)
    return;
  uint8_t *values = tensor.data<uint8_t>();
  for (size_t i = 0, e = tensor.nbytes(); i != e; ++i)
    values[i] = values[i] != 0;
}

uint32_t loadLE32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

uint64_t loadLE64(const uint8_t *p) {
  return uint64_t(loadLE32(p)) | uint64_t(loadLE32(p + 4)) << 32;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

const char kNpyMagic[] = "\x93NUMPY";
const size_t kNpyMagicSize = 6;
const char kNpySupported[] =
    "<f4, <f8, <f2, |i1, <i2, <i4, <i8, |u1, <u2, <u4, <u8, |b1, and "
    "ml_dtypes' bfloat16, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, "
    "float8_e5m2fnuz, int4, uint4, int2, uint2";

// Types numpy lacks, by the names ml_dtypes registers with numpy: arrays of
// them are saved with these descr strings (np.load reads them back once
// ml_dtypes is imported).
struct NamedNpyType {
  const char *descr;
  DType dtype;
};
const NamedNpyType kNamedNpyTypes[] = {{"bfloat16", DType::BF16},
                                       {"float8_e4m3fn", DType::F8E4M3FN},
                                       {"float8_e4m3fnuz", DType::F8E4M3FNUZ},
                                       {"float8_e5m2", DType::F8E5M2},
                                       {"float8_e5m2fnuz", DType::F8E5M2FNUZ},
                                       {"int4", DType::I4},
                                       {"uint4", DType::U4},
                                       {"int2", DType::I2},
                                       {"uint2", DType::U2}};

/// Sub-byte integers are held sign- or zero-extended to a byte; ml_dtypes
/// ignores the bits above the value, which may be anything in its files.
void normalizeSubByte(Tensor &tensor) {
  unsigned bits = tensor.dtype() == DType::I4 || tensor.dtype() == DType::U4 ? 4
                  : tensor.dtype() == DType::I2 || tensor.dtype() == DType::U2
                      ? 2
                      : 0;
  if (!bits || tensor.nbytes() == 0)
    return;
  bool isSigned = tensor.dtype() == DType::I4 || tensor.dtype() == DType::I2;
  uint8_t *values = tensor.data<uint8_t>();
  for (size_t i = 0, e = tensor.nbytes(); i != e; ++i) {
    unsigned v = values[i] & ((1u << bits) - 1);
    if (isSigned && (v >> (bits - 1)))
      v |= 0xffu << bits;
    values[i] = static_cast<uint8_t>(v);
  }
}

struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Parses the Python dict literal numpy writes as the .npy header, e.g.
/// "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), }".
class NpyHeaderParser {
public:
  NpyHeaderParser(const std::string &filePath, const std::string &headerText)
      : path(filePath), text(headerText) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seenDescr = false, seenFortran = false, seenShape = false;
    expect('{', "'{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key = parseString("a key");
      expect(':', "':'");
      skipSpace();
      if (key == "descr") {
        noteKey(seenDescr, key);
        if (peek() == '[')
          fail(path, "structured dtypes are not supported");
        header.descr = parseString("the 'descr' string");
      } else if (key == "fortran_order") {
        noteKey(seenFortran, key);
        header.fortranOrder = parseBool();
      } else if (key == "shape") {
        noteKey(seenShape, key);
        header.shape = parseShape();
      } else {
        malformed("unexpected key '" + key + "'");
      }
      skipSpace();
      if (consume('}'))
        break;
      expect(',', "',' or '}'");
    }
    // Only padding (spaces, the final newline) may follow the dict.
    skipSpace();
    if (pos != text.size())
      malformed("unexpected text after the dict");
    if (!seenDescr)
      malformed("missing key 'descr'");
    if (!seenFortran)
      malformed("missing key 'fortran_order'");
    if (!seenShape)
      malformed("missing key 'shape'");
    return header;
  }

private:
  [[noreturn]] void malformed(const std::string &what) {
    std::string shown = text;
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n' ||
                              shown.back() == '\0'))
      shown.pop_back();
    if (shown.size() > 200)
      shown = shown.substr(0, 200) + "...";
    for (char &c : shown)
      if (static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) > 0x7e)
        c = '?';
    fail(path, "malformed .npy header: " + what + " in \"" + shown + "\"");
  }

  char peek() const { return pos < text.size() ? text[pos] : '\0'; }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' ||
            text[pos] == '\r' || text[pos] == '\0'))
      ++pos;
  }

  bool consume(char c) {
    if (peek() != c || pos >= text.size())
      return false;
    ++pos;
    return true;
  }

  void expect(char c, const char *what) {
    skipSpace();
    if (!consume(c))
      malformed(std::string("expected ") + what);
  }

  void noteKey(bool &seen, const std::string &key) {
    if (seen)
      malformed("duplicate key '" + key + "'");
    seen = true;
  }

  /// A Python string literal in single or double quotes.
  std::string parseString(const char *what) {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      malformed(std::string("expected ") + what);
    ++pos;
    std::string value;
    while (true) {
      if (pos >= text.size())
        malformed("unterminated string");
      char c = text[pos++];
      if (c == quote)
        return value;
      if (c == '\\') {
        if (pos >= text.size())
          malformed("unterminated string");
        c = text[pos++];
      }
      value += c;
    }
  }

  bool parseBool() {
    if (text.compare(pos, 4, "True") == 0) {
      pos += 4;
      return true;
    }
    if (text.compare(pos, 5, "False") == 0) {
      pos += 5;
      return false;
    }
    malformed("expected True or False for 'fortran_order'");
  }

  /// A tuple of non-negative integers: "()", "(5,)", "(2, 3)". Python 2's
  /// long suffix ("3L") is accepted too.
  std::vector<int64_t> parseShape() {
    std::vector<int64_t> shape;
    if (!consume('('))
      malformed("expected a tuple for 'shape'");
    while (true) {
      skipSpace();
      if (consume(')'))
        return shape;
      if (peek() == '-')
        malformed("negative dimension in 'shape'");
      if (peek() < '0' || peek() > '9')
        malformed("expected an integer in 'shape'");
      int64_t dim = 0;
      while (peek() >= '0' && peek() <= '9') {
        int digit = text[pos++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10)
          malformed("dimension too large in 'shape'");
        dim = dim * 10 + digit;
      }
      if (peek() == 'L' || peek() == 'l')
        ++pos;
      shape.push_back(dim);
      skipSpace();
      if (consume(')'))
        return shape;
      if (!consume(','))
        malformed("expected ',' or ')' in 'shape'");
    }
  }

  const std::string &path;
  const std::string &text;
  size_t pos = 0;
};

DType npyDType(const std::string &path, const std::string &descr,
               DType untyped) {
  char order = '=';
  std::string code = descr;
  if (!descr.empty() && std::strchr("<>|=", descr[0])) {
    order = descr[0];
    code = descr.substr(1);
  }
  // (ml_dtypes' float8_e5m2 saves as 'f1'.)
  if (code == "V1" || code == "V2" || code == "f1") {
    bool narrow = false;
    for (const NamedNpyType &named : kNamedNpyTypes)
      narrow |= named.dtype == untyped;
    if (!narrow || dtypeSize(untyped) != size_t(code[1] - '0') ||
        (code == "f1" && untyped != DType::F8E5M2))
      fail(path, "untyped data ('" + descr +
                     "', as numpy saves ml_dtypes arrays) is read only for "
                     "a model input of a narrow type of that size "
                     "(bfloat16, float8, int4, ...)");
    if (order == '>' && code == "V2")
      fail(path, "big-endian data ('" + descr + "') is not supported");
    return untyped;
  }
  struct Entry {
    const char *code;
    DType dtype;
    size_t size;
  };
  static const Entry entries[] = {
      {"f4", DType::F32, 4}, {"f8", DType::F64, 8}, {"f2", DType::F16, 2},
      {"i1", DType::I8, 1},  {"i2", DType::I16, 2}, {"i4", DType::I32, 4},
      {"i8", DType::I64, 8}, {"u1", DType::U8, 1},  {"u2", DType::U16, 2},
      {"u4", DType::U32, 4}, {"u8", DType::U64, 8}, {"b1", DType::Bool, 1},
      {"?", DType::Bool, 1}};
  for (const NamedNpyType &named : kNamedNpyTypes)
    if (code == named.descr)
      return named.dtype;
  for (const Entry &entry : entries) {
    if (code != entry.code)
      continue;
    // '<' little, '|' not applicable, '=' native (little-endian here);
    // byte order does not matter for single bytes.
    if (order == '>' && entry.size > 1)
      fail(path, "big-endian data ('" + descr +
                     "') is not supported; save it little-endian, e.g. "
                     "with array.astype('<" +
                     code + "')");
    return entry.dtype;
  }
  fail(path,
       "unsupported dtype '" + descr + "' (supported: " + kNpySupported + ")");
}

const char *npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::F16:
    return "<f2";
  case DType::I8:
    return "|i1";
  case DType::I16:
    return "<i2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::U8:
    return "|u1";
  case DType::U16:
    return "<u2";
  case DType::U32:
    return "<u4";
  case DType::U64:
    return "<u8";
  case DType::Bool:
    return "|b1";
  default:
    for (const NamedNpyType &named : kNamedNpyTypes)
      if (named.dtype == dtype)
        return named.descr;
  }
  return nullptr;
}

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

std::string lowerCase(std::string text) {
  for (char &c : text)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

Tensor readNpy(const std::string &path, DType untyped) {
  std::vector<uint8_t> bytes = readWholeFile(path);
  if (bytes.size() < kNpyMagicSize + 2 ||
      std::memcmp(bytes.data(), kNpyMagic, kNpyMagicSize) != 0)
    fail(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
  unsigned major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "unsupported .npy format version " + std::to_string(major) +
                   "." + std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lengthSize = major == 1 ? 2 : 4;
  size_t headerStart = 8 + lengthSize;
  if (bytes.size() < headerStart)
    fail(path, "truncated header: file has only " +
                   std::to_string(bytes.size()) + " bytes");
  size_t headerLength = major == 1 ? (size_t(bytes[8]) | size_t(bytes[9]) << 8)
                                   : size_t(loadLE32(&bytes[8]));
  if (headerLength > bytes.size() - headerStart)
    fail(path, "truncated header: expected " + std::to_string(headerLength) +
                   " header bytes, found " +
                   std::to_string(bytes.size() - headerStart));
  std::string text(reinterpret_cast<const char *>(&bytes[headerStart]),
                   headerLength);
  NpyHeader header = NpyHeaderParser(path, text).parse();

  DType dtype = npyDType(path, header.descr, untyped);
  // With at most one dimension above 1, Fortran and C order coincide.
  size_t nonTrivial = 0;
  for (int64_t dim : header.shape)
    nonTrivial += dim != 1;
  if (header.fortranOrder && nonTrivial > 1)
    fail(path, "fortran_order arrays are not supported; save a C-order "
               "array, e.g. with numpy.ascontiguousarray");

  size_t elemSize = dtypeSize(dtype);
  size_t expected = checkedNumElements(path, header.shape, elemSize) * elemSize;
  size_t dataStart = headerStart + headerLength;
  size_t found = bytes.size() - dataStart;
  if (found < expected)
    fail(path, "truncated data: expected " + std::to_string(expected) +
                   " bytes, found " + std::to_string(found));
  if (found > expected)
    fail(path, "unexpected trailing data: expected " +
                   std::to_string(expected) + " bytes, found " +
                   std::to_string(found));
  Tensor tensor = Tensor::fromBytes(dtype, header.shape,
                                    bytes.data() + dataStart, expected);
  normalizeBools(tensor);
  normalizeSubByte(tensor);
  return tensor;
}

void writeNpy(const std::string &path, const Tensor &tensor) {
  const char *descr = npyDescr(tensor.dtype());
  if (!descr)
    fail(path, "cannot write this dtype to .npy");
  const std::vector<int64_t> &shape = tensor.shape();
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";

  // Pad with spaces and end with '\n' so the data starts 64-byte aligned.
  // Version 2.0 (4-byte header length) only when 1.0's 2 bytes overflow.
  unsigned major = 1;
  size_t prefix = 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xffff) {
    major = 2;
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t headerLength = total - prefix;
  std::string header(kNpyMagic, kNpyMagicSize);
  header += static_cast<char>(major);
  header += '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    header += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  header += dict;
  header.append(total - header.size() - 1, ' ');
  header += '\n';

  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    fail(path, "cannot create file: " +
                   (errno ? systemError(errno) : std::string("unknown error")));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (tensor.nbytes() != 0)
    out.write(static_cast<const char *>(tensor.raw()),
              static_cast<std::streamsize>(tensor.nbytes()));
  out.close();
  if (!out)
    fail(path, "write error (disk full?)");
}

namespace {

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

Tensor readTensorFile(const std::string &path, DType untyped) {
  size_t slash = path.find_last_of("/\\");
  size_t dot = path.rfind('.');
  std::string extension;
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    extension = lowerCase(path.substr(dot));
  if (extension == ".npy")
    return readNpy(path, untyped);
  if (extension == ".pb")
    return readTensorProto(path);
  fail(path,
       (extension.empty() ? std::string("no file extension")
                          : "unknown file extension '" + extension + "'") +
           "; accepted tensor files: .npy (numpy), .pb (onnx "
           "TensorProto)");
}

std::vector<uint8_t> readWholeFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path, "is a directory, not a tensor file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(path, "cannot open file: " +
                   (errno ? systemError(errno) : std::string("unknown error")));
  std::vector<uint8_t> bytes;
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size < (uintmax_t(1) << 40))
    bytes.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0)
    bytes.insert(bytes.end(), buffer, buffer + in.gcount());
  if (in.bad())
    fail(path, "read error");
  return bytes;
}

} // namespace kiln
