//===- Module.cpp - load a .kiln artifact and run its plan ----------------===//
//
// load: read the file into aligned memory, validate it (runtime/Artifact),
// check the CPU has the features the code was compiled for, dlopen the code
// section from an in-memory file (memfd), decode the plan (runtime/Plan),
// bind its roles to devices (runtime/Device) and upload the constants of
// devices that do not use host memory.
//
// run: give every value a buffer for this call (inputs staged onto their
// device), then either call the steps in order on the calling thread (a plan
// on one device without copies), or queue every step on its device's compute
// or copy stream. Per-run events order steps across streams; a run is queued
// on all streams under one lock, so each stream sees runs in one order and
// concurrent runs cannot deadlock. Every call has its own buffers, so
// concurrent runs are safe.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "runtime/Artifact.h"
#include "runtime/Device.h"
#include "runtime/Plan.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln {

namespace {
using device::Device;
using plan::ValueKind;

// The whole file in 64-byte aligned memory, read once.
Tensor readFile(const std::string &path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(path + ": " +
                (std::filesystem::exists(path, ec) ? "not a regular file"
                                                   : "no such file"));
  uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in)
    throw Error(path + ": cannot open file: " + std::strerror(errno));
  Tensor file = Tensor::empty(DType::U8, {static_cast<int64_t>(size)});
  if (size && !in.read(static_cast<char *>(file.raw()),
                       static_cast<std::streamsize>(size)))
    throw Error(path + ": cannot read file");
  return file;
}

/// Runs one step on the buffers of a run; `args` is scratch space.
void execute(const plan::Step &step, const plan::Plan &plan,
             const std::vector<void *> &buffers, std::vector<void *> &args) {
  if (step.isCopy) {
    size_t bytes = plan.values[step.args[0]].nbytes;
    if (bytes)
      std::memcpy(buffers[step.args[1]], buffers[step.args[0]], bytes);
    return;
  }
  args.clear();
  for (size_t id : step.args)
    args.push_back(buffers[id]);
  step.fn(args.data());
}

/// The events of one run on streams: which values are ready, how many of its
/// steps have not finished, and the first error.
struct RunEvents {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> ready; // per value
  size_t pending = 0;
  std::exception_ptr error;
};
} // namespace

struct Module::Impl {
  std::string path;
  Tensor file; // the whole artifact, 64-byte aligned
  void *library = nullptr;
  plan::Plan plan;
  std::vector<std::unique_ptr<Device>> devices; // the distinct bound ones
  std::vector<Device *> roleDevice;             // per role
  std::vector<device::Buffer> uploads;          // constants on devices
  std::vector<const void *> constants;          // per value
  /// Roles all on one device and no copies: run on the calling thread.
  bool runsInline = true;
  /// Per step (stream plans): its stream and the values it waits for.
  struct Scheduled {
    device::Stream *stream = nullptr;
    std::vector<size_t> waits;
  };
  std::vector<Scheduled> schedule;
  mutable std::mutex enqueueMutex;

  ~Impl() {
    uploads.clear();
    devices.clear(); // joins the streams before the code goes away
    if (library)
      dlclose(library);
  }
  Error fail(const std::string &message) const {
    return Error(path + ": " + message);
  }
  Device &deviceOf(size_t value) const {
    return *roleDevice[plan.values[value].role];
  }
  void loadCode(const artifact::Parsed::Span &code);
  void prepare(const artifact::Parsed::Span *weights);
  void runOnStreams(const std::vector<void *> &buffers) const;
  void runStep(size_t index, const std::vector<void *> &buffers,
               RunEvents &events) const;
};

void Module::Impl::loadCode(const artifact::Parsed::Span &code) {
  int fd = memfd_create("kiln-code", MFD_CLOEXEC);
  if (fd < 0)
    throw fail("cannot create an in-memory file for the code section");
  const char *bytes = static_cast<const char *>(file.raw()) + code.offset;
  size_t written = 0;
  while (written < code.size) {
    ssize_t n = ::write(fd, bytes + written, code.size - written);
    if (n <= 0) {
      close(fd);
      throw fail("cannot write the code section to memory");
    }
    written += static_cast<size_t>(n);
  }
  std::string fdPath = "/proc/self/fd/" + std::to_string(fd);
  library = dlopen(fdPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  if (!library)
    throw fail(std::string("cannot load the code section: ") + dlerror());
  auto abi = reinterpret_cast<int (*)()>(dlsym(library, "kiln_abi_version"));
  if (!abi || abi() != artifact::kKernelABI)
    throw fail("code section has kernel ABI " +
               std::to_string(abi ? abi() : -1) + ", this runtime needs " +
               std::to_string(artifact::kKernelABI));
}

void Module::Impl::prepare(const artifact::Parsed::Span *weights) {
  const auto *base = static_cast<const uint8_t *>(file.raw());
  constants.assign(plan.values.size(), nullptr);
  for (size_t id = 0; id < plan.values.size(); ++id) {
    const plan::Value &v = plan.values[id];
    if (v.kind != ValueKind::Constant)
      continue;
    const uint8_t *bytes = base + weights->offset + v.offset;
    Device &device = deviceOf(id);
    if (device.usesHostMemory()) {
      constants[id] = bytes;
      continue;
    }
    uploads.emplace_back(device, v.nbytes);
    if (v.nbytes)
      std::memcpy(uploads.back().data(), bytes, v.nbytes);
    constants[id] = uploads.back().data();
  }
  runsInline = devices.size() <= 1 && !plan.hasCopies();
  if (runsInline)
    return;
  for (auto &device : devices)
    device->startStreams();
  for (const plan::Step &step : plan.steps) {
    Scheduled s;
    Device &device = *roleDevice[step.role];
    s.stream = step.isCopy ? &device.copy() : &device.compute();
    for (size_t i = 0; i < step.numInputs; ++i) {
      size_t root = plan.values[step.args[i]].root;
      if (plan.values[root].kind == ValueKind::Temp &&
          std::find(s.waits.begin(), s.waits.end(), root) == s.waits.end())
        s.waits.push_back(root);
    }
    schedule.push_back(std::move(s));
  }
}

Module::Module(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Module::Module(Module &&) noexcept = default;
Module &Module::operator=(Module &&) noexcept = default;
Module::~Module() = default;

Module Module::load(const std::string &path) {
  return load(path, LoadOptions());
}

Module Module::load(const std::string &path, const LoadOptions &options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = readFile(path);
  const char *data = static_cast<const char *>(impl->file.raw());
  artifact::Parsed parsed = artifact::read(data, impl->file.nbytes(), path);
  try {
    const nlohmann::json &m = parsed.manifest;
    if (m.at("abi").get<int>() != artifact::kKernelABI)
      throw impl->fail("kernel ABI mismatch");
    std::vector<std::string> host = artifact::hostCpuFeatures();
    for (const auto &feature : m.at("target").at("cpu_features"))
      if (std::find(host.begin(), host.end(), feature.get<std::string>()) ==
          host.end())
        throw impl->fail("compiled for CPUs with " +
                         feature.get<std::string>() +
                         ", which this CPU lacks; recompile it here");
    const artifact::Parsed::Span *code = parsed.find("code");
    if (!code)
      throw impl->fail("artifact has no code section");
    impl->loadCode(*code);
    const artifact::Parsed::Span *weights = parsed.find("weights");
    void *library = impl->library;
    try {
      impl->plan = plan::decode(
          m, weights ? std::optional<size_t>(weights->size) : std::nullopt,
          [library](const std::string &name) {
            return reinterpret_cast<plan::KernelFn>(
                dlsym(library, name.c_str()));
          });
      device::Binding binding = device::bind(impl->plan.roles, options);
      impl->devices = std::move(binding.devices);
      impl->roleDevice = std::move(binding.roleDevice);
      impl->prepare(weights);
    } catch (const Error &e) { // from the plan, the binding or an upload
      throw impl->fail(e.what());
    }
  } catch (const nlohmann::json::exception &e) {
    throw impl->fail(std::string("malformed manifest: ") + e.what());
  }
  return Module(std::move(impl));
}

const std::vector<TensorInfo> &Module::inputs() const {
  return impl_->plan.inputInfo;
}
const std::vector<TensorInfo> &Module::outputs() const {
  return impl_->plan.outputInfo;
}

std::vector<DeviceInfo> Module::devices() const {
  std::vector<DeviceInfo> info;
  for (size_t r = 0; r < impl_->plan.roles.size(); ++r)
    info.push_back(
        {r, impl_->plan.roles[r].name, impl_->roleDevice[r]->name()});
  return info;
}

std::vector<size_t> Module::peakBytes() const {
  std::vector<size_t> peaks;
  for (const Device *device : impl_->roleDevice)
    peaks.push_back(device->peakBytes());
  return peaks;
}

void Module::Impl::runStep(size_t index, const std::vector<void *> &buffers,
                           RunEvents &events) const {
  const plan::Step &step = plan.steps[index];
  const std::vector<size_t> &waits = schedule[index].waits;
  bool skip;
  {
    std::unique_lock<std::mutex> lock(events.mutex);
    events.changed.wait(lock, [&] {
      return std::all_of(waits.begin(), waits.end(),
                         [&](size_t id) { return events.ready[id] != 0; });
    });
    skip = events.error != nullptr; // the run failed: signal, do not run
  }
  std::exception_ptr error;
  if (!skip) {
    try {
      std::vector<void *> args;
      execute(step, plan, buffers, args);
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Notified under the lock: once `pending` reaches 0 the caller may destroy
  // `events`, and this thread touches it no more after unlocking.
  std::lock_guard<std::mutex> lock(events.mutex);
  if (error && !events.error)
    events.error = error;
  for (size_t i = step.numInputs; i < step.args.size(); ++i)
    events.ready[step.args[i]] = 1;
  --events.pending;
  events.changed.notify_all();
}

void Module::Impl::runOnStreams(const std::vector<void *> &buffers) const {
  RunEvents events;
  events.ready.assign(plan.values.size(), 0);
  events.pending = plan.steps.size();
  size_t queued = 0;
  try {
    std::lock_guard<std::mutex> lock(enqueueMutex);
    for (; queued < plan.steps.size(); ++queued)
      schedule[queued].stream->enqueue([this, &buffers, &events, queued] {
        runStep(queued, buffers, events);
      });
  } catch (...) {
    // Let what was queued finish at once: it skips its work and waits on
    // nothing that will never come.
    std::lock_guard<std::mutex> lock(events.mutex);
    if (!events.error)
      events.error = std::current_exception();
    events.pending -= plan.steps.size() - queued;
    std::fill(events.ready.begin(), events.ready.end(), 1);
    events.changed.notify_all();
  }
  std::unique_lock<std::mutex> lock(events.mutex);
  events.changed.wait(lock, [&] { return events.pending == 0; });
  if (events.error)
    std::rethrow_exception(events.error);
}

std::vector<Tensor> Module::run(const std::vector<Tensor> &inputs) const {
  const Impl &m = *impl_;
  const plan::Plan &p = m.plan;
  if (inputs.size() != p.inputInfo.size())
    throw Error("expected " + std::to_string(p.inputInfo.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo &want = p.inputInfo[i];
    if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
      throw Error("input #" + std::to_string(i) + " '" + want.name +
                  "' must be " + describe(want.dtype, want.shape) + ", got " +
                  describe(inputs[i].dtype(), inputs[i].shape()));
    if (!inputs[i].raw())
      throw Error("input #" + std::to_string(i) + " '" + want.name +
                  "' has no storage");
  }
  std::vector<void *> buffers(p.values.size(), nullptr);
  std::vector<device::Buffer> storage; // device memory of this call
  storage.reserve(p.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t id = p.inputValues[i];
    Device &device = m.deviceOf(id);
    if (device.usesHostMemory()) {
      buffers[id] = const_cast<void *>(inputs[i].raw());
      continue;
    }
    storage.emplace_back(device, p.values[id].nbytes);
    if (p.values[id].nbytes)
      std::memcpy(storage.back().data(), inputs[i].raw(), p.values[id].nbytes);
    buffers[id] = storage.back().data();
  }
  std::vector<Tensor> outputs(p.outputValues.size());
  std::vector<bool> copyOut(p.outputValues.size(), false);
  for (size_t i = 0; i < p.outputValues.size(); ++i) {
    size_t id = p.outputValues[i];
    const plan::Value &v = p.values[id];
    outputs[i] = Tensor::empty(v.dtype, v.shape);
    // A host temp computed straight into the output tensor, unless an
    // earlier output already claimed it.
    if (v.kind == ValueKind::Temp && m.deviceOf(id).usesHostMemory() &&
        !buffers[id])
      buffers[id] = outputs[i].raw();
    else
      copyOut[i] = true;
  }
  for (size_t id = 0; id < p.values.size(); ++id) {
    const plan::Value &v = p.values[id];
    if (v.kind == ValueKind::Alias) {
      buffers[id] = buffers[v.aliasOf];
    } else if (v.kind == ValueKind::Constant) {
      buffers[id] = const_cast<void *>(m.constants[id]);
    } else if (v.kind == ValueKind::Temp && !buffers[id]) {
      storage.emplace_back(m.deviceOf(id), v.nbytes);
      buffers[id] = storage.back().data();
    }
  }
  if (m.runsInline) {
    std::vector<void *> args;
    for (const plan::Step &step : p.steps)
      execute(step, p, buffers, args);
  } else {
    m.runOnStreams(buffers);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (copyOut[i] && outputs[i].nbytes())
      std::memcpy(outputs[i].raw(), buffers[p.outputValues[i]],
                  outputs[i].nbytes());
  return outputs;
}

} // namespace kiln
