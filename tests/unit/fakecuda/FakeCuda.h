//===- FakeCuda.h - the fake CUDA libraries' shared state -------*- C++ -*-===//
//
// The driver (Driver.cpp), cuBLAS (Cublas.cpp) and cuDNN (Cudnn.cpp) of the
// fake CUDA library share its devices, contexts, streams and allocations,
// under one lock; each file exports its half of the C API. What the fake
// checks and how tests configure it: Driver.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TESTS_FAKECUDA_H
#define KILN_TESTS_FAKECUDA_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace fake {
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

extern std::recursive_mutex mutex;
extern bool initialized;
extern int deviceCount;
extern size_t memory[kMaxDevices], used[kMaxDevices];
extern Ctx contexts[kMaxDevices];
extern std::map<uintptr_t, Allocation> allocations;
extern std::set<Stream *> streams;
extern std::set<Event *> events;
extern std::map<uintptr_t, size_t> pinned;
extern long pinnedCopies;
extern long streamSyncs, eventWaits, eventSyncs;
extern std::set<Module *> modules;
extern std::set<Function *> functions;
extern long launches;
extern thread_local Ctx *current;

#define LOCK std::lock_guard<std::recursive_mutex> lock(mutex)
#define REQUIRE_CONTEXT                                                        \
  LOCK;                                                                        \
  if (!initialized)                                                            \
    return NotInitialized;                                                     \
  if (!current || current->retained <= 0)                                      \
    return InvalidContext;

/// The device whose live allocation holds [p, p + bytes); -1 if none.
int deviceOf(uintptr_t p, size_t bytes);
/// Whether `s` is a live stream of the current context.
bool onCurrent(Stream *s);

/// The cuBLAS and cuDNN halves' counts for fake_cuda_count ("blas",
/// "gemms"; "dnn", "dnn_descriptors", "convs", "convs_fused",
/// "convs_not_fma"); -1 for a name they do not count.
long blasCount(const std::string &what);
long dnnCount(const std::string &what);
} // namespace fake

#endif // KILN_TESTS_FAKECUDA_H
