//===- Compiler.h - a compile, stage by stage ---------------------*-
// C++-*-===//
//
// What kilnc and jit::compile both do, as a library: an ONNX model through
//
//   import -> verify -> place -> fuse -> lower -> generate -> package
//
// into a .kiln artifact (or one of the texts kilnc --emit prints). Each
// stage is a method of Compilation, so a caller (a test, a tool) can stop
// after any of them and look at the module. compileModel runs them all.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_COMPILER_H
#define KILN_COMPILER_COMPILER_H

#include "codegen/Backend.h"
#include "codegen/Toolchain.h"
#include "codegen/cuda/Nvrtc.h"
#include "kiln/safetensors.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}
namespace llvm {
class raw_ostream;
}

namespace kiln {

enum class EmitKind { MLIR, Cpp, Cuda, Ptx, Dot, Artifact };

/// Every option of a compile, in one place: kilnc's flags and jit::Options
/// fill it, the stages read it.
struct CompileOptions {
  CompileOptions() { pipeline.devices = {"cpu"}; }

  std::string input;  // .onnx file; with `model`, only names the model
  std::string output; // "-" for stdout (text kinds only)
  /// A model already in memory, compiled instead of reading `input`.
  const onnx::ModelProto *model = nullptr;
  /// A safetensors file whose tensors replace or supply initializers
  /// (kilnc --weights; see applyWeights), keys remapped as `weightOptions`
  /// says. Only for a model read from `input`.
  std::string weights;
  SafetensorsOptions weightOptions;
  /// When set, an artifact is stored here instead of written to `output`.
  std::vector<char> *artifact = nullptr;
  /// When non-empty, an artifact written to `output` is signed with this
  /// key: an HMAC-SHA256 in OUTPUT.sig (runtime/Signature.h).
  std::string signingKey;
  /// Where diagnostics go, without the "kilnc: " prefix (default: stderr,
  /// with it).
  llvm::raw_ostream *diagnostics = nullptr;
  EmitKind emit = EmitKind::Artifact;
  bool printIRAfterAll = false;
  /// NAME=K: a sequence graph input's length (kiln compiles sequences of a
  /// fixed length).
  std::vector<std::string> sequenceLengths;
  /// Optional graph inputs compiled as having no value.
  std::vector<std::string> emptyOptionals;
  /// Input shapes, devices, the placement strategy and its settings, as the
  /// pass pipeline takes them. The first device is the default one: graph
  /// inputs arrive there and (unless outputDevice says otherwise) outputs
  /// leave from it. A shape given for a sequence input applies to each of
  /// its elements.
  PipelineOptions pipeline;
  /// Write the final placement as pins rules to this file.
  std::string savePlacement;
  /// Print the placement table to stdout.
  bool printPlacement = false;
  /// Show stages and kernel counts on stderr (kilnc: when it is a terminal).
  bool progress = false;
  /// After the compile, print each stage's wall time to the diagnostics.
  bool timeStages = false;
  CxxOptions cxx;
  CudaOptions cuda;
};

/// The device list of CompileOptions from kilnc's --device and --devices:
/// `device` (when given) first, then the others; "cpu" when both are empty.
std::vector<std::string> devicesWithDefault(const std::string &device,
                                            std::vector<std::string> devices);

/// Sets options.pipeline.placement from kilnc's --placement text. Fails
/// with the message in `error` when the text is not a strategy.
mlir::LogicalResult setPlacement(CompileOptions &options, llvm::StringRef text,
                                 std::string &error);

struct Plan;
class Progress;

/// One compile. Stages run in order, each once; each fails after printing
/// its errors to options.diagnostics, leaving the module as the last
/// successful stage left it.
class Compilation {
public:
  explicit Compilation(const CompileOptions &options);
  ~Compilation();

  /// Checks the options that no stage would check before doing work (the
  /// -O level, sanitizers, CUDA arch, K of data:K / pipeline:K against the
  /// devices, sequence lengths).
  mlir::LogicalResult checkOptions();
  /// Reads the model (and --weights) and imports it as a kiln graph; for
  /// data:K and pipeline:K also once per chunk size of the batch.
  mlir::LogicalResult import();
  /// Runs MLIR's verifier over the imported graph.
  mlir::LogicalResult verify();
  /// Shapes, placement and copies; writes --save-placement and prints
  /// --print-placement.
  mlir::LogicalResult place();
  /// Elementwise fusion.
  mlir::LogicalResult fuse();
  /// Kernel lowering and the kernel-level passes: the module the emitters
  /// read.
  mlir::LogicalResult lower();
  /// The stages from checkOptions through lower, stopping at the first that
  /// fails: every output but the graph-level MLIR starts from their module.
  mlir::LogicalResult toKernels();
  /// toKernels, then what options.emit asks for: the module's text, the
  /// DOT graph, C++, CUDA C, PTX or the packaged artifact.
  mlir::LogicalResult run();
  /// "time by stage: importing 0.31 s, ..." to the diagnostics: each
  /// stage's wall time so far (kilnc --time-stages).
  void printStageTimes();
  /// The plan of the function's steps and the source of every kernel: C++
  /// for each, and its device backend's source for a kernel on a kind that
  /// has one (CUDA C++ on cuda).
  mlir::LogicalResult generate();
  /// Each device backend's code (PTX through NVRTC), the code section
  /// through the system C++ compiler, and the artifact (written, signed,
  /// or stored in options.artifact).
  mlir::LogicalResult package();

  /// The texts kilnc --emit prints, after the stage that makes each.
  std::string moduleText(); // after lower
  std::string dotText();    // after lower
  std::string cppText();    // after generate
  /// After generate: the translation unit of device backend `name`
  /// ("cuda"), that unit compiled (PTX), and how many kernels it holds.
  std::string backendSource(llvm::StringRef name);
  mlir::FailureOr<std::string> backendCompiled(llvm::StringRef name);
  size_t backendKernels(llvm::StringRef name);
  /// Writes the cuda backend's source to options.cuda.saveSource when that
  /// is set.
  mlir::LogicalResult saveCudaText();
  void warn(const llvm::Twine &message);

  /// Writes `bytes` to `path` ("-": stdout), with an error when it cannot.
  mlir::LogicalResult writeOutput(const std::string &path,
                                  llvm::StringRef bytes);

  mlir::MLIRContext &context() { return context_; }
  mlir::ModuleOp module() { return module_ ? *module_ : mlir::ModuleOp(); }

private:
  mlir::LogicalResult
  runPasses(llvm::function_ref<void(mlir::OpPassManager &)> build);
  mlir::LogicalResult fail(const llvm::Twine &message);

  const CompileOptions &options;
  mlir::MLIRContext context_;
  llvm::raw_ostream &errs;
  std::string prefix;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  std::unique_ptr<Progress> progress;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  /// The input shapes with a sequence's shape given to each element.
  std::vector<std::string> inputShapes;
  std::unique_ptr<Plan> plan;
  std::vector<CxxSource> sources;
  DeviceBackend &backend(llvm::StringRef name);

  /// The code generators of kinds whose kernels are not the C++.
  std::vector<std::unique_ptr<DeviceBackend>> backends;
};

/// Registers `kiln-compile` (kiln-opt): the passes of place, fuse and lower
/// with default options.
void registerCompilePipeline();

/// Runs the stages options.emit needs and writes options.output. Fails
/// without writing it on any error.
mlir::LogicalResult compileModel(const CompileOptions &options);

} // namespace kiln

#endif // KILN_COMPILER_COMPILER_H
