//===- Scratch.h - part of the prelude of generated C++ ---------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: kernels' local
// tensors (a per-thread block cache) and OpenMP pinning.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/Math.h"
// kiln prelude text
// A kernel's local tensors. Blocks go back to a per-thread cache and are
// reused by the next request they fit (with at most half to spare), so a
// model run again touches no fresh pages; big blocks would otherwise be
// mmap'ed and faulted in on every call. The smallest block that fits is
// taken, of those the one released last: the most likely still in cache.
// Blocks of 2 MiB and more in huge pages, as the runtime's own (its
// runtime/HostMemory.cpp says why); KILN_HUGE_PAGES=0 turns that off.
inline void *kiln_allocate(size_t bytes) {
  static const char *setting = getenv("KILN_HUGE_PAGES");
  static const bool huge = !setting || strcmp(setting, "0") != 0;
  const size_t align = huge && bytes >= (size_t(2) << 20) ? size_t(2) << 20 : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void *data = std::aligned_alloc(align, rounded);
  if (data && align > 64)
    madvise(data, rounded, MADV_HUGEPAGE);
  return data;
}
struct kiln_scratch_cache {
  std::vector<std::pair<size_t, void *>> free; // the last released last
  ~kiln_scratch_cache() {
    for (auto &block : free)
      std::free(block.second);
  }
};
inline kiln_scratch_cache &kiln_scratch_blocks() {
  thread_local kiln_scratch_cache cache;
  return cache;
}
// Under kilnc --sanitize=address the bytes of a block past the request
// are poisoned, and a released block entirely, so that a kernel reading
// past a scratch tensor is reported even in a reused, larger block.
#if defined(__SANITIZE_ADDRESS__)
inline void kiln_poison(void *p, size_t n) { ASAN_POISON_MEMORY_REGION(p, n); }
inline void kiln_unpoison(void *p, size_t n) { ASAN_UNPOISON_MEMORY_REGION(p, n); }
#else
inline void kiln_poison(void *, size_t) {}
inline void kiln_unpoison(void *, size_t) {}
#endif
struct kiln_scratch {
  explicit kiln_scratch(size_t bytes) : size((bytes + 63) / 64 * 64) {
    std::vector<std::pair<size_t, void *>> &free = kiln_scratch_blocks().free;
    size_t best = free.size();
    for (size_t i = free.size(); i-- > 0;)
      if (free[i].first >= size && free[i].first <= 2 * size &&
          (best == free.size() || free[i].first < free[best].first))
        best = i;
    if (best < free.size()) {
      size = free[best].first;
      data = free[best].second;
      free.erase(free.begin() + best);
    } else if (!(data = kiln_allocate(size))) {
      throw std::bad_alloc();
    }
    kiln_unpoison(data, bytes);
    kiln_poison(static_cast<char *>(data) + bytes, size - bytes);
  }
  ~kiln_scratch() { release(); }
  // Hands the memory back before the end of its scope.
  void release() {
    if (data) {
      kiln_poison(data, size);
      kiln_scratch_blocks().free.emplace_back(size, data);
    }
    data = nullptr;
  }
  kiln_scratch(const kiln_scratch &) = delete;
  kiln_scratch &operator=(const kiln_scratch &) = delete;
  size_t size;
  void *data = nullptr;
};

// OpenMP's worker threads outlive a parallel loop: the runtime must stay
// loaded when this code is unloaded, or the idle threads crash the process.
static const bool kiln_openmp_pinned =
    dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;

