//===- CacheTrim.cpp - keeping the on-disk caches under a size -----------===//
//
// The code cache (kernels' shared objects and PTX, the precompiled
// prelude) and the JIT's artifacts grow with every model compiled. Each
// folder is kept under a limit, $KILN_CACHE_MAX_MB (MiB, default 2048; 0
// for none): after an entry is published, when the folder's files add up
// to more, the least recently used go (the oldest modification time; a hit
// touches its entry) until the folder is at three quarters of the limit,
// so that the next few compiles do not trim again. Temporary files of
// writes in flight stay, unless an hour old (what a killed process left).
// Another process reading an entry as it goes finds no file, or an
// intact one it still holds open: a miss at worst.
//
//===----------------------------------------------------------------------===//

#include "codegen/Toolchain.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utime.h>

using namespace llvm;

namespace kiln {

uint64_t cacheLimitBytes() {
  const uint64_t fallback = uint64_t(2048) << 20;
  const char *env = std::getenv("KILN_CACHE_MAX_MB");
  if (!env || !*env)
    return fallback;
  char *end = nullptr;
  unsigned long long mib = std::strtoull(env, &end, 10);
  if (*end || *env == '-')
    return fallback; // not a number: the default, as if unset
  return mib == 0 ? UINT64_MAX : uint64_t(mib) << 20;
}

void touchCached(StringRef path) {
  (void)::utime(path.str().c_str(), nullptr); // now
}

void trimCacheFolder(StringRef dir, uint64_t limit, StringRef keep) {
  if (limit == UINT64_MAX)
    return;
  struct Entry {
    sys::TimePoint<> modified;
    uint64_t size;
    std::string path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    sys::fs::file_status status;
    if (sys::fs::status(it->path(), status) ||
        status.type() != sys::fs::file_type::regular_file)
      continue;
    entries.push_back(
        {status.getLastModificationTime(), status.getSize(), it->path()});
    total += status.getSize();
  }
  if (total <= limit)
    return;
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return a.modified < b.modified;
  });
  const auto hourAgo = std::chrono::system_clock::now() - std::chrono::hours(1);
  const uint64_t target = limit / 4 * 3;
  for (const Entry &entry : entries) {
    if (total <= target)
      break;
    if (entry.path == keep ||
        (StringRef(entry.path).contains(".tmp") && entry.modified > hourAgo))
      continue;
    if (!sys::fs::remove(entry.path))
      total -= entry.size;
  }
}

} // namespace kiln
