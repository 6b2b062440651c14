//===- Module.cpp - load a .kiln artifact (Run.cpp runs its plan) ---------===//
//
// load: read the file into aligned memory, validate it (runtime/Artifact),
// check the CPU has the features the code was compiled for, dlopen the code
// section from an in-memory file (memfd), decode the plan (runtime/Plan),
// bind its roles to devices (runtime/Device), upload the constants of
// devices that do not use host memory, and load the PTX on cuda devices.
//
// run: give every value a buffer for this call (inputs staged onto their
// device), then either call the steps in order on the calling thread (a plan
// on one device without copies), or queue every step on its device's compute
// or copy stream. Per-run events order steps across streams; a run is queued
// on all streams under one lock, so each stream sees runs in one order and
// concurrent runs cannot deadlock. Every call has its own buffers, so
// concurrent runs are safe. A plan whose shapes depend on data it computes,
// or on data off the host, runs step by step on the calling thread instead:
// each step's shapes are resolved, its outputs allocated, then it runs.
//
// On a cuda device, a run on the calling thread enqueues everything (inputs,
// launches, outputs) on one CUDA stream of its own, taken from the device's
// pool, and synchronises once at the end; concurrent runs use different
// streams. On the worker threads of a multi-device plan, a cuda step waits
// for the CUDA events of the GPU work writing its inputs, enqueues its work,
// records an event and signals its outputs at once (Run.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/ModuleImpl.h"
#include "runtime/Signature.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln {

namespace {
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

} // namespace

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
  // dlopen returns an already loaded library whose name matches, and a
  // code section may stay loaded after dlclose (its threads' TLS
  // destructors pin it). Every load therefore gets a name no earlier load in
  // this process had: the same fd path, with "/." or "//." per bit of a
  // counter in front of the fd number.
  static std::atomic<uint32_t> loads{0};
  uint32_t n = loads++;
  std::string fdPath = "/proc/self/fd";
  for (int bit = 0; bit < 32 && (n >> bit); ++bit)
    fdPath += (n >> bit) & 1 ? "//." : "/.";
  fdPath += "/" + std::to_string(fd);
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

void Module::Impl::loadKernels(const artifact::Parsed &parsed) {
  functions.assign(plan.steps.size(), {});
  std::string arch;
  const nlohmann::json &target = parsed.manifest.at("target");
  if (target.contains("cuda_arch") && target.at("cuda_arch").is_string())
    arch = target.at("cuda_arch").get<std::string>();
  // Whether cuBLAS (cuDNN) loads, asked once, at the first launch that has a
  // stand-in to run instead.
  std::optional<bool> blas, dnn;
  for (auto &device : devices) {
    cuda::Context *context = device->cuda();
    if (!context)
      continue;
    bool loaded = false;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const plan::Step &step = plan.steps[i];
      if (step.isCopy || roleDevice[step.role] != device.get())
        continue;
      std::string what = step.describe(i);
      if (!step.cuda)
        throw Error(what + " runs on " + plan.describeRole(step.role) +
                    " bound to " + device->name() +
                    ", but has no \"cuda\" launch description");
      if (!loaded) {
        const artifact::Parsed::Span *ptx = parsed.find("ptx");
        if (!ptx)
          throw Error("the artifact has no ptx section, but " +
                      plan.describeRole(step.role) + " is bound to " +
                      device->name());
        context->loadModule(static_cast<const char *>(file.raw()) + ptx->offset,
                            ptx->size, arch);
        loaded = true;
      }
      for (const plan::CudaKernel::Launch &launch : step.cuda->launches) {
        bool entry = !launch.entry.empty();
        if (entry && launch.library()) {
          std::optional<bool> &loads = launch.gemm ? blas : dnn;
          if (!loads)
            loads = cuda::libraryLoads(launch.gemm ? cuda::Library::Blas
                                                   : cuda::Library::Dnn);
          entry = !*loads; // its stand-in
        }
        functions[i].push_back(entry ? context->function(launch.entry, what)
                                     : nullptr);
      }
    }
  }
}

void Module::Impl::prepare(const artifact::Parsed &parsed) {
  const artifact::Parsed::Span *weights = parsed.find("weights");
  const auto *base = static_cast<const uint8_t *>(file.raw());
  loadKernels(parsed);
  constants.assign(plan.values.size(), nullptr);
  transfer::Streams streams; // after `uploads`: waits before any unwinding
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
    transfer::copy(uploads.back().data(), &device, bytes, nullptr, v.nbytes,
                   streams);
    constants[id] = uploads.back().data();
  }
  streams.synchronize("uploading the constants");
  runsInline = devices.size() <= 1 && !plan.hasCopies();
  allocatesLazily = runsInline && !devices.empty() && !devices.front()->cuda();
  // Liveness: a temp lives from the step that writes it to the last step
  // that touches it or a view of it. Outputs live to the end.
  std::vector<size_t> last(plan.values.size(), SIZE_MAX);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (size_t id : plan.steps[i].args)
      last[plan.values[id].root] = i;
  for (size_t id : plan.outputValues)
    last[plan.values[id].root] = SIZE_MAX;
  releaseAfter.assign(plan.steps.size(), {});
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (plan.values[id].kind == ValueKind::Temp && last[id] != SIZE_MAX)
      releaseAfter[last[id]].push_back(id);
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
  if (options.signingKey.empty() || !options.signature.empty())
    return load(readFile(path), path, options);
  LoadOptions signedOptions = options;
  std::string sigPath = signature::sigPath(path);
  std::ifstream sig(sigPath, std::ios::binary);
  if (!sig)
    throw Error(path + ": a signature is required, but " + sigPath +
                " cannot be read (sign with kilnc --sign-key)");
  signedOptions.signature.assign(std::istreambuf_iterator<char>(sig), {});
  return load(readFile(path), path, signedOptions);
}

Module Module::fromBytes(const void *data, size_t size,
                         const LoadOptions &options, const std::string &name) {
  return load(
      Tensor::fromBytes(DType::U8, {static_cast<int64_t>(size)}, data, size),
      name, options);
}

Module Module::load(Tensor file, const std::string &path,
                    const LoadOptions &options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = std::move(file);
  const char *data = static_cast<const char *>(impl->file.raw());
  if (!options.signingKey.empty()) {
    if (options.signature.empty())
      throw Error(path + ": a signature is required, but none was given "
                         "(LoadOptions::signature)");
    signature::verify(options.signingKey, options.signature, data,
                      impl->file.nbytes(), path);
  }
  artifact::Parsed parsed = artifact::read(data, impl->file.nbytes(), path);
  try {
    const nlohmann::json &m = parsed.manifest;
    // Compared as JSON: a float or a huge number is a mismatch, not an
    // out-of-range conversion.
    if (!m.at("abi").is_number_integer() ||
        m.at("abi") != nlohmann::json(artifact::kKernelABI))
      throw impl->fail("kernel ABI mismatch");
    std::vector<std::string> host = artifact::hostCpuFeatures();
    for (const auto &feature : m.at("target").at("cpu_features"))
      if (std::find(host.begin(), host.end(), feature.get<std::string>()) ==
          host.end())
        throw impl->fail("compiled for CPUs with " +
                         feature.get<std::string>() +
                         ", which this CPU lacks; recompile it here or for "
                         "a lower level (kilnc --cpu=x86-64-v3 or "
                         "--cpu=generic)");
    // Sanitized kernels need the sanitizers' runtime in the process (built
    // into it, or preloaded); without it ASan's dlopen aborts the process.
    std::string sanitize = m.at("target").value("sanitize", "");
    if (sanitize.find("address") != std::string::npos &&
        !dlsym(RTLD_DEFAULT, "__asan_init"))
      throw impl->fail("its kernels were compiled with --sanitize=" + sanitize +
                       ", which needs a process with AddressSanitizer: use "
                       "a kiln-run built by scripts/build --sanitize=" +
                       sanitize + " or preload libasan (LD_PRELOAD)");
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
      if (!impl->plan.dynamic && !impl->plan.readsData) {
        std::vector<std::vector<int64_t>> shapes;
        for (const TensorInfo &info : impl->plan.inputInfo)
          shapes.push_back(info.shape);
        impl->staticShapes = plan::resolveShapes(
            impl->plan, shapes,
            std::vector<void *>(impl->plan.values.size(), nullptr));
      }
      device::Binding binding = device::bind(impl->plan.roles, options);
      impl->devices = std::move(binding.devices);
      impl->roleDevice = std::move(binding.roleDevice);
      impl->prepare(parsed);
      impl->stepByStep = impl->plan.lateShapes;
      for (const plan::Step &step : impl->plan.steps)
        for (size_t i : step.dimsData)
          if (!impl->deviceOf(step.args[i]).usesHostMemory())
            impl->stepByStep = true; // read back from the device
    } catch (const Error &e) {       // from the plan, the binding or an upload
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
const std::vector<PortInfo> &Module::inputPorts() const {
  return impl_->plan.inputPorts;
}
const std::vector<PortInfo> &Module::outputPorts() const {
  return impl_->plan.outputPorts;
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

} // namespace kiln
