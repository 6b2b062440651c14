//===- Toolchain.h - the system C++ compiler as the CPU backend ---*- C++
//-*-===//

#ifndef KILN_CODEGEN_TOOLCHAIN_H
#define KILN_CODEGEN_TOOLCHAIN_H

#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
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
  /// Sanitizers to compile the kernels with (-fsanitize=<list>, e.g.
  /// "address,undefined"); empty: none.
  std::string sanitize;
  /// Keep the generated sources and objects in this folder (empty: temp).
  std::string keepDir;
  /// kiln's cache folder (compiled code goes in its code/ folder, keyed by
  /// a hash of the sources, flags and compiler); empty: $KILN_CACHE_DIR,
  /// else ~/.cache/kiln. "none" disables the cache.
  std::string cacheDir;
};

struct CxxSource {
  std::string name;
  std::string text;
};

/// Compiles `sources` into one shared object and returns its bytes. The
/// sources are packed into one translation unit per core (each starting
/// with `prelude`) compiled in parallel; a single unit is compiled and
/// linked in one step. A cached object for the same sources, flags and
/// compiler is reused. `progress(done, total)` counts sources. Errors carry
/// the compiler's output.
llvm::Expected<std::vector<char>>
compileSharedObject(const std::string &prelude,
                    const std::vector<CxxSource> &sources,
                    const CxxOptions &options,
                    const std::function<void(size_t, size_t)> &progress);

/// kiln's cache folder: `configured` if set, else $KILN_CACHE_DIR, else
/// ~/.cache/kiln; "" when caching is off ("none").
std::string cacheRoot(const std::string &configured);
/// The C++ compiler `options` pick (path, size and modification time), for
/// cache keys; "" when none is found.
std::string compilerIdentity(const CxxOptions &options);

/// <cacheRoot>/`name`, or "" when caching is off.
std::string cacheFolder(const std::string &configured, llvm::StringRef name);
/// Where compiled code is cached: <cacheRoot>/code, or "" when off.
std::string codeCacheDirectory(const std::string &configured);

/// Writes `bytes` to the cache entry `path` atomically (beside it, then a
/// rename), creating its folder, with a checksum after them, then trims the
/// folder (trimCacheFolder, cacheLimitBytes); a failure only means no cache
/// entry.
void publishCached(llvm::StringRef path, llvm::StringRef bytes);
/// The bytes of cache entry `path`, or nothing when it is absent. An entry
/// whose checksum does not match (truncated, corrupted) is removed and
/// reported absent, so that it is rebuilt. A hit touches the entry.
std::optional<std::string> readCached(llvm::StringRef path);

/// How large a cache folder may grow: $KILN_CACHE_MAX_MB MiB (default
/// 2048; 0: no limit, UINT64_MAX).
uint64_t cacheLimitBytes();
/// Removes the least recently modified files of cache folder `dir`, but
/// `keep` and temporary files under an hour old, until they add up to at
/// most three quarters of `limit`, when they add up to more than `limit`
/// (CacheTrim.cpp).
void trimCacheFolder(llvm::StringRef dir, uint64_t limit,
                     llvm::StringRef keep = "");
/// Marks cache entry `path` as used now (its modification time).
void touchCached(llvm::StringRef path);

/// The CPU features code compiled for `targetCpu` may use, as the runtime
/// checks them at load ("avx2", "avx512f", ...).
std::vector<std::string> targetCpuFeatures(const std::string &targetCpu);

} // namespace kiln

#endif // KILN_CODEGEN_TOOLCHAIN_H
