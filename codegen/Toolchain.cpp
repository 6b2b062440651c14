//===- Toolchain.cpp - compile generated C++ into a shared object ---------===//

#include "codegen/Toolchain.h"

#include "runtime/Artifact.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace llvm;

namespace kiln {

namespace {
Expected<std::string> findCompiler(const CxxOptions &options) {
  std::string name = options.compiler;
  for (const char *env : {"KILN_CXX", "CXX"})
    if (name.empty() && std::getenv(env) && *std::getenv(env))
      name = std::getenv(env);
  if (name.empty())
    name = "c++";
  if (sys::path::is_absolute(name))
    return name;
  auto found = sys::findProgramByName(name);
  if (!found)
    return createStringError(
        found.getError(), "C++ compiler '%s' not found on PATH (set KILN_CXX)",
        name.c_str());
  return *found;
}

std::string slurp(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

struct Job {
  std::string label;
  std::vector<std::string> args;
  std::string log;
};

// Runs `jobs` with at most `width` at once, calling progress(job index,
// count) as each finishes; the first failure is returned
// with its compiler output.
Error runJobs(StringRef compiler, std::vector<Job> &jobs, unsigned width,
              const std::function<void(size_t, size_t)> &progress) {
  std::vector<std::pair<sys::ProcessInfo, size_t>> running;
  size_t next = 0, done = 0;
  while (done < jobs.size()) {
    while (next < jobs.size() && running.size() < width) {
      Job &job = jobs[next];
      std::vector<StringRef> argv = {compiler};
      for (const std::string &a : job.args)
        argv.push_back(a);
      std::optional<StringRef> redirects[] = {std::nullopt, StringRef(job.log),
                                              StringRef(job.log)};
      std::string error;
      bool failed = false;
      sys::ProcessInfo pi = sys::ExecuteNoWait(compiler, argv, std::nullopt,
                                               redirects, 0, &error, &failed);
      if (failed)
        return createStringError(inconvertibleErrorCode(), "cannot run %s: %s",
                                 compiler.str().c_str(), error.c_str());
      running.emplace_back(pi, next++);
    }
    auto [pi, index] = running.front();
    running.erase(running.begin());
    std::string error;
    sys::ProcessInfo result = sys::Wait(pi, std::nullopt, &error);
    if (result.ReturnCode != 0) {
      for (auto &[other, i] : running)
        sys::Wait(other, std::nullopt);
      return createStringError(
          inconvertibleErrorCode(), "C++ compiler failed on %s:\n%s",
          jobs[index].label.c_str(), slurp(jobs[index].log).c_str());
    }
    ++done;
    if (progress)
      progress(index, jobs.size()); // which job finished
  }
  return Error::success();
}
} // namespace

std::string cacheRoot(const std::string &configured) {
  std::string dir = configured;
  if (dir.empty() && std::getenv("KILN_CACHE_DIR"))
    dir = std::getenv("KILN_CACHE_DIR");
  if (dir.empty()) {
    SmallString<128> home;
    if (!sys::path::home_directory(home))
      return "";
    sys::path::append(home, ".cache", "kiln");
    dir = home.str().str();
  }
  return dir == "none" ? "" : dir;
}

std::string cacheFolder(const std::string &configured, StringRef name) {
  std::string root = cacheRoot(configured);
  if (root.empty())
    return "";
  SmallString<128> dir(root);
  sys::path::append(dir, name);
  return dir.str().str();
}

std::string codeCacheDirectory(const std::string &configured) {
  return cacheFolder(configured, "code");
}

namespace {
// A cache entry ends with this tag and the xxh3 of what precedes it.
constexpr char kCacheTag[8] = {'K', 'I', 'L', 'N', 'S', 'U', 'M', '1'};
} // namespace

std::optional<std::string> readCached(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  StringRef bytes = (*buffer)->getBuffer();
  uint64_t sum = 0;
  bool intact =
      bytes.size() >= 16 && bytes.substr(bytes.size() - 16, 8) ==
                                StringRef(kCacheTag, sizeof(kCacheTag));
  if (intact) {
    std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
    bytes = bytes.drop_back(16);
    intact = sum == xxh3_64bits(bytes);
  }
  if (!intact) { // truncated or corrupted: never trusted, rebuilt
    (void)sys::fs::remove(path);
    return std::nullopt;
  }
  touchCached(path);
  return bytes.str();
}

namespace {

Expected<std::vector<char>> readBytes(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError(buffer.getError(), "cannot read %s",
                             path.str().c_str());
  StringRef bytes = (*buffer)->getBuffer();
  return std::vector<char>(bytes.begin(), bytes.end());
}

// Makes `path` through a unique file beside it, which `write` fills and
// which is renamed over `path` when that succeeds: readers never see a
// partial file, and concurrent writers do not share one. False, leaving
// nothing behind, when a step fails.
bool publishFile(StringRef path, function_ref<bool(StringRef temp)> write) {
  SmallString<128> tmp;
  int fd = -1;
  if (sys::fs::createUniqueFile(path + ".tmp%%%%%%%%", fd, tmp))
    return false;
  ::close(fd);
  if (write(tmp) && !sys::fs::rename(tmp, path))
    return true;
  (void)sys::fs::remove(tmp);
  return false;
}

// Writes `parts` to `path`. A full disk gives false (and must not reach
// raw_fd_ostream's destructor as an error, which aborts).
bool writeFile(StringRef path, ArrayRef<StringRef> parts) {
  std::error_code ec;
  raw_fd_ostream out(path, ec);
  if (ec)
    return false;
  for (StringRef part : parts)
    out << part;
  out.close();
  if (!out.has_error())
    return true;
  out.clear_error();
  return false;
}
} // namespace

// `compiler`'s path, size and modification time.
static std::string identityOf(const std::string &compiler) {
  std::string id = compiler;
  sys::fs::file_status status;
  if (!sys::fs::status(compiler, status))
    id += " " + std::to_string(status.getSize()) + "@" +
          std::to_string(
              status.getLastModificationTime().time_since_epoch().count());
  return id;
}

// Whether `compiler` accepts `flag` (asked once per compiler and flag).
static bool acceptsFlag(const std::string &compiler, const std::string &flag) {
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  std::string key = identityOf(compiler) + "\n" + flag;
  auto it = known.find(key);
  if (it != known.end())
    return it->second;
  std::optional<StringRef> quiet[] = {StringRef(""), StringRef(""),
                                      StringRef("")};
  SmallVector<StringRef> argv = {compiler,        flag,       "-x", "c++",
                                 "-fsyntax-only", "/dev/null"};
  bool ok = sys::ExecuteAndWait(compiler, argv, std::nullopt, quiet) == 0;
  return known[key] = ok;
}

std::string compilerIdentity(const CxxOptions &options) {
  auto compiler = findCompiler(options);
  if (!compiler) {
    llvm::consumeError(compiler.takeError());
    return "";
  }
  return identityOf(*compiler);
}

// The prelude as a header in the code cache, with GCC's precompiled form
// beside it, for units to include first: parsing the prelude's standard
// headers is about half of compiling a small model's kernels (GCC 12, -O1:
// 0.6 s against 1.2 s). Both are named by the hash of the compiler, the
// flags and the text, built once and published by rename, so concurrent
// kilncs never read half a file. A compiler that cannot precompile it, or
// does not look for a .gch (clang), parses the header instead. "" (the
// units then hold the prelude) without a cache or where it cannot be
// written.
static std::string preludeHeader(const std::string &compiler,
                                 const std::vector<std::string> &common,
                                 const std::string &prelude,
                                 StringRef cacheDir) {
  if (cacheDir.empty() || sys::fs::create_directories(cacheDir))
    return "";
  std::string key =
      identityOf(compiler) + "\n" + llvm::join(common, " ") + "\n" + prelude;
  SmallString<128> path(cacheDir);
  sys::path::append(path, "prelude-" + llvm::utohexstr(llvm::xxh3_64bits(key)) +
                              ".h");
  std::string header = path.str().str(), gch = header + ".gch";
  if (header.find_first_of("\"\\\n") != std::string::npos)
    return "";
  if (!sys::fs::exists(header) && !publishFile(header, [&](StringRef temp) {
        return writeFile(temp, {prelude});
      }))
    return "";
  touchCached(header); // in use: the last files a trim takes
  if (sys::fs::exists(gch))
    touchCached(gch);
  else
    (void)publishFile(gch, [&](StringRef temp) {
      std::vector<Job> job = {{"the prelude", common, (temp + ".log").str()}};
      job[0].args.insert(job[0].args.end(),
                         {"-x", "c++-header", header, "-o", temp.str()});
      Error e = runJobs(compiler, job, 1, nullptr);
      (void)sys::fs::remove(job[0].log);
      return !errorToBool(std::move(e));
    });
  return header;
}

Expected<std::vector<char>>
compileSharedObject(const std::string &prelude,
                    const std::vector<CxxSource> &sources,
                    const CxxOptions &options,
                    const std::function<void(size_t, size_t)> &progress) {
  auto compiler = findCompiler(options);
  if (!compiler)
    return compiler.takeError();
  std::vector<std::string> common = {
      "-std=c++17",
      "-O" + std::to_string(options.optLevel),
      "-fPIC",
      "-fno-math-errno",
      "-fno-trapping-math", // lets loops with conversions and selects vectorize
      "-fopenmp",
      "-w"};
  if (!options.targetCpu.empty())
    common.push_back("-march=" + (options.targetCpu == "generic"
                                      ? std::string("x86-64")
                                      : options.targetCpu));
  // Out-of-bounds reads and undefined behaviour in generated kernels are
  // reported where they happen, and stop the run (no recovery): a test
  // must fail on them.
  if (!options.sanitize.empty()) {
    common.push_back("-fsanitize=" + options.sanitize);
    common.push_back("-fno-sanitize-recover=all");
    common.push_back("-fno-omit-frame-pointer");
  }
#if defined(__x86_64__)
  // float16 arithmetic through float, as on CPUs without AVX512-FP16 (and as
  // numpy computes it): native half-precision arithmetic, which -march
  // enables on CPUs that have it, rounds every step to 11 bits and gives
  // results that differ by machine. Compilers older than the option (GCC 11,
  // clang 13) know no native half arithmetic either.
  if (acceptsFlag(*compiler, "-mno-avx512fp16"))
    common.push_back("-mno-avx512fp16");
#endif

  // Pack the sources into at most one unit per core, largest first onto the
  // smallest unit.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  size_t numUnits =
      std::max<size_t>(1, std::min<size_t>(cores, sources.size()));
  std::string cacheDir = codeCacheDirectory(options.cacheDir);
  std::string header = options.keepDir.empty()
                           ? preludeHeader(*compiler, common, prelude, cacheDir)
                           : "";
  std::string include = "#include \"" + header + "\"\n";
  std::vector<std::string> units(numUnits,
                                 header.empty() ? prelude + "\n" : include);
  std::vector<size_t> unitSources(numUnits, 0);
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sources[a].text.size() > sources[b].text.size();
  });
  for (size_t i : order) {
    size_t smallest =
        std::min_element(units.begin(), units.end(),
                         [](const std::string &a, const std::string &b) {
                           return a.size() < b.size();
                         }) -
        units.begin();
    units[smallest] += sources[i].text + "\n";
    ++unitSources[smallest];
  }

  // The cache key: compiler, flags and every unit.
  // The compiler's size and time stand for its version: an upgraded compiler
  // misses the cache.
  std::string key = identityOf(*compiler) + "\n" + llvm::join(common, " ");
  for (const std::string &unit : units)
    key += "\n" + std::to_string(unit.size()) + "\n" + unit;
  SmallString<128> cached;
  if (!cacheDir.empty()) {
    cached = cacheDir;
    sys::path::append(cached, llvm::utohexstr(llvm::xxh3_64bits(key)) + ".so");
    if (options.keepDir.empty())
      if (std::optional<std::string> hit = readCached(cached)) {
        if (progress)
          progress(sources.size(), sources.size());
        return std::vector<char>(hit->begin(), hit->end());
      }
  }

  SmallString<128> dir;
  if (!options.keepDir.empty()) {
    dir = options.keepDir;
    if (auto ec = sys::fs::create_directories(dir))
      return createStringError(ec, "cannot create %s", dir.c_str());
  } else if (auto ec = sys::fs::createUniqueDirectory("kiln-build", dir)) {
    return createStringError(ec, "cannot create a temporary build folder");
  }
  auto cleanup = make_scope_exit([&] {
    if (options.keepDir.empty())
      sys::fs::remove_directories(dir);
  });

  std::string so = (dir + "/kernels.so").str();
  std::vector<Job> compiles;
  std::vector<std::string> objects;
  std::vector<std::string> cpps;
  for (size_t u = 0; u < numUnits; ++u)
    cpps.push_back((dir + "/kernels" + std::to_string(u) + ".cpp").str());
  auto writeUnits = [&]() -> Error {
    for (size_t u = 0; u < numUnits; ++u)
      if (!writeFile(cpps[u], {units[u]}))
        return createStringError(inconvertibleErrorCode(), "cannot write %s",
                                 cpps[u].c_str());
    return Error::success();
  };
  if (Error e = writeUnits())
    return e;
  for (size_t u = 0; u < numUnits; ++u) {
    std::string stem = "kernels" + std::to_string(u), cpp = cpps[u];
    Job job{stem + ".cpp", common, (dir + "/" + stem + ".log").str()};
    if (numUnits == 1) { // compile and link in one step
      job.args.insert(job.args.end(), {"-shared", "-o", so, cpp});
    } else {
      std::string obj = (dir + "/" + stem + ".o").str();
      job.args.insert(job.args.end(), {"-c", cpp, "-o", obj});
      objects.push_back(obj);
    }
    compiles.push_back(std::move(job));
  }
  size_t done = 0;
  auto compile = [&]() {
    return runJobs(*compiler, compiles, cores, [&](size_t unit, size_t) {
      done += unitSources[unit];
      if (progress)
        progress(done, sources.size());
    });
  };
  if (Error e = compile()) {
    if (header.empty())
      return e;
    // A damaged prelude header or .gch must not fail every compile: drop
    // both (the next compile publishes them again) and compile once more
    // with the prelude in the units.
    llvm::consumeError(std::move(e));
    (void)sys::fs::remove(header + ".gch");
    (void)sys::fs::remove(header);
    for (std::string &unit : units)
      unit = prelude + "\n" + unit.substr(include.size());
    done = 0;
    if (Error e = writeUnits())
      return e;
    if (Error e = compile())
      return e;
  }
  if (numUnits > 1) {
    std::vector<Job> link = {{"the link step",
                              {"-shared", "-fopenmp", "-o", so},
                              (dir + "/link.log").str()}};
    link[0].args.insert(link[0].args.end(), objects.begin(), objects.end());
    if (Error e = runJobs(*compiler, link, 1, nullptr))
      return e;
  }
  auto bytes = readBytes(so);
  if (bytes && !cached.empty())
    publishCached(cached, StringRef(bytes->data(), bytes->size()));
  return bytes;
}

void publishCached(StringRef path, StringRef bytes) {
  if (sys::fs::create_directories(sys::path::parent_path(path)))
    return;
  uint64_t sum = xxh3_64bits(bytes);
  if (publishFile(path, [&](StringRef temp) {
        return writeFile(temp,
                         {bytes, StringRef(kCacheTag, sizeof(kCacheTag)),
                          StringRef(reinterpret_cast<const char *>(&sum), 8)});
      }))
    trimCacheFolder(sys::path::parent_path(path), cacheLimitBytes(), path);
}

std::vector<std::string> targetCpuFeatures(const std::string &targetCpu) {
  if (targetCpu == "native")
    return artifact::hostCpuFeatures();
  // The x86-64 levels, in the feature names the runtime checks at load.
  if (targetCpu == "x86-64-v3")
    return {"avx", "avx2", "fma"};
  if (targetCpu == "x86-64-v4")
    return {"avx",      "avx2",     "fma",     "avx512f",
            "avx512bw", "avx512vl", "avx512dq"};
  return {}; // generic, x86-64(-v2) or a CPU named by the user, who vouches
}

} // namespace kiln
