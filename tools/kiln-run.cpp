//===- kiln-run.cpp - run a compiled .kiln artifact on tensor files -------===//
//
//   kiln-run OUT.kiln INPUT... [--output-dir DIR] [--bench N] [--device D]
//            [--bind ROLE=DEVICE]... [--device-memory DEVICE=BYTES]...
//            [--profile FILE.json] [--versus OTHER.kiln]...
//
// Loads an artifact with the kiln runtime, binding the plan's device roles
// as --device/--bind say (docs/devices.md), reads one tensor per graph input
// (.npy or ONNX TensorProto .pb; positional in graph-input order, or
// NAME=FILE; sequences and optionals as ONNX SequenceProto/OptionalProto or
// folders of .npy), runs the model once, prints a summary line per output
// and optionally saves the outputs as DIR/output_<i>.npy (a sequence: a
// folder DIR/output_<i>/; an optional with no value: DIR/output_<i>.none).
// --bench N then times N more runs (after 3 warm-up runs) and prints the median
// and minimum latency (host wall time: a run returns once its outputs are on
// the host), and for a plan on several roles or on a GPU the peak memory of
// each device.
// --versus OTHER.kiln (with --bench) loads OTHER as well, runs it on the same
// inputs, says whether its outputs match, and times both run by run in turn
// (the machines are noisy: a ratio taken run by run holds up where medians
// from separate processes do not).
// --profile FILE.json runs once more with every step timed, writes a Chrome
// trace (one slice per kernel and copy) and prints the slowest steps.
//
// Depends only on the runtime (no LLVM); arguments are parsed by hand. Every
// failure prints "kiln-run: error: <message>" to stderr and exits with 1.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "kiln/tensor_io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <new>
#include <string>
#include <system_error>
#include <vector>

namespace {

const char kUsage[] =
    "usage: kiln-run OUT.kiln INPUT... [options]\n"
    "\n"
    "Runs a compiled kiln artifact on tensors read from files.\n"
    "\n"
    "  INPUT               a .npy or ONNX TensorProto .pb file, one per graph\n"
    "                      input in graph-input order, or NAME=FILE to bind\n"
    "                      an input by name (positional files then fill the\n"
    "                      remaining inputs in order); a sequence input is a\n"
    "                      folder of 0.npy, 1.npy, ... or a SequenceProto "
    ".pb,\n"
    "                      an optional input an OptionalProto .pb (or, with\n"
    "                      no value, a .none file)\n"
    "\n"
    "options:\n"
    "  --output-dir DIR    also write DIR/output_<i>.npy for every output\n"
    "                      (DIR is created if missing); a sequence output as\n"
    "                      a folder DIR/output_<i>/ of 0.npy, 1.npy, ..., an\n"
    "                      optional output with no value as an empty file\n"
    "                      DIR/output_<i>.none\n"
    "  --bench N           after 3 warm-up runs, time N runs and print the\n"
    "                      median and minimum latency (and, for a plan on\n"
    "                      several device roles or a GPU, each device's peak\n"
    "                      memory)\n"
    "  --versus OTHER.kiln with --bench: load OTHER too, run it on the same\n"
    "                      inputs and say whether its outputs match, then\n"
    "                      time both in turn, run by run, and print OTHER's\n"
    "                      median and min and the median and quartiles of\n"
    "                      OTHER's time over this artifact's, run by run;\n"
    "                      repeatable\n"
    "  --profile FILE.json after the runs above, run once more with every\n"
    "                      kernel and copy timed; write a Chrome trace\n"
    "                      (chrome://tracing, ui.perfetto.dev) and print the\n"
    "                      ten slowest steps\n"
    "  --device D          run every device role of the plan on D: cpu,\n"
    "                      sim:N (a host-memory test device), cuda:N or\n"
    "                      cuda:auto (the GPU with the most free memory); by\n"
    "                      default, each role runs on the device it was\n"
    "                      compiled for, and a cuda role of a plan with a cpu\n"
    "                      role falls back to cpu when CUDA is unavailable\n"
    "  --bind ROLE=DEVICE  run one role on DEVICE; ROLE is the role's index\n"
    "                      or the device it was compiled for (e.g. 1=sim:0,\n"
    "                      cuda:0=cpu runs a GPU role's CPU code); "
    "repeatable,\n"
    "                      applied after --device\n"
    "  --device-memory DEVICE=BYTES\n"
    "                      cap the memory kiln may hold on DEVICE (e.g.\n"
    "                      sim:0=64M, cuda:0=8G); suffixes K, M, G (or KiB,\n"
    "                      MiB, GiB) are powers of 1024; repeatable\n"
    "  --require-signature KEYFILE\n"
    "                      load only an artifact signed with the key in\n"
    "                      KEYFILE (kilnc --sign-key KEYFILE): OUT.kiln.sig\n"
    "                      must hold its HMAC-SHA256, checked before any of\n"
    "                      its code is loaded (and the same for --versus);\n"
    "                      without it, loading runs whatever code the\n"
    "                      artifact holds\n"
    "  --help, -h          print this help\n"
    "\n"
    "For every output, one line goes to stdout:\n"
    "  output_<i> NAME DTYPE[SHAPE]: first values ...\n";

const char kUsageHint[] =
    "usage: kiln-run OUT.kiln INPUT... [--output-dir DIR] [--bench N] "
    "[--device D] [--bind ROLE=DEVICE] [--device-memory DEVICE=BYTES] "
    "[--profile FILE.json] [--versus OTHER.kiln] "
    "[--require-signature KEYFILE]; see "
    "'kiln-run --help'\n";

/// A command-line mistake: reported with a usage hint.
class UsageError : public kiln::Error {
public:
  using kiln::Error::Error;
};

struct Options {
  std::string modulePath;
  std::vector<std::string> inputs;
  std::string outputDir;
  bool haveOutputDir = false;
  long bench = 0;
  std::vector<std::string> versus;
  std::string profile;
  kiln::LoadOptions load;
  bool help = false;
};

long parseBenchCount(const std::string &text) {
  const long maxRuns = 1000000000;
  errno = 0;
  char *end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < 1 ||
      value > maxRuns || !(text[0] >= '0' && text[0] <= '9'))
    throw UsageError("--bench expects a positive number of runs, got '" + text +
                     "'");
  return value;
}

/// Splits "KEY=VALUE" for `flag`, both sides non-empty.
std::pair<std::string, std::string>
splitPair(const std::string &flag, const std::string &text, const char *form) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError(flag + " expects " + form + ", got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

/// "4096", "64K", "2GiB": a whole number of bytes; K, M and G (or KiB, MiB,
/// GiB) are powers of 1024.
size_t parseBytes(const std::string &flag, const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  std::string suffix = text.substr(digits);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty())
    shift = 64; // not a suffix we know
  errno = 0;
  unsigned long long value =
      digits ? std::strtoull(text.substr(0, digits).c_str(), nullptr, 10) : 0;
  if (!digits || shift == 64 || errno == ERANGE ||
      value > (static_cast<unsigned long long>(SIZE_MAX) >> shift))
    throw UsageError(flag +
                     " expects a size in bytes such as 4096, 64K, 512M "
                     "or 2GiB, got '" +
                     text + "'");
  return static_cast<size_t>(value << shift);
}

Options parseArguments(int argc, char **argv) {
  Options options;
  std::vector<std::string> positional;
  bool onlyPositional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (onlyPositional || arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      onlyPositional = true;
      continue;
    }
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      options.help = true;
      continue;
    }
    // Options with a value: "--flag VALUE" or "--flag=VALUE".
    std::string flag = arg, value;
    bool haveValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      haveValue = true;
    }
    if (flag != "--output-dir" && flag != "--bench" && flag != "--device" &&
        flag != "--bind" && flag != "--device-memory" && flag != "--profile" &&
        flag != "--versus" && flag != "--require-signature")
      throw UsageError("unknown option '" + arg + "'");
    if (!haveValue) {
      if (i + 1 >= argc)
        throw UsageError("option '" + flag + "' needs a value");
      value = argv[++i];
    }
    if (flag == "--output-dir") {
      if (value.empty())
        throw UsageError("--output-dir needs a directory name");
      options.outputDir = value;
      options.haveOutputDir = true;
    } else if (flag == "--bench") {
      options.bench = parseBenchCount(value);
    } else if (flag == "--versus") {
      if (value.empty())
        throw UsageError("--versus needs a .kiln artifact");
      options.versus.push_back(value);
    } else if (flag == "--profile") {
      if (value.empty())
        throw UsageError("--profile needs a file name");
      options.profile = value;
    } else if (flag == "--device") {
      if (value.empty())
        throw UsageError(
            "--device needs a device name such as cpu, sim:0 or cuda:0");
      options.load.device = value;
    } else if (flag == "--require-signature") {
      std::ifstream key(value, std::ios::binary);
      if (value.empty() || !key)
        throw UsageError("--require-signature needs the key file kilnc "
                         "--sign-key signed with; cannot read '" +
                         value + "'");
      options.load.signingKey.assign(std::istreambuf_iterator<char>(key), {});
      if (options.load.signingKey.empty())
        throw UsageError("--require-signature: key file '" + value +
                         "' is empty");
    } else if (flag == "--bind") {
      auto [role, device] = splitPair(flag, value, "ROLE=DEVICE");
      if (!options.load.bind.emplace(role, device).second)
        throw UsageError("--bind: role '" + role + "' is bound more than once");
    } else {
      auto [device, bytes] = splitPair(flag, value, "DEVICE=BYTES");
      if (!options.load.memoryCapacity.emplace(device, parseBytes(flag, bytes))
               .second)
        throw UsageError("--device-memory: device '" + device +
                         "' is given more than once");
    }
  }
  if (options.help)
    return options;
  if (positional.empty())
    throw UsageError("missing the .kiln artifact to run");
  if (!options.versus.empty() && options.bench == 0)
    throw UsageError("--versus needs --bench N: it times both artifacts "
                     "run by run");
  options.modulePath = positional.front();
  options.inputs.assign(positional.begin() + 1, positional.end());
  return options;
}

/// "x f32[1,3]", "seq sequence of 3 f32[?]", "opt optional with no value".
std::string describePort(const kiln::PortInfo &port,
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

std::string describeInputs(const kiln::Module &module) {
  const std::vector<kiln::PortInfo> &ports = module.inputPorts();
  if (ports.empty())
    return "the model takes no inputs";
  std::string text = "the model's inputs are:";
  for (size_t i = 0; i < ports.size(); ++i)
    text += std::string(i ? "," : "") + " " +
            describePort(ports[i], module.inputs());
  return text;
}

bool isRegularFile(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

/// Maps the INPUT arguments to one file per graph input, in graph order.
std::vector<std::string> assignInputFiles(const std::vector<std::string> &args,
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
kiln::Tensor checkInput(kiln::Tensor tensor, const std::string &file,
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

bool hasExtension(const std::string &path, const char *extension) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  return ext == extension;
}

/// The tensors of a sequence input: a folder of 0.npy, 1.npy, ... (as
/// --output-dir writes them), an ONNX SequenceProto .pb, or for an optional
/// input an OptionalProto .pb.
std::vector<kiln::Tensor>
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
std::vector<kiln::Tensor> readInputs(const std::vector<std::string> &files,
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
std::string formatElement(const kiln::Tensor &tensor, int64_t i) {
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

void printOutput(const std::string &label, const std::string &name,
                 const kiln::Tensor &tensor) {
  const int64_t shown = 8;
  std::string line = label + " " + name + " " +
                     kiln::describe(tensor.dtype(), tensor.shape()) + ":";
  int64_t count = tensor.numElements();
  for (int64_t i = 0; i < std::min(count, shown); ++i)
    line += " " + formatElement(tensor, i);
  if (count > shown)
    line += " ...";
  std::printf("%s\n", line.c_str());
}

/// System messages start upper-case ("Not a directory"); ours do not.
std::string lowerFirst(std::string text) {
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z')
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

/// Writes output port i as DIR/output_<i>.npy (a tensor), a folder
/// DIR/output_<i>/ of 0.npy, 1.npy, ... (a sequence), or an empty file
/// DIR/output_<i>.none (an optional with no value).
void writeOutputs(const std::string &dir, const kiln::Module &module,
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

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/// Whether `other`'s outputs are `outputs`, bit for bit, else the largest
/// relative L2 difference over the f32 outputs (or the first output that
/// differs, when none of those is f32, or a shape that differs).
std::string compareOutputs(const std::vector<kiln::Tensor> &outputs,
                           const std::vector<kiln::Tensor> &other) {
  if (outputs.size() != other.size())
    return "outputs differ: " + std::to_string(other.size()) +
           " outputs against " + std::to_string(outputs.size());
  const size_t none = outputs.size();
  size_t firstDiffering = none, worstF32 = none;
  double worst = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::Tensor &a = outputs[i], &b = other[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return "output_" + std::to_string(i) +
             " differs: " + kiln::describe(b.dtype(), b.shape()) + " against " +
             kiln::describe(a.dtype(), a.shape());
    if (!a.nbytes() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0)
      continue;
    if (firstDiffering == none)
      firstDiffering = i;
    if (a.dtype() != kiln::DType::F32)
      continue;
    const float *x = a.data<float>(), *y = b.data<float>();
    double diff = 0, norm = 0;
    for (int64_t e = 0; e < a.numElements(); ++e) {
      diff += (double(y[e]) - x[e]) * (double(y[e]) - x[e]);
      norm += double(x[e]) * x[e];
    }
    double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    if (worstF32 == none || !(rel <= worst)) { // a NaN is the worst
      worst = rel;
      worstF32 = i;
    }
  }
  if (firstDiffering == none)
    return "outputs bit-identical";
  if (worstF32 == none)
    return "outputs differ: output_" + std::to_string(firstDiffering) +
           " (compared bit for bit)";
  char text[96];
  std::snprintf(text, sizeof text,
                "outputs differ: largest rel L2 %.2e (output_%zu)", worst,
                worstF32);
  return text;
}

/// Throws unless `inputs` (read for the main artifact) fit `other`, the
/// artifact at `path`, naming what it takes.
void checkInputsFit(const kiln::Module &other, const std::string &path,
                    const std::vector<kiln::Tensor> &inputs) {
  const std::vector<kiln::TensorInfo> &infos = other.inputs();
  if (infos.size() != inputs.size())
    throw kiln::Error("--versus " + path + ": " + describeInputs(other) +
                      "; given " + std::to_string(inputs.size()) + " tensors");
  for (size_t i = 0; i < inputs.size(); ++i)
    checkInput(inputs[i], "--versus " + path, infos[i]);
}

/// Times `runs` runs of each module after 3 warm-up runs each. With more
/// than one, every round runs each once, the first in turn (so none is
/// always first), and the others are also compared run by run with the
/// first.
void benchmark(const std::vector<const kiln::Module *> &modules,
               const std::vector<std::string> &paths,
               const std::vector<kiln::Tensor> &inputs, long runs) {
  using Clock = std::chrono::steady_clock;
  for (const kiln::Module *module : modules)
    for (int i = 0; i < 3; ++i)
      module->run(inputs);
  std::vector<std::vector<double>> millis(modules.size());
  for (long r = 0; r < runs; ++r)
    for (size_t j = 0; j < modules.size(); ++j) {
      size_t m = (j + static_cast<size_t>(r)) % modules.size();
      Clock::time_point start = Clock::now();
      modules[m]->run(inputs);
      std::chrono::duration<double, std::milli> elapsed = Clock::now() - start;
      millis[m].push_back(elapsed.count());
    }
  std::printf("latency over %ld runs: median %.3f ms, min %.3f ms\n", runs,
              median(millis[0]),
              *std::min_element(millis[0].begin(), millis[0].end()));
  for (size_t m = 1; m < modules.size(); ++m) {
    std::vector<double> ratios;
    for (long r = 0; r < runs; ++r)
      ratios.push_back(millis[m][r] / millis[0][r]);
    std::sort(ratios.begin(), ratios.end());
    std::printf("versus %s: median %.3f ms, min %.3f ms; run by run %.3fx "
                "(quartiles %.3f-%.3f)\n",
                paths[m].c_str(), median(millis[m]),
                *std::min_element(millis[m].begin(), millis[m].end()),
                median(ratios), ratios[ratios.size() / 4],
                ratios[(3 * ratios.size()) / 4]);
  }
  const kiln::Module &module = *modules.front();
  // Per device (roles may share one), for plans on several roles or a GPU.
  std::vector<kiln::DeviceInfo> roles = module.devices();
  bool onGpu = std::any_of(roles.begin(), roles.end(), [](const auto &role) {
    return role.boundName.rfind("cuda:", 0) == 0;
  });
  if (roles.size() < 2 && !onGpu)
    return;
  std::vector<size_t> peaks = module.peakBytes();
  std::vector<std::string> seen;
  std::string line = "peak device memory:";
  for (size_t r = 0; r < roles.size(); ++r) {
    if (std::find(seen.begin(), seen.end(), roles[r].boundName) != seen.end())
      continue;
    seen.push_back(roles[r].boundName);
    line += std::string(seen.size() > 1 ? "," : "") + " " + roles[r].boundName +
            " " + std::to_string(peaks[r]) + " bytes";
  }
  std::printf("%s\n", line.c_str());
}

/// One profiled run: the trace to `path`, the slowest steps to stdout.
void profile(const kiln::Module &module,
             const std::vector<kiln::Tensor> &inputs, const std::string &path) {
  std::vector<kiln::ProfileEvent> events;
  module.run(inputs, events);
  std::ofstream out(path, std::ios::binary);
  out << kiln::chromeTrace(events) << "\n";
  out.close();
  if (!out)
    throw kiln::Error("cannot write the profile to " + path);
  double total = 0;
  for (const kiln::ProfileEvent &e : events)
    total += e.durationUs;
  std::stable_sort(
      events.begin(), events.end(),
      [](const auto &a, const auto &b) { return a.durationUs > b.durationUs; });
  std::printf("profile: %zu steps, %.3f ms in steps, written to %s\n",
              events.size(), total / 1000, path.c_str());
  for (size_t i = 0; i < events.size() && i < 10; ++i)
    std::printf("  %9.3f ms %5.1f%%  %-10s %-8s %s\n",
                events[i].durationUs / 1000,
                total > 0 ? 100 * events[i].durationUs / total : 0.0,
                events[i].name.c_str(), events[i].device.c_str(),
                events[i].nodes.c_str());
}

int runTool(int argc, char **argv) {
  Options options = parseArguments(argc, argv);
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  kiln::Module module = kiln::Module::load(options.modulePath, options.load);
  std::vector<std::string> files = assignInputFiles(options.inputs, module);
  std::vector<kiln::Tensor> inputs = readInputs(files, module);

  std::vector<kiln::Tensor> outputs = module.run(inputs);
  const std::vector<kiln::TensorInfo> &outputInfos = module.outputs();
  const std::vector<kiln::PortInfo> &outputPorts = module.outputPorts();
  for (size_t i = 0; i < outputPorts.size(); ++i) {
    const kiln::PortInfo &port = outputPorts[i];
    if (port.kind == kiln::PortInfo::Kind::None)
      std::printf("output_%zu %s: optional with no value\n", i,
                  port.name.c_str());
    for (size_t e = 0; e < port.count; ++e) {
      std::string label = "output_" + std::to_string(i);
      if (port.kind == kiln::PortInfo::Kind::Sequence)
        label += "[" + std::to_string(e) + "]";
      printOutput(label, outputInfos[port.first + e].name,
                  outputs[port.first + e]);
    }
  }
  std::fflush(stdout);
  if (options.haveOutputDir)
    writeOutputs(options.outputDir, module, outputs);
  if (options.bench > 0) {
    std::vector<kiln::Module> others;
    std::vector<const kiln::Module *> modules{&module};
    std::vector<std::string> paths{options.modulePath};
    others.reserve(options.versus.size());
    for (const std::string &path : options.versus) {
      others.push_back(kiln::Module::load(path, options.load));
      checkInputsFit(others.back(), path, inputs);
      modules.push_back(&others.back());
      paths.push_back(path);
      std::vector<kiln::Tensor> theirs;
      try {
        theirs = others.back().run(inputs);
      } catch (const kiln::Error &e) {
        throw kiln::Error("--versus " + path + ": " + e.what());
      }
      std::printf("versus %s: %s\n", path.c_str(),
                  compareOutputs(outputs, theirs).c_str());
    }
    std::fflush(stdout);
    benchmark(modules, paths, inputs, options.bench);
  }
  if (!options.profile.empty())
    profile(module, inputs, options.profile);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw kiln::Error("cannot write to stdout");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return runTool(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "kiln-run: error: %s\n%s", e.what(), kUsageHint);
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "kiln-run: error: %s\n", e.what());
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "kiln-run: error: out of memory\n");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-run: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kiln-run: error: unknown failure\n");
  }
  return 1;
}
