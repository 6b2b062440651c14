//===- Nvrtc.cpp - CUDA C++ to PTX through a dlopen'ed NVRTC --------------===//
//
// Only the handful of NVRTC entry points kiln needs are declared here (their
// C ABI is stable across toolkit versions), so no CUDA header is needed to
// build kiln. PTX is cached like CPU code: by a hash of the source, the
// options and NVRTC's version.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Nvrtc.h"
#include "codegen/Toolchain.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <vector>

using namespace llvm;

namespace kiln {

namespace {
using Program = void *;
struct Api {
  int (*version)(int *, int *) = nullptr;
  int (*create)(Program *, const char *, const char *, int, const char *const *,
                const char *const *) = nullptr;
  int (*compile)(Program, int, const char *const *) = nullptr;
  int (*logSize)(Program, size_t *) = nullptr;
  int (*log)(Program, char *) = nullptr;
  int (*ptxSize)(Program, size_t *) = nullptr;
  int (*ptx)(Program, char *) = nullptr;
  int (*destroy)(Program *) = nullptr;
  const char *(*errorString)(int) = nullptr;
  std::string loadError; // why it is not there
  int major = 0, minor = 0;
};

const Api &api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string home = cudaHome();
    std::vector<std::string> candidates = {
        home + "/lib64/libnvrtc.so", home + "/lib64/libnvrtc.so.13",
        home + "/lib64/libnvrtc.so.12", home + "/lib/libnvrtc.so",
        "libnvrtc.so"};
    void *lib = nullptr;
    for (const std::string &path : candidates)
      if ((lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      a.loadError = "NVRTC (libnvrtc.so) not found in " + home +
                    "/lib64 or on the library path; install the CUDA toolkit "
                    "or set KILN_CUDA_HOME";
      return;
    }
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(lib, name));
      if (!fn && a.loadError.empty())
        a.loadError = std::string("NVRTC lacks ") + name;
    };
    sym(a.version, "nvrtcVersion");
    sym(a.create, "nvrtcCreateProgram");
    sym(a.compile, "nvrtcCompileProgram");
    sym(a.logSize, "nvrtcGetProgramLogSize");
    sym(a.log, "nvrtcGetProgramLog");
    sym(a.ptxSize, "nvrtcGetPTXSize");
    sym(a.ptx, "nvrtcGetPTX");
    sym(a.destroy, "nvrtcDestroyProgram");
    sym(a.errorString, "nvrtcGetErrorString");
    if (a.loadError.empty())
      a.version(&a.major, &a.minor);
  });
  return a;
}
} // namespace

std::string cudaHome() {
  const char *env = std::getenv("KILN_CUDA_HOME");
  return env && *env ? env : "/usr/local/cuda";
}

bool isCudaArch(const std::string &arch) {
  unsigned n = 0;
  return StringRef(arch).starts_with("sm_") &&
         !StringRef(arch).drop_front(3).getAsInteger(10, n) && n >= 50;
}

Expected<std::string> compilePtx(const std::string &source,
                                 const CudaOptions &options, bool half) {
  if (!isCudaArch(options.arch))
    return createStringError(inconvertibleErrorCode(),
                             "unknown CUDA architecture '%s' (expected sm_NN, "
                             "e.g. sm_80)",
                             options.arch.c_str());
  const Api &nvrtc = api();
  if (!nvrtc.loadError.empty())
    return createStringError(inconvertibleErrorCode(), "%s",
                             nvrtc.loadError.c_str());
  std::vector<std::string> flags = {"--gpu-architecture=compute_" +
                                        options.arch.substr(3),
                                    "-default-device", "-std=c++17"};
  if (half)
    flags.push_back("-I" + cudaHome() + "/include");

  std::string key = "nvrtc " + std::to_string(nvrtc.major) + "." +
                    std::to_string(nvrtc.minor) + "\n" + join(flags, " ") +
                    "\n" + source;
  std::string cacheDir = codeCacheDirectory(options.cacheDir);
  SmallString<128> cached;
  if (!cacheDir.empty()) {
    cached = cacheDir;
    sys::path::append(cached, utohexstr(xxh3_64bits(key)) + ".ptx");
    if (std::optional<std::string> hit = readCached(cached))
      return *hit;
  }

  Program program = nullptr;
  if (int rc = nvrtc.create(&program, source.c_str(), "kiln_kernels.cu", 0,
                            nullptr, nullptr))
    return createStringError(inconvertibleErrorCode(),
                             "nvrtcCreateProgram failed: %s",
                             nvrtc.errorString(rc));
  std::vector<const char *> argv;
  for (const std::string &f : flags)
    argv.push_back(f.c_str());
  int rc = nvrtc.compile(program, argv.size(), argv.data());
  size_t size = 0;
  nvrtc.logSize(program, &size);
  std::string log(size, '\0');
  if (size)
    nvrtc.log(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  if (rc) {
    nvrtc.destroy(&program);
    return createStringError(inconvertibleErrorCode(),
                             "NVRTC failed on the generated CUDA (%s):\n%s",
                             nvrtc.errorString(rc), log.c_str());
  }
  nvrtc.ptxSize(program, &size);
  std::string ptx(size, '\0');
  nvrtc.ptx(program, ptx.data());
  nvrtc.destroy(&program);
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();

  if (!cached.empty())
    publishCached(cached, ptx);
  return ptx;
}

} // namespace kiln
