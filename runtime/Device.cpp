//===- Device.cpp - concrete devices: names, memory, streams --------------===//

#include "runtime/Device.h"
#include "runtime/HostMemory.h"

#include "kiln/runtime.h"
#include "runtime/Cuda.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <system_error>
#include <unordered_map>

namespace kiln::device {

namespace {
constexpr long kMaxOrdinal = 1 << 20;

/// "0", "12": a non-negative decimal without sign or spaces.
std::optional<long> parseOrdinal(const std::string &text) {
  if (text.empty() || text.size() > 7)
    return std::nullopt;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value > kMaxOrdinal)
    return std::nullopt;
  return value;
}
} // namespace

std::optional<Name> parseName(const std::string &text) {
  size_t colon = text.find(':');
  std::optional<Kind> kind = parseKind(text.substr(0, colon));
  if (!kind)
    return std::nullopt;
  const KindInfo &k = info(*kind);
  if (colon == std::string::npos)
    return k.numbered ? std::nullopt : std::optional(Name{*kind, -1, text});
  std::string rest = text.substr(colon + 1);
  if (rest == "auto" && k.autoOrdinal)
    return Name{*kind, -1, text};
  std::optional<long> ordinal = parseOrdinal(rest);
  if (!k.numbered || !ordinal)
    return std::nullopt;
  return Name{*kind, *ordinal,
              std::string(k.name) + ":" + std::to_string(*ordinal)};
}

Name parseBindable(const std::string &text) {
  std::optional<Name> name = parseName(text);
  if (!name)
    throw Error("unknown device '" + text + "' (expected " + nameForms() + ")");
  return *name;
}

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

Stream::Stream() : thread_([this] { loop(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Stream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void Stream::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

namespace {
/// Host memory that is kept for reuse: a released block waits, by size, for
/// an allocation it fits without wasting over half of it.
class HostPool final : public Memory {
public:
  explicit HostPool(std::string name) : name_(std::move(name)) {}
  ~HostPool() override {
    for (auto [data, size] : blockSizes_)
      std::free(data);
  }

  void *allocate(size_t bytes, size_t) override {
    void *data = nullptr;
    if (bytes <= SIZE_MAX / 2) {
      size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = freeBlocks_.lower_bound(rounded);
      if (it != freeBlocks_.end() && it->first <= 2 * rounded) {
        data = it->second;
        freeBlocks_.erase(it);
      } else if ((data = host::allocate(rounded))) {
        blockSizes_[data] = rounded;
      }
      // Past the tensor, a reused block larger than it is poisoned too.
      if (data) {
        size_t block = blockSizes_.at(data);
        host::unpoison(data, bytes);
        host::poison(static_cast<char *>(data) + bytes, block - bytes);
      }
    }
    if (!data)
      throw Error(name_ + ": out of host memory allocating " +
                  std::to_string(bytes) + " bytes");
    return data;
  }

  void release(void *data, size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t block = blockSizes_.at(data);
    host::poison(data, block);
    freeBlocks_.emplace(block, data);
  }

private:
  std::string name_;
  std::mutex mutex_;
  // The free blocks by size, and every block's size.
  std::multimap<size_t, void *> freeBlocks_;
  std::unordered_map<void *, size_t> blockSizes_;
};

/// Device memory from a CUDA context's caching allocator.
class CudaMemory final : public Memory {
public:
  CudaMemory(cuda::Context &context, std::string name)
      : context_(context), name_(std::move(name)) {}

  void *allocate(size_t bytes, size_t inUse) override {
    cuda::CUdeviceptr pointer = context_.allocate(bytes);
    if (!pointer)
      throw Error(name_ + ": out of memory: cuMemAlloc of " +
                  std::to_string(bytes) + " bytes failed with " +
                  std::to_string(inUse) + " bytes in use by kiln");
    return reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
  }

  void release(void *data, size_t bytes) override {
    context_.release(reinterpret_cast<uintptr_t>(data), bytes);
  }

private:
  cuda::Context &context_;
  std::string name_;
};
} // namespace

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

Device::Device(Name name, std::optional<size_t> capacity,
               const cuda::Driver *driver)
    : name_(std::move(name)), capacity_(capacity) {
  if (!info(name_.kind).cuda) {
    memory_ = std::make_unique<HostPool>(name_.text);
    return;
  }
  if (!driver || name_.ordinal < 0)
    throw Error(name_.text + ": no CUDA driver is loaded");
  cuda_ =
      std::make_unique<cuda::Context>(*driver, int(name_.ordinal), name_.text);
  memory_ = std::make_unique<CudaMemory>(*cuda_, name_.text);
}

Device::~Device() {
  // Join the workers while the allocator is still alive; the CUDA memory
  // goes before its context.
  compute_.reset();
  copy_.reset();
  memory_.reset();
  cuda_.reset();
}

void *Device::allocate(size_t bytes) {
  size_t inUse;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capacity_ && (bytes > *capacity_ || inUse_ > *capacity_ - bytes))
      throw Error(name_.text + ": out of memory: needs " +
                  std::to_string(bytes) + " bytes, " + std::to_string(inUse_) +
                  " of " + std::to_string(*capacity_) + " in use");
    inUse = inUse_;
    inUse_ += bytes;
    peak_ = std::max(peak_, inUse_);
  }
  try {
    return memory_->allocate(bytes, inUse);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    inUse_ -= bytes;
    throw;
  }
}

void Device::release(void *data, size_t bytes) {
  memory_->release(data, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  inUse_ -= bytes;
}

size_t Device::bytesInUse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inUse_;
}

size_t Device::peakBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void Device::startStreams() {
  try {
    if (!compute_)
      compute_ = std::make_unique<Stream>();
    if (!copy_)
      copy_ = std::make_unique<Stream>();
  } catch (const std::system_error &e) {
    throw Error(name_.text + ": cannot start a stream thread: " + e.what());
  }
}

//===----------------------------------------------------------------------===//
// Buffer
//===----------------------------------------------------------------------===//

Buffer &Buffer::operator=(Buffer &&other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.device_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ && data_)
    device_->release(data_, bytes_);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

Binding bind(const std::vector<Role> &roles, const LoadOptions &options) {
  auto describe = [&](size_t r) {
    return "role " + std::to_string(r) + " '" + roles[r].name + "'";
  };
  if (!options.device.empty())
    parseBindable(options.device); // refused even without roles
  std::vector<std::string> targets(roles.size(), options.device);
  // Roles the caller named a device for: never silently moved elsewhere.
  std::vector<bool> requested(roles.size(), !options.device.empty());
  for (size_t r = 0; r < roles.size(); ++r)
    if (targets[r].empty())
      targets[r] = roles[r].name;
  for (const auto &[key, target] : options.bind) {
    bool found = false;
    for (size_t r = 0; r < roles.size(); ++r)
      if (key == std::to_string(r) || key == roles[r].name) {
        targets[r] = target;
        requested[r] = true;
        found = true;
      }
    if (found)
      continue;
    std::string list;
    for (size_t r = 0; r < roles.size(); ++r)
      list += (r ? ", " : " ") + std::to_string(r) + " '" + roles[r].name + "'";
    throw Error("cannot bind '" + key + "': the plan has no such role; " +
                (roles.empty() ? "it has no roles" : "its roles are" + list));
  }
  std::map<std::string, size_t> capacity;
  for (const auto &[name, bytes] : options.memoryCapacity) {
    std::optional<Name> parsed = parseName(name);
    if (!parsed)
      throw Error("memory capacity for unknown device '" + name +
                  "' (expected " + nameForms() + ")");
    capacity[parsed->text] = bytes;
  }
  std::vector<Name> names;
  for (size_t r = 0; r < roles.size(); ++r) {
    Name name = parseBindable(targets[r]);
    if (info(name.kind).cuda && !info(roles[r].kind).cuda)
      throw Error("cannot bind " + describe(r) + " to '" + name.text +
                  "': its kernels run on " + nameForms(/*cuda=*/false) +
                  " (the artifact has no code for the CUDA backend on this "
                  "role)");
    names.push_back(std::move(name));
  }

  // The CUDA driver is loaded only when a role is to run on a cuda device.
  bool hasCpuRole = std::any_of(roles.begin(), roles.end(), [](const Role &r) {
    return r.kind == Kind::Cpu;
  });
  const cuda::Driver *driver = nullptr;
  std::string reason;
  bool loaded = false;
  std::optional<long> autoOrdinal;
  std::vector<bool> wasAuto(roles.size(), false);
  std::map<std::string, std::vector<size_t>> fellBack; // target -> roles
  for (size_t r = 0; r < roles.size(); ++r) {
    Name &name = names[r];
    if (!info(name.kind).cuda)
      continue;
    if (!loaded) {
      driver = cuda::load(reason);
      loaded = true;
    }
    if (!driver) {
      if (requested[r])
        throw Error(describe(r) + ": " + name.text + " was asked for, but " +
                    reason);
      if (!hasCpuRole)
        throw Error(describe(r) + ": " + reason +
                    "; bind it to a host device with --bind " +
                    std::to_string(r) + "=cpu");
      fellBack[name.text].push_back(r);
      name = Name{Kind::Cpu, -1, "cpu"};
      continue;
    }
    if (name.ordinal < 0) {
      if (!autoOrdinal)
        autoOrdinal = cuda::deviceWithMostFreeMemory(*driver);
      name = Name{Kind::Cuda, *autoOrdinal,
                  "cuda:" + std::to_string(*autoOrdinal)};
      wasAuto[r] = true;
    }
  }
  for (const auto &[target, fallen] : fellBack) {
    std::string list;
    for (size_t r : fallen)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr,
                 "kiln: warning: %s is unavailable (%s); role%s %s run%s on "
                 "cpu\n",
                 target.c_str(), reason.c_str(), fallen.size() > 1 ? "s" : "",
                 list.c_str(), fallen.size() > 1 ? "" : "s");
  }

  Binding binding;
  for (size_t r = 0; r < roles.size(); ++r) {
    const Name &name = names[r];
    auto it = std::find_if(
        binding.devices.begin(), binding.devices.end(),
        [&](const auto &device) { return device->name() == name.text; });
    if (it == binding.devices.end()) {
      auto limit = capacity.find(name.text);
      if (limit == capacity.end() && wasAuto[r])
        limit = capacity.find("cuda:auto");
      std::optional<size_t> bytes;
      if (limit != capacity.end())
        bytes = limit->second;
      binding.devices.push_back(std::make_unique<Device>(
          name, bytes, info(name.kind).cuda ? driver : nullptr));
      it = binding.devices.end() - 1;
    }
    binding.roleDevice.push_back(it->get());
  }
  return binding;
}

std::shared_ptr<Device> tensorDevice(const std::string &text) {
  Name name = parseBindable(text);
  if (!info(name.kind).cuda)
    throw Error("'" + text +
                "' is a host device; tensors there need no "
                "runtime device");
  std::string reason;
  const cuda::Driver *driver = cuda::load(reason);
  if (!driver)
    throw Error(name.text + " was asked for, but " + reason);
  if (driver->deviceCount == 0)
    throw Error(name.text + " was asked for, but the driver sees no GPU");
  if (name.ordinal < 0) {
    int best = cuda::deviceWithMostFreeMemory(*driver);
    name = Name{Kind::Cuda, best, "cuda:" + std::to_string(best)};
  }
  if (name.ordinal >= driver->deviceCount)
    throw Error(name.text + " was asked for, but the driver sees " +
                std::to_string(driver->deviceCount) + " GPU" +
                (driver->deviceCount == 1 ? "" : "s"));
  static std::mutex mutex;
  static std::map<std::pair<const cuda::Driver *, std::string>,
                  std::weak_ptr<Device>>
      devices;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<Device> &slot = devices[{driver, name.text}];
  std::shared_ptr<Device> device = slot.lock();
  if (!device) {
    device = std::make_shared<Device>(name, std::nullopt, driver);
    slot = device;
  }
  return device;
}

} // namespace kiln::device
