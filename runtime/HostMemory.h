//===- HostMemory.h - host allocations for tensors and temps ---*- C++ -*-===//
//
// One home for how the runtime takes host memory. Blocks of 2 MiB and more
// are aligned to 2 MiB and marked MADV_HUGEPAGE, so that where transparent
// huge pages are enabled only on request (the default of many
// distributions: "madvise") a model's weights and its large temps sit in
// huge pages: a kernel streaming a 9 MB weight then takes one TLB entry per
// 2 MiB instead of one per 4 KiB, and the hardware prefetcher does not stop
// at every 4 KiB page boundary (docs/performance-log.md, step 50). Smaller
// blocks are 64-byte aligned. KILN_HUGE_PAGES=0 in the environment turns
// the advice off. Free with std::free.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HOSTMEMORY_H
#define KILN_RUNTIME_HOSTMEMORY_H

#include <cstddef>

namespace kiln::host {

/// At least `bytes` (rounded up to the alignment) of uninitialised memory,
/// or nullptr when the system has none.
void *allocate(size_t bytes);

/// Marks `bytes` at `data` unreadable (poison) or readable again (unpoison)
/// for AddressSanitizer, so that a kernel reading past its tensor into the
/// rest of a block is reported; nothing in a build without it.
void poison(void *data, size_t bytes);
void unpoison(void *data, size_t bytes);

} // namespace kiln::host

#endif // KILN_RUNTIME_HOSTMEMORY_H
