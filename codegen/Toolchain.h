//===- Toolchain.h - the system C++ compiler as the CPU backend ---*- C++
//-*-===//

#ifndef KILN_CODEGEN_TOOLCHAIN_H
#define KILN_CODEGEN_TOOLCHAIN_H

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct CxxOptions {
  /// Empty: $KILN_CXX, else $CXX, else `c++` on PATH.
  std::string compiler;
  /// 0..3, passed as -O<level>.
  int optLevel = 3;
  /// Passed as -march=<cpu>; "native" records the host's features.
  std::string targetCpu = "native";
  /// Keep the generated sources and objects in this folder (empty: temp).
  std::string keepDir;
};

struct CxxSource {
  std::string name; // file stem
  std::string text;
};

/// Compiles `sources` (in parallel, one process per core) and links them
/// into one shared object, returning its bytes. `progress(done, total)` is
/// called as translation units finish. Errors carry the compiler's output.
llvm::Expected<std::vector<char>>
compileSharedObject(const std::vector<CxxSource> &sources,
                    const CxxOptions &options,
                    const std::function<void(size_t, size_t)> &progress);

/// The CPU features code compiled for `targetCpu` may use, as the runtime
/// checks them at load ("avx2", "avx512f", ...).
std::vector<std::string> targetCpuFeatures(const std::string &targetCpu);

} // namespace kiln

#endif // KILN_CODEGEN_TOOLCHAIN_H
