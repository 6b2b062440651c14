//===- TensorIO.cpp - tensors from and to .npy and TensorProto files ------===//
//
// Implements kiln/tensor_io.h with nothing but the standard library:
//
//  * .npy files, format versions 1.0, 2.0 and 3.0: the header dict is parsed
//    by a small tokenizer for the Python literals numpy writes; data must be
//    little-endian (or single-byte) and in C order. writeNpy writes version
//    1.0 (2.0 only when the header would not fit), padded like numpy does.
//  * ONNX TensorProto files (.pb): TensorProto.cpp.
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
#include "runtime/TensorIOCommon.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's tensor I/O assumes a little-endian host"
#endif

namespace kiln::tensor_io {

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

std::string lowerCase(std::string text) {
  for (char &c : text)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return text;
}

} // namespace kiln::tensor_io

namespace kiln {
using namespace tensor_io;

namespace {
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
