//===- CudaDriver.cpp - load the CUDA driver library with dlopen ----------===//
//
// The driver is loaded on first use and never unloaded (unloading libcuda
// while contexts or its own threads exist is not safe). The answer for a
// library path, driver or reason, is computed once under a mutex, so cuInit
// runs once per process; tests may point $KILN_CUDA_DRIVER elsewhere between
// loads to simulate a machine without CUDA.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"

#include "kiln/runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <memory>

namespace kiln::cuda {

namespace {
struct Loaded {
  std::unique_ptr<Driver> driver; // null when unavailable
  std::string reason;
};

/// Resolves `symbol` into `slot`; false when the library lacks it.
template <typename Fn>
bool resolve(void *library, const char *symbol, Fn &slot,
             std::string &missing) {
  slot = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!slot && missing.empty())
    missing = symbol;
  return slot != nullptr;
}

Loaded loadFrom(const std::string &path) {
  Loaded loaded;
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = dlerror();
    loaded.reason =
        "no CUDA driver (" + std::string(error ? error : path.c_str()) + ")";
    return loaded;
  }
  auto d = std::make_unique<Driver>();
  d->path = path;
  std::string missing;
  resolve(library, "cuGetErrorName", d->cuGetErrorName, missing);
  resolve(library, "cuGetErrorString", d->cuGetErrorString, missing);
  resolve(library, "cuInit", d->cuInit, missing);
  resolve(library, "cuDriverGetVersion", d->cuDriverGetVersion, missing);
  resolve(library, "cuDeviceGetCount", d->cuDeviceGetCount, missing);
  resolve(library, "cuDeviceGet", d->cuDeviceGet, missing);
  resolve(library, "cuDeviceGetName", d->cuDeviceGetName, missing);
  resolve(library, "cuDeviceTotalMem_v2", d->cuDeviceTotalMem, missing);
  resolve(library, "cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain,
          missing);
  resolve(library, "cuDevicePrimaryCtxRelease_v2", d->cuDevicePrimaryCtxRelease,
          missing);
  resolve(library, "cuCtxSetCurrent", d->cuCtxSetCurrent, missing);
  resolve(library, "cuMemGetInfo_v2", d->cuMemGetInfo, missing);
  resolve(library, "cuMemAlloc_v2", d->cuMemAlloc, missing);
  resolve(library, "cuMemFree_v2", d->cuMemFree, missing);
  resolve(library, "cuMemHostAlloc", d->cuMemHostAlloc, missing);
  resolve(library, "cuMemFreeHost", d->cuMemFreeHost, missing);
  resolve(library, "cuMemcpyHtoDAsync_v2", d->cuMemcpyHtoDAsync, missing);
  resolve(library, "cuMemcpyDtoHAsync_v2", d->cuMemcpyDtoHAsync, missing);
  resolve(library, "cuMemcpyDtoDAsync_v2", d->cuMemcpyDtoDAsync, missing);
  resolve(library, "cuMemcpyPeerAsync", d->cuMemcpyPeerAsync, missing);
  resolve(library, "cuStreamCreate", d->cuStreamCreate, missing);
  resolve(library, "cuStreamDestroy_v2", d->cuStreamDestroy, missing);
  resolve(library, "cuStreamSynchronize", d->cuStreamSynchronize, missing);
  resolve(library, "cuEventCreate", d->cuEventCreate, missing);
  resolve(library, "cuEventRecord", d->cuEventRecord, missing);
  resolve(library, "cuStreamWaitEvent", d->cuStreamWaitEvent, missing);
  resolve(library, "cuEventSynchronize", d->cuEventSynchronize, missing);
  resolve(library, "cuEventDestroy_v2", d->cuEventDestroy, missing);
  resolve(library, "cuModuleLoadDataEx", d->cuModuleLoadDataEx, missing);
  resolve(library, "cuModuleUnload", d->cuModuleUnload, missing);
  resolve(library, "cuModuleGetFunction", d->cuModuleGetFunction, missing);
  resolve(library, "cuLaunchKernel", d->cuLaunchKernel, missing);
  if (!missing.empty()) {
    // Keep the library loaded: a bogus one may not like being unloaded.
    loaded.reason =
        path + " is not a usable CUDA driver (it lacks " + missing + ")";
    return loaded;
  }
  CUresult result = d->cuInit(0);
  if (result != kSuccess) {
    loaded.reason = "cuInit failed: " + d->describe(result);
    return loaded;
  }
  result = d->cuDriverGetVersion(&d->version);
  if (result != kSuccess) {
    loaded.reason = "cuDriverGetVersion failed: " + d->describe(result);
    return loaded;
  }
  result = d->cuDeviceGetCount(&d->deviceCount);
  if (result != kSuccess) {
    loaded.reason = "cuDeviceGetCount failed: " + d->describe(result);
    return loaded;
  }
  if (d->deviceCount <= 0) {
    loaded.reason = "no CUDA device found";
    return loaded;
  }
  loaded.driver = std::move(d);
  return loaded;
}
} // namespace

unsigned gridSize(uint64_t threads) {
  uint64_t blocks = threads / kBlockSize + (threads % kBlockSize ? 1 : 0);
  return static_cast<unsigned>(
      std::clamp<uint64_t>(blocks, 1, uint64_t(1) << 20));
}

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(result, &name) != kSuccess || !name)
    name = nullptr;
  if (!cuGetErrorString || cuGetErrorString(result, &text) != kSuccess || !text)
    text = nullptr;
  std::string out =
      name ? std::string(name) : "CUDA error " + std::to_string(result);
  if (text)
    out += " (" + std::string(text) + ")";
  return out;
}

void Driver::check(CUresult result, const char *call,
                   const std::string &what) const {
  if (result != kSuccess)
    throw Error(what + ": " + call + " failed: " + describe(result));
}

const Driver *load(std::string &reason) {
  static std::mutex mutex;
  static std::map<std::string, Loaded> loaded;
  const char *env = std::getenv("KILN_CUDA_DRIVER");
  std::string path = env && *env ? env : "libcuda.so.1";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end())
    it = loaded.emplace(path, loadFrom(path)).first;
  reason = it->second.reason;
  return it->second.driver.get();
}

int deviceWithMostFreeMemory(const Driver &driver) {
  if (driver.deviceCount == 1)
    return 0; // nothing to compare: spare creating a context here
  int best = 0;
  size_t bestFree = 0;
  for (int ordinal = 0; ordinal < driver.deviceCount; ++ordinal) {
    // The context stays retained while this Context lives only.
    Context context(driver, ordinal, "cuda:" + std::to_string(ordinal));
    size_t free = context.freeMemory();
    if (ordinal == 0 || free > bestFree) {
      best = ordinal;
      bestFree = free;
    }
  }
  return best;
}

std::string describeDevice(const Driver &driver, int ordinal) {
  std::string what = "cuda:" + std::to_string(ordinal);
  CUdevice device = 0;
  driver.check(driver.cuDeviceGet(&device, ordinal), "cuDeviceGet", what);
  char name[256] = {};
  driver.check(driver.cuDeviceGetName(name, sizeof(name) - 1, device),
               "cuDeviceGetName", what);
  size_t total = 0;
  driver.check(driver.cuDeviceTotalMem(&total, device), "cuDeviceTotalMem",
               what);
  Context context(driver, ordinal, what);
  char line[512];
  std::snprintf(line, sizeof(line), "%s, %.1f GiB, %.1f GiB free", name,
                double(total) / double(1 << 30),
                double(context.freeMemory()) / double(1 << 30));
  return line;
}

} // namespace kiln::cuda
