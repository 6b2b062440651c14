//===- CudaContext.cpp - one bound cuda device ----------------------------===//
//
// The caching allocator is PyTorch's idea, simplified: sizes round up to
// 512 bytes and a freed block waits in a multimap keyed by its rounded size
// until an allocation of the same rounded size takes it. Blocks come back
// only after the streams that used them were synchronised, so any stream may
// reuse them. Out of memory frees the cache and retries once.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"

#include "kiln/runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::cuda {

namespace {
constexpr size_t kRound = 512;
// cuda.h: CUjit_option and CUstream_flags.
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;
constexpr unsigned kStreamNonBlocking = 1;
constexpr size_t kLogSize = 16384;

size_t roundUp(size_t bytes) {
  return bytes <= kRound ? kRound : (bytes + kRound - 1) / kRound * kRound;
}
} // namespace

Context::Context(const Driver &driver, int ordinal, std::string name)
    : driver_(driver), ordinal_(ordinal), name_(std::move(name)) {
  if (ordinal < 0 || ordinal >= driver.deviceCount) {
    std::string list;
    for (int i = 0; i < driver.deviceCount; ++i)
      list += (i ? ", cuda:" : "cuda:") + std::to_string(i);
    throw Error(name_ + ": this machine has " +
                std::to_string(driver.deviceCount) + " CUDA device(s) (" +
                list + ")");
  }
  check(driver_.cuDeviceGet(&device_, ordinal_), "cuDeviceGet",
        "cannot open the device");
  check(driver_.cuDevicePrimaryCtxRetain(&context_, device_),
        "cuDevicePrimaryCtxRetain", "cannot open the device");
  makeCurrent();
}

Context::~Context() {
  // Errors are ignored here: at process exit the driver may be shutting
  // down already.
  if (driver_.cuCtxSetCurrent(context_) == kSuccess) {
    if (blas_)
      blasLibrary_->destroy(blas_);
    releaseDnn();
    for (const auto &[bytes, pointer] : cache_)
      driver_.cuMemFree(pointer);
    for (void *block : pinnedAll_)
      driver_.cuMemFreeHost(block);
    if (module_)
      driver_.cuModuleUnload(module_);
    for (CUstream stream : streams_)
      driver_.cuStreamDestroy(stream);
    driver_.cuCtxSetCurrent(nullptr);
  }
  driver_.cuDevicePrimaryCtxRelease(device_);
}

void Context::check(CUresult result, const char *call,
                    const std::string &what) const {
  driver_.check(result, call, name_ + ": " + what);
}

void Context::makeCurrent() const {
  check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent",
        "cannot make the context current");
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

CUdeviceptr Context::allocate(size_t bytes) {
  if (bytes > SIZE_MAX - kRound)
    return 0;
  size_t rounded = roundUp(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(rounded);
    if (it != cache_.end()) {
      CUdeviceptr pointer = it->second;
      cache_.erase(it);
      cached_ -= rounded;
      return pointer;
    }
  }
  makeCurrent();
  CUdeviceptr pointer = 0;
  CUresult result = driver_.cuMemAlloc(&pointer, rounded);
  if (result == kErrorOutOfMemory) {
    emptyCache();
    result = driver_.cuMemAlloc(&pointer, rounded);
    if (result == kErrorOutOfMemory)
      return 0;
  }
  check(result, "cuMemAlloc",
        "cannot allocate " + std::to_string(bytes) + " bytes");
  return pointer;
}

void Context::release(CUdeviceptr pointer, size_t bytes) {
  if (!pointer)
    return;
  size_t rounded = roundUp(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.emplace(rounded, pointer);
  cached_ += rounded;
}

void Context::emptyCache() {
  std::multimap<size_t, CUdeviceptr> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(cache_);
    cached_ = 0;
  }
  makeCurrent();
  for (const auto &[bytes, pointer] : blocks)
    check(driver_.cuMemFree(pointer), "cuMemFree",
          "cannot free a cached block");
}

size_t Context::cachedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

size_t Context::freeMemory() const {
  makeCurrent();
  size_t free = 0, total = 0;
  check(driver_.cuMemGetInfo(&free, &total), "cuMemGetInfo",
        "cannot query free memory");
  return free;
}

//===----------------------------------------------------------------------===//
// Streams and copies
//===----------------------------------------------------------------------===//

/// The size of the pinned block that holds `bytes`.
static size_t pinnedSize(size_t bytes) {
  size_t size = Context::kStageMin;
  while (size < bytes)
    size *= 2;
  return size;
}

void *Context::pinned(size_t bytes) {
  size_t size = pinnedSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pinned_.find(size);
    if (it != pinned_.end()) {
      void *block = it->second;
      pinned_.erase(it);
      pinnedPooled_ -= size;
      return block;
    }
  }
  makeCurrent();
  void *block = nullptr;
  if (driver_.cuMemHostAlloc(&block, size, 0) != kSuccess || !block)
    return nullptr; // pageable copies still work
  std::lock_guard<std::mutex> lock(mutex_);
  pinnedAll_.push_back(block);
  return block;
}

void Context::releasePinned(void *block, size_t bytes) {
  size_t size = pinnedSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pinnedPooled_ + size <= kPinnedPoolMax) {
      pinned_.emplace(size, block);
      pinnedPooled_ += size;
      return;
    }
    pinnedAll_.erase(std::find(pinnedAll_.begin(), pinnedAll_.end(), block));
  }
  makeCurrent();
  driver_.cuMemFreeHost(block);
}

CUstream Context::acquireStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      CUstream stream = idle_.back();
      idle_.pop_back();
      return stream;
    }
  }
  makeCurrent();
  CUstream stream = nullptr;
  check(driver_.cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate",
        "cannot create a stream");
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.push_back(stream);
  return stream;
}

void Context::releaseStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(stream);
}

void Context::synchronize(CUstream stream, const std::string &what) const {
  makeCurrent();
  check(driver_.cuStreamSynchronize(stream), "cuStreamSynchronize", what);
}

CUevent Context::record(CUstream stream, const std::string &what) const {
  constexpr unsigned kDisableTiming = 2; // CU_EVENT_DISABLE_TIMING
  makeCurrent();
  CUevent event = nullptr;
  check(driver_.cuEventCreate(&event, kDisableTiming), "cuEventCreate", what);
  CUresult result = driver_.cuEventRecord(event, stream);
  if (result != kSuccess) {
    driver_.cuEventDestroy(event);
    check(result, "cuEventRecord", what);
  }
  return event;
}

void Context::wait(CUstream stream, CUevent event,
                   const std::string &what) const {
  makeCurrent();
  check(driver_.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent", what);
}

void Context::waitHost(CUevent event, const std::string &what) const {
  makeCurrent();
  check(driver_.cuEventSynchronize(event), "cuEventSynchronize", what);
}

void Context::destroyEvent(CUevent event) const {
  makeCurrent();
  driver_.cuEventDestroy(event);
}

void Context::toDevice(CUdeviceptr dst, const void *src, size_t bytes,
                       CUstream stream) const {
  makeCurrent();
  check(driver_.cuMemcpyHtoDAsync(dst, src, bytes, stream), "cuMemcpyHtoDAsync",
        "cannot copy " + std::to_string(bytes) + " bytes from the host");
}

void Context::toHost(void *dst, CUdeviceptr src, size_t bytes,
                     CUstream stream) const {
  makeCurrent();
  check(driver_.cuMemcpyDtoHAsync(dst, src, bytes, stream), "cuMemcpyDtoHAsync",
        "cannot copy " + std::to_string(bytes) + " bytes to the host");
}

void Context::withinDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                           CUstream stream) const {
  makeCurrent();
  check(driver_.cuMemcpyDtoDAsync(dst, src, bytes, stream), "cuMemcpyDtoDAsync",
        "cannot copy " + std::to_string(bytes) + " bytes on the device");
}

void Context::fromPeer(CUdeviceptr dst, const Context &from, CUdeviceptr src,
                       size_t bytes, CUstream stream) const {
  makeCurrent();
  check(driver_.cuMemcpyPeerAsync(dst, context_, src, from.context_, bytes,
                                  stream),
        "cuMemcpyPeerAsync",
        "cannot copy " + std::to_string(bytes) + " bytes from " + from.name_);
}

//===----------------------------------------------------------------------===//
// Code
//===----------------------------------------------------------------------===//

void Context::loadModule(const char *ptx, size_t size,
                         const std::string &arch) {
  std::string what =
      "cannot load the PTX" + (arch.empty() ? "" : " (for " + arch + ")");
  if (module_)
    throw Error(name_ + ": " + what + ": a module is loaded already");
  if (std::memchr(ptx, '\0', size))
    throw Error(name_ + ": " + what + ": the ptx section holds a NUL byte");
  std::string image(ptx, size); // the driver wants it NUL-terminated
  std::vector<char> log(kLogSize, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[] = {log.data(), reinterpret_cast<void *>(uintptr_t(kLogSize))};
  makeCurrent();
  CUresult result =
      driver_.cuModuleLoadDataEx(&module_, image.c_str(), 2, options, values);
  if (result != kSuccess) {
    module_ = nullptr;
    log.back() = '\0';
    std::string text = log.data();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    throw Error(name_ + ": " + what +
                ": cuModuleLoadDataEx failed: " + driver_.describe(result) +
                (text.empty() ? "" : "; the JIT log says:\n" + text));
  }
}

CUfunction Context::function(const std::string &entry,
                             const std::string &what) {
  if (!module_)
    throw Error(name_ + ": " + what + ": no PTX module is loaded");
  makeCurrent();
  CUfunction fn = nullptr;
  CUresult result = driver_.cuModuleGetFunction(&fn, module_, entry.c_str());
  if (result == kErrorNotFound)
    throw Error(name_ + ": " + what + ": the ptx section lacks entry '" +
                entry + "'");
  check(result, "cuModuleGetFunction",
        what + ": cannot find entry '" + entry + "'");
  return fn;
}

void Context::launch(CUfunction fn, uint64_t threads,
                     std::vector<CUdeviceptr> &slots, CUstream stream,
                     const std::string &what) const {
  if (threads == 0)
    return;
  CUdeviceptr none = 0;
  // One kernel parameter, KilnSlots {void *p[K]}: its bytes are the K
  // pointers, which cuLaunchKernel copies before it returns.
  void *params[] = {slots.empty() ? static_cast<void *>(&none)
                                  : static_cast<void *>(slots.data())};
  makeCurrent();
  check(driver_.cuLaunchKernel(fn, gridSize(threads), 1, 1, kBlockSize, 1, 1, 0,
                               stream, params, nullptr),
        "cuLaunchKernel", what);
}

} // namespace kiln::cuda
