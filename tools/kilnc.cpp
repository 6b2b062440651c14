//===- kilnc.cpp - the kiln ahead-of-time compiler ------------------------===//
//
//   kilnc MODEL.onnx -o OUT.kiln [--emit=mlir|cpp|cuda|ptx|dot|artifact]
//         [--input-shape NAME=D0xD1...] [--sequence-length NAME=K]
//         [--empty-optional NAME] [--device D] [--devices D1,D2,...]
//         [--pin FILE.json] [--save-placement FILE.json] [--print-placement]
//         [--output-device D] [--device-profile D=FILE.json]
//         [--placement=single|auto|data:K|pipeline:K] [--microbatches M]
//         [--split-dim NAME=D]
//         [--print-ir-after-all] [-O0..-O3]
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

using namespace llvm;

static cl::OptionCategory category("kilnc options");
static cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                                  cl::Required, cl::cat(category));
static cl::opt<std::string> output("o",
                                   cl::desc("output file (default: "
                                            "MODEL.kiln, or - for text)"),
                                   cl::value_desc("file"), cl::cat(category));
static cl::opt<kiln::EmitKind> emit(
    "emit", cl::desc("what to produce"), cl::init(kiln::EmitKind::Artifact),
    cl::values(clEnumValN(kiln::EmitKind::MLIR, "mlir", "kernel-level MLIR"),
               clEnumValN(kiln::EmitKind::Cpp, "cpp", "generated C++ kernels"),
               clEnumValN(kiln::EmitKind::Cuda, "cuda",
                          "generated CUDA kernels (those on cuda devices)"),
               clEnumValN(kiln::EmitKind::Ptx, "ptx",
                          "PTX of the CUDA kernels, from NVRTC"),
               clEnumValN(kiln::EmitKind::Dot, "dot",
                          "Graphviz of the placed, fused graph"),
               clEnumValN(kiln::EmitKind::Artifact, "artifact",
                          "a .kiln artifact (default)")),
    cl::cat(category));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("bind a model input's symbolic dims, e.g. x=64x784 "
                         "('?' keeps a dim symbolic, 'scalar' for rank 0; a "
                         "sequence's NAME applies to every element, "
                         "NAME[i] to one; repeatable; unbound dims are sized "
                         "at run time; cuda, data:K and pipeline:K need them "
                         "bound)"),
                cl::value_desc("NAME=D0xD1..."), cl::cat(category));
static cl::list<std::string> sequenceLengths(
    "sequence-length",
    cl::desc("the length of a sequence input (kiln compiles sequences of a "
             "fixed length; the elements are inputs NAME[0], NAME[1], ...); "
             "repeatable"),
    cl::value_desc("NAME=K"), cl::cat(category));
static cl::list<std::string> emptyOptionals(
    "empty-optional",
    cl::desc("compile an optional input as having no value (by default an "
             "optional input has one); repeatable"),
    cl::value_desc("NAME"), cl::cat(category));
static cl::opt<std::string>
    device("device",
           cl::desc("the default device: graph inputs arrive there, and every "
                    "op not placed elsewhere runs there (default: the first "
                    "of --devices, else cpu)"),
           cl::value_desc("cpu|sim:N|cuda:N"), cl::cat(category));
static cl::list<std::string> devices("devices",
                                     cl::desc("devices placement may use"),
                                     cl::value_desc("D1,D2,..."),
                                     cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string>
    placement("placement",
              cl::desc("placement strategy (single: the default "
                       "device plus pins and fallbacks)"),
              cl::value_desc("single|auto|pipeline:K|data:K"),
              cl::init("single"), cl::cat(category));
static cl::opt<unsigned>
    microbatches("microbatches",
                 cl::desc("for --placement=pipeline:K, the chunks of the "
                          "batch that flow through the stages (default 1)"),
                 cl::init(1), cl::cat(category));
static cl::list<std::string>
    splitDims("split-dim",
              cl::desc("for --placement=data:K, the input dim to scatter "
                       "(default 0 for every input; -1 replicates the input "
                       "whole); outputs are gathered along the same dim"),
              cl::value_desc("NAME=D"), cl::cat(category));
static cl::opt<std::string>
    pin("pin",
        cl::desc("JSON rules placing ops by ONNX op type and/or node-name "
                 "regex: {\"rules\": [{\"op\": \"Conv\", \"node\": "
                 "\"/layer1/.*\", \"device\": \"sim:0\"}]}"),
        cl::value_desc("file.json"), cl::cat(category));
static cl::opt<std::string>
    savePlacement("save-placement",
                  cl::desc("write the final placement as pins rules (edit "
                           "and feed back with --pin)"),
                  cl::value_desc("file.json"), cl::cat(category));
static cl::opt<bool>
    printPlacement("print-placement",
                   cl::desc("print op -> device, estimated costs, copies and "
                            "peak memory per device"),
                   cl::cat(category));
static cl::opt<bool> timeStages(
    "time-stages",
    cl::desc("after the compile, print each stage's wall time (importing, "
             "optimizing the graph, fusing, lowering, generating code, "
             "compiling kernels, ...)"),
    cl::cat(category));
static cl::opt<std::string>
    outputDevice("output-device",
                 cl::desc("the device outputs are delivered on (default: the "
                          "default device)"),
                 cl::value_desc("D"), cl::cat(category));
static cl::list<std::string>
    deviceProfiles("device-profile",
                   cl::desc("override a device's cost profile (peak_gflops, "
                            "memory_gbps, capacity_bytes, link_gbps, "
                            "link_latency_us, launch_us, ops, "
                            "unsupported_ops); repeatable"),
                   cl::value_desc("D=FILE.json"), cl::cat(category));
static cl::opt<bool> printIR("print-ir-after-all",
                             cl::desc("print the IR after every pass"),
                             cl::cat(category));
static cl::opt<int> optLevel("O", cl::desc("C++ optimization level 0-3"),
                             cl::Prefix, cl::init(3), cl::cat(category));
static cl::opt<std::string> targetCpu(
    "target-cpu",
    cl::desc("CPU to generate code for: native (default), x86-64-v3, "
             "x86-64-v4, generic, or any -march name; the features native "
             "and the x86-64 levels need are recorded and checked at load"),
    cl::init("native"), cl::value_desc("cpu"), cl::cat(category));
static cl::opt<std::string> signKey(
    "sign-key",
    cl::desc("sign the artifact with the secret key in this file (at least "
             "16 bytes; e.g. head -c 32 /dev/urandom > key): an HMAC-SHA256 "
             "of it goes to OUT.kiln.sig, which kiln-run "
             "--require-signature=KEYFILE checks before loading any code"),
    cl::value_desc("keyfile"));

static cl::opt<std::string> sanitize(
    "sanitize",
    cl::desc("compile the kernels with these sanitizers (address, "
             "undefined, or both: address,undefined); the artifact then "
             "runs only in a process built with them (scripts/build "
             "--sanitize=...)"),
    cl::value_desc("list"), cl::cat(category));
static cl::alias targetCpuAlias("cpu", cl::desc("alias for --target-cpu"),
                                cl::aliasopt(targetCpu), cl::cat(category));
static cl::opt<std::string>
    cudaArch("cuda-arch",
             cl::desc("GPU generation the PTX of cuda kernels targets; it "
                      "JIT-compiles forward to newer GPUs (default sm_80)"),
             cl::init("sm_80"), cl::value_desc("sm_NN"), cl::cat(category));
static cl::opt<bool> cudaWarpReductions(
    "cuda-warp-reductions",
    cl::desc("give each output of a long reduction with few outputs a warp, "
             "or a block when longer still, on cuda devices (default true; "
             "false: one thread per output)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> cudaGemmLibrary(
    "cuda-cublas",
    cl::desc("run matrix products on cuda devices through cuBLAS (default "
             "true; false: generated kernels)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> cudaConvLibrary(
    "cuda-cudnn",
    cl::desc("run 2-D convolutions on cuda devices through cuDNN (default "
             "true; false: generated kernels)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> cudaConvFusion(
    "cuda-cudnn-fusion",
    cl::desc("let a cuDNN convolution add its bias (and a residual) and "
             "apply the ReLU after it in the same call (default true; "
             "false: a generated kernel does those)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> cudaLibraryFallbacks(
    "cuda-library-fallbacks",
    cl::desc("give each cuBLAS and cuDNN launch a generated kernel that "
             "runs where the library does not load (default true)"),
    cl::init(true), cl::cat(category));
static cl::opt<std::string> saveCuda(
    "save-cuda",
    cl::desc("also write the CUDA C++ of the kernels on cuda devices (what "
             "NVRTC compiles; as --emit=cuda prints) to this file"),
    cl::value_desc("file"), cl::cat(category));
static cl::opt<std::string> keepTemps("keep-temps",
                                      cl::desc("keep generated C++ and objects "
                                               "in this folder"),
                                      cl::value_desc("dir"), cl::cat(category));

static cl::opt<std::string> weights(
    "weights",
    cl::desc("a safetensors file whose tensors replace the initializers of "
             "the same name, or supply graph inputs as constants"),
    cl::value_desc("file.safetensors"), cl::cat(category));
static cl::opt<std::string> stripPrefix(
    "strip-prefix",
    cl::desc("remove this prefix from --weights keys that have it (e.g. "
             "'module.' from torch.nn.DataParallel checkpoints)"),
    cl::value_desc("prefix"), cl::cat(category));
static cl::list<std::string>
    renames("rename",
            cl::desc("rename a --weights key (after --strip-prefix); "
                     "repeatable"),
            cl::value_desc("OLD=NEW"), cl::cat(category));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "kiln ahead-of-time compiler\n");
  kiln::CompileOptions options;
  options.input = input;
  if ((!stripPrefix.empty() || !renames.empty()) && weights.empty()) {
    errs() << "kilnc: error: --strip-prefix and --rename apply to --weights, "
              "which is not given\n";
    return 1;
  }
  options.weights = weights;
  options.weightOptions.strip_prefix = stripPrefix;
  for (const std::string &rename : renames) {
    auto [from, to] = StringRef(rename).split('=');
    if (from.empty() || to.empty()) {
      errs() << "kilnc: error: --rename=" << rename << " is not OLD=NEW\n";
      return 1;
    }
    options.weightOptions.rename[from.str()] = to.str();
  }
  options.emit = emit;
  options.output = output;
  if (options.output.empty())
    options.output = emit == kiln::EmitKind::Artifact
                         ? sys::path::stem(input).str() + ".kiln"
                         : "-";
  options.printIRAfterAll = printIR;
  options.sequenceLengths = sequenceLengths;
  options.emptyOptionals = emptyOptionals;
  kiln::PipelineOptions &pipeline = options.pipeline;
  pipeline.inputShapes = inputShapes;
  pipeline.devices = kiln::devicesWithDefault(
      device, std::vector<std::string>(devices.begin(), devices.end()));
  pipeline.pins = pin;
  std::string error;
  if (mlir::failed(kiln::setPlacement(options, placement, error))) {
    errs() << "kilnc: error: " << error << "\n";
    return 1;
  }
  pipeline.splitDims = splitDims;
  pipeline.microbatches = microbatches;
  pipeline.profiles = deviceProfiles;
  pipeline.outputDevice = outputDevice;
  options.savePlacement = savePlacement;
  options.printPlacement = printPlacement;
  options.progress = isatty(2) && options.output != "-";
  options.timeStages = timeStages;
  options.cxx.optLevel = optLevel;
  options.cuda.arch = cudaArch;
  options.cuda.warpReductions = cudaWarpReductions;
  options.cuda.gemmLibrary = cudaGemmLibrary;
  options.cuda.convLibrary = cudaConvLibrary;
  options.cuda.convFusion = cudaConvFusion;
  options.cuda.libraryFallbacks = cudaLibraryFallbacks;
  options.cuda.saveSource = saveCuda;
  options.cxx.targetCpu = targetCpu;
  options.cxx.sanitize = sanitize;
  options.cxx.keepDir = keepTemps;
  if (!signKey.empty()) {
    if (emit != kiln::EmitKind::Artifact || options.output == "-") {
      errs() << "kilnc: error: --sign-key signs an artifact written to a "
                "file (--emit=artifact, -o OUT.kiln)\n";
      return 1;
    }
    auto key = MemoryBuffer::getFile(signKey);
    if (!key) {
      errs() << "kilnc: error: --sign-key: cannot read '" << signKey
             << "': " << key.getError().message() << "\n";
      return 1;
    }
    options.signingKey = (*key)->getBuffer().str();
    if (options.signingKey.size() < 16) {
      errs() << "kilnc: error: --sign-key: '" << signKey << "' holds "
             << options.signingKey.size()
             << " bytes; a key needs at least 16 (e.g. head -c 32 "
                "/dev/urandom > key)\n";
      return 1;
    }
  }
  return mlir::succeeded(kiln::compileModel(options)) ? 0 : 1;
}
