//===- Artifact.cpp - writing and validating .kiln files ------------------===//

#include "runtime/Artifact.h"

#include "kiln/runtime.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace kiln::artifact {

namespace {
// Slicing-by-8 tables for the reflected CRC-32 polynomial 0xEDB88320:
// table[0] is the bytewise table, table[k][b] the CRC of byte b followed by
// k zero bytes.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
CrcTables makeTables() {
  CrcTables table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t k = 1; k < table.size(); ++k)
      table[k][i] = table[0][table[k - 1][i] & 0xFF] ^ (table[k - 1][i] >> 8);
  return table;
}

void putU32(std::vector<char> &out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint32_t getU32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

size_t alignUp(size_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}
} // namespace

uint32_t crc32(const void *data, size_t size) {
  // Eight bytes a step (slicing-by-8): loading resnet18's 116 MB artifact
  // spent half its time here a byte at a time (docs/performance-log.md, step
  // 58).
  static const CrcTables table = makeTables();
  uint32_t c = 0xFFFFFFFFu;
  const auto *p = static_cast<const uint8_t *>(data);
  for (; size >= 8; size -= 8, p += 8) {
    uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 |
                       uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^
        table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^ table[3][p[4]] ^
        table[2][p[5]] ^ table[1][p[6]] ^ table[0][p[7]];
  }
  for (; size; --size, ++p)
    c = table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::vector<std::string> hostCpuFeatures() {
  std::vector<std::string> features;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports needs literal arguments, hence the macro.
#define KILN_FEATURE(name)                                                     \
  if (__builtin_cpu_supports(name))                                            \
    features.push_back(name);
  KILN_FEATURE("avx")
  KILN_FEATURE("avx2")
  KILN_FEATURE("fma")
  KILN_FEATURE("avx512f")
  KILN_FEATURE("avx512bw")
  KILN_FEATURE("avx512vl")
  KILN_FEATURE("avx512dq")
#undef KILN_FEATURE
#endif
  return features;
}

std::vector<char> write(nlohmann::json manifest,
                        const std::vector<Section> &sections) {
  // Section offsets depend on the manifest's size, which depends on the
  // offsets' digits: reserve room by padding the manifest to a fixed point.
  nlohmann::json entries = nlohmann::json::array();
  for (const Section &s : sections)
    entries.push_back({{"name", s.name},
                       {"offset", 0},
                       {"size", s.bytes.size()},
                       {"crc32", crc32(s.bytes.data(), s.bytes.size())}});
  std::string text;
  size_t start = 0;
  for (int iteration = 0; iteration < 8; ++iteration) {
    manifest["sections"] = entries;
    text = manifest.dump(1);
    size_t offset = alignUp(kHeaderSize + text.size());
    if (offset == start)
      break;
    start = offset;
    for (auto &entry : entries) {
      entry["offset"] = offset;
      offset = alignUp(offset + entry["size"].get<size_t>());
    }
  }
  std::vector<char> file(kHeaderSize, 0);
  std::memcpy(file.data(), kMagic, sizeof(kMagic));
  putU32(file, 8, kFormatVersion);
  putU32(file, 12, static_cast<uint32_t>(text.size()));
  putU32(file, 16, crc32(text.data(), text.size()));
  file.insert(file.end(), text.begin(), text.end());
  for (size_t i = 0; i < sections.size(); ++i) {
    file.resize(entries[i]["offset"].get<size_t>(), 0);
    file.insert(file.end(), sections[i].bytes.begin(), sections[i].bytes.end());
  }
  return file;
}

const Parsed::Span *Parsed::find(const std::string &name) const {
  for (const auto &[n, span] : sections)
    if (n == name)
      return &span;
  return nullptr;
}

Parsed read(const char *file, size_t size, const std::string &what) {
  auto fail = [&](const std::string &message) -> Error {
    return Error(what + ": " + message);
  };
  if (size < kHeaderSize || std::memcmp(file, kMagic, sizeof(kMagic)) != 0)
    throw fail("not a kiln artifact (bad magic)");
  uint32_t version = getU32(file + 8);
  if (version != kFormatVersion)
    throw fail("artifact has format version " + std::to_string(version) +
               ", this runtime reads version " +
               std::to_string(kFormatVersion) + "; recompile it");
  uint32_t manifestSize = getU32(file + 12);
  if (manifestSize > size - kHeaderSize)
    throw fail("truncated artifact: manifest of " +
               std::to_string(manifestSize) + " bytes but only " +
               std::to_string(size - kHeaderSize) + " follow the header");
  const char *text = file + kHeaderSize;
  if (crc32(text, manifestSize) != getU32(file + 16))
    throw fail("corrupted artifact: manifest checksum mismatch");
  Parsed parsed;
  try {
    parsed.manifest = nlohmann::json::parse(text, text + manifestSize);
    // A section's numbers must be unsigned integers: nlohmann's get<> of a
    // float out of the target's range is undefined behaviour (found by
    // tests/libfuzzer's kiln target: "crc32": 4.29e+62).
    auto number = [&](const nlohmann::json &entry, const char *key,
                      uint64_t max) {
      const nlohmann::json &j = entry.at(key);
      if (!j.is_number_unsigned() || j.get<uint64_t>() > max)
        throw fail(std::string("malformed manifest: a section's \"") + key +
                   "\" must be an integer in [0, " + std::to_string(max) +
                   "], got " + j.dump());
      return j.get<uint64_t>();
    };
    for (const auto &entry : parsed.manifest.at("sections")) {
      Parsed::Span span{number(entry, "offset", SIZE_MAX),
                        number(entry, "size", SIZE_MAX)};
      std::string name = entry.at("name").get<std::string>();
      if (span.offset > size || span.size > size - span.offset)
        throw fail("truncated artifact: section '" + name + "' needs bytes " +
                   std::to_string(span.offset) + ".." +
                   std::to_string(span.offset + span.size) + " of a " +
                   std::to_string(size) + "-byte file");
      if (crc32(file + span.offset, span.size) !=
          number(entry, "crc32", UINT32_MAX))
        throw fail("corrupted artifact: section '" + name +
                   "' checksum mismatch");
      parsed.sections.emplace_back(name, span);
    }
  } catch (const nlohmann::json::exception &e) {
    throw fail(std::string("malformed manifest: ") + e.what());
  }
  // Every byte is accounted for: padding between sections is zero and the
  // file ends where the last section does.
  std::vector<Parsed::Span> spans = {{0, kHeaderSize + manifestSize}};
  for (const auto &entry : parsed.sections)
    spans.push_back(entry.second);
  std::sort(spans.begin(), spans.end(),
            [](const auto &a, const auto &b) { return a.offset < b.offset; });
  size_t end = 0;
  for (const Parsed::Span &span : spans) {
    for (size_t i = end; i < span.offset; ++i)
      if (file[i] != 0)
        throw fail("corrupted artifact: non-zero padding at byte " +
                   std::to_string(i));
    end = std::max(end, span.offset + span.size);
  }
  if (end != size)
    throw fail("corrupted artifact: " + std::to_string(size - end) +
               " unexpected bytes after the last section");
  return parsed;
}

} // namespace kiln::artifact
