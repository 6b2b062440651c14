//===- CacheTest.cpp - the on-disk caches stay under their size ----------===//

#include "codegen/Toolchain.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace kiln;

namespace {
struct CacheDir {
  fs::path path = fs::temp_directory_path() /
                  ("kiln-cache-test-" + std::to_string(::getpid()));
  CacheDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~CacheDir() { fs::remove_all(path); }
  // A file of `kib` KiB, modified `age` hours ago.
  fs::path file(const std::string &name, int kib, int age) {
    fs::path p = path / name;
    std::ofstream(p) << std::string(size_t(kib) << 10, 'x');
    fs::last_write_time(p, fs::file_time_type::clock::now() -
                               std::chrono::hours(age));
    return p;
  }
};
} // namespace

TEST(Cache, TrimRemovesLeastRecentlyUsedDownToThreeQuarters) {
  CacheDir dir;
  // 8 entries of 256 KiB (2 MiB in all), the oldest first.
  std::vector<fs::path> entries;
  for (int i = 0; i < 8; ++i)
    entries.push_back(dir.file("e" + std::to_string(i), 256, 100 - i));
  // Under the limit: nothing goes.
  trimCacheFolder(dir.path.string(), uint64_t(2) << 20);
  for (const fs::path &p : entries)
    EXPECT_TRUE(fs::exists(p)) << p;
  // A limit of 1 MiB: down to 768 KiB, the three newest.
  trimCacheFolder(dir.path.string(), uint64_t(1) << 20);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(fs::exists(entries[i]), i >= 5) << i;
}

TEST(Cache, TrimKeepsTheNewEntryAndWritesInFlight) {
  CacheDir dir;
  fs::path big = dir.file("big", 1024, 50);       // the entry just published
  fs::path temp = dir.file("x.tmp1234", 512, 0);  // a write in flight
  fs::path stale = dir.file("y.tmp5678", 512, 2); // left by a killed process
  fs::path old = dir.file("old", 512, 10);
  trimCacheFolder(dir.path.string(), uint64_t(1) << 20, big.string());
  EXPECT_TRUE(fs::exists(big));
  EXPECT_TRUE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(old));
}

TEST(Cache, HitsAreRecentAndPublishingTrims) {
  CacheDir dir;
  ::setenv("KILN_CACHE_MAX_MB", "1", 1);
  std::string payload(360 << 10, 'k');
  fs::path a = dir.path / "a", b = dir.path / "b", c = dir.path / "c";
  publishCached(a.string(), payload);
  publishCached(b.string(), payload);
  fs::last_write_time(a,
                      fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(b,
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  // A hit makes `a` the most recently used: publishing `c` (1080 KiB in all)
  // removes `b`, not `a`.
  ASSERT_TRUE(readCached(a.string()).has_value());
  publishCached(c.string(), payload);
  ::unsetenv("KILN_CACHE_MAX_MB");
  EXPECT_TRUE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(fs::exists(c));
  EXPECT_EQ(readCached(c.string()), payload);
}

TEST(Cache, LimitFromTheEnvironment) {
  ::setenv("KILN_CACHE_MAX_MB", "64", 1);
  EXPECT_EQ(cacheLimitBytes(), uint64_t(64) << 20);
  ::setenv("KILN_CACHE_MAX_MB", "0", 1);
  EXPECT_EQ(cacheLimitBytes(), UINT64_MAX);
  ::setenv("KILN_CACHE_MAX_MB", "lots", 1);
  EXPECT_EQ(cacheLimitBytes(), uint64_t(2048) << 20);
  ::unsetenv("KILN_CACHE_MAX_MB");
  EXPECT_EQ(cacheLimitBytes(), uint64_t(2048) << 20);
}
