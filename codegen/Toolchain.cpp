//===- Toolchain.cpp - compile generated C++ into a shared object ---------===//

#include "codegen/Toolchain.h"

#include "runtime/Artifact.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <thread>

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

// Runs `jobs` with at most `width` at once; the first failure is returned
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
      progress(done, jobs.size());
  }
  return Error::success();
}
} // namespace

Expected<std::vector<char>>
compileSharedObject(const std::vector<CxxSource> &sources,
                    const CxxOptions &options,
                    const std::function<void(size_t, size_t)> &progress) {
  auto compiler = findCompiler(options);
  if (!compiler)
    return compiler.takeError();
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

  std::vector<std::string> common = {"-std=c++17",
                                     "-O" + std::to_string(options.optLevel),
                                     "-fPIC", "-fno-math-errno", "-w"};
  if (!options.targetCpu.empty())
    common.push_back("-march=" + options.targetCpu);

  std::vector<Job> compiles;
  std::vector<std::string> objects;
  for (const CxxSource &source : sources) {
    std::string cpp = (dir + "/" + source.name + ".cpp").str();
    std::string obj = (dir + "/" + source.name + ".o").str();
    std::error_code ec;
    raw_fd_ostream out(cpp, ec);
    if (ec)
      return createStringError(ec, "cannot write %s", cpp.c_str());
    out << source.text;
    out.close();
    Job job{source.name + ".cpp", common,
            (dir + "/" + source.name + ".log").str()};
    job.args.insert(job.args.end(), {"-c", cpp, "-o", obj});
    compiles.push_back(std::move(job));
    objects.push_back(obj);
  }
  unsigned width = std::max(1u, std::thread::hardware_concurrency());
  if (Error e = runJobs(*compiler, compiles, width, progress))
    return e;

  std::string so = (dir + "/kernels.so").str();
  std::vector<Job> link = {
      {"the link step", {"-shared", "-o", so}, (dir + "/link.log").str()}};
  link[0].args.insert(link[0].args.end(), objects.begin(), objects.end());
  if (Error e = runJobs(*compiler, link, 1, nullptr))
    return e;
  auto buffer = MemoryBuffer::getFile(so);
  if (!buffer)
    return createStringError(buffer.getError(), "cannot read %s", so.c_str());
  StringRef bytes = (*buffer)->getBuffer();
  return std::vector<char>(bytes.begin(), bytes.end());
}

std::vector<std::string> targetCpuFeatures(const std::string &targetCpu) {
  if (targetCpu != "native")
    return {}; // a named -march is the user's promise
  return artifact::hostCpuFeatures();
}

} // namespace kiln
