//===- Artifact.h - the .kiln file format -------------------------*- C++
//-*-===//
//
// One file holds everything a deployed model needs:
//
//   offset 0   magic "KILNART\0"             8 bytes
//          8   format version (u32 LE)       currently 2
//         12   manifest size (u32 LE)
//         16   manifest CRC-32 (u32 LE)
//         20   manifest: JSON (nlohmann/json)
//          …   sections, each 64-byte aligned, described in the manifest as
//              {"name", "offset", "size", "crc32"} with absolute offsets:
//              "code" (the compiled shared object), "weights" (constants).
//
// The manifest also holds the plan: the devices it uses (roles), typed values
// (inputs, constants, temps, aliases) on those roles, the graph
// inputs/outputs, and the steps (kernel calls and copies between roles) in
// order; see docs/devices.md (version 2 added roles and copies). Every byte
// is covered by a checksum, so truncation and bit flips are load errors.
// Shared by the compiler (writer) and the runtime (reader).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_H

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::artifact {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr size_t kHeaderSize = 20;
inline constexpr size_t kAlignment = 64;
/// The ABI of compiled kernels: `extern "C" void NAME(void **buffers)`, the
/// buffers being a kernel's inputs then its outputs. The code section exports
/// `int kiln_abi_version(void)` returning this.
inline constexpr int kKernelABI = 1;

uint32_t crc32(const void *data, size_t size);

/// The x86 features this CPU has, among those an artifact may require
/// ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq").
/// kilnc records them for -march=native; the runtime checks them at load.
std::vector<std::string> hostCpuFeatures();

struct Section {
  std::string name;
  std::vector<char> bytes;
};

/// Lays out `sections` after the manifest, records them in
/// manifest["sections"], and returns the whole file.
std::vector<char> write(nlohmann::json manifest,
                        const std::vector<Section> &sections);

/// A validated artifact: the manifest and where each section lies in `file`.
struct Parsed {
  nlohmann::json manifest;
  struct Span {
    size_t offset = 0, size = 0;
  };
  std::vector<std::pair<std::string, Span>> sections;
  const Span *find(const std::string &name) const;
};

/// Validates the `size` bytes at `file` (magic, version, sizes, every checksum)
/// and parses the manifest. Throws kiln::Error saying what is wrong; `what`
/// names the file.
Parsed read(const char *file, size_t size, const std::string &what);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_H
