//===- Driver.cpp - a fake CUDA driver library for the runtime tests ------===//
//
// Built as a shared library that tests point $KILN_CUDA_DRIVER at. It
// implements the driver API entry points the runtime resolves, on host
// memory, and is strict where a real driver would fail or misbehave: every
// call needs cuInit and a current context, streams and functions must belong
// to the current context, copies and kernels only touch live allocations of
// the right device (a host pointer passed as a device pointer is an error),
// launches must use the documented geometry. Streams run synchronously.
//
// Configured from the environment when cuInit runs: FAKE_CUDA_DEVICES (the
// number of devices, 1 by default; 0 makes cuInit fail like a machine
// without a GPU), FAKE_CUDA_MEMORY ("bytes,bytes,...": each device's memory,
// 1 GiB by default). Kernels (PTX entries the fake knows, on f32[1000]):
// kiln_add_one {x, y}: y = x + 1; kiln_add {x, y, z}: z = x + y;
// kiln_twice {x, y, t}: t = 2x; kiln_plus_one {x, y, t}: y = t + 1;
// kiln_fault: fails asynchronously (the next synchronize reports
// CUDA_ERROR_ILLEGAL_ADDRESS). A PTX containing FAKE_JIT_ERROR fails to load
// with a log. fake_cuda_count(WHAT) reports live objects for leak checks.
// FAKE_CUDA_KERNELS names a host library of emulated kernels
// (tests/emu/cuda_emu.py): an entry NAME that it exports as NAME_emu runs
// there, thread by thread, after every slot pointer is checked to lie in a
// live allocation of the current device; with FAKE_CUDA_REPORT=1 the process
// says at exit how many emulated launches, GEMMs and convs ran.
//
// The same library is the fake cuBLAS (Cublas.cpp) and cuDNN (Cudnn.cpp);
// they share the state in FakeCuda.h.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fake {
std::recursive_mutex mutex;
bool initialized = false;
int deviceCount = 1;
size_t memory[kMaxDevices], used[kMaxDevices];
Ctx contexts[kMaxDevices];
std::map<uintptr_t, Allocation> allocations;
std::set<Stream *> streams;
std::set<Event *> events;
std::map<uintptr_t, size_t> pinned; // page-locked blocks: start, bytes
long pinnedCopies = 0;
long streamSyncs = 0, eventWaits = 0, eventSyncs = 0;
std::set<Module *> modules;
std::set<Function *> functions;
long launches = 0;
thread_local Ctx *current = nullptr;

int deviceOf(uintptr_t p, size_t bytes) {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin())
    return -1;
  --it;
  if (p < it->first || p + bytes > it->first + it->second.size)
    return -1;
  return it->second.device;
}

bool onCurrent(Stream *s) { return streams.count(s) && s->ctx == current; }
} // namespace fake

using namespace fake;

extern "C" {

CUresult cuGetErrorName(CUresult e, const char **s) {
  static const std::map<int, const char *> names = {
      {Success, "CUDA_SUCCESS"},
      {InvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {OutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
      {NotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {NoDevice, "CUDA_ERROR_NO_DEVICE"},
      {InvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {InvalidPtx, "CUDA_ERROR_INVALID_PTX"},
      {InvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
      {InvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
      {NotFound, "CUDA_ERROR_NOT_FOUND"},
      {IllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS"}};
  auto it = names.find(e);
  if (it == names.end())
    return InvalidValue;
  *s = it->second;
  return Success;
}

CUresult cuGetErrorString(CUresult e, const char **s) {
  if (cuGetErrorName(e, s) != Success)
    return InvalidValue;
  *s = e == NoDevice ? "no CUDA-capable device is detected" : "fake error";
  return Success;
}

long emulated = 0;

void report() {
  std::fprintf(stderr,
               "fake cuda: %ld emulated kernel launches, %ld GEMMs, %ld "
               "convs (%ld fused), %ld stream waits on events, %ld copies "
               "from pinned memory\n",
               emulated, blasCount("gemms"), dnnCount("convs"),
               dnnCount("convs_fused"), eventWaits, pinnedCopies);
}

CUresult cuInit(unsigned flags) {
  LOCK;
  if (flags != 0)
    return InvalidValue;
  const char *count = std::getenv("FAKE_CUDA_DEVICES");
  deviceCount = count ? std::atoi(count) : 1;
  if (deviceCount <= 0)
    return NoDevice;
  const char *sizes = std::getenv("FAKE_CUDA_MEMORY");
  for (int d = 0; d < kMaxDevices; ++d) {
    memory[d] = size_t(1) << 30;
    contexts[d].device = d;
  }
  for (int d = 0; sizes && *sizes && d < kMaxDevices; ++d) {
    char *end = nullptr;
    memory[d] = std::strtoull(sizes, &end, 10);
    sizes = *end == ',' ? end + 1 : end;
  }
  static bool reporting = [] {
    const char *wanted = std::getenv("FAKE_CUDA_REPORT");
    return wanted && std::string(wanted) == "1" && std::atexit(report) == 0;
  }();
  (void)reporting;
  initialized = true;
  return Success;
}

// An emulated kernel runs the whole grid; a fault in it aborts the process
// with the emulator's message (tests/emu/kiln_cuda_emu.h).
using EmuKernel = void (*)(void **, unsigned, unsigned);
using EmuSlots = unsigned (*)(void **, void *const **);

/// The library of emulated kernels ($FAKE_CUDA_KERNELS), or null.
void *emulatedKernels() {
  static void *library = [] {
    const char *path = std::getenv("FAKE_CUDA_KERNELS");
    if (!path || !*path)
      return static_cast<void *>(nullptr);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "fake cuda: cannot load FAKE_CUDA_KERNELS: %s\n",
                   dlerror());
      std::abort();
    }
    return h;
  }();
  return library;
}

/// Runs `name` on the host when the emulated kernels have it: Success,
/// an error, or NotFound when they do not.
CUresult launchEmulated(const std::string &name, unsigned blocks,
                        unsigned threads, Stream *s, void **params) {
  void *library = emulatedKernels();
  if (!library)
    return NotFound;
  auto run =
      reinterpret_cast<EmuKernel>(dlsym(library, (name + "_emu").c_str()));
  auto slots =
      reinterpret_cast<EmuSlots>(dlsym(library, (name + "_emu_slots").c_str()));
  if (!run || !slots)
    return NotFound;
  void *const *p = nullptr;
  unsigned count = slots(params, &p);
  for (unsigned i = 0; i < count; ++i)
    if (p[i] &&
        deviceOf(reinterpret_cast<uintptr_t>(p[i]), 1) != current->device) {
      std::fprintf(stderr,
                   "fake cuda: %s: slot %u (%p) is no allocation of device "
                   "%d\n",
                   name.c_str(), i, p[i], current->device);
      s->pending = IllegalAddress;
      return Success;
    }
  ++emulated;
  run(params, blocks, threads);
  return Success;
}

CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return Success;
}

CUresult cuDeviceGetCount(int *n) {
  LOCK;
  if (!initialized)
    return NotInitialized;
  *n = deviceCount;
  return Success;
}

CUresult cuDeviceGet(int *device, int ordinal) {
  LOCK;
  if (!initialized)
    return NotInitialized;
  if (ordinal < 0 || ordinal >= deviceCount)
    return InvalidDevice;
  *device = ordinal;
  return Success;
}

CUresult cuDeviceGetName(char *name, int len, int device) {
  if (device < 0 || device >= deviceCount)
    return InvalidDevice;
  std::snprintf(name, size_t(len), "Fake GPU %d", device);
  return Success;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) {
  if (device < 0 || device >= deviceCount)
    return InvalidDevice;
  *bytes = memory[device];
  return Success;
}

CUresult cuDevicePrimaryCtxRetain(Ctx **ctx, int device) {
  LOCK;
  if (!initialized)
    return NotInitialized;
  if (device < 0 || device >= deviceCount)
    return InvalidDevice;
  ++contexts[device].retained;
  *ctx = &contexts[device];
  return Success;
}

CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  LOCK;
  if (device < 0 || device >= deviceCount || contexts[device].retained <= 0)
    return InvalidContext;
  --contexts[device].retained;
  return Success;
}

CUresult cuCtxSetCurrent(Ctx *ctx) {
  LOCK;
  if (ctx &&
      (ctx < contexts || ctx >= contexts + kMaxDevices || ctx->retained <= 0))
    return InvalidContext;
  current = ctx;
  return Success;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  REQUIRE_CONTEXT;
  *free = memory[current->device] - used[current->device];
  *total = memory[current->device];
  return Success;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes) {
  REQUIRE_CONTEXT;
  int d = current->device;
  if (bytes == 0)
    return InvalidValue;
  if (bytes > memory[d] - used[d])
    return OutOfMemory;
  void *data = std::malloc(bytes);
  std::memset(data, 0xAB, bytes); // device memory is not zeroed
  used[d] += bytes;
  allocations[reinterpret_cast<uintptr_t>(data)] = {d, bytes};
  *p = reinterpret_cast<uintptr_t>(data);
  return Success;
}

CUresult cuMemFree_v2(uint64_t p) {
  REQUIRE_CONTEXT;
  auto it = allocations.find(p);
  if (it == allocations.end())
    return InvalidValue;
  used[it->second.device] -= it->second.size;
  std::free(reinterpret_cast<void *>(p));
  allocations.erase(it);
  return Success;
}

// Page-locked host memory: plain memory here, counted; FAKE_CUDA_PINNED=0
// makes cuMemHostAlloc fail (out of memory), as when the host has no more
// to lock.
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  REQUIRE_CONTEXT;
  const char *allowed = std::getenv("FAKE_CUDA_PINNED");
  if (allowed && std::string(allowed) == "0")
    return OutOfMemory;
  if (flags != 0 || !bytes)
    return InvalidValue;
  *p = std::malloc(bytes);
  pinned[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return Success;
}

CUresult cuMemFreeHost(void *p) {
  REQUIRE_CONTEXT;
  if (!pinned.erase(reinterpret_cast<uintptr_t>(p)))
    return InvalidValue;
  std::free(p);
  return Success;
}

CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n,
                              Stream *s) {
  REQUIRE_CONTEXT;
  if (!onCurrent(s))
    return InvalidHandle;
  if (deviceOf(dst, n) != current->device ||
      deviceOf(reinterpret_cast<uintptr_t>(src), 1) != -1)
    return InvalidValue;
  auto block = pinned.upper_bound(reinterpret_cast<uintptr_t>(src));
  if (block != pinned.begin() &&
      reinterpret_cast<uintptr_t>(src) + n <=
          std::prev(block)->first + std::prev(block)->second)
    ++pinnedCopies;
  std::memcpy(reinterpret_cast<void *>(dst), src, n);
  return Success;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, Stream *s) {
  REQUIRE_CONTEXT;
  if (!onCurrent(s))
    return InvalidHandle;
  if (deviceOf(src, n) != current->device ||
      deviceOf(reinterpret_cast<uintptr_t>(dst), 1) != -1)
    return InvalidValue;
  std::memcpy(dst, reinterpret_cast<void *>(src), n);
  return Success;
}

CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, Stream *s) {
  REQUIRE_CONTEXT;
  if (!onCurrent(s))
    return InvalidHandle;
  if (deviceOf(dst, n) != current->device ||
      deviceOf(src, n) != current->device)
    return InvalidValue;
  std::memmove(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src), n);
  return Success;
}

CUresult cuMemcpyPeerAsync(uint64_t dst, Ctx *dstCtx, uint64_t src, Ctx *srcCtx,
                           size_t n, Stream *s) {
  REQUIRE_CONTEXT;
  if (!onCurrent(s))
    return InvalidHandle;
  if (!dstCtx || !srcCtx || deviceOf(dst, n) != dstCtx->device ||
      deviceOf(src, n) != srcCtx->device)
    return InvalidValue;
  std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src), n);
  return Success;
}

CUresult cuStreamCreate(Stream **s, unsigned flags) {
  REQUIRE_CONTEXT;
  if (flags != 1) // kiln always asks for CU_STREAM_NON_BLOCKING
    return InvalidValue;
  *s = new Stream{current};
  streams.insert(*s);
  return Success;
}

CUresult cuStreamDestroy_v2(Stream *s) {
  REQUIRE_CONTEXT;
  if (!streams.erase(s))
    return InvalidHandle;
  delete s;
  return Success;
}

// Flags: CU_EVENT_DISABLE_TIMING (2) only, as kiln asks.
CUresult cuEventCreate(Event **e, unsigned flags) {
  REQUIRE_CONTEXT;
  if (flags != 2)
    return InvalidValue;
  *e = new Event{current};
  events.insert(*e);
  return Success;
}

// The event and the stream belong to one context, the current one.
CUresult cuEventRecord(Event *e, Stream *s) {
  REQUIRE_CONTEXT;
  if (!events.count(e) || e->ctx != current || !onCurrent(s))
    return InvalidHandle;
  e->recorded = true;
  e->pending = s->pending;
  return Success;
}

// The stream is the current context's; the event may be any context's, but
// must have been recorded.
CUresult cuStreamWaitEvent(Stream *s, Event *e, unsigned flags) {
  REQUIRE_CONTEXT;
  if (!events.count(e) || !onCurrent(s) || flags != 0)
    return InvalidHandle;
  if (!e->recorded)
    return InvalidValue;
  ++eventWaits;
  if (s->pending == Success)
    s->pending = e->pending;
  return Success;
}

CUresult cuEventSynchronize(Event *e) {
  REQUIRE_CONTEXT;
  if (!events.count(e) || !e->recorded)
    return InvalidHandle;
  ++eventSyncs;
  return e->pending;
}

CUresult cuEventDestroy_v2(Event *e) {
  REQUIRE_CONTEXT;
  if (!events.erase(e))
    return InvalidHandle;
  delete e;
  return Success;
}

CUresult cuStreamSynchronize(Stream *s) {
  REQUIRE_CONTEXT;
  if (!onCurrent(s))
    return InvalidHandle;
  ++streamSyncs;
  CUresult pending = s->pending;
  s->pending = Success;
  return pending;
}

CUresult cuModuleLoadDataEx(Module **m, const void *image, unsigned count,
                            int *options, void **values) {
  REQUIRE_CONTEXT;
  char *log = nullptr;
  size_t logSize = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == 5)
      log = static_cast<char *>(values[i]);
    else if (options[i] == 6)
      logSize = reinterpret_cast<uintptr_t>(values[i]);
  }
  std::string ptx = static_cast<const char *>(image); // NUL-terminated
  if (ptx.find("FAKE_JIT_ERROR") != std::string::npos) {
    if (log && logSize)
      std::snprintf(log, logSize, "ptxas fatal   : fake syntax error\n");
    return InvalidPtx;
  }
  auto *module = new Module{current, {}};
  for (size_t at = ptx.find(".entry "); at != std::string::npos;
       at = ptx.find(".entry ", at + 1)) {
    size_t begin = at + 7, end = ptx.find_first_of("( \n", begin);
    module->entries.insert(ptx.substr(begin, end - begin));
  }
  modules.insert(module);
  *m = module;
  return Success;
}

CUresult cuModuleUnload(Module *m) {
  REQUIRE_CONTEXT;
  if (!modules.erase(m))
    return InvalidHandle;
  for (auto it = functions.begin(); it != functions.end();)
    if ((*it)->module == m) {
      delete *it;
      it = functions.erase(it);
    } else {
      ++it;
    }
  delete m;
  return Success;
}

CUresult cuModuleGetFunction(Function **f, Module *m, const char *name) {
  REQUIRE_CONTEXT;
  if (!modules.count(m) || m->ctx != current)
    return InvalidHandle;
  if (!m->entries.count(name))
    return NotFound;
  *f = new Function{m, name};
  functions.insert(*f);
  return Success;
}

CUresult cuLaunchKernel(Function *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        Stream *s, void **params, void **extra) {
  REQUIRE_CONTEXT;
  if (!functions.count(f) || f->module->ctx != current || !onCurrent(s))
    return InvalidHandle;
  if (gx < 1 || gx > (1u << 20) || gy != 1 || gz != 1 || bx != 256 || by != 1 ||
      bz != 1 || shared != 0 || !params || extra)
    return InvalidValue;
  ++launches;
  const std::string &name = f->name;
  if (CUresult emulated = launchEmulated(name, gx, bx, s, params);
      emulated != NotFound)
    return emulated;
  const uint64_t *slot = static_cast<const uint64_t *>(params[0]);
  size_t used = name == "kiln_add_one" ? 2 : name == "kiln_fault" ? 0 : 3;
  for (size_t i = 0; i < used; ++i)
    if (deviceOf(slot[i], kN * sizeof(float)) != current->device) {
      s->pending = IllegalAddress;
      return Success;
    }
  auto at = [&](size_t i) { return reinterpret_cast<float *>(slot[i]); };
  for (size_t i = 0; i < kN; ++i) {
    if (name == "kiln_add_one")
      at(1)[i] = at(0)[i] + 1.0f;
    else if (name == "kiln_add")
      at(2)[i] = at(0)[i] + at(1)[i];
    else if (name == "kiln_twice")
      at(2)[i] = at(0)[i] + at(0)[i];
    else if (name == "kiln_plus_one")
      at(1)[i] = at(2)[i] + 1.0f;
    else
      s->pending = IllegalAddress;
  }
  return Success;
}

/// Live objects: "allocations", "bytes", "contexts" (retains), "streams",
/// "events", "pinned" (host blocks), "modules"; calls so far: "launches",
/// "pinned_copies" (to a device from a pinned block), "stream_syncs",
/// "event_waits" (cuStreamWaitEvent), "event_syncs" (cuEventSynchronize).
long fake_cuda_count(const char *what) {
  LOCK;
  std::string w = what;
  if (w == "allocations")
    return long(allocations.size());
  if (w == "bytes") {
    size_t total = 0;
    for (int d = 0; d < kMaxDevices; ++d)
      total += used[d];
    return long(total);
  }
  if (w == "contexts") {
    long total = 0;
    for (const Ctx &c : contexts)
      total += c.retained;
    return total;
  }
  if (w == "streams")
    return long(streams.size());
  if (w == "events")
    return long(events.size());
  if (w == "pinned")
    return long(pinned.size());
  if (w == "pinned_copies")
    return pinnedCopies;
  if (w == "stream_syncs")
    return streamSyncs;
  if (w == "event_waits")
    return eventWaits;
  if (w == "event_syncs")
    return eventSyncs;
  if (w == "modules")
    return long(modules.size());
  if (w == "launches")
    return launches;
  if (long n = blasCount(w); n >= 0)
    return n;
  return dnnCount(w);
}

} // extern "C"
