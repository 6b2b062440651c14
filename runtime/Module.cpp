//===- Module.cpp - load a .kiln artifact and run its plan ----------------===//
//
// load: read the file into aligned memory, validate it (runtime/Artifact),
// decode the manifest into a plan of typed values and kernel steps, check
// the CPU has the features the code was compiled for, and dlopen the code
// section from an in-memory file (memfd). run: bind inputs, constants and
// per-call buffers to the plan's values and call the kernels in order; every
// call has its own buffers, so concurrent runs are safe.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "runtime/Artifact.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln {

namespace {
using KernelFn = void (*)(void **);

enum class ValueKind { Input, Constant, Temp, Alias };

struct Value {
  DType dtype;
  std::vector<int64_t> shape;
  ValueKind kind;
  const uint8_t *constant = nullptr; // into the file, for constants
  size_t aliasOf = 0;                // for aliases (views), an earlier value
  size_t nbytes = 0;
};

struct Step {
  std::string name;
  KernelFn fn;
  std::vector<size_t> args;
};

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

struct Module::Impl {
  std::string path;
  Tensor file; // the whole artifact, 64-byte aligned
  void *library = nullptr;
  std::vector<Value> values;
  std::vector<TensorInfo> inputInfo, outputInfo;
  std::vector<size_t> inputValues, outputValues;
  std::vector<Step> steps;

  ~Impl() {
    if (library)
      dlclose(library);
  }
  Error fail(const std::string &message) const {
    return Error(path + ": " + message);
  }
  void decode(const artifact::Parsed &parsed);
  void loadCode(const artifact::Parsed::Span &code);
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

void Module::Impl::decode(const artifact::Parsed &parsed) {
  const nlohmann::json &m = parsed.manifest;
  std::vector<std::string> host = artifact::hostCpuFeatures();
  for (const auto &feature : m.at("target").at("cpu_features"))
    if (std::find(host.begin(), host.end(), feature.get<std::string>()) ==
        host.end())
      throw fail("compiled for CPUs with " + feature.get<std::string>() +
                 ", which this CPU lacks; recompile it here");
  const artifact::Parsed::Span *weights = parsed.find("weights");
  const auto *base = static_cast<const uint8_t *>(file.raw());
  for (const auto &v : m.at("values")) {
    Value value;
    value.dtype = parseDType(v.at("dtype").get<std::string>());
    value.shape = v.at("shape").get<std::vector<int64_t>>();
    std::string device = v.at("device").get<std::string>();
    if (device != "cpu")
      throw fail("the plan needs device '" + device +
                 "', which this runtime cannot drive (cpu only)");
    int64_t count = 1;
    for (int64_t d : value.shape) {
      if (d < 0)
        throw fail("negative dimension in the plan");
      count *= d;
    }
    value.nbytes = count * dtypeSize(value.dtype);
    std::string kind = v.at("kind").get<std::string>();
    if (kind == "input") {
      value.kind = ValueKind::Input;
    } else if (kind == "temp") {
      value.kind = ValueKind::Temp;
    } else if (kind == "constant") {
      value.kind = ValueKind::Constant;
      size_t offset = v.at("offset").get<size_t>();
      if (!weights || offset > weights->size ||
          value.nbytes > weights->size - offset)
        throw fail("a constant lies outside the weights section");
      value.constant = base + weights->offset + offset;
    } else if (kind == "alias") {
      value.kind = ValueKind::Alias;
      value.aliasOf = v.at("of").get<size_t>();
      if (value.aliasOf >= values.size() ||
          values[value.aliasOf].nbytes != value.nbytes)
        throw fail("an alias must view an earlier value of the same size");
    } else {
      throw fail("unknown value kind '" + kind + "'");
    }
    values.push_back(std::move(value));
  }
  auto valueId = [&](const nlohmann::json &j) {
    size_t id = j.get<size_t>();
    if (id >= values.size())
      throw fail("the plan refers to value " + std::to_string(id) +
                 " of only " + std::to_string(values.size()));
    return id;
  };
  auto ports = [&](const char *key, std::vector<TensorInfo> &info,
                   std::vector<size_t> &ids) {
    for (const auto &p : m.at(key)) {
      size_t id = valueId(p.at("value"));
      ids.push_back(id);
      info.push_back({p.at("name").get<std::string>(), values[id].dtype,
                      values[id].shape});
    }
  };
  ports("inputs", inputInfo, inputValues);
  ports("outputs", outputInfo, outputValues);
  for (size_t id : inputValues)
    if (values[id].kind != ValueKind::Input)
      throw fail("a graph input is not an input value");
  for (const auto &s : m.at("steps")) {
    Step step;
    step.name = s.at("kernel").get<std::string>();
    step.fn = reinterpret_cast<KernelFn>(dlsym(library, step.name.c_str()));
    if (!step.fn)
      throw fail("code section lacks kernel '" + step.name + "'");
    for (const auto &a : s.at("args"))
      step.args.push_back(valueId(a));
    steps.push_back(std::move(step));
  }
}

Module::Module(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Module::Module(Module &&) noexcept = default;
Module &Module::operator=(Module &&) noexcept = default;
Module::~Module() = default;

Module Module::load(const std::string &path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = readFile(path);
  const char *data = static_cast<const char *>(impl->file.raw());
  artifact::Parsed parsed = artifact::read(data, impl->file.nbytes(), path);
  try {
    const nlohmann::json &m = parsed.manifest;
    if (m.at("abi").get<int>() != artifact::kKernelABI)
      throw impl->fail("kernel ABI mismatch");
    const artifact::Parsed::Span *code = parsed.find("code");
    if (!code)
      throw impl->fail("artifact has no code section");
    impl->loadCode(*code);
    impl->decode(parsed);
  } catch (const nlohmann::json::exception &e) {
    throw impl->fail(std::string("malformed manifest: ") + e.what());
  }
  return Module(std::move(impl));
}

const std::vector<TensorInfo> &Module::inputs() const {
  return impl_->inputInfo;
}
const std::vector<TensorInfo> &Module::outputs() const {
  return impl_->outputInfo;
}

std::vector<Tensor> Module::run(const std::vector<Tensor> &inputs) const {
  const Impl &m = *impl_;
  if (inputs.size() != m.inputInfo.size())
    throw Error("expected " + std::to_string(m.inputInfo.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo &want = m.inputInfo[i];
    if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
      throw Error("input #" + std::to_string(i) + " '" + want.name +
                  "' must be " + describe(want.dtype, want.shape) + ", got " +
                  describe(inputs[i].dtype(), inputs[i].shape()));
  }
  std::vector<void *> buffers(m.values.size(), nullptr);
  std::vector<Tensor> storage; // temps of this call
  for (size_t i = 0; i < inputs.size(); ++i)
    buffers[m.inputValues[i]] = const_cast<void *>(inputs[i].raw());
  std::vector<Tensor> outputs(m.outputValues.size());
  std::vector<bool> copyOut(m.outputValues.size(), false);
  for (size_t i = 0; i < m.outputValues.size(); ++i) {
    const Value &v = m.values[m.outputValues[i]];
    outputs[i] = Tensor::empty(v.dtype, v.shape);
    // A temp computed straight into the output tensor, unless an earlier
    // output already claimed it.
    if (v.kind == ValueKind::Temp && !buffers[m.outputValues[i]])
      buffers[m.outputValues[i]] = outputs[i].raw();
    else
      copyOut[i] = true;
  }
  for (size_t id = 0; id < m.values.size(); ++id) {
    const Value &v = m.values[id];
    if (v.kind == ValueKind::Alias)
      buffers[id] = buffers[v.aliasOf];
    else if (v.kind == ValueKind::Constant)
      buffers[id] = const_cast<uint8_t *>(v.constant);
    else if (v.kind == ValueKind::Temp && !buffers[id]) {
      storage.push_back(Tensor::empty(v.dtype, v.shape));
      buffers[id] = storage.back().raw();
    }
  }
  std::vector<void *> args;
  for (const Step &step : m.steps) {
    args.clear();
    for (size_t id : step.args)
      args.push_back(buffers[id]);
    step.fn(args.data());
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (copyOut[i] && outputs[i].nbytes())
      std::memcpy(outputs[i].raw(), buffers[m.outputValues[i]],
                  outputs[i].nbytes());
  return outputs;
}

} // namespace kiln
