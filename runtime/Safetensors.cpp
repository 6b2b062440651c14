//===- Safetensors.cpp - read and write .safetensors files ----------------===//
//
// Implements kiln/safetensors.h. The format: an 8-byte little-endian header
// size N, N bytes of JSON ({"key": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, "__metadata__": {..}}), then the data, with
// offsets counted from the end of the header. Every offset is checked against
// the file and every size against dtype x shape before a byte is copied.
//
//===----------------------------------------------------------------------===//

#include "kiln/safetensors.h"

#include "runtime/FileRead.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <unistd.h>

namespace kiln {
namespace {

struct StDType {
  const char *name;
  DType dtype;
};
// The safetensors spellings kiln reads as they are; BF16 is widened.
constexpr StDType kStDTypes[] = {
    {"F32", DType::F32}, {"F64", DType::F64}, {"F16", DType::F16},
    {"I8", DType::I8},   {"I16", DType::I16}, {"I32", DType::I32},
    {"I64", DType::I64}, {"U8", DType::U8},   {"BOOL", DType::Bool},
    {"U16", DType::U16}, {"U32", DType::U32}, {"U64", DType::U64}};

std::optional<DType> stDType(const std::string &name) {
  for (const StDType &e : kStDTypes)
    if (name == e.name)
      return e.dtype;
  return std::nullopt;
}

const char *stName(DType dtype) {
  for (const StDType &e : kStDTypes)
    if (e.dtype == dtype)
      return e.name;
  return "?";
}

[[noreturn]] void fail(const std::string &path, const std::string &message) {
  throw Error(path + ": " + message);
}

uint64_t readU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

// One header entry, checked, as a tensor.
Tensor readEntry(const std::string &path, const std::string &key,
                 const nlohmann::json &entry, const uint8_t *data,
                 uint64_t dataSize) {
  auto bad = [&](const std::string &what) -> Error {
    return Error(path + ": tensor '" + key + "': " + what);
  };
  if (!entry.is_object() || !entry.contains("dtype") ||
      !entry.contains("shape") || !entry.contains("data_offsets"))
    throw bad("header entry needs dtype, shape and data_offsets");
  const nlohmann::json &dt = entry["dtype"], &sh = entry["shape"],
                       &off = entry["data_offsets"];
  if (!dt.is_string())
    throw bad("dtype is not a string");
  std::string dtypeText = dt.get<std::string>();
  std::optional<DType> dtype = stDType(dtypeText);
  bool bf16 = dtypeText == "BF16";
  if (!dtype && !bf16)
    throw bad("unknown or unsupported dtype '" + dtypeText +
              "' (kiln reads F64, F32, F16, BF16, I64, I32, I16, I8, U64, "
              "U32, U16, U8 and BOOL)");
  if (!sh.is_array())
    throw bad("shape is not a list");
  std::vector<int64_t> shape;
  uint64_t count = 1;
  constexpr uint64_t kMaxElements = uint64_t(1) << 40;
  for (const nlohmann::json &d : sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxElements)
      throw bad("shape holds " + d.dump() + ", not a dim size");
    uint64_t n = d.get<uint64_t>();
    shape.push_back(static_cast<int64_t>(n));
    // Checked before multiplying, so the count cannot wrap.
    if (n != 0 && count > kMaxElements / n)
      throw bad("too many elements");
    count *= n;
  }
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    throw bad("data_offsets is not [begin, end]");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > dataSize)
    throw bad("data_offsets [" + std::to_string(begin) + ", " +
              std::to_string(end) + ") lie outside the " +
              std::to_string(dataSize) + " bytes of data (truncated file?)");
  uint64_t width = bf16 ? 2 : dtypeSize(*dtype);
  if (end - begin != count * width)
    throw bad(dtypeText + " of shape " + sh.dump() + " needs " +
              std::to_string(count * width) + " bytes, data_offsets give " +
              std::to_string(end - begin));
  if (!bf16)
    return Tensor::fromBytes(*dtype, shape, data + begin, end - begin);
  Tensor t = Tensor::empty(DType::F32, shape);
  float *out = t.data<float>();
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t bits =
        uint32_t(data[begin + 2 * i]) | uint32_t(data[begin + 2 * i + 1]) << 8;
    bits <<= 16;
    std::memcpy(&out[i], &bits, 4);
  }
  return t;
}

} // namespace

std::map<std::string, Tensor>
load_safetensors(const std::string &path, const SafetensorsOptions &options) {
  std::vector<uint8_t> bytes = readWholeFile(path);
  if (bytes.size() < 8)
    fail(path, "truncated safetensors file: " + std::to_string(bytes.size()) +
                   " bytes, the header size alone takes 8");
  uint64_t headerSize = readU64(bytes.data());
  if (headerSize > bytes.size() - 8)
    fail(path, "truncated safetensors header: it claims " +
                   std::to_string(headerSize) + " bytes, the file has " +
                   std::to_string(bytes.size() - 8) + " after the size");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8,
                                   bytes.begin() + 8 + headerSize);
  } catch (const nlohmann::json::exception &e) {
    fail(path,
         std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(path, "safetensors header is not a JSON object");
  const uint8_t *data = bytes.data() + 8 + headerSize;
  uint64_t dataSize = bytes.size() - 8 - headerSize;

  const std::string &prefix = options.strip_prefix;
  std::set<std::string> renamed;
  std::map<std::string, std::string> source; // final name -> file key
  std::map<std::string, Tensor> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    Tensor t = readEntry(path, it.key(), it.value(), data, dataSize);
    std::string name = it.key();
    if (!prefix.empty() && name.compare(0, prefix.size(), prefix) == 0)
      name = name.substr(prefix.size());
    if (auto r = options.rename.find(name); r != options.rename.end()) {
      renamed.insert(r->first);
      name = r->second;
    }
    auto [at, fresh] = source.emplace(name, it.key());
    if (!fresh)
      fail(path, "keys '" + at->second + "' and '" + it.key() +
                     "' both become '" + name + "'");
    tensors.emplace(name, std::move(t));
  }
  std::string unknown;
  for (const auto &[from, to] : options.rename)
    if (!renamed.count(from))
      unknown += (unknown.empty() ? "'" : ", '") + from + "'";
  if (!unknown.empty())
    fail(path, "rename names keys the file does not have: " + unknown);
  return tensors;
}

void save_safetensors(const std::string &path,
                      const std::map<std::string, Tensor> &tensors) {
  for (const auto &[name, t] : tensors) {
    if (name == "__metadata__")
      fail(path, "'__metadata__' is the format's own key, not a tensor name");
    if (!t.isHost())
      fail(path, "tensor '" + name + "' is on " + t.device() +
                     ": move it with .to(\"cpu\") first");
  }
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    header[name] = {{"dtype", stName(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // data 8-byte aligned
  // Written beside the target, then renamed: never a truncated file.
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  uint8_t size[8];
  for (int i = 0; i < 8; ++i)
    size[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char *>(size), 8);
  out << text;
  for (const auto &entry : tensors)
    out.write(static_cast<const char *>(entry.second.raw()),
              static_cast<std::streamsize>(entry.second.nbytes()));
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, "cannot write file");
  }
}

} // namespace kiln
