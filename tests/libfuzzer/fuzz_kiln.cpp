//===- fuzz_kiln.cpp - libFuzzer target for the .kiln artifact loader -----===//
//
// Module::load validates an artifact (runtime/Artifact.cpp: magic, version,
// sizes, the manifest's and every section's CRC-32, zero padding), checks
// the manifest's target, dlopens the code section and decodes the plan
// (runtime/Plan.cpp), which "trusts nothing in the manifest". This target
// runs all of that except loading and running kernel code, on the input
// bytes in two ways:
//
//  1. As a file, with the manifest checksum in the header recomputed over
//     the (mutated) manifest, so mutations reach the JSON parser and the
//     section checks instead of all dying at "checksum mismatch".
//  2. Its manifest, if it is JSON, packed again by artifact::write around
//     the sections the input describes (their bytes where they lie in the
//     input, zeros otherwise), so every section checksum is right and the
//     mutated plan reaches plan::decode and shape resolution. What write
//     produces must read back: that is checked.
//
// The code section is never loaded: kernel and dims symbols resolve to a
// stub function, never called as a kernel. As a dims function it sets every
// unknown (-1) dim of its step to 1, as a real dims function would give each
// output a size, so that shapes resolve through the whole plan (aliases,
// copies, views) the way a run does.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "runtime/Artifact.h"
#include "runtime/Plan.h"

#include <algorithm>
#include <optional>

using namespace kiln;

namespace {

// The lengths of the dims arrays of the steps with a dims function, in
// plan order: resolveShapes calls them in that order, and a DimsFn is not
// told its array's length.
std::vector<size_t> dimsLengths;
size_t nextDims = 0;

const char *stubDims(int64_t *dims, void *const *) {
  if (nextDims >= dimsLengths.size())
    fuzz::invariant("more dims calls than steps with a dims function");
  size_t n = dimsLengths[nextDims++];
  for (size_t i = 0; i < n; ++i)
    if (dims[i] < 0)
      dims[i] = 1;
  return nullptr;
}

/// The checks Module::load makes on a validated artifact before and after
/// loading the code section (which is skipped here).
void checkLoadable(const artifact::Parsed &parsed) {
  try {
    const nlohmann::json &m = parsed.manifest;
    // Module::load reads this with get<int>(), which is undefined
    // behaviour for a float out of int's range ("abi": 1e300); checked
    // here without the conversion so that runs go on past it (see
    // README.md, "Open").
    const nlohmann::json &abi = m.at("abi");
    if (!abi.is_number_integer() || abi != artifact::kKernelABI)
      return;
    // Module::load compares these with the host's features; the answer
    // depends on the fuzzing machine, so only their decoding is exercised.
    for (const auto &feature : m.at("target").at("cpu_features"))
      (void)feature.get<std::string>();
    (void)m.at("target").value("sanitize", "");
    if (!parsed.find("code"))
      return;
    const artifact::Parsed::Span *weights = parsed.find("weights");
    plan::Plan plan = plan::decode(
        m, weights ? std::optional<size_t>(weights->size) : std::nullopt,
        [](const std::string &) {
          // Like dlsym on a code section that has every symbol. One stub
          // serves kernels and dims functions alike: the kernels are never
          // called, and a dims symbol is called as the DimsFn it is (Plan.cpp
          // casts through void (*)()), whatever its name.
          return reinterpret_cast<plan::KernelFn>(
              reinterpret_cast<void (*)()>(&stubDims));
        });
    // Resolve shapes as Module::load does for a static plan, and as a run
    // does for a dynamic one given inputs whose unknown dims are 1.
    dimsLengths.clear();
    nextDims = 0;
    for (const plan::Step &step : plan.steps) {
      if (step.isCopy || !step.dims)
        continue;
      size_t n = 0;
      for (size_t id : step.args)
        n += plan.values[id].shape.size();
      dimsLengths.push_back(n);
    }
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorInfo &info : plan.inputInfo) {
      std::vector<int64_t> shape = info.shape;
      std::replace(shape.begin(), shape.end(), int64_t(-1), int64_t(1));
      shapes.push_back(shape);
    }
    // Buffers are all null: a dims function reading data is refused by
    // resolveStep before it is called, as at load time.
    plan::resolveShapes(plan, shapes,
                        std::vector<void *>(plan.values.size(), nullptr));
  } catch (const Error &) {
  } catch (const nlohmann::json::exception &) {
    // Module::load turns these into "malformed manifest: ..." errors.
  }
}

uint32_t getU32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // 1. The bytes as a file, manifest checksum fixed up.
  std::vector<char> file(data, data + size);
  if (size >= artifact::kHeaderSize) {
    uint32_t manifestSize = getU32(data + 12);
    if (manifestSize <= size - artifact::kHeaderSize) {
      uint32_t crc =
          artifact::crc32(data + artifact::kHeaderSize, manifestSize);
      for (int i = 0; i < 4; ++i)
        file[16 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    }
  }
  try {
    checkLoadable(artifact::read(file.data(), file.size(), "fuzz.kiln"));
  } catch (const Error &) {
  }

  // 2. The manifest, repacked with correct section checksums.
  if (size < artifact::kHeaderSize)
    return 0;
  uint32_t manifestSize = getU32(data + 12);
  if (manifestSize > size - artifact::kHeaderSize)
    return 0;
  const char *text =
      reinterpret_cast<const char *>(data) + artifact::kHeaderSize;
  nlohmann::json manifest =
      nlohmann::json::parse(text, text + manifestSize, nullptr,
                            /*allow_exceptions=*/false);
  if (!manifest.is_object())
    return 0;
  std::vector<artifact::Section> sections;
  if (manifest.contains("sections") && manifest["sections"].is_array()) {
    for (const nlohmann::json &entry : manifest["sections"]) {
      if (!entry.is_object() || !entry.contains("name") ||
          !entry["name"].is_string())
        continue;
      artifact::Section section;
      section.name = entry["name"].get<std::string>();
      uint64_t offset = 0, length = 0;
      if (entry.contains("offset") && entry["offset"].is_number_unsigned())
        offset = entry["offset"].get<uint64_t>();
      if (entry.contains("size") && entry["size"].is_number_unsigned())
        length = entry["size"].get<uint64_t>();
      // Keep the repacked file small whatever size the manifest claims.
      length = std::min<uint64_t>(length, 1 << 16);
      if (offset <= size && length <= size - offset)
        section.bytes.assign(data + offset, data + offset + length);
      else
        section.bytes.assign(length, 0);
      sections.push_back(std::move(section));
    }
  }
  std::vector<char> repacked = artifact::write(manifest, sections);
  artifact::Parsed parsed;
  try {
    parsed = artifact::read(repacked.data(), repacked.size(), "repacked.kiln");
  } catch (const Error &e) {
    fuzz::invariant(std::string("artifact::write produced a file that "
                                "artifact::read refuses: ") +
                    e.what());
  }
  checkLoadable(parsed);
  return 0;
}
