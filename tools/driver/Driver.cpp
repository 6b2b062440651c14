//===- Driver.cpp - import, optimize, generate, compile, package ----------===//

#include "tools/driver/Driver.h"

#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitter.h"
#include "codegen/Plan.h"
#include "frontend/OnnxImporter.h"
#include "kiln/safetensors.h"
#include "passes/Passes.h"
#include "passes/placement/Chunks.h"
#include "passes/placement/Report.h"
#include "runtime/Artifact.h"
#include "runtime/Signature.h"

#include <onnx/onnx_pb.h>

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace kiln {

namespace {
constexpr const char *kVersion = "0.1.0";

class Progress {
public:
  explicit Progress(bool enabled) : enabled(enabled) {}
  void stage(const std::string &text) {
    if (enabled)
      llvm::errs() << "\r\033[K[kilnc] " << text << (endsLine ? "\n" : "");
  }
  void done() {
    if (enabled)
      llvm::errs() << "\r\033[K";
  }

private:
  bool enabled;
  bool endsLine = false;
};

LogicalResult writeOutput(const std::string &path, llvm::StringRef bytes,
                          llvm::raw_ostream &errs, llvm::StringRef prefix) {
  std::string error;
  auto file = mlir::openOutputFile(path, &error);
  if (!file) {
    errs << prefix << "error: cannot write '" << path << "': " << error << "\n";
    return failure();
  }
  file->os() << bytes;
  file->keep();
  return success();
}

// "model.onnx: node '/fc1/Gemm'": the file and the ONNX node names a
// location carries (a fused kernel carries several).
std::string describe(Location loc) {
  std::string file;
  std::vector<std::string> nodes;
  loc->walk([&](Location l) {
    if (auto f = dyn_cast<FileLineColLoc>(l)) {
      if (file.empty())
        file = f.getFilename().str() +
               (f.getLine() ? ":" + std::to_string(f.getLine()) : "");
    } else if (auto n = dyn_cast<NameLoc>(l)) {
      std::string quoted = "'" + n.getName().str() + "'";
      if (!llvm::is_contained(nodes, quoted))
        nodes.push_back(quoted);
    }
    return WalkResult::advance();
  });
  std::string text = file;
  if (!nodes.empty())
    text += (text.empty() ? "" : ": ") +
            std::string(nodes.size() == 1 ? "node " : "nodes ") +
            llvm::join(nodes, ", ");
  return text;
}

// For --placement=data:K: the model specialised for each chunk size of the
// batch, as private @main_chunk_<size> functions beside @main (see
// kiln-place-data). Each is a fresh import, so shape computations fold for
// that size.
LogicalResult addChunkFunctions(MLIRContext &context, ModuleOp module,
                                const CompileOptions &options,
                                const onnx::ModelProto &model,
                                const ImportOptions &importOptions,
                                unsigned parts) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto split = splitDimsOf(main, options.splitDims);
  if (failed(split))
    return failure();
  auto [dims, batch] = *split;
  std::vector<int64_t> sizes = chunkSizes(batch, parts);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int64_t size : sizes) {
    ImportOptions chunk = importOptions;
    for (auto [i, t] : llvm::enumerate(main.getArgumentTypes())) {
      if (dims[i] < 0)
        continue;
      auto name = main.getArgAttrOfType<StringAttr>(i, "kiln.name");
      SmallVector<int64_t> shape(cast<RankedTensorType>(t).getShape());
      shape[dims[i]] = size;
      std::string binding = name.str() + "=";
      for (auto [j, d] : llvm::enumerate(shape)) {
        if (ShapedType::isDynamic(d))
          return emitError(main.getLoc())
                 << "input '" << name.str() << "' has symbolic dims; bind "
                 << "them with --input-shape for data parallelism";
        binding += (j ? "x" : "") + std::to_string(d);
      }
      llvm::erase_if(chunk.inputShapes, [&](const std::string &b) {
        return StringRef(b).starts_with(name.str() + "=");
      });
      chunk.inputShapes.push_back(binding);
    }
    OwningOpRef<ModuleOp> imported =
        importOnnxModel(context, model, options.input, chunk);
    if (!imported)
      return failure();
    auto f = imported->lookupSymbol<func::FuncOp>("main");
    f->remove();
    f.setSymName("main_chunk_" + std::to_string(size));
    f.setPrivate();
    module.push_back(f);
  }
  return success();
}

LogicalResult printDiagnostic(Diagnostic &diag, llvm::raw_ostream &errs,
                              llvm::StringRef prefix) {
  auto print = [&](Location loc, DiagnosticSeverity severity,
                   const std::string &message) {
    const char *kind = severity == DiagnosticSeverity::Error     ? "error"
                       : severity == DiagnosticSeverity::Warning ? "warning"
                                                                 : "note";
    std::string where = describe(loc);
    errs << prefix << (where.empty() ? "" : where + ": ") << kind << ": "
         << message << "\n";
  };
  print(diag.getLocation(), diag.getSeverity(), diag.str());
  for (Diagnostic &note : diag.getNotes())
    print(note.getLocation(), note.getSeverity(), note.str());
  return success();
}

// Weights are kept out of printed IR: blobs longer than 64 bytes show as
// "__elided__".
OpPrintingFlags printingFlags() {
  return OpPrintingFlags().elideLargeResourceString(64);
}

std::string abiSource() {
  return "// kiln: the kernel ABI version this code section follows\n"
         "extern \"C\" int kiln_abi_version(void) { return " +
         std::to_string(artifact::kKernelABI) + "; }\n";
}
} // namespace

std::vector<std::string> devicesWithDefault(const std::string &device,
                                            std::vector<std::string> devices) {
  if (!device.empty()) {
    llvm::erase(devices, device);
    devices.insert(devices.begin(), device);
  }
  if (devices.empty())
    devices.push_back("cpu");
  return devices;
}

LogicalResult compileModel(const CompileOptions &options) {
  MLIRContext context;
  context.loadDialect<KilnDialect, func::FuncDialect, linalg::LinalgDialect,
                      tensor::TensorDialect, arith::ArithDialect,
                      math::MathDialect>();
  context.printOpOnDiagnostic(false);
  llvm::raw_ostream &errs =
      options.diagnostics ? *options.diagnostics : llvm::errs();
  std::string prefix = options.diagnostics ? "" : "kilnc: ";
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    return printDiagnostic(diag, errs, prefix);
  });
  auto writeOutput = [&](const std::string &path, llvm::StringRef bytes) {
    return kiln::writeOutput(path, bytes, errs, prefix);
  };
  Progress progress(options.progress);

  StringRef strategy = options.placement;
  if (strategy != "single" && strategy != "auto" &&
      !strategy.starts_with("data:") && !strategy.starts_with("pipeline:")) {
    errs << prefix << "error: --placement=" << options.placement
         << " is not a strategy (available: single, auto, data:K, "
            "pipeline:K)\n";
    return failure();
  }
  if (!isCudaArch(options.cuda.arch)) {
    errs << prefix << "error: --cuda-arch=" << options.cuda.arch
         << " is not a CUDA architecture (expected sm_NN, e.g. sm_80)\n";
    return failure();
  }

  progress.stage("importing " + options.input);
  onnx::ModelProto fileModel;
  const onnx::ModelProto *model = options.model;
  if (!model) {
    if (failed(readOnnxFile(context, options.input, fileModel)))
      return failure();
    model = &fileModel;
  }
  if (!options.weights.empty()) {
    if (options.model)
      return emitError(UnknownLoc::get(&context))
             << "weights from a file need the model from a file too";
    std::map<std::string, Tensor> weights;
    try {
      weights = load_safetensors(options.weights, options.weightOptions);
    } catch (const Error &e) {
      errs << prefix << "error: " << e.what() << "\n";
      return failure();
    }
    if (failed(
            applyWeights(fileModel, weights,
                         FileLineColLoc::get(&context, options.weights, 0, 0))))
      return failure();
  }
  ImportOptions importOptions;
  importOptions.device = options.devices.front();
  importOptions.emptyOptionals = options.emptyOptionals;
  for (const std::string &text : options.sequenceLengths) {
    auto [name, count] = StringRef(text).rsplit('=');
    int64_t length;
    if (name.empty() || count.getAsInteger(10, length) || length < 0) {
      errs << prefix << "error: malformed sequence length '" << text
           << "' (expected NAME=K, K >= 0)\n";
      return failure();
    }
    importOptions.sequenceLengths[name.str()] = length;
  }
  // A shape given for a sequence input applies to each of its elements
  // NAME[i] not given one of their own; the importer and the shape pass
  // see only the elements' names.
  std::vector<std::string> inputShapes;
  for (const std::string &binding : options.inputShapes) {
    std::string name = StringRef(binding).rsplit('=').first.str();
    auto length = importOptions.sequenceLengths.find(name);
    if (length == importOptions.sequenceLengths.end()) {
      inputShapes.push_back(binding);
      continue;
    }
    std::string dims = StringRef(binding).rsplit('=').second.str();
    for (int64_t i = 0; i < length->second; ++i) {
      std::string element = name + "[" + std::to_string(i) + "]";
      if (llvm::none_of(options.inputShapes, [&](const std::string &b) {
            return StringRef(b).starts_with(element + "=");
          }))
        inputShapes.push_back(element + "=" + dims);
    }
  }
  importOptions.inputShapes = inputShapes;
  OwningOpRef<ModuleOp> module =
      importOnnxModel(context, *model, options.input, importOptions);
  if (!module)
    return failure();
  StringRef placement = options.placement;
  bool data = placement.consume_front("data:");
  if (data || placement.consume_front("pipeline:")) {
    unsigned k = 0;
    if (placement.getAsInteger(10, k) || k == 0 || k > options.devices.size()) {
      errs << prefix << "error: --placement=" << options.placement
           << " needs K between 1 and the number of --devices ("
           << options.devices.size() << ")\n";
      return failure();
    }
    if (!data && options.microbatches == 0) {
      errs << prefix << "error: --microbatches must be at least 1\n";
      return failure();
    }
    if (failed(addChunkFunctions(context, *module, options, *model,
                                 importOptions,
                                 data ? k : options.microbatches))) {
      errs << prefix << "note: --placement=" << options.placement
           << " imports the model once per chunk size of the batch; "
              "its inputs need a symbolic (dynamic) batch dim\n";
      return failure();
    }
  }

  progress.stage("optimizing the graph");
  PassManager pm(&context);
  if (options.printIRAfterAll) {
    context.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, errs,
                        printingFlags());
  }
  PipelineOptions pipeline;
  pipeline.inputShapes = inputShapes;
  pipeline.devices = options.devices;
  pipeline.profiles = options.profiles;
  pipeline.pins = options.pins;
  pipeline.placement = options.placement;
  pipeline.splitDims = options.splitDims;
  pipeline.microbatches = options.microbatches;
  pipeline.outputDevice = options.outputDevice;
  buildPlacementPipeline(pm, pipeline);
  if (failed(pm.run(*module))) {
    progress.done();
    return failure();
  }
  auto func = module->lookupSymbol<func::FuncOp>("main");
  if (!options.savePlacement.empty() &&
      failed(writeOutput(options.savePlacement,
                         placementRules(func).dump(2) + "\n")))
    return failure();
  if (options.printPlacement) {
    auto profiles =
        loadProfiles(func.getLoc(), options.devices, options.profiles);
    if (failed(profiles))
      return failure();
    llvm::outs() << placementTable(func, *profiles);
    llvm::outs().flush();
  }

  PassManager kernels(&context);
  if (options.printIRAfterAll)
    kernels.enableIRPrinting([](Pass *, Operation *) { return false; },
                             [](Pass *, Operation *) { return true; },
                             /*printModuleScope=*/true,
                             /*printAfterOnlyOnChange=*/false,
                             /*printAfterOnlyOnFailure=*/false, errs,
                             printingFlags());
  buildKernelPipeline(kernels);
  if (failed(kernels.run(*module))) {
    progress.done();
    return failure();
  }

  if (options.emit == EmitKind::MLIR) {
    progress.done();
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, printingFlags());
    return writeOutput(options.output, text);
  }
  if (options.emit == EmitKind::Dot) {
    progress.done();
    return writeOutput(options.output, placementDot(func));
  }

  FailureOr<Plan> plan = buildPlan(func, options.devices);
  if (failed(plan))
    return failure();
  std::vector<CxxSource> sources;
  for (auto &[kernel, symbol] : plan->kernels) {
    FailureOr<std::string> text = emitKernelCpp(kernel, symbol);
    if (failed(text))
      return failure();
    sources.push_back({symbol, *text});
  }
  if (options.emit == EmitKind::Cpp) {
    progress.done();
    std::string all = kernelPrelude() + "\n";
    for (const CxxSource &source : sources)
      all += "//===--- " + source.name + " ---===//\n" + source.text + "\n";
    all += abiSource();
    return writeOutput(options.output, all);
  }

  // Kernels on cuda devices: CUDA C++ through NVRTC to one PTX module. Their
  // C++ twins above stay in the code section, for roles bound to a host.
  std::string cudaSource, ptx;
  std::map<std::string, nlohmann::json> cudaSteps; // symbol -> step["cuda"]
  bool half = false;
  for (auto &[kernel, symbol] : plan->kernels) {
    DeviceAttr device = kernel.getNumResults()
                            ? getDevice(kernel.getResult(0).getType())
                            : DeviceAttr();
    if (!device || device.getKind() != "cuda")
      continue;
    FailureOr<CudaKernel> cuda = emitKernelCuda(kernel, symbol, options.cuda);
    if (failed(cuda))
      return failure();
    half |= cuda->usesHalf;
    cudaSource += "\n" + cuda->source;
    nlohmann::json launches = cuda->launches;
    cudaSteps[symbol] = {{"slots", cuda->slots},
                         {"scratch", cuda->scratch},
                         {"launches", launches}};
  }
  bool emitsGpuCode =
      options.emit == EmitKind::Cuda || options.emit == EmitKind::Ptx;
  if (emitsGpuCode && cudaSteps.empty())
    errs << prefix
         << "warning: no kernel runs on a cuda device (place "
            "some with --device cuda:0, --devices or --pin)\n";
  cudaSource = cudaPrelude(half) + cudaSource; // the whole translation unit
  if (options.emit == EmitKind::Cuda)
    return writeOutput(options.output, cudaSource);
  if (!options.cuda.saveSource.empty() &&
      failed(writeOutput(options.cuda.saveSource, cudaSource)))
    return failure();
  if (!cudaSteps.empty() || emitsGpuCode) {
    progress.stage("compiling " + std::to_string(cudaSteps.size()) +
                   " CUDA kernels");
    auto compiled = compilePtx(cudaSource, options.cuda, half);
    if (!compiled) {
      progress.done();
      errs << prefix << "error: " << llvm::toString(compiled.takeError())
           << "\n";
      return failure();
    }
    ptx = std::move(*compiled);
  }
  if (options.emit == EmitKind::Ptx)
    return writeOutput(options.output, ptx);

  sources.push_back({"kiln_abi", abiSource()});
  size_t total = sources.size();
  progress.stage("compiling kernels 0/" + std::to_string(total));
  auto code = compileSharedObject(
      kernelPrelude(), sources, options.cxx, [&](size_t done, size_t all) {
        progress.stage("compiling kernels " + std::to_string(done) + "/" +
                       std::to_string(all));
      });
  progress.done();
  if (!code) {
    errs << prefix << "error: " << llvm::toString(code.takeError()) << "\n";
    return failure();
  }

  nlohmann::json manifest = plan->manifest;
  manifest["producer"] = std::string("kilnc ") + kVersion;
  manifest["source"] = llvm::sys::path::filename(options.input).str();
  manifest["abi"] = artifact::kKernelABI;
  manifest["target"] = {
      {"arch", "x86_64"},
      {"cpu", options.cxx.targetCpu},
      {"cpu_features", targetCpuFeatures(options.cxx.targetCpu)}};
  if (!options.cxx.sanitize.empty())
    manifest["target"]["sanitize"] = options.cxx.sanitize;
  std::vector<artifact::Section> sections = {
      {"code", std::move(*code)}, {"weights", std::move(plan->weights)}};
  if (!cudaSteps.empty()) {
    manifest["target"]["cuda_arch"] = options.cuda.arch;
    for (nlohmann::json &step : manifest["steps"])
      if (step.contains("kernel"))
        if (auto it = cudaSteps.find(step["kernel"]); it != cudaSteps.end())
          step["cuda"] = it->second;
    sections.push_back({"ptx", std::vector<char>(ptx.begin(), ptx.end())});
  }
  std::vector<char> file = artifact::write(manifest, sections);
  if (options.artifact) {
    *options.artifact = std::move(file);
    return success();
  }
  if (failed(writeOutput(options.output,
                         llvm::StringRef(file.data(), file.size()))))
    return failure();
  if (options.signingKey.empty())
    return success();
  return writeOutput(
      signature::sigPath(options.output),
      signature::sign(options.signingKey, file.data(), file.size()));
}

} // namespace kiln
