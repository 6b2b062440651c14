//===- FakeCuda.cpp - a fake CUDA driver library for the runtime tests ----===//
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
//===----------------------------------------------------------------------===//

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

namespace {
using CUresult = int;
constexpr int kMaxDevices = 8;
constexpr size_t kN = 1000;

enum : CUresult {
  Success = 0,
  InvalidValue = 1,
  OutOfMemory = 2,
  NotInitialized = 3,
  NoDevice = 100,
  InvalidDevice = 101,
  InvalidPtx = 218,
  InvalidContext = 201,
  InvalidHandle = 400,
  NotFound = 500,
  IllegalAddress = 700,
};

struct Ctx {
  int device = 0;
  int retained = 0;
};
struct Stream {
  Ctx *ctx;
  CUresult pending = Success;
};
// An event: recorded on a stream of its context; streams run synchronously
// here, so it completes at once, carrying the stream's pending error (a
// fault reaches whoever waits on it, as a sticky error would).
struct Event {
  Ctx *ctx;
  bool recorded = false;
  CUresult pending = Success;
};
struct Module {
  Ctx *ctx;
  std::set<std::string> entries;
};
struct Function {
  Module *module;
  std::string name;
};
struct Allocation {
  int device;
  size_t size;
};

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

#define LOCK std::lock_guard<std::recursive_mutex> lock(mutex)
#define REQUIRE_CONTEXT                                                        \
  LOCK;                                                                        \
  if (!initialized)                                                            \
    return NotInitialized;                                                     \
  if (!current || current->retained <= 0)                                      \
    return InvalidContext;

/// The device whose live allocation holds [p, p + bytes); -1 if none.
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

enum { BlasNotInitialized = 1, BlasInvalidValue = 7, BlasExecutionFailed = 13 };
struct BlasHandle {
  Ctx *ctx;
  Stream *stream;
};
std::set<BlasHandle *> blasHandles;
long gemms = 0;

// The fake cuDNN's objects. Its heuristic offers, in order: 6 in tensor-op
// math and 5 in the default math (either may use TF32, which kiln must
// not take), 7, which is not supported, 1, which needs kFakeAlgo1Bytes of
// workspace (more than kiln gives), then 0 and 2, which need
// kFakeAlgo0Bytes. All that run compute the same thing here, except that
// the fused call refuses 0. Statuses are cuDNN 9's.
enum {
  DnnSuccess = 0,
  DnnNotInitialized = 1001,
  DnnBadParam = 2000,
  DnnNotSupported = 3000,
  DnnFailed = 5000
};
constexpr size_t kFakeAlgo0Bytes = 256, kFakeAlgo1Bytes = size_t(1) << 40;
struct DnnHandle {
  Ctx *ctx;
  Stream *stream;
};
struct DnnDescriptor {
  int dims[4] = {0, 0, 0, 0};       // tensor, filter
  int conv[6] = {0, 0, 0, 0, 0, 0}; // pad h, w, stride h, w, dilation h, w
  int groups = 1, math = 0;
  bool set = false;
};
struct DnnAlgoPerf { // cudnnConvolutionFwdAlgoPerf_t
  int algo, status;
  float time;
  size_t memory;
  int determinism, mathType, reserved[3];
};
struct DnnActivation {
  int mode = -1, nan = -1;
  double coef = 0;
};
std::set<DnnHandle *> dnnHandles;
std::set<DnnDescriptor *> dnnDescriptors;
std::set<DnnActivation *> dnnActivations;
long convs = 0, convsNotFma = 0, convsFused = 0;

size_t elements(const DnnDescriptor *d) {
  return size_t(d->dims[0]) * d->dims[1] * d->dims[2] * d->dims[3];
}

/// Column-major C = alpha op(A) op(B) + beta C for each batch (cuBLAS's
/// definition), after checking the handle, its stream and every extent.
template <typename T>
int fakeGemm(BlasHandle *h, int opA, int opB, int m, int n, int k,
             const T *alpha, const T *A, int lda, long long sA, const T *B,
             int ldb, long long sB, const T *beta, T *C, int ldc, long long sC,
             int batch) {
  LOCK;
  if (!blasHandles.count(h) || !h->stream || current != h->ctx)
    return BlasNotInitialized;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || (opA != 0 && opA != 1) ||
      (opB != 0 && opB != 1) || lda < (opA ? k : m) || ldb < (opB ? n : k) ||
      ldc < m)
    return BlasInvalidValue;
  if (!m || !n || !batch)
    return 0;
  auto fits = [&](const void *p, long long stride, long long last) {
    size_t bytes = size_t((batch - 1) * stride + last + 1) * sizeof(T);
    return deviceOf(uintptr_t(p), bytes) == h->ctx->device;
  };
  long long lastA = opA ? (k - 1) + (long long)(m - 1) * lda
                        : (m - 1) + (long long)(k - 1) * lda;
  long long lastB = opB ? (n - 1) + (long long)(k - 1) * ldb
                        : (k - 1) + (long long)(n - 1) * ldb;
  if ((k && (!fits(A, sA, lastA) || !fits(B, sB, lastB))) ||
      !fits(C, sC, (m - 1) + (long long)(n - 1) * ldc))
    return BlasExecutionFailed;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T sum = 0;
        for (int l = 0; l < k; ++l)
          sum += (opA ? A[b * sA + l + i * lda] : A[b * sA + i + l * lda]) *
                 (opB ? B[b * sB + j + l * ldb] : B[b * sB + l + j * ldb]);
        T &c = C[b * sC + i + (long long)j * ldc];
        c = *alpha * sum + (*beta == 0 ? T(0) : *beta * c);
      }
  ++gemms;
  return 0;
}
} // namespace

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
               emulated, gemms, convs, convsFused, eventWaits, pinnedCopies);
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
  if (w == "blas")
    return long(blasHandles.size());
  if (w == "gemms")
    return gemms;
  if (w == "dnn")
    return long(dnnHandles.size());
  if (w == "dnn_descriptors")
    return long(dnnDescriptors.size() + dnnActivations.size());
  if (w == "convs_fused")
    return convsFused;
  if (w == "convs")
    return convs;
  if (w == "convs_not_fma")
    return convsNotFma;
  return -1;
}

// A fake cuBLAS in the same library ($KILN_CUBLAS points here too): handles
// belong to the context current at creation, GEMMs run on the handle's
// stream in column-major order, and every matrix must lie in a live
// allocation of that context's device.

int cublasCreate_v2(BlasHandle **h) {
  LOCK;
  if (!initialized || !current || current->retained <= 0)
    return BlasNotInitialized;
  *h = new BlasHandle{current, nullptr};
  blasHandles.insert(*h);
  return 0;
}

int cublasDestroy_v2(BlasHandle *h) {
  LOCK;
  if (!blasHandles.erase(h))
    return BlasNotInitialized;
  delete h;
  return 0;
}

int cublasSetStream_v2(BlasHandle *h, Stream *s) {
  LOCK;
  if (!blasHandles.count(h) || !streams.count(s) || s->ctx != h->ctx)
    return BlasInvalidValue;
  h->stream = s;
  return 0;
}

const char *cublasGetStatusString(int status) {
  switch (status) {
  case 0:
    return "CUBLAS_STATUS_SUCCESS";
  case BlasNotInitialized:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case BlasInvalidValue:
    return "CUBLAS_STATUS_INVALID_VALUE";
  default:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
}

int cublasSgemmStridedBatched(BlasHandle *h, int opA, int opB, int m, int n,
                              int k, const float *alpha, const float *A,
                              int lda, long long sA, const float *B, int ldb,
                              long long sB, const float *beta, float *C,
                              int ldc, long long sC, int batch) {
  return fakeGemm(h, opA, opB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C,
                  ldc, sC, batch);
}

int cublasDgemmStridedBatched(BlasHandle *h, int opA, int opB, int m, int n,
                              int k, const double *alpha, const double *A,
                              int lda, long long sA, const double *B, int ldb,
                              long long sB, const double *beta, double *C,
                              int ldc, long long sC, int batch) {
  return fakeGemm(h, opA, opB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C,
                  ldc, sC, batch);
}

// A fake cuDNN in the same library ($KILN_CUDNN points here too), the
// legacy convolution API kiln uses: handles belong to the context current
// at creation; a conv runs on the handle's stream, NCHW, every tensor and
// the workspace in live allocations of that context's device, with the
// descriptors' shapes checked as cuDNN checks them.

int cudnnCreate(DnnHandle **h) {
  LOCK;
  if (!initialized || !current || current->retained <= 0)
    return DnnNotInitialized;
  *h = new DnnHandle{current, nullptr};
  dnnHandles.insert(*h);
  return DnnSuccess;
}

int cudnnDestroy(DnnHandle *h) {
  LOCK;
  if (!dnnHandles.erase(h))
    return DnnBadParam;
  delete h;
  return DnnSuccess;
}

int cudnnSetStream(DnnHandle *h, Stream *s) {
  LOCK;
  if (!dnnHandles.count(h) || !streams.count(s) || s->ctx != h->ctx)
    return DnnBadParam;
  h->stream = s;
  return DnnSuccess;
}

const char *cudnnGetErrorString(int status) {
  switch (status) {
  case DnnSuccess:
    return "CUDNN_STATUS_SUCCESS";
  case DnnNotInitialized:
    return "CUDNN_STATUS_NOT_INITIALIZED";
  case DnnBadParam:
    return "CUDNN_STATUS_BAD_PARAM";
  case DnnNotSupported:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  default:
    return "CUDNN_STATUS_EXECUTION_FAILED";
  }
}

static int createDescriptor(DnnDescriptor **d) {
  LOCK;
  *d = new DnnDescriptor;
  dnnDescriptors.insert(*d);
  return DnnSuccess;
}

static int destroyDescriptor(DnnDescriptor *d) {
  LOCK;
  if (!dnnDescriptors.erase(d))
    return DnnBadParam;
  delete d;
  return DnnSuccess;
}

static int setDims(DnnDescriptor *d, int n, int c, int h, int w) {
  LOCK;
  if (!dnnDescriptors.count(d) || n < 1 || c < 1 || h < 1 || w < 1)
    return DnnBadParam;
  *d = DnnDescriptor{{n, c, h, w}, {}, 1, 0, true};
  return DnnSuccess;
}

int cudnnCreateTensorDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyTensorDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}
int cudnnCreateFilterDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyFilterDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}
int cudnnCreateConvolutionDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyConvolutionDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}

// Format NCHW (0) and data type float (0) only.
int cudnnSetTensor4dDescriptor(DnnDescriptor *d, int format, int type, int n,
                               int c, int h, int w) {
  return format || type ? DnnBadParam : setDims(d, n, c, h, w);
}

int cudnnSetFilter4dDescriptor(DnnDescriptor *d, int type, int format, int k,
                               int c, int h, int w) {
  return format || type ? DnnBadParam : setDims(d, k, c, h, w);
}

// Cross-correlation (mode 1) in float (0) only.
int cudnnSetConvolution2dDescriptor(DnnDescriptor *d, int padH, int padW,
                                    int strideH, int strideW, int dilationH,
                                    int dilationW, int mode, int type) {
  LOCK;
  if (!dnnDescriptors.count(d) || padH < 0 || padW < 0 || strideH < 1 ||
      strideW < 1 || dilationH < 1 || dilationW < 1 || mode != 1 || type)
    return DnnBadParam;
  *d = DnnDescriptor{
      {}, {padH, padW, strideH, strideW, dilationH, dilationW}, 1, 0, true};
  return DnnSuccess;
}

int cudnnSetConvolutionGroupCount(DnnDescriptor *d, int groups) {
  LOCK;
  if (!dnnDescriptors.count(d) || !d->set || groups < 1)
    return DnnBadParam;
  d->groups = groups;
  return DnnSuccess;
}

int cudnnSetConvolutionMathType(DnnDescriptor *d, int math) {
  LOCK;
  if (!dnnDescriptors.count(d) || !d->set || math < 0 || math > 3)
    return DnnBadParam;
  d->math = math;
  return DnnSuccess;
}

/// The output dims of conv `c` of `x` by `w`, or false when they do not
/// make one.
static bool convOutput(const DnnDescriptor *x, const DnnDescriptor *w,
                       const DnnDescriptor *c, int out[4]) {
  if (!x->set || !w->set || !c->set || x->dims[1] != w->dims[1] * c->groups ||
      w->dims[0] % c->groups)
    return false;
  out[0] = x->dims[0];
  out[1] = w->dims[0];
  for (int i = 0; i < 2; ++i) {
    int window = c->conv[4 + i] * (w->dims[2 + i] - 1) + 1;
    int span = x->dims[2 + i] + 2 * c->conv[i] - window;
    if (span < 0)
      return false;
    out[2 + i] = span / c->conv[2 + i] + 1;
  }
  return true;
}

/// The workspace `algo` needs for a conv into `y`: 0 and 2 need
/// kFakeAlgo0Bytes, or 4 bytes per output when that is less (workspaces
/// scale with the problem: a tiny conv must not need more than kiln's
/// im2col-sized slot).
static size_t fakeWorkspace(int algo, const DnnDescriptor *y) {
  size_t scaled = std::min(kFakeAlgo0Bytes, 4 * elements(y));
  return algo == 1 ? kFakeAlgo1Bytes : algo == 0 || algo == 2 ? scaled : 0;
}

int cudnnGetConvolutionForwardAlgorithm_v7(DnnHandle *h, DnnDescriptor *x,
                                           DnnDescriptor *w, DnnDescriptor *c,
                                           DnnDescriptor *y, int requested,
                                           int *returned, DnnAlgoPerf *perf) {
  LOCK;
  int out[4];
  if (!dnnHandles.count(h) || current != h->ctx)
    return DnnNotInitialized;
  if (!dnnDescriptors.count(x) || !dnnDescriptors.count(w) ||
      !dnnDescriptors.count(c) || !dnnDescriptors.count(y) || requested < 1 ||
      !convOutput(x, w, c, out) || std::memcmp(out, y->dims, sizeof out))
    return DnnBadParam;
  DnnAlgoPerf offered[6] = {
      {6, DnnSuccess, 0.1f, 0, 1, 1, {}},
      {5, DnnSuccess, 0.2f, 0, 1, 0, {}},
      {7, DnnNotSupported, -1.0f, 0, 1, c->math, {}},
      {1, DnnSuccess, 0.5f, kFakeAlgo1Bytes, 1, c->math, {}},
      {0, DnnSuccess, 1.0f, fakeWorkspace(0, y), 1, c->math, {}},
      {2, DnnSuccess, 2.0f, fakeWorkspace(2, y), 1, c->math, {}}};
  *returned = requested < 6 ? requested : 6;
  std::memcpy(perf, offered, sizeof(DnnAlgoPerf) * size_t(*returned));
  return DnnSuccess;
}

int cudnnGetConvolutionForwardWorkspaceSize(DnnHandle *h, DnnDescriptor *x,
                                            DnnDescriptor *w, DnnDescriptor *c,
                                            DnnDescriptor *y, int algo,
                                            size_t *bytes) {
  LOCK;
  if (!dnnHandles.count(h) || current != h->ctx)
    return DnnNotInitialized;
  if (!dnnDescriptors.count(x) || !dnnDescriptors.count(w) ||
      !dnnDescriptors.count(c) || !dnnDescriptors.count(y))
    return DnnBadParam;
  if (algo == 7)
    return DnnNotSupported;
  *bytes = fakeWorkspace(algo, y);
  return DnnSuccess;
}

/// Checks a conv call's handle, descriptors, algorithm, workspace and
/// tensors (each a live allocation of the handle's device), then computes
/// the conv into `sums` (y's elements); a cuDNN status.
static int convolve(DnnHandle *h, DnnDescriptor *xd, const float *x,
                    DnnDescriptor *wd, const float *w, DnnDescriptor *cd,
                    int algo, void *workspace, size_t workspaceBytes,
                    DnnDescriptor *yd, float *y, std::vector<float> &sums) {
  if (!dnnHandles.count(h) || !h->stream || current != h->ctx)
    return DnnNotInitialized;
  int out[4];
  if (!dnnDescriptors.count(xd) || !dnnDescriptors.count(wd) ||
      !dnnDescriptors.count(cd) || !dnnDescriptors.count(yd) ||
      !convOutput(xd, wd, cd, out) || std::memcmp(out, yd->dims, sizeof out) ||
      algo < 0 || algo > 7)
    return DnnBadParam;
  if (algo == 7)
    return DnnNotSupported;
  size_t need = fakeWorkspace(algo, yd);
  int device = h->ctx->device;
  if (workspaceBytes < need || deviceOf(uintptr_t(workspace), need) != device ||
      deviceOf(uintptr_t(x), elements(xd) * 4) != device ||
      deviceOf(uintptr_t(w), elements(wd) * 4) != device ||
      deviceOf(uintptr_t(y), elements(yd) * 4) != device)
    return DnnFailed;
  const int *X = xd->dims, *W = wd->dims, *c = cd->conv;
  int groups = cd->groups, mg = W[0] / groups;
  sums.assign(elements(yd), 0.0f);
  for (int n = 0; n < out[0]; ++n)
    for (int m = 0; m < out[1]; ++m)
      for (int oh = 0; oh < out[2]; ++oh)
        for (int ow = 0; ow < out[3]; ++ow) {
          float sum = 0;
          for (int k = 0; k < W[1]; ++k)
            for (int i = 0; i < W[2]; ++i)
              for (int j = 0; j < W[3]; ++j) {
                int ih = oh * c[2] + i * c[4] - c[0],
                    iw = ow * c[3] + j * c[5] - c[1];
                if (ih < 0 || iw < 0 || ih >= X[2] || iw >= X[3])
                  continue;
                int ch = m / mg * W[1] + k;
                sum += x[((size_t(n) * X[1] + ch) * X[2] + ih) * X[3] + iw] *
                       w[((size_t(m) * W[1] + k) * W[2] + i) * W[3] + j];
              }
          sums[((size_t(n) * out[1] + m) * out[2] + oh) * out[3] + ow] = sum;
        }
  ++convs;
  if (cd->math != 3 || algo == 5 || algo == 6) // CUDNN_FMA_MATH: no TF32
    ++convsNotFma;
  return DnnSuccess;
}

int cudnnConvolutionForward(DnnHandle *h, const float *alpha, DnnDescriptor *xd,
                            const float *x, DnnDescriptor *wd, const float *w,
                            DnnDescriptor *cd, int algo, void *workspace,
                            size_t workspaceBytes, const float *beta,
                            DnnDescriptor *yd, float *y) {
  LOCK;
  std::vector<float> sums;
  if (int status = convolve(h, xd, x, wd, w, cd, algo, workspace,
                            workspaceBytes, yd, y, sums))
    return status;
  for (size_t i = 0; i < sums.size(); ++i)
    y[i] = *alpha * sums[i] + (*beta == 0 ? 0.0f : *beta * y[i]);
  return DnnSuccess;
}

int cudnnCreateActivationDescriptor(DnnActivation **a) {
  LOCK;
  *a = new DnnActivation;
  dnnActivations.insert(*a);
  return DnnSuccess;
}

int cudnnDestroyActivationDescriptor(DnnActivation *a) {
  LOCK;
  if (!dnnActivations.erase(a))
    return DnnBadParam;
  delete a;
  return DnnSuccess;
}

// Modes sigmoid (0) to swish (6); NaN propagation 0 or 1.
int cudnnSetActivationDescriptor(DnnActivation *a, int mode, int nan,
                                 double coef) {
  LOCK;
  if (!dnnActivations.count(a) || mode < 0 || mode > 6 || nan < 0 || nan > 1)
    return DnnBadParam;
  *a = {mode, nan, coef};
  return DnnSuccess;
}

// y = act(alpha1 conv(x) + alpha2 z + bias), ReLU only here. It refuses
// algorithm 0 as not supported (the real one may refuse some algorithms for
// the fused call), and z (when alpha2 is not 0) and the [1, C, 1, 1] bias
// must be live allocations of the device.
int cudnnConvolutionBiasActivationForward(
    DnnHandle *h, const float *alpha1, DnnDescriptor *xd, const float *x,
    DnnDescriptor *wd, const float *w, DnnDescriptor *cd, int algo,
    void *workspace, size_t workspaceBytes, const float *alpha2,
    DnnDescriptor *zd, const float *z, DnnDescriptor *bd, const float *bias,
    DnnActivation *ad, DnnDescriptor *yd, float *y) {
  LOCK;
  if (!dnnActivations.count(ad) || ad->mode != 1 || !dnnDescriptors.count(zd) ||
      !dnnDescriptors.count(bd) || !dnnDescriptors.count(yd) ||
      std::memcmp(zd->dims, yd->dims, sizeof zd->dims) || bd->dims[0] != 1 ||
      bd->dims[1] != yd->dims[1] || bd->dims[2] != 1 || bd->dims[3] != 1)
    return DnnBadParam;
  if (algo == 0)
    return DnnNotSupported;
  int device = h && dnnHandles.count(h) ? h->ctx->device : -1;
  if (deviceOf(uintptr_t(bias), elements(bd) * 4) != device ||
      (*alpha2 != 0 && deviceOf(uintptr_t(z), elements(zd) * 4) != device))
    return DnnFailed;
  std::vector<float> sums;
  if (int status = convolve(h, xd, x, wd, w, cd, algo, workspace,
                            workspaceBytes, yd, y, sums))
    return status;
  size_t plane = size_t(yd->dims[2]) * yd->dims[3];
  for (size_t i = 0; i < sums.size(); ++i) {
    float v = *alpha1 * sums[i] + bias[i / plane % yd->dims[1]];
    if (*alpha2 != 0)
      v += *alpha2 * z[i];
    y[i] = v != v || v > 0 ? v : 0.0f;
  }
  ++convsFused;
  return DnnSuccess;
}

} // extern "C"
