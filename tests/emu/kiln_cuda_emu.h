//===- kiln_cuda_emu.h - run kiln's CUDA C kernels on the host
//-------------===//
//
// Force-included (g++ -include) ahead of the CUDA source kilnc --emit=cuda
// prints, this header makes that source an ordinary C++ translation unit
// whose __global__ functions run on the host: every CUDA thread of a block
// is a fiber (ucontext), so __syncthreads and warp shuffles wait for the
// rest of their block or warp, as on a GPU; blocks run one after another,
// so __shared__ (static here) is the block's own memory. A kernel that never
// synchronises (known from its text, see cuda_emu.py) runs its threads as
// plain calls instead. The emulator is strict where hardware is undefined:
// a shuffle with a partial mask, a barrier that part of the warp or block
// never reaches (an exited thread, a divergent barrier) is an error naming
// the block and thread, not a hang.
//
// cuda_emu.py appends a trampoline per kernel, which the fake driver
// (tests/unit/fakecuda/Driver.cpp, $FAKE_CUDA_KERNELS) calls from
// cuLaunchKernel. Nothing here is used by kiln itself: it is how CI runs the
// generated CUDA kernels without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CUDA_EMU_H
#define KILN_CUDA_EMU_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h> // the C names (isinf, signbit) in the global namespace
#include <string>
#include <ucontext.h>
#include <vector>

// NVRTC has no system headers: kiln's prelude defines these itself (int64_t
// as long long, as NVRTC's int64_t is). Its definitions win here too.
#define int64_t kiln_emu_int64_t
#define uint64_t kiln_emu_uint64_t
#undef INT64_C
#undef NAN
#undef INFINITY

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
// Blocks run one at a time: a static is the running block's shared memory.
#define __shared__ static

struct kiln_emu_uint3 {
  unsigned x, y, z;
};

namespace kiln_emu {

enum State { Ready, AtWarpBarrier, AtBlockBarrier, Done };

struct Thread {
  kiln_emu_uint3 idx;
  unsigned linear;
  State state;
  unsigned long long shuffled; // the value a lane offers to its warp's shuffle
  ucontext_t context;
};

struct Grid {
  kiln_emu_uint3 blockIdx{0, 1, 1}, blockDim{1, 1, 1}, gridDim{1, 1, 1};
  std::vector<Thread> threads;
  std::vector<std::vector<char>> stacks;
  Thread *current = nullptr;
  bool fibers = false;
  ucontext_t scheduler;
  void (*body)(void *) = nullptr;
  void *arg = nullptr;
};

static Grid grid;

[[noreturn]] inline void fail(const std::string &what) {
  // The fake driver reports it; nothing after it in this launch runs.
  std::fprintf(stderr, "kiln-cuda-emu: block %u thread %u: %s\n",
               grid.blockIdx.x, grid.current ? grid.current->linear : 0,
               what.c_str());
  std::abort();
}

/// Parks the current fiber at a barrier until the scheduler releases it.
inline void wait(State at) {
  if (!grid.fibers)
    fail("the kernel synchronises, but cuda_emu.py found no __syncthreads "
         "or __shfl in its text");
  Thread *self = grid.current;
  self->state = at;
  swapcontext(&self->context, &grid.scheduler);
  grid.current = self;
}

inline void entry() {
  grid.body(grid.arg);
  grid.current->state = Done;
  // uc_link returns to the scheduler.
}

/// Releases the barriers every member has reached; an error where some
/// member can never reach its barrier.
inline bool release(unsigned count) {
  bool any = false;
  unsigned atBlock = 0, done = 0;
  for (unsigned t = 0; t < count; ++t) {
    atBlock += grid.threads[t].state == AtBlockBarrier;
    done += grid.threads[t].state == Done;
  }
  for (unsigned w = 0; w < count; w += 32) {
    unsigned end = std::min(count, w + 32), at = 0, ready = 0;
    for (unsigned t = w; t < end; ++t) {
      at += grid.threads[t].state == AtWarpBarrier;
      ready += grid.threads[t].state == Ready;
    }
    if (at == end - w) {
      for (unsigned t = w; t < end; ++t)
        grid.threads[t].state = Ready;
      any = true;
    } else if (at && !ready) {
      grid.current = &grid.threads[w];
      fail("a warp shuffle that part of warp " + std::to_string(w / 32) +
           " never reaches (exited or at __syncthreads)");
    }
  }
  if (atBlock && atBlock == count) {
    for (unsigned t = 0; t < count; ++t)
      grid.threads[t].state = Ready;
    any = true;
  } else if (atBlock && atBlock + done == count && done) {
    fail("__syncthreads that " + std::to_string(done) +
         " exited threads of the block never reach");
  }
  return any;
}

/// Runs `body` as every thread of a grid of `blocks` x `threads`.
inline void launch(unsigned blocks, unsigned threads, bool sync,
                   void (*body)(void *), void *arg) {
  grid.gridDim = {blocks, 1, 1};
  grid.blockDim = {threads, 1, 1};
  grid.threads.assign(threads, Thread());
  grid.fibers = sync;
  grid.body = body;
  grid.arg = arg;
  constexpr size_t kStack = 64 * 1024;
  if (sync && grid.stacks.size() < threads)
    grid.stacks.resize(threads, std::vector<char>(kStack));
  for (unsigned b = 0; b < blocks; ++b) {
    grid.blockIdx = {b, 0, 0};
    for (unsigned t = 0; t < threads; ++t) {
      Thread &th = grid.threads[t];
      th.idx = {t, 0, 0};
      th.linear = t;
      th.state = Ready;
      if (!sync) {
        grid.current = &th;
        body(arg);
        continue;
      }
      getcontext(&th.context);
      th.context.uc_stack.ss_sp = grid.stacks[t].data();
      th.context.uc_stack.ss_size = kStack;
      th.context.uc_link = &grid.scheduler;
      makecontext(&th.context, entry, 0);
    }
    if (!sync)
      continue;
    for (;;) {
      bool ran = false, live = false;
      for (unsigned t = 0; t < threads; ++t) {
        Thread &th = grid.threads[t];
        live |= th.state != Done;
        if (th.state != Ready)
          continue;
        grid.current = &th;
        swapcontext(&grid.scheduler, &th.context);
        ran = true;
      }
      if (!live)
        break;
      if (!release(threads) && !ran) {
        bool left = false;
        for (unsigned t = 0; t < threads; ++t)
          left |= grid.threads[t].state != Done;
        if (!left)
          break;
        fail("no thread of the block can go on");
      }
    }
  }
  grid.current = nullptr;
}

} // namespace kiln_emu

#define threadIdx (kiln_emu::grid.current->idx)
#define blockIdx (kiln_emu::grid.blockIdx)
#define blockDim (kiln_emu::grid.blockDim)
#define gridDim (kiln_emu::grid.gridDim)
#define warpSize 32

inline void __syncthreads() { kiln_emu::wait(kiln_emu::AtBlockBarrier); }

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  using namespace kiln_emu;
  if (mask != 0xffffffffu || width != 32)
    fail("only full-warp shuffles are emulated");
  Thread *self = grid.current;
  std::memcpy(&self->shuffled, &value, sizeof(T));
  wait(AtWarpBarrier); // every lane has offered its value
  T result = value;
  unsigned lane = self->linear % 32;
  if (lane + delta < 32)
    std::memcpy(&result, &grid.threads[self->linear + delta].shuffled,
                sizeof(T));
  wait(AtWarpBarrier); // every lane has read before any offers again
  return result;
}

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

#endif // KILN_CUDA_EMU_H
