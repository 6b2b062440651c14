//===- PortFiles.cpp - tensor files for a module's ports ------------------===//

#include "runtime/tool/RunTool.h"

#include "kiln/tensor_io.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

using namespace kiln;
using namespace kiln::tool;

/// "x f32[1,3]", "seq sequence of 3 f32[?]", "opt optional with no value".
std::string
kiln::tool::describePort(const kiln::PortInfo &port,
                         const std::vector<kiln::TensorInfo> &infos) {
  if (port.kind == kiln::PortInfo::Kind::None)
    return port.name + " optional with no value";
  if (port.kind == kiln::PortInfo::Kind::Tensor)
    return port.name + " " +
           kiln::describe(infos[port.first].dtype, infos[port.first].shape);
  std::string text = port.name + " sequence of " + std::to_string(port.count);
  for (size_t i = 0; i < port.count; ++i)
    text += std::string(i ? ", " : " ") +
            kiln::describe(infos[port.first + i].dtype,
                           infos[port.first + i].shape);
  return text;
}

std::string kiln::tool::describeInputs(const kiln::Module &module) {
  const std::vector<kiln::PortInfo> &ports = module.inputPorts();
  if (ports.empty())
    return "the model takes no inputs";
  std::string text = "the model's inputs are:";
  for (size_t i = 0; i < ports.size(); ++i)
    text += std::string(i ? "," : "") + " " +
            describePort(ports[i], module.inputs());
  return text;
}

static bool isRegularFile(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

/// Maps the INPUT arguments to one file per graph input, in graph order.
std::vector<std::string>
kiln::tool::assignInputFiles(const std::vector<std::string> &args,
                             const kiln::Module &module) {
  const std::vector<kiln::PortInfo> &ports = module.inputPorts();
  std::vector<std::string> files(ports.size());
  std::vector<bool> named(ports.size(), false);
  std::vector<std::string> positional;
  for (const std::string &arg : args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(0, eq);
    auto it = std::find_if(
        ports.begin(), ports.end(),
        [&](const kiln::PortInfo &port) { return port.name == name; });
    if (it == ports.end()) {
      // A file whose name merely contains '=' is still a positional input.
      if (isRegularFile(arg)) {
        positional.push_back(arg);
        continue;
      }
      throw kiln::Error("'" + arg + "': the model has no input named '" + name +
                        "'; " + describeInputs(module));
    }
    size_t index = static_cast<size_t>(it - ports.begin());
    if (named[index])
      throw kiln::Error("input '" + name + "' is given more than once");
    if (eq + 1 == arg.size())
      throw kiln::Error("'" + arg + "': missing the file name after '='");
    files[index] = arg.substr(eq + 1);
    named[index] = true;
  }

  size_t namedCount =
      static_cast<size_t>(std::count(named.begin(), named.end(), true));
  if (namedCount + positional.size() != ports.size())
    throw kiln::Error("expected " + std::to_string(ports.size()) +
                      " input file(s) but got " +
                      std::to_string(namedCount + positional.size()) + "; " +
                      describeInputs(module));
  auto next = positional.begin();
  for (size_t i = 0; i < ports.size(); ++i)
    if (!named[i])
      files[i] = *next++;
  return files;
}

/// Checks one tensor against the model's expectation (negative expected
/// dims match anything), naming the file when it does not fit.
kiln::Tensor kiln::tool::checkInput(kiln::Tensor tensor,
                                    const std::string &file,
                                    const kiln::TensorInfo &info) {
  bool fits = tensor.dtype() == info.dtype &&
              tensor.shape().size() == info.shape.size();
  for (size_t d = 0; fits && d < info.shape.size(); ++d)
    fits = info.shape[d] < 0 || info.shape[d] == tensor.shape()[d];
  if (!fits)
    throw kiln::Error(file + ": input '" + info.name + "' is " +
                      kiln::describe(tensor.dtype(), tensor.shape()) +
                      ", but the model expects " +
                      kiln::describe(info.dtype, info.shape));
  return tensor;
}

static bool hasExtension(const std::string &path, const char *extension) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  return ext == extension;
}

/// The tensors of a sequence input: a folder of 0.npy, 1.npy, ... (as
/// --output-dir writes them), an ONNX SequenceProto .pb, or for an optional
/// input an OptionalProto .pb.
static std::vector<kiln::Tensor>
readSequence(const std::string &file, const kiln::PortInfo &port,
             const std::vector<kiln::TensorInfo> &infos) {
  namespace fs = std::filesystem;
  std::vector<kiln::Tensor> tensors;
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    for (size_t i = 0;; ++i) {
      fs::path element = fs::path(file) / (std::to_string(i) + ".npy");
      if (!fs::exists(element, ec))
        break;
      size_t at = port.first + std::min(i, port.count ? port.count - 1 : 0);
      tensors.push_back(kiln::readNpy(
          element.string(), port.count ? infos[at].dtype : kiln::DType::U8));
    }
  } else if (port.optional && hasExtension(file, ".pb")) {
    kiln::OptionalValue value = kiln::readOptionalProto(file);
    if (value.kind != kiln::OptionalValue::Kind::Sequence)
      throw kiln::Error(file + ": input '" + port.name +
                        "' is an optional sequence, but the file holds " +
                        (value.kind == kiln::OptionalValue::Kind::None
                             ? "no value"
                             : "a tensor"));
    tensors = std::move(value.tensors);
  } else if (hasExtension(file, ".pb")) {
    tensors = kiln::readSequenceProto(file);
  } else {
    throw kiln::Error(file + ": input '" + port.name +
                      "' is a sequence: give a folder of 0.npy, 1.npy, ... "
                      "or an ONNX SequenceProto .pb");
  }
  if (tensors.size() != port.count)
    throw kiln::Error(file + ": input '" + port.name + "' is a sequence of " +
                      std::to_string(tensors.size()) +
                      " tensors, but the model was compiled for " +
                      std::to_string(port.count) +
                      " (kilnc --sequence-length " + port.name + "=" +
                      std::to_string(tensors.size()) + " compiles for that)");
  return tensors;
}

/// Reads every graph input into the model's flat list of tensors.
std::vector<kiln::Tensor>
kiln::tool::readInputs(const std::vector<std::string> &files,
                       const kiln::Module &module) {
  const std::vector<kiln::TensorInfo> &infos = module.inputs();
  std::vector<kiln::Tensor> inputs;
  for (size_t p = 0; p < files.size(); ++p) {
    const kiln::PortInfo &port = module.inputPorts()[p];
    const std::string &file = files[p];
    switch (port.kind) {
    case kiln::PortInfo::Kind::None: {
      bool empty =
          hasExtension(file, ".none") ||
          (hasExtension(file, ".pb") && kiln::readOptionalProto(file).kind ==
                                            kiln::OptionalValue::Kind::None);
      if (!empty)
        throw kiln::Error(file + ": input '" + port.name +
                          "' was compiled as an optional with no value "
                          "(kilnc --empty-optional); give a .none file or "
                          "an empty OptionalProto .pb");
      break;
    }
    case kiln::PortInfo::Kind::Tensor: {
      const kiln::TensorInfo &info = infos[port.first];
      if (port.optional && hasExtension(file, ".pb")) {
        kiln::OptionalValue value = kiln::readOptionalProto(file);
        if (value.kind != kiln::OptionalValue::Kind::Tensor)
          throw kiln::Error(file + ": input '" + port.name +
                            "' was compiled as an optional holding a tensor, "
                            "but the file holds " +
                            (value.kind == kiln::OptionalValue::Kind::None
                                 ? "no value (kilnc --empty-optional " +
                                       port.name + " compiles for that)"
                                 : std::string("a sequence")));
        inputs.push_back(checkInput(std::move(value.tensors[0]), file, info));
      } else {
        inputs.push_back(
            checkInput(kiln::readTensorFile(file, info.dtype), file, info));
      }
      break;
    }
    case kiln::PortInfo::Kind::Sequence: {
      std::vector<kiln::Tensor> tensors = readSequence(file, port, infos);
      for (size_t i = 0; i < tensors.size(); ++i)
        inputs.push_back(
            checkInput(std::move(tensors[i]), file, infos[port.first + i]));
      break;
    }
    }
  }
  return inputs;
}

/// Element `i` as text: %g for floating point, exact integers otherwise.
std::string kiln::tool::formatElement(const kiln::Tensor &tensor, int64_t i) {
  char buffer[64];
  switch (tensor.dtype()) {
  case kiln::DType::I64:
    std::snprintf(buffer, sizeof(buffer), "%" PRId64,
                  tensor.data<int64_t>()[i]);
    break;
  case kiln::DType::U64:
    std::snprintf(buffer, sizeof(buffer), "%" PRIu64,
                  tensor.data<uint64_t>()[i]);
    break;
  default: {
    double value = kiln::elementAsDouble(tensor.dtype(), tensor.raw(), i);
    std::string name = kiln::dtypeName(tensor.dtype());
    bool integer = name[0] == 'i' || name[0] == 'u' || name == "bool";
    std::snprintf(buffer, sizeof(buffer), integer ? "%.0f" : "%g", value);
    break;
  }
  }
  return buffer;
}

namespace {
std::string outputLine(const std::string &label, const std::string &name,
                       const kiln::Tensor &tensor) {
  const int64_t shown = 8;
  std::string line = label + " " + name + " " +
                     kiln::describe(tensor.dtype(), tensor.shape()) + ":";
  int64_t count = tensor.numElements();
  for (int64_t i = 0; i < std::min(count, shown); ++i)
    line += " " + formatElement(tensor, i);
  if (count > shown)
    line += " ...";
  return line;
}
} // namespace

std::vector<std::string>
kiln::tool::outputLines(const Module &module,
                        const std::vector<Tensor> &outputs) {
  std::vector<std::string> lines;
  const std::vector<TensorInfo> &infos = module.outputs();
  const std::vector<PortInfo> &ports = module.outputPorts();
  for (size_t i = 0; i < ports.size(); ++i) {
    const PortInfo &port = ports[i];
    std::string label = "output_" + std::to_string(i);
    if (port.kind == PortInfo::Kind::None)
      lines.push_back(label + " " + port.name + ": optional with no value");
    for (size_t e = 0; e < port.count; ++e)
      lines.push_back(outputLine(label + (port.kind == PortInfo::Kind::Sequence
                                              ? "[" + std::to_string(e) + "]"
                                              : ""),
                                 infos[port.first + e].name,
                                 outputs[port.first + e]));
  }
  return lines;
}

/// System messages start upper-case ("Not a directory"); ours do not.
static std::string lowerFirst(std::string text) {
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z')
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

/// Writes output port i as DIR/output_<i>.npy (a tensor), a folder
/// DIR/output_<i>/ of 0.npy, 1.npy, ... (a sequence), or an empty file
/// DIR/output_<i>.none (an optional with no value).
void kiln::tool::writeOutputs(const std::string &dir,
                              const kiln::Module &module,
                              const std::vector<kiln::Tensor> &outputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw kiln::Error(dir + ": cannot create the output directory: " +
                      lowerFirst(ec.message()));
  if (!fs::is_directory(dir, ec))
    throw kiln::Error(dir + ": exists and is not a directory");
  const std::vector<kiln::PortInfo> &ports = module.outputPorts();
  for (size_t i = 0; i < ports.size(); ++i) {
    fs::path base = fs::path(dir) / ("output_" + std::to_string(i));
    switch (ports[i].kind) {
    case kiln::PortInfo::Kind::Tensor:
      kiln::writeNpy(base.string() + ".npy", outputs[ports[i].first]);
      break;
    case kiln::PortInfo::Kind::Sequence:
      fs::remove_all(base, ec);
      fs::create_directories(base, ec);
      if (ec)
        throw kiln::Error(base.string() + ": cannot create the folder: " +
                          lowerFirst(ec.message()));
      for (size_t e = 0; e < ports[i].count; ++e)
        kiln::writeNpy((base / (std::to_string(e) + ".npy")).string(),
                       outputs[ports[i].first + e]);
      break;
    case kiln::PortInfo::Kind::None: {
      std::ofstream none(base.string() + ".none", std::ios::binary);
      if (!none)
        throw kiln::Error(base.string() + ".none: cannot write");
      break;
    }
    }
  }
}
