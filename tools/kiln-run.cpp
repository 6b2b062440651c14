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
#include "runtime/tool/RunTool.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

using namespace kiln::tool;

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
  for (const std::string &line : outputLines(module, outputs))
    std::printf("%s\n", line.c_str());
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
    std::fputs(
        benchReport(timeRuns(modules, inputs, options.bench), paths, module)
            .c_str(),
        stdout);
  }
  if (!options.profile.empty())
    std::fputs(profileRun(module, inputs, options.profile).c_str(), stdout);
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
