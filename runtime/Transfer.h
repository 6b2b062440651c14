//===- Transfer.h - moving bytes between host and devices ---------*- C++
//-*-===//
//
// Every byte the runtime moves (inputs staged onto devices, constants
// uploaded at load, copy steps, outputs read back) goes through transfer():
// host to host is a memcpy; anything touching a cuda device is an
// asynchronous CUDA copy on a stream of a Streams set, which the caller
// synchronises before it uses the bytes or releases the memory. A large copy
// from the host to a device goes through a pinned (page-locked) staging
// block the Streams set holds until it is synchronised: the DMA then runs
// asynchronously, where from pageable memory the driver would first wait
// for the stream.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRANSFER_H
#define KILN_RUNTIME_TRANSFER_H

#include "runtime/Cuda.h"
#include "runtime/Device.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln::transfer {

/// The CUDA streams that work of one thread uses: one per cuda device, taken
/// from the device's pool on first use. The destructor waits for them
/// (ignoring errors: it runs while unwinding) and returns them to the pool,
/// so declare it after the buffers its work uses.
class Streams {
public:
  Streams() = default;
  ~Streams();
  Streams(const Streams &) = delete;
  Streams &operator=(const Streams &) = delete;

  /// The stream of `device`, a cuda device.
  cuda::CUstream of(device::Device &device);
  /// Waits for every stream; throws the first error, `what` saying what
  /// was running ("running the plan"). Staging blocks go back to their
  /// contexts once their streams are done.
  void synchronize(const std::string &what);
  /// Keeps the pinned `block` of `context` until the streams are done.
  void stage(cuda::Context *context, void *block, size_t bytes) {
    staged_.push_back({context, block, bytes});
    stagedBytes_ += bytes;
  }
  /// The bytes of the pinned blocks held now.
  size_t stagedBytes() const { return stagedBytes_; }

private:
  struct Staged {
    cuda::Context *context;
    void *block;
    size_t bytes;
  };
  void releaseStaged();
  std::vector<std::pair<cuda::Context *, cuda::CUstream>> held_;
  std::vector<Staged> staged_;
  size_t stagedBytes_ = 0;
};

/// The cuda device on whose stream copy() enqueues a copy from `from` to
/// `to` (the target's when it is a cuda device, else the source's);
/// nullptr when neither is one.
device::Device *streamDevice(device::Device *to, device::Device *from);

/// Copies `bytes` from `src` to `dst`. `from` and `to` are the devices the
/// memory is on, nullptr for plain host memory (the caller's tensors, the
/// mapped file).
void copy(void *dst, device::Device *to, const void *src, device::Device *from,
          size_t bytes, Streams &streams);

inline cuda::CUdeviceptr devicePointer(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer);
}

} // namespace kiln::transfer

#endif // KILN_RUNTIME_TRANSFER_H
