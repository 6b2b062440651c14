//===- DeviceKinds.h - the runtime's device kinds ---------------*- C++ -*-===//
//
// One row per kind of device (DeviceKinds.cpp): how its devices are named,
// whose memory its kernels may read, and whether its memory and kernels go
// through the CUDA driver or are host memory running the artifact's C++
// kernels. Binding, plan decoding and tensors read these traits instead of
// comparing kinds. A kind whose kernels are the generated C++ (sim) is a
// row here and one in the compiler's table (ir/DeviceKinds.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICEKINDS_H
#define KILN_RUNTIME_DEVICEKINDS_H

#include <optional>
#include <string>
#include <vector>

namespace kiln::device {

enum class Kind { Cpu, Sim, Cuda };

struct KindInfo {
  Kind kind;
  /// As the manifest's roles and device names spell it: "cpu", "sim".
  const char *name;
  /// Named KIND:N with an ordinal (sim:0), rather than KIND alone (cpu).
  bool numbered;
  /// Its kernels may read host memory they did not allocate: the caller's
  /// input tensors and constants in the mapped file (the host itself).
  bool callerMemory;
  /// Memory, copies and kernels (the artifact's "ptx" section) through the
  /// CUDA driver (runtime/Cuda.h); else host memory from the device's own
  /// allocator and the code section's C++ kernels.
  bool cuda;
  /// "KIND:auto" names the device of the kind with the most free memory,
  /// resolved at bind time.
  bool autoOrdinal;
};

/// Every kind, in the order messages list them.
const std::vector<KindInfo> &kinds();
const KindInfo &info(Kind kind);
/// "cpu", "sim", "cuda" (the manifest's spelling of a role's kind).
const char *kindName(Kind kind);
/// The inverse of kindName; nullopt when unknown.
std::optional<Kind> parseKind(const std::string &text);
/// "cpu, sim or cuda": the kinds a manifest may name.
std::string kindList();
/// "cpu, sim:N, cuda:N or cuda:auto": the device names messages offer; with
/// `cuda` set, only those of the kinds whose `cuda` trait is it ("cpu or
/// sim:N" for false).
std::string nameForms(std::optional<bool> cuda = std::nullopt);

} // namespace kiln::device

#endif // KILN_RUNTIME_DEVICEKINDS_H
