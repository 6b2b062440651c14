//===- TensorIOTest.cpp - tests for kiln/tensor_io.h ----------------------===//
//
// Round-trips .npy files through writeNpy/readNpy, reads .npy files laid out
// the way numpy writes them (headers built here, no Python needed) and ONNX
// TensorProto files encoded by hand in the protobuf wire format, and checks
// that truncated or malformed files throw kiln::Error naming the file.
//
//===----------------------------------------------------------------------===//

#include "kiln/tensor_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#ifndef _WIN32
#include <unistd.h>
#endif

using namespace kiln;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Gives every test its own scratch directory, removed afterwards.
class TensorIOTest : public ::testing::Test {
protected:
  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    std::string unique = std::string("kiln-tensor-io-") + info->name();
#ifndef _WIN32
    unique += "-" + std::to_string(::getpid());
#endif
    dir = std::filesystem::path(::testing::TempDir()) / unique;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string path(const std::string &name) const {
    return (dir / name).string();
  }

  std::string writeFile(const std::string &name, const std::string &bytes) {
    std::string file = path(name);
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << file;
    return file;
  }

  static std::string readFile(const std::string &file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir;
};

/// Expects `read` to throw kiln::Error whose message starts with "FILE: " and
/// contains `needle`.
void expectError(const std::string &file, const std::function<void()> &read,
                 const std::string &needle) {
  try {
    read();
    ADD_FAILURE() << "no error reading " << file << " (wanted '" << needle
                  << "')";
  } catch (const Error &e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind(file + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(needle), std::string::npos)
        << "'" << message << "' lacks '" << needle << "'";
  }
}

template <typename T> std::string bytesOf(const std::vector<T> &values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty())
    std::memcpy(&bytes[0], values.data(), bytes.size());
  return bytes;
}

std::string tensorBytes(const Tensor &tensor) {
  return std::string(static_cast<const char *>(tensor.raw()), tensor.nbytes());
}

/// A .npy file as numpy lays it out: magic, version, little-endian header
/// length, the dict padded with spaces to a 64-byte boundary, '\n', data.
std::string npyFile(const std::string &dict, const std::string &data,
                    int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  size_t headerLength = total - prefix;
  std::string bytes("\x93NUMPY", 6);
  bytes += static_cast<char>(major);
  bytes += '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  bytes += dict;
  bytes.append(total - bytes.size() - 1, ' ');
  bytes += '\n';
  return bytes + data;
}

// Protobuf wire-format encoders.
std::string varint(uint64_t value) {
  std::string bytes;
  while (value >= 0x80) {
    bytes += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  bytes += static_cast<char>(value);
  return bytes;
}
std::string tag(int field, int wireType) {
  return varint(static_cast<uint64_t>(field) << 3 | wireType);
}
std::string varintField(int field, uint64_t value) {
  return tag(field, 0) + varint(value);
}
std::string bytesField(int field, const std::string &payload) {
  return tag(field, 2) + varint(payload.size()) + payload;
}
std::string fixed32(uint32_t value) {
  std::string bytes;
  for (int i = 0; i < 4; ++i)
    bytes += static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}
std::string fixed64(uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes += static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}
std::string packedDims(const std::vector<int64_t> &dims) {
  std::string payload;
  for (int64_t dim : dims)
    payload += varint(static_cast<uint64_t>(dim));
  return bytesField(1, payload);
}

// ONNX TensorProto field numbers and data types.
enum : int {
  Dims = 1,
  DataType = 2,
  FloatData = 4,
  Int32Data = 5,
  Int64Data = 7,
  Name = 8,
  RawData = 9,
  DoubleData = 10,
  Uint64Data = 11,
  DocString = 12,
  DataLocation = 14,
};
enum : uint64_t {
  OnnxFloat = 1,
  OnnxUint8 = 2,
  OnnxInt8 = 3,
  OnnxInt64 = 7,
  OnnxString = 8,
  OnnxBool = 9,
  OnnxFloat16 = 10,
  OnnxDouble = 11,
  OnnxUint16 = 4,
  OnnxUint32 = 12,
  OnnxUint64 = 13,
  OnnxBfloat16 = 16,
  OnnxFloat8E4M3FN = 17,
  OnnxFloat8E5M2FNUZ = 20,
  OnnxUint4 = 21,
  OnnxInt4 = 22,
  OnnxFloat4E2M1 = 23,
  OnnxInt2 = 26
};

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

TEST_F(TensorIOTest, NpyRoundTripAllDTypesAndShapes) {
  const DType dtypes[] = {
      DType::F32, DType::F64, DType::F16,  DType::I8,       DType::I16,
      DType::I32, DType::I64, DType::U8,   DType::Bool,     DType::U16,
      DType::U32, DType::U64, DType::BF16, DType::F8E4M3FN, DType::F8E5M2FNUZ,
      DType::I4,  DType::U2};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {5}, {2, 3}, {0, 4}, {1, 2, 3, 4}, {64, 10}};
  int fileIndex = 0;
  for (DType dtype : dtypes) {
    for (const std::vector<int64_t> &shape : shapes) {
      Tensor tensor = Tensor::empty(dtype, shape);
      auto *bytes = static_cast<uint8_t *>(tensor.raw());
      for (size_t i = 0; i < tensor.nbytes(); ++i)
        bytes[i] = dtype == DType::Bool ? (i % 3 == 0)
                   : dtype == DType::I4 ? static_cast<int8_t>(i % 16) - 8
                   : dtype == DType::U2 ? i % 4
                                        : static_cast<uint8_t>(i * 37 + 11);
      std::string file = path("t" + std::to_string(fileIndex++) + ".npy");
      SCOPED_TRACE(describe(dtype, shape));
      writeNpy(file, tensor);

      // numpy's layout: version 1.0, data 64-byte aligned after a '\n'.
      std::string written = readFile(file);
      ASSERT_GE(written.size(), 64u);
      EXPECT_EQ(written.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
      size_t dataStart = 10 + (uint8_t(written[8]) | uint8_t(written[9]) << 8);
      EXPECT_EQ(dataStart % 64, 0u);
      EXPECT_EQ(written[dataStart - 1], '\n');
      EXPECT_EQ(written.size(), dataStart + tensor.nbytes());

      Tensor back = readNpy(file);
      EXPECT_EQ(back.dtype(), dtype);
      EXPECT_EQ(back.shape(), shape);
      EXPECT_EQ(tensorBytes(back), tensorBytes(tensor));
    }
  }
}

TEST_F(TensorIOTest, NpyWriterHeaderMatchesNumpy) {
  Tensor scalar = Tensor::fromBytes(DType::F32, {}, "\0\0\x80\x3f", 4);
  writeNpy(path("scalar.npy"), scalar);
  std::string written = readFile(path("scalar.npy"));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
  EXPECT_EQ(written.substr(10, dict.size()), dict);
  EXPECT_EQ(written.size(), 128u + 4u); // numpy uses 128 header bytes too

  writeNpy(path("vector.npy"), Tensor::empty(DType::Bool, {5}));
  EXPECT_NE(readFile(path("vector.npy"))
                .find("{'descr': '|b1', 'fortran_order': False, "
                      "'shape': (5,), }"),
            std::string::npos);
}

TEST_F(TensorIOTest, NpyNarrowTypesUseMlDtypesNames) {
  // ml_dtypes registers these names with numpy; its 4-bit values may carry
  // any upper bits, which kiln drops (sign- or zero-extending).
  writeNpy(path("bf16.npy"), Tensor::empty(DType::BF16, {2}));
  EXPECT_NE(readFile(path("bf16.npy")).find("'descr': 'bfloat16'"),
            std::string::npos);
  std::string header = "{'descr': 'int4', 'fortran_order': False, "
                       "'shape': (3,), }";
  header.append(118 - header.size(), ' ');
  header += '\n';
  std::string file = writeFile(
      "int4.npy", std::string("\x93NUMPY\x01\x00", 8) +
                      std::string(1, char(header.size())) + std::string(1, 0) +
                      header + std::string("\x0f\x07\xf8", 3));
  Tensor t = readNpy(file);
  ASSERT_EQ(t.dtype(), DType::I4);
  EXPECT_EQ(t.data<int8_t>()[0], -1);
  EXPECT_EQ(t.data<int8_t>()[1], 7);
  EXPECT_EQ(t.data<int8_t>()[2], -8);
}

TEST_F(TensorIOTest, ElementAsDoubleDecodesNarrowFloats) {
  struct Case {
    DType dtype;
    uint16_t bits;
    double value;
  };
  const Case cases[] = {
      {DType::BF16, 0x3f80, 1.0},
      {DType::BF16, 0xc2f7, -123.5},
      {DType::BF16, 0x7f80, INFINITY},
      {DType::F8E4M3FN, 0x7e, 448.0},
      {DType::F8E4M3FN, 0x01, 0.001953125},
      {DType::F8E4M3FN, 0xb8, -1.0},
      {DType::F8E4M3FNUZ, 0x7f, 240.0},
      {DType::F8E5M2, 0x7b, 57344.0},
      {DType::F8E5M2, 0xfc, -INFINITY},
      {DType::F8E5M2FNUZ, 0x7f, 57344.0},
      {DType::F8E5M2FNUZ, 0x01, std::ldexp(1.0, -17)},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.dtype)) + " " +
                 std::to_string(c.bits));
    if (dtypeSize(c.dtype) == 2)
      EXPECT_EQ(elementAsDouble(c.dtype, &c.bits, 0), c.value);
    else {
      uint8_t byte = static_cast<uint8_t>(c.bits);
      EXPECT_EQ(elementAsDouble(c.dtype, &byte, 0), c.value);
    }
  }
  uint8_t fnNan = 0x7f, fnuzNan = 0x80, fnuzZero = 0x00;
  EXPECT_TRUE(std::isnan(elementAsDouble(DType::F8E4M3FN, &fnNan, 0)));
  EXPECT_TRUE(std::isnan(elementAsDouble(DType::F8E4M3FNUZ, &fnuzNan, 0)));
  EXPECT_EQ(elementAsDouble(DType::F8E4M3FNUZ, &fnuzZero, 0), 0.0);
}

TEST_F(TensorIOTest, ReadsNumpyWrittenFiles) {
  std::vector<float> values = {1.5f, -2.0f, 0.0f, 3.25f, 1e-3f, -7.0f};
  std::string file = writeFile(
      "numpy.npy",
      npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
              bytesOf(values)));
  Tensor tensor = readNpy(file);
  EXPECT_EQ(tensor.dtype(), DType::F32);
  EXPECT_EQ(tensor.shape(), (std::vector<int64_t>{2, 3}));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(tensor.data<float>()[i], values[i]);

  // Versions 2.0 and 3.0 only widen the header length to 4 bytes.
  for (int major : {2, 3}) {
    std::string versioned = writeFile(
        "v" + std::to_string(major) + ".npy",
        npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                bytesOf(std::vector<int64_t>{-1, 0, 1LL << 40}), major));
    Tensor v = readNpy(versioned);
    EXPECT_EQ(v.dtype(), DType::I64);
    EXPECT_EQ(v.shape(), std::vector<int64_t>{3});
    EXPECT_EQ(v.data<int64_t>()[2], 1LL << 40);
  }

  // Scalar, '=' / '|' byte orders, extra spaces, double quotes, Python 2
  // longs, a 1-D Fortran-order array (same layout as C order).
  struct Case {
    const char *dict;
    DType dtype;
    std::vector<int64_t> shape;
    std::string data;
  };
  const Case cases[] = {
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
       DType::F64,
       {},
       bytesOf(std::vector<double>{2.5})},
      {"{'descr': '=i4', 'fortran_order': False, 'shape': (2,), }",
       DType::I32,
       {2},
       bytesOf(std::vector<int32_t>{7, -7})},
      {"{ \"descr\" : \"|u1\" , \"fortran_order\" : False , \"shape\" : ( 4 , "
       ") }",
       DType::U8,
       {4},
       "\x01\x02\x03\xff"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (1L, 2L), }",
       DType::F16,
       {1, 2},
       std::string("\x00\x3c\x00\xc0", 4)},
      {"{'descr': '|i1', 'fortran_order': True, 'shape': (3,), }",
       DType::I8,
       {3},
       "\x01\xfe\x03"},
      {"{'fortran_order': False, 'shape': (2, 2), 'descr': '<i2'}",
       DType::I16,
       {2, 2},
       bytesOf(std::vector<int16_t>{1, -2, 300, -32768})},
  };
  int index = 0;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.dict);
    std::string caseFile = writeFile("case" + std::to_string(index++) + ".npy",
                                     npyFile(c.dict, c.data));
    Tensor t = readNpy(caseFile);
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), c.shape);
    EXPECT_EQ(tensorBytes(t), c.data);
  }
}

TEST_F(TensorIOTest, NpyBoolsReadAsZeroOrOne) {
  std::string file = writeFile(
      "bools.npy",
      npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
              std::string("\x00\x01\x07", 3)));
  EXPECT_EQ(tensorBytes(readNpy(file)), std::string("\x00\x01\x01", 3));
}

TEST_F(TensorIOTest, NpyTruncatedDataThrows) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), }";
  std::string file =
      writeFile("truncated.npy", npyFile(dict, std::string(100, '\0')));
  expectError(
      file, [&] { readNpy(file); },
      "truncated data: expected 200704 bytes, found 100");

  std::string header = npyFile(dict, "");
  std::string cutHeader = writeFile("cut-header.npy", header.substr(0, 40));
  expectError(
      cutHeader, [&] { readNpy(cutHeader); }, "truncated header");

  std::string extra =
      writeFile("extra.npy", npyFile("{'descr': '<f4', 'fortran_order': False, "
                                     "'shape': (2,), }",
                                     std::string(9, '\0')));
  expectError(
      extra, [&] { readNpy(extra); }, "expected 8 bytes, found 9");
}

TEST_F(TensorIOTest, NpyBadMagicThrows) {
  std::string good = npyFile(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "abcd");
  std::string bad = good;
  bad[1] = 'X';
  std::string file = writeFile("bad-magic.npy", bad);
  expectError(
      file, [&] { readNpy(file); }, "not a .npy file");

  std::string tiny = writeFile("tiny.npy", "\x93NU");
  expectError(
      tiny, [&] { readNpy(tiny); }, "not a .npy file");

  std::string version = good;
  version[6] = 4;
  std::string versionFile = writeFile("version.npy", version);
  expectError(
      versionFile, [&] { readNpy(versionFile); },
      "unsupported .npy format version 4.0");
}

TEST_F(TensorIOTest, NpyBigEndianThrows) {
  std::string file = writeFile(
      "big.npy",
      npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
              std::string(8, '\0')));
  expectError(
      file, [&] { readNpy(file); }, "big-endian");

  // Byte order is meaningless for single bytes, so '>i1' is fine.
  std::string bytes = writeFile(
      "big-bytes.npy",
      npyFile("{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }",
              "\x01\x02"));
  EXPECT_EQ(readNpy(bytes).dtype(), DType::I8);
}

TEST_F(TensorIOTest, NpyUnsupportedOrMalformedHeadersThrow) {
  struct Case {
    const char *dict;
    const char *error;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
       "fortran_order"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
       "unsupported dtype '<c8'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
       "structured dtypes"},
      {"{'descr': '<f4', 'fortran_order': False, }", "missing key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
       "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }",
       "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
       "expected ',' or '}'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }",
       "malformed .npy header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999, 99999999999, 99999999999), }",
       "too large"},
  };
  int index = 0;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.dict);
    std::string file = writeFile("bad" + std::to_string(index++) + ".npy",
                                 npyFile(c.dict, std::string(24, '\0')));
    expectError(
        file, [&] { readNpy(file); }, c.error);
  }
}

TEST_F(TensorIOTest, MissingFilesThrow) {
  std::string file = path("does-not-exist.npy");
  expectError(
      file, [&] { readNpy(file); }, "cannot open file");
  expectError(
      file, [&] { readTensorFile(file); }, "cannot open file");
  std::string pb = path("does-not-exist.pb");
  expectError(
      pb, [&] { readTensorProto(pb); }, "cannot open file");
  std::string unwritable = path("no-such-dir/out.npy");
  expectError(
      unwritable, [&] { writeNpy(unwritable, Tensor::empty(DType::F32, {1})); },
      "cannot create file");
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto
//===----------------------------------------------------------------------===//

TEST_F(TensorIOTest, TensorProtoRawData) {
  std::vector<float> values = {1, 2, 3, 4, 5, -6};
  std::string file = writeFile(
      "raw.pb", packedDims({2, 3}) + varintField(DataType, OnnxFloat) +
                    bytesField(Name, "input.1") +
                    bytesField(RawData, bytesOf(values)));
  std::string name;
  Tensor tensor = readTensorProto(file, &name);
  EXPECT_EQ(name, "input.1");
  EXPECT_EQ(tensor.dtype(), DType::F32);
  EXPECT_EQ(tensor.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensorBytes(tensor), bytesOf(values));

  // readTensorFile dispatches on the extension.
  EXPECT_EQ(tensorBytes(readTensorFile(file)), bytesOf(values));

  // No dims: a scalar.
  std::string scalar = writeFile(
      "scalar.pb", varintField(DataType, OnnxInt64) +
                       bytesField(RawData, bytesOf(std::vector<int64_t>{-9})));
  Tensor s = readTensorProto(scalar);
  EXPECT_TRUE(s.shape().empty());
  EXPECT_EQ(s.data<int64_t>()[0], -9);
}

TEST_F(TensorIOTest, TensorProtoPackedAndUnpackedFloatData) {
  std::vector<float> values = {0.5f, -1.25f, 3e10f, 0.0f};
  std::string packed = writeFile(
      "packed.pb", packedDims({4}) + varintField(DataType, OnnxFloat) +
                       bytesField(FloatData, bytesOf(values)));
  Tensor tensor = readTensorProto(packed);
  EXPECT_EQ(tensor.shape(), std::vector<int64_t>{4});
  EXPECT_EQ(tensorBytes(tensor), bytesOf(values));

  // Unpacked: one tag per value (dims unpacked too, fields out of order).
  std::string unpacked = varintField(DataType, OnnxFloat);
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    unpacked += tag(FloatData, 5) + fixed32(bits);
  }
  unpacked += varintField(Dims, 2) + varintField(Dims, 2);
  std::string file = writeFile("unpacked.pb", unpacked);
  Tensor t = readTensorProto(file);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(tensorBytes(t), bytesOf(values));
}

TEST_F(TensorIOTest, TensorProtoInt64AndDoubleData) {
  std::vector<int64_t> values = {-1, 0, 1, INT64_MIN, INT64_MAX, 300};
  std::string payload;
  for (int64_t v : values)
    payload += varint(static_cast<uint64_t>(v));
  std::string file = writeFile(
      "int64.pb", packedDims({3, 2}) + varintField(DataType, OnnxInt64) +
                      bytesField(Int64Data, payload));
  Tensor tensor = readTensorProto(file);
  EXPECT_EQ(tensor.dtype(), DType::I64);
  EXPECT_EQ(tensor.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(tensorBytes(tensor), bytesOf(values));

  double d = -0.1;
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  std::string dfile = writeFile(
      "double.pb", packedDims({2}) + varintField(DataType, OnnxDouble) +
                       tag(DoubleData, 1) + fixed64(bits) +
                       bytesField(DoubleData, fixed64(bits)));
  Tensor dt = readTensorProto(dfile);
  EXPECT_EQ(dt.dtype(), DType::F64);
  EXPECT_EQ(dt.data<double>()[0], -0.1);
  EXPECT_EQ(dt.data<double>()[1], -0.1);
}

TEST_F(TensorIOTest, TensorProtoInt32DataIsNarrowed) {
  // INT8: -5 is stored sign-extended to 10 varint bytes.
  std::string int8 = writeFile(
      "int8.pb", packedDims({3}) + varintField(DataType, OnnxInt8) +
                     bytesField(Int32Data, varint(static_cast<uint64_t>(-5)) +
                                               varint(127) + varint(0)));
  Tensor t8 = readTensorProto(int8);
  EXPECT_EQ(t8.dtype(), DType::I8);
  EXPECT_EQ(tensorBytes(t8), std::string("\xfb\x7f\x00", 3));

  // FLOAT16 keeps the bit pattern (1.0 = 0x3c00, -2.0 = 0xc000).
  std::string half = writeFile(
      "half.pb", packedDims({2}) + varintField(DataType, OnnxFloat16) +
                     varintField(Int32Data, 0x3c00) +
                     varintField(Int32Data, 0xc000));
  Tensor th = readTensorProto(half);
  EXPECT_EQ(th.dtype(), DType::F16);
  EXPECT_EQ(th.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(th.data<uint16_t>()[1], 0xc000);

  std::string boolean = writeFile(
      "bool.pb", packedDims({3}) + varintField(DataType, OnnxBool) +
                     bytesField(Int32Data, varint(1) + varint(0) + varint(1)));
  EXPECT_EQ(tensorBytes(readTensorProto(boolean)),
            std::string("\x01\x00\x01", 3));

  std::string overflow =
      writeFile("uint8.pb", packedDims({1}) + varintField(DataType, OnnxUint8) +
                                varintField(Int32Data, 256));
  expectError(
      overflow, [&] { readTensorProto(overflow); }, "out of range for UINT8");
}

TEST_F(TensorIOTest, TensorProtoUnsignedTypes) {
  // UINT16 in int32_data; UINT32 and UINT64 in uint64_data.
  std::string u16 =
      writeFile("u16.pb", packedDims({2}) + varintField(DataType, OnnxUint16) +
                              bytesField(Int32Data, varint(65535) + varint(7)));
  Tensor t16 = readTensorProto(u16);
  EXPECT_EQ(t16.dtype(), DType::U16);
  EXPECT_EQ(t16.data<uint16_t>()[0], 65535);
  EXPECT_EQ(t16.data<uint16_t>()[1], 7);

  std::string u32 = writeFile(
      "u32.pb", packedDims({2}) + varintField(DataType, OnnxUint32) +
                    bytesField(Uint64Data, varint(4294967295u) + varint(1)));
  Tensor t32 = readTensorProto(u32);
  EXPECT_EQ(t32.dtype(), DType::U32);
  EXPECT_EQ(t32.data<uint32_t>()[0], 4294967295u);
  EXPECT_EQ(t32.data<uint32_t>()[1], 1u);

  std::string u64 =
      writeFile("u64.pb", packedDims({1}) + varintField(DataType, OnnxUint64) +
                              varintField(Uint64Data, ~0ULL));
  Tensor t64 = readTensorProto(u64);
  EXPECT_EQ(t64.dtype(), DType::U64);
  EXPECT_EQ(t64.data<uint64_t>()[0], ~0ULL);

  std::string overflow = writeFile(
      "u32big.pb", packedDims({1}) + varintField(DataType, OnnxUint32) +
                       varintField(Uint64Data, 1ULL << 32));
  expectError(
      overflow, [&] { readTensorProto(overflow); }, "out of range for UINT32");
  std::string wrongField = writeFile(
      "u64int32.pb", packedDims({1}) + varintField(DataType, OnnxUint64) +
                         varintField(Int32Data, 1));
  expectError(
      wrongField, [&] { readTensorProto(wrongField); },
      "int32_data is set but the tensor is a UINT64 tensor");
}

TEST_F(TensorIOTest, TensorProtoNarrowTypes) {
  // INT4 packs two values a byte, low nibble first: 7, -8, -1 (and a pad).
  Tensor int4 = readTensorProto(writeFile(
      "int4.pb", packedDims({3}) + varintField(DataType, OnnxInt4) +
                     bytesField(RawData, std::string("\x87\x0f", 2))));
  ASSERT_EQ(int4.dtype(), DType::I4);
  EXPECT_EQ(tensorBytes(int4), std::string("\x07\xf8\xff", 3));
  // UINT4 in int32_data: one packed byte per value.
  Tensor uint4 = readTensorProto(
      writeFile("uint4.pb", packedDims({2}) + varintField(DataType, OnnxUint4) +
                                varintField(Int32Data, 0xf1)));
  EXPECT_EQ(tensorBytes(uint4), std::string("\x01\x0f", 2));
  // INT2: four a byte; 0b11100100 holds 0, 1, -2, -1.
  Tensor int2 = readTensorProto(
      writeFile("int2.pb", packedDims({4}) + varintField(DataType, OnnxInt2) +
                               bytesField(RawData, "\xe4")));
  EXPECT_EQ(tensorBytes(int2), std::string("\x00\x01\xfe\xff", 4));
  // BFLOAT16 and FLOAT8 bit patterns in int32_data.
  Tensor bf16 = readTensorProto(writeFile(
      "bf16.pb", packedDims({1}) + varintField(DataType, OnnxBfloat16) +
                     varintField(Int32Data, 0x3f80)));
  EXPECT_EQ(elementAsDouble(bf16.dtype(), bf16.raw(), 0), 1.0);
  Tensor f8 = readTensorProto(writeFile(
      "f8.pb", packedDims({1}) + varintField(DataType, OnnxFloat8E4M3FN) +
                   varintField(Int32Data, 0x7e)));
  EXPECT_EQ(elementAsDouble(f8.dtype(), f8.raw(), 0), 448.0);

  const struct {
    std::string bytes;
    const char *error;
  } bad[] = {
      {packedDims({3}) + varintField(DataType, OnnxInt4) +
           bytesField(RawData, "\x01"),
       "raw_data has 1 packed bytes, expected 2"},
      {packedDims({1}) + varintField(DataType, OnnxFloat8E5M2FNUZ) +
           varintField(Int32Data, 256),
       "out of range for 8-bit float bits"},
      {packedDims({1}) + varintField(DataType, OnnxFloat4E2M1) +
           bytesField(RawData, "\x01"),
       "unsupported data_type 23 (FLOAT4E2M1)"},
  };
  int index = 0;
  for (const auto &c : bad) {
    SCOPED_TRACE(c.error);
    std::string file =
        writeFile("narrow" + std::to_string(index++) + ".pb", c.bytes);
    expectError(
        file, [&] { readTensorProto(file); }, c.error);
  }
}

TEST_F(TensorIOTest, TensorProtoSkipsUnknownFields) {
  std::string file = writeFile(
      "unknown.pb",
      bytesField(DocString, "a doc string") + packedDims({1}) + tag(99, 1) +
          fixed64(7) + tag(100, 5) + fixed32(8) + varintField(101, 1ULL << 60) +
          varintField(DataLocation, 0) + varintField(DataType, OnnxFloat) +
          bytesField(RawData, fixed32(0x3f800000)));
  Tensor tensor = readTensorProto(file);
  EXPECT_EQ(tensor.data<float>()[0], 1.0f);
}

TEST_F(TensorIOTest, TensorProtoTruncatedThrows) {
  std::string message = packedDims({2, 2}) + varintField(DataType, OnnxFloat) +
                        bytesField(Name, "x") +
                        bytesField(RawData, std::string(16, '\x11'));
  std::string file = writeFile("truncated.pb", message.substr(0, 20));
  expectError(
      file, [&] { readTensorProto(file); },
      "truncated protobuf: unexpected end of data in raw_data");

  // Every proper prefix is either cut mid-field or lacks type or data.
  for (size_t size = 0; size < message.size(); ++size) {
    SCOPED_TRACE(size);
    std::string prefix = writeFile("prefix.pb", message.substr(0, size));
    EXPECT_THROW(readTensorProto(prefix), Error);
  }
  EXPECT_NO_THROW(readTensorProto(writeFile("whole.pb", message)));
}

TEST_F(TensorIOTest, TensorProtoMalformedThrows) {
  struct Case {
    std::string bytes;
    const char *error;
  };
  const std::string floatType = varintField(DataType, OnnxFloat);
  const Case cases[] = {
      {packedDims({2}) + floatType + bytesField(RawData, "abc"),
       "raw_data has 3 bytes, expected 8"},
      {packedDims({3}) + floatType + bytesField(FloatData, fixed32(0)),
       "float_data has 1 values, expected 3"},
      {packedDims({3}) + floatType, "tensor has no data"},
      {packedDims({1}) + bytesField(RawData, "abcd"), "no data_type"},
      {packedDims({1}) + varintField(DataType, OnnxString),
       "unsupported data_type 8 (STRING)"},
      {packedDims({1}) + varintField(DataType, 77) +
           bytesField(RawData, "abcd"),
       "unknown data_type 77"},
      {packedDims({1}) + floatType + bytesField(RawData, fixed32(0)) +
           bytesField(FloatData, fixed32(0)),
       "both raw_data and float_data"},
      {packedDims({1}) + floatType + varintField(Int64Data, 1),
       "int64_data is set but the tensor is a FLOAT tensor"},
      {packedDims({1}) + floatType + bytesField(FloatData, "abcde"),
       "not a multiple of 4"},
      {packedDims({1}) + floatType + varintField(DataLocation, 1),
       "external data is not supported"},
      {packedDims({1}) + floatType + bytesField(13, ""),
       "external data is not supported"},
      {floatType + tag(50, 3) + tag(50, 4), "groups"},
      {floatType + tag(50, 7), "invalid wire type 7"},
      {floatType + tag(0, 0) + varint(1), "invalid field number 0"},
      {tag(DataType, 2) + varint(0), "data_type has wire type 2"},
      {floatType + tag(Dims, 0) + std::string(11, '\xff'), "varint too long"},
      {packedDims({-1}) + floatType, "negative dimension"},
      {packedDims({1LL << 40, 1LL << 40}) + floatType, "too large"},
  };
  int index = 0;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.error);
    std::string file =
        writeFile("bad" + std::to_string(index++) + ".pb", c.bytes);
    expectError(
        file, [&] { readTensorProto(file); }, c.error);
  }
}

TEST_F(TensorIOTest, ReadTensorFileRejectsUnknownExtensions) {
  std::string file = writeFile("input.txt", "hello");
  expectError(
      file, [&] { readTensorFile(file); },
      "accepted tensor files: .npy (numpy), .pb (onnx TensorProto)");
  std::string bare = writeFile("input", "hello");
  expectError(
      bare, [&] { readTensorFile(bare); }, "no file extension");
  // Upper-case extensions are fine.
  std::string upper = writeFile(
      "INPUT.NPY",
      npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
              fixed32(0)));
  EXPECT_EQ(readTensorFile(upper).shape(), std::vector<int64_t>{1});
}

} // namespace
