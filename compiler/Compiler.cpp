//===- Compiler.cpp - place, fuse, lower, generate, package ---------------===//

#include "compiler/Compiler.h"
#include "compiler/Diagnostics.h"

#include "codegen/CppEmitter.h"
#include "codegen/KernelPipeline.h"
#include "codegen/Plan.h"
#include "passes/placement/Report.h"
#include "runtime/Artifact.h"
#include "runtime/Signature.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

using namespace mlir;

namespace kiln {

namespace {
constexpr const char *kVersion = "0.1.0";

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

Compilation::Compilation(const CompileOptions &options)
    : options(options),
      errs(options.diagnostics ? *options.diagnostics : llvm::errs()),
      prefix(options.diagnostics ? "" : "kilnc: "),
      progress(std::make_unique<Progress>(options.progress)),
      backends(createDeviceBackends({options.cuda})) {
  context_.loadDialect<KilnDialect, func::FuncDialect, linalg::LinalgDialect,
                       tensor::TensorDialect, arith::ArithDialect,
                       math::MathDialect>();
  context_.printOpOnDiagnostic(false);
  handler = std::make_unique<ScopedDiagnosticHandler>(
      &context_,
      [this](Diagnostic &diag) { return printDiagnostic(diag, errs, prefix); });
}

Compilation::~Compilation() = default;

LogicalResult Compilation::fail(const Twine &message) {
  progress->done();
  errs << prefix << "error: " << message << "\n";
  return failure();
}

void Compilation::warn(const Twine &message) {
  errs << prefix << "warning: " << message << "\n";
}

LogicalResult Compilation::writeOutput(const std::string &path,
                                       StringRef bytes) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file)
    return fail("cannot write '" + path + "': " + error);
  file->os() << bytes;
  file->keep();
  return success();
}

LogicalResult
Compilation::runPasses(function_ref<void(OpPassManager &)> build) {
  PassManager pm(&context_);
  if (options.printIRAfterAll) {
    context_.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, errs,
                        printingFlags());
  }
  build(pm);
  if (succeeded(pm.run(*module_)))
    return success();
  progress->done();
  return failure();
}

LogicalResult Compilation::verify() { return mlir::verify(*module_); }

LogicalResult Compilation::place() {
  progress->stage("optimizing the graph");
  PipelineOptions pipeline = options.pipeline;
  pipeline.inputShapes = inputShapes;
  if (failed(runPasses(
          [&](OpPassManager &pm) { buildPlacementPipeline(pm, pipeline); })))
    return failure();
  auto func = module_->lookupSymbol<func::FuncOp>("main");
  if (!options.savePlacement.empty() &&
      failed(writeOutput(options.savePlacement,
                         placementRules(func).dump(2) + "\n")))
    return failure();
  if (options.printPlacement) {
    auto profiles =
        loadProfiles(func.getLoc(), pipeline.devices, pipeline.profiles);
    if (failed(profiles))
      return failure();
    llvm::outs() << placementTable(func, *profiles);
    llvm::outs().flush();
  }
  return success();
}

LogicalResult Compilation::fuse() {
  progress->stage("fusing");
  return runPasses(buildFusionPipeline);
}

LogicalResult Compilation::lower() {
  progress->stage("lowering");
  return runPasses([](OpPassManager &pm) {
    buildLoweringPipeline(pm);
    buildKernelPipeline(pm);
  });
}

void registerCompilePipeline() {
  PassPipelineRegistration<>("kiln-compile",
                             "the graph-to-kernel pipeline kilnc runs",
                             [](OpPassManager &pm) {
                               buildPlacementPipeline(pm, {});
                               buildFusionPipeline(pm);
                               buildLoweringPipeline(pm);
                               buildKernelPipeline(pm);
                             });
}

std::string Compilation::moduleText() {
  std::string text;
  llvm::raw_string_ostream os(text);
  module_->print(os, printingFlags());
  return text;
}

std::string Compilation::dotText() {
  return placementDot(module_->lookupSymbol<func::FuncOp>("main"));
}

LogicalResult Compilation::generate() {
  progress->stage("generating code");
  auto func = module_->lookupSymbol<func::FuncOp>("main");
  FailureOr<Plan> built = buildPlan(func, options.pipeline.devices);
  if (failed(built))
    return failure();
  plan = std::make_unique<Plan>(std::move(*built));
  auto kindOfKernel = [](KernelOp kernel) -> const DeviceKind * {
    return kernel.getNumResults()
               ? kindOf(getDevice(kernel.getResult(0).getType()))
               : nullptr;
  };
  // Kernels with the same code (repeated blocks of a model: attention
  // layers, residual stages, the shape arithmetic of each block) are
  // compiled once, and so are their dims functions: later steps call the
  // first one's functions. A dims function's messages name nodes by index
  // into its step's "dims_nodes", so each step's errors name its own nodes.
  llvm::StringMap<std::string> firstWithCode, firstWithDims;
  struct Calls {
    std::string code, dims;
    std::vector<std::string> dimsNodes;
  };
  std::map<std::string, Calls> calls;
  for (auto &[kernel, symbol] : plan->kernels) {
    FailureOr<KernelCpp> parts = emitKernelCppParts(kernel, symbol);
    if (failed(parts))
      return failure();
    std::string text = parts->comment;
    // A kernel of a device backend (cuda) keeps its symbol and lends it to
    // no other: the backend describes the steps that name it as its own.
    const DeviceKind *kind = kindOfKernel(kernel);
    bool host = !kind || kind->backend == "cpp";
    auto once = [&](llvm::StringMap<std::string> &first,
                    const std::string &part) {
      if (!host) {
        text += part;
        return symbol;
      }
      auto [it, fresh] = first.try_emplace(kernelCodeKey(part, symbol), symbol);
      if (fresh) {
        text += part;
        return symbol;
      }
      text += "// " + symbol + " calls " + it->second + "'s\n";
      return it->second;
    };
    Calls &c = calls[symbol];
    c.code = once(firstWithCode, parts->code);
    if (!parts->dims.empty())
      c.dims = once(firstWithDims, parts->dims);
    c.dimsNodes = std::move(parts->dimsNodes);
    sources.push_back({symbol, text});
  }
  for (nlohmann::json &step : plan->manifest["steps"]) {
    if (!step.contains("kernel"))
      continue;
    const Calls &c = calls.at(step["kernel"].get<std::string>());
    step["kernel"] = c.code;
    if (step.contains("dims"))
      step["dims"] = c.dims + "_dims";
    if (!c.dimsNodes.empty())
      step["dims_nodes"] = c.dimsNodes;
  }
  // Kernels of kinds with a device backend (cuda): its source too. Their
  // C++ twins stay in the code section, for roles bound to a host.
  for (auto &[kernel, symbol] : plan->kernels) {
    const DeviceKind *kind = kindOfKernel(kernel);
    if (!kind || kind->backend == "cpp")
      continue;
    if (failed(backend(kind->backend).addKernel(kernel, symbol)))
      return failure();
  }
  return success();
}

std::string Compilation::cppText() {
  std::string all = kernelPrelude() + "\n";
  for (const CxxSource &source : sources)
    all += "//===--- " + source.name + " ---===//\n" + source.text + "\n";
  return all + abiSource();
}

DeviceBackend &Compilation::backend(StringRef name) {
  for (std::unique_ptr<DeviceBackend> &b : backends)
    if (b->name() == name)
      return *b;
  llvm::report_fatal_error("no device backend named '" + name +
                           "' (ir/DeviceKinds.cpp names one that "
                           "codegen/Backends.cpp does not create)");
}

std::string Compilation::backendSource(StringRef name) {
  return backend(name).source();
}

size_t Compilation::backendKernels(StringRef name) {
  return backend(name).kernelCount();
}

FailureOr<std::string> Compilation::backendCompiled(StringRef name) {
  DeviceBackend &b = backend(name);
  progress->stage("compiling " + name.str() + " kernels",
                  "(" + std::to_string(b.kernelCount()) + ")");
  auto compiled = b.compile();
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  return std::move(*compiled);
}

LogicalResult Compilation::saveCudaText() {
  if (options.cuda.saveSource.empty())
    return success();
  return writeOutput(options.cuda.saveSource, backendSource("cuda"));
}

LogicalResult Compilation::package() {
  if (failed(saveCudaText()))
    return failure();
  // Device code first: its compiler's errors come before the C++ build.
  std::vector<std::pair<DeviceBackend *, std::string>> compiled;
  for (std::unique_ptr<DeviceBackend> &b : backends) {
    if (!b->kernelCount())
      continue;
    FailureOr<std::string> code = backendCompiled(b->name());
    if (failed(code))
      return failure();
    compiled.emplace_back(b.get(), std::move(*code));
  }

  std::vector<CxxSource> all = sources;
  all.push_back({"kiln_abi", abiSource()});
  progress->stage("compiling kernels", "0/" + std::to_string(all.size()));
  auto code = compileSharedObject(
      kernelPrelude(), all, options.cxx, [&](size_t done, size_t total) {
        progress->stage("compiling kernels",
                        std::to_string(done) + "/" + std::to_string(total));
      });
  if (!code)
    return fail(llvm::toString(code.takeError()));
  progress->stage("writing the artifact");

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
  for (auto &[b, bytes] : compiled) {
    b->describeTarget(manifest["target"]);
    for (nlohmann::json &step : manifest["steps"])
      if (step.contains("kernel"))
        b->describeStep(step["kernel"].get<std::string>(), step);
    sections.push_back(
        {b->section().str(), std::vector<char>(bytes.begin(), bytes.end())});
  }
  std::vector<char> file = artifact::write(manifest, sections);
  if (options.artifact) {
    *options.artifact = std::move(file);
    return success();
  }
  if (failed(writeOutput(options.output, StringRef(file.data(), file.size()))))
    return failure();
  if (options.signingKey.empty())
    return success();
  return writeOutput(
      signature::sigPath(options.output),
      signature::sign(options.signingKey, file.data(), file.size()));
}

LogicalResult Compilation::toKernels() {
  return success(succeeded(checkOptions()) && succeeded(import()) &&
                 succeeded(verify()) && succeeded(place()) &&
                 succeeded(fuse()) && succeeded(lower()));
}

void Compilation::printStageTimes() {
  progress->done();
  double total = 0;
  std::string line;
  for (const auto &[name, seconds] : progress->times()) {
    line += (line.empty() ? "" : ", ") + name +
            llvm::formatv(" {0:f2} s", seconds).str();
    total += seconds;
  }
  errs << prefix << "time by stage: " << line
       << llvm::formatv(" (total {0:f2} s)", total) << "\n";
}

LogicalResult compileModel(const CompileOptions &options) {
  Compilation c(options);
  LogicalResult result = c.run();
  if (options.timeStages)
    c.printStageTimes();
  return result;
}

LogicalResult Compilation::run() {
  if (failed(toKernels()))
    return failure();
  switch (options.emit) {
  case EmitKind::MLIR:
    return writeOutput(options.output, moduleText());
  case EmitKind::Dot:
    return writeOutput(options.output, dotText());
  default:
    break;
  }
  if (failed(generate()))
    return failure();
  if ((options.emit == EmitKind::Cuda || options.emit == EmitKind::Ptx) &&
      !backendKernels("cuda"))
    warn("no kernel runs on a cuda device (place some with --device "
         "cuda:0, --devices or --pin)");
  switch (options.emit) {
  case EmitKind::Cpp:
    return writeOutput(options.output, cppText());
  case EmitKind::Cuda:
    return writeOutput(options.output, backendSource("cuda"));
  case EmitKind::Ptx: {
    if (failed(saveCudaText()))
      return failure();
    FailureOr<std::string> ptx = backendCompiled("cuda");
    return failed(ptx) ? failure() : writeOutput(options.output, *ptx);
  }
  default:
    return package();
  }
}

} // namespace kiln
