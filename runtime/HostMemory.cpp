//===- HostMemory.cpp - host allocations for tensors and temps ------------===//

#include "runtime/HostMemory.h"

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace kiln::host {

namespace {
bool hugePagesWanted() {
  const char *setting = std::getenv("KILN_HUGE_PAGES");
  return !setting || std::strcmp(setting, "0") != 0;
}
} // namespace

void *allocate(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  static const bool huge = hugePagesWanted();
  size_t align = huge && bytes >= kHuge ? kHuge : 64;
  size_t rounded = bytes < align ? align : (bytes + align - 1) / align * align;
  if (rounded < bytes)
    return nullptr;
  void *data = std::aligned_alloc(align, rounded);
  // Advice only: where huge pages are off or used up the block still works
  // in small pages.
  if (data && align == kHuge)
    madvise(data, rounded, MADV_HUGEPAGE);
  // The rounding is not the caller's (a kernel indexing a 1-element tensor
  // as a longer one reads it).
  if (data)
    poison(static_cast<char *>(data) + bytes, rounded - bytes);
  return data;
}

void poison(void *data, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_POISON_MEMORY_REGION(data, bytes);
#else
  (void)data, (void)bytes;
#endif
}

void unpoison(void *data, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(data, bytes);
#else
  (void)data, (void)bytes;
#endif
}

} // namespace kiln::host
