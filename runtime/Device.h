//===- Device.h - concrete devices: names, memory, streams --------*- C++
//-*-===//
//
// The devices a loaded plan's roles are bound to (docs/devices.md):
//
//   cpu    the host; its kernels may read the caller's buffers directly.
//   sim:N  a host-memory test device: same kernels, its own allocator (with
//          an optional capacity) and its own streams; data enters and leaves
//          it only through copies.
//   cuda:N  a GPU through the CUDA driver (runtime/Cuda.h): device memory
//          from a caching allocator, PTX kernels; cuda:auto is resolved at
//          bind time to the cuda:N with the most free memory.
//
// What distinguishes the kinds is their row in DeviceKinds.cpp and where
// their memory comes from (a Memory: the host pool, or a CUDA context's
// caching allocator). Every Device counts the bytes it has handed out
// (current and peak) and owns, once started, two streams: a compute stream and
// a copy stream, each a worker thread running closures in FIFO order (for a
// cuda device the worker enqueues CUDA work and waits for it).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/DeviceKinds.h"

namespace kiln {
struct LoadOptions;
} // namespace kiln

namespace kiln::cuda {
class Context;
struct Driver;
} // namespace kiln::cuda

namespace kiln::device {

/// A device name: "cpu", "sim:N", "cuda:N" or "cuda:auto".
struct Name {
  Kind kind = Kind::Cpu;
  /// The ordinal; -1 for cpu and cuda:auto.
  long ordinal = -1;
  /// The canonical spelling ("sim:3").
  std::string text;
};

/// A device of a plan as the compiler numbered it.
struct Role {
  std::string name; // the device it was compiled for, canonical ("sim:1")
  Kind kind;
};

/// Parses a device name; nullopt when it is not one.
std::optional<Name> parseName(const std::string &text);

/// Parses a device name that is to be bound, throwing kiln::Error when it is
/// unknown.
Name parseBindable(const std::string &text);

/// A worker thread running closures in the order they were enqueued.
/// Closures must not throw. The destructor runs what is queued, then joins.
class Stream {
public:
  Stream();
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  void enqueue(std::function<void()> task);

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

/// Where a device's memory comes from.
class Memory {
public:
  virtual ~Memory() = default;
  /// `bytes` of memory, not zeroed; throws kiln::Error when there is none
  /// (`inUse`: the bytes the device has handed out, for the message).
  virtual void *allocate(size_t bytes, size_t inUse) = 0;
  virtual void release(void *data, size_t bytes) = 0;
};

/// One bound device: its allocator and (once started) its streams.
class Device {
public:
  /// `capacity`: the most bytes it may hand out at once (unlimited if none).
  /// A cuda device (a concrete cuda:N) needs the loaded `driver`.
  Device(Name name, std::optional<size_t> capacity,
         const cuda::Driver *driver = nullptr);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  const std::string &name() const { return name_.text; }
  Kind kind() const { return name_.kind; }
  /// Whether kernels bound here may use host memory they did not allocate
  /// here (the caller's input tensors, constants in the mapped file).
  bool usesHostMemory() const { return info(name_.kind).callerMemory; }
  /// The CUDA context of a cuda device; nullptr for host devices.
  cuda::Context *cuda() const { return cuda_.get(); }

  /// `bytes` of memory on this device, not zeroed: on the host 64-byte
  /// aligned, on a cuda device a device pointer (512-byte aligned). Both come
  /// from caching allocators: released blocks are kept for reuse, so a
  /// second run touches no fresh pages. Throws kiln::Error when the capacity
  /// would be exceeded or the device is out of memory.
  void *allocate(size_t bytes);
  void release(void *data, size_t bytes);
  size_t bytesInUse() const;
  size_t peakBytes() const;

  /// Starts the worker threads; compute() and copy() need them.
  void startStreams();
  Stream &compute() { return *compute_; }
  Stream &copy() { return *copy_; }

private:
  Name name_;
  std::optional<size_t> capacity_;
  mutable std::mutex mutex_;
  size_t inUse_ = 0, peak_ = 0;
  std::unique_ptr<cuda::Context> cuda_;
  std::unique_ptr<Memory> memory_;
  // Declared last: joined before the allocator goes away.
  std::unique_ptr<Stream> compute_, copy_;
};

/// Memory from a Device, released when destroyed. Move-only.
class Buffer {
public:
  Buffer() = default;
  Buffer(Device &device, size_t bytes)
      : device_(&device), data_(device.allocate(bytes)), bytes_(bytes) {}
  Buffer(Buffer &&other) noexcept { *this = std::move(other); }
  Buffer &operator=(Buffer &&other) noexcept;
  ~Buffer() { reset(); }

  void *data() const { return data_; }
  void reset();

private:
  Device *device_ = nullptr;
  void *data_ = nullptr;
  size_t bytes_ = 0;
};

/// The devices a plan's roles are bound to.
struct Binding {
  std::vector<std::unique_ptr<Device>> devices; // distinct, streams stopped
  std::vector<Device *> roleDevice;             // per role
};

/// Binds every role as `options` say (docs/devices.md): to `options.device`
/// if set, else to the device it was compiled for, then `options.bind` by
/// role index or compiled name. Roles bound to the same device share one
/// Device. A cuda role bound to a cuda device when CUDA is unavailable falls
/// back to cpu if the plan has a cpu role (with a warning on stderr).
/// Throws kiln::Error for a key naming no role, an unknown or unavailable
/// device, a host role bound to a cuda device, or a capacity for an unknown
/// device name.
Binding bind(const std::vector<Role> &roles, const LoadOptions &options);

/// The device that tensors moved by Tensor::to("cuda:N") live on: one per
/// CUDA driver and GPU in the process, kept while such tensors live.
/// cuda:auto picks the GPU with the most free memory. Throws kiln::Error
/// when no driver loads or the GPU does not exist.
std::shared_ptr<Device> tensorDevice(const std::string &name);

} // namespace kiln::device

#endif // KILN_RUNTIME_DEVICE_H
