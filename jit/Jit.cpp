//===- Jit.cpp - compile in-process, with an on-disk artifact cache -------===//
//
// kiln::jit::compile turns a trace or an ONNX file into a loaded Function:
//
//  1. the model as an ONNX ModelProto (a trace's graph, or the file), with
//     the weights bound by name (frontend applyWeights, as kilnc --weights);
//  2. the cache key: xxh3-128 of the serialized model, every option that
//     changes the artifact, the target CPU's features and this build of
//     kiln (version, and the size and time of libkiln.so);
//  3. a cache hit (<cache>/jit/<key>.kiln whose checksum and artifact
//     checksums hold) is loaded as it is; a corrupted entry is removed and
//     rebuilt, never trusted;
//  4. otherwise compileModel (compiler/) runs the whole pipeline into
//     memory, diagnostics captured into the kiln::Error thrown on failure,
//     and the artifact is published to the cache atomically.
//
//===----------------------------------------------------------------------===//

#include "jit/Trace.h"

#include "codegen/Toolchain.h"
#include "compiler/Compiler.h"
#include "frontend/OnnxImporter.h"
#include "runtime/Artifact.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <dlfcn.h>
#include <fstream>
#include <sys/stat.h>

#ifndef KILN_VERSION
#define KILN_VERSION "0.1.0"
#endif

namespace kiln {
namespace {

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &e : v)
    s += e + "\x1f";
  return s;
}

// This build of kiln: its version, and the size and time of the file this
// code was loaded from (libkiln.so), so that a rebuilt compiler never reuses
// artifacts of an older one with the same version.
std::string buildIdentity() {
  static const std::string identity = [] {
    std::string id = std::string("kiln ") + KILN_VERSION;
    Dl_info info;
    struct stat st;
    if (dladdr(reinterpret_cast<void *>(&buildIdentity), &info) &&
        info.dli_fname && ::stat(info.dli_fname, &st) == 0)
      id += " " + std::to_string(st.st_size) + "@" +
            std::to_string(st.st_mtim.tv_sec) + "." +
            std::to_string(st.st_mtim.tv_nsec);
    else
      id += std::string(" ") + __DATE__ + " " + __TIME__;
    return id;
  }();
  return identity;
}

CompileOptions compileOptions(const jit::Options &o) {
  CompileOptions c;
  PipelineOptions &p = c.pipeline;
  p.devices = devicesWithDefault(o.device, o.devices);
  std::string error;
  if (mlir::failed(setPlacement(c, o.placement, error)))
    throw Error("jit::compile: " + error);
  p.microbatches = o.microbatches;
  p.splitDims = o.splitDims;
  p.pins = o.pins;
  p.profiles = o.profiles;
  p.outputDevice = o.outputDevice;
  p.inputShapes = o.inputShapes;
  c.cxx.optLevel = o.optLevel;
  c.cxx.targetCpu = o.targetCpu;
  c.cxx.cacheDir = o.cacheDir;
  c.cuda.arch = o.cudaArch;
  c.cuda.cacheDir = o.cacheDir;
  return c;
}

// Everything besides the model that changes the artifact: the compile's
// options as the compile reads them (so one list of options serves both).
std::string optionsKey(const CompileOptions &c) {
  const PipelineOptions &p = c.pipeline;
  std::string key = buildIdentity() + "\n" + join(p.devices) + "\n" +
                    p.placement.str() + "\n" + std::to_string(p.microbatches) +
                    "\n" + join(p.splitDims) + "\n" + p.outputDevice + "\n" +
                    join(p.inputShapes) + "\n" +
                    std::to_string(c.cxx.optLevel) + "\n" + c.cxx.targetCpu +
                    "\n" + c.cuda.arch + "\n";
  // Files the placement reads: their contents, not only their names.
  std::vector<std::string> files = {p.pins};
  for (const std::string &profile : p.profiles)
    files.push_back(profile.substr(profile.find('=') + 1));
  for (const std::string &file : files) {
    if (file.empty())
      continue;
    std::ifstream in(file, std::ios::binary);
    key += file + "\n" + std::string(std::istreambuf_iterator<char>(in), {}) +
           "\n";
  }
  key += join(p.profiles) + "\n";
  key += join(targetCpuFeatures(c.cxx.targetCpu)) + "\n";
  // The C++ compiler that builds the kernels, and the CUDA toolkit.
  key += compilerIdentity(c.cxx) + "\n";
  const char *cuda = std::getenv("KILN_CUDA_HOME");
  key += std::string(cuda ? cuda : "") + "\n";
  return key;
}

// Diagnostics collected for the kiln::Error a failed step throws: from
// the driver (through `stream`), or from a context's handler, each line
// prefixed with `where`.
struct Diagnostics {
  Diagnostics() = default;
  Diagnostics(mlir::MLIRContext &context, std::string prefix)
      : where(std::move(prefix)) {
    handler = std::make_unique<mlir::ScopedDiagnosticHandler>(
        &context, [this](mlir::Diagnostic &d) {
          stream << where << d.str() << "\n";
          for (mlir::Diagnostic &note : d.getNotes())
            stream << "note: " << note.str() << "\n";
          return mlir::success();
        });
  }
  Error error() {
    stream.flush();
    while (!messages.empty() && messages.back() == '\n')
      messages.pop_back();
    return Error("jit::compile: " + (messages.empty()
                                         ? std::string("compilation failed")
                                         : messages));
  }

  std::string messages, where;
  llvm::raw_string_ostream stream{messages};
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
};

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out.flush())
    throw Error(path + ": cannot write file");
}

// Every stage of a compile into memory, with diagnostics captured and
// thrown as kiln::Error. With `dumpDir`, the kernel-level MLIR and the
// generated C++ of this same compile are written there too.
std::vector<char> compileToArtifact(CompileOptions c,
                                    const std::string &dumpDir) {
  Diagnostics diagnostics;
  c.diagnostics = &diagnostics.stream;
  std::vector<char> bytes;
  c.artifact = &bytes;
  Compilation compilation(c);
  auto check = [&](mlir::LogicalResult result) {
    if (mlir::failed(result))
      throw diagnostics.error();
  };
  check(compilation.toKernels());
  if (!dumpDir.empty())
    writeFile(dumpDir + "/kernels.mlir", compilation.moduleText());
  check(compilation.generate());
  if (!dumpDir.empty())
    writeFile(dumpDir + "/kernels.cpp", compilation.cppText());
  check(compilation.package());
  return bytes;
}

Function compileProto(const onnx::ModelProto &model, const std::string &source,
                      const jit::Options &o, bool cacheable) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  CompileInfo info;
  CompileOptions c = compileOptions(o);
  c.input = source;
  c.model = &model;
  // A dump wants the whole pipeline to run, so it skips the cache lookup.
  std::string dir = cacheable ? jit::cacheDirectory(o.cacheDir) : "";
  bool lookUp = o.dumpDir.empty();
  // The model (weights included) is serialized only for the key or a dump.
  std::string serialized =
      dir.empty() && o.dumpDir.empty() ? "" : model.SerializeAsString();
  if (!dir.empty()) {
    // The model's own hash, then the key over it: no copy of the weights.
    llvm::XXH128_hash_t m =
        llvm::xxh3_128bits(llvm::arrayRefFromStringRef(serialized));
    llvm::XXH128_hash_t h = llvm::xxh3_128bits(llvm::arrayRefFromStringRef(
        llvm::utohexstr(m.high64) + llvm::utohexstr(m.low64) + "\x1e" + source +
        "\x1e" + optionsKey(c)));
    info.cacheKey = llvm::utohexstr(h.high64, false, 16) +
                    llvm::utohexstr(h.low64, false, 16);
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, info.cacheKey + ".kiln");
    info.cachePath = path.str().str();
    if (std::optional<std::string> hit =
            lookUp ? readCached(path) : std::nullopt) {
      bool intact = true;
      try {
        artifact::read(hit->data(), hit->size(), info.cachePath);
      } catch (const Error &) {
        intact = false;
        (void)llvm::sys::fs::remove(path);
      }
      if (intact) {
        auto module = std::make_shared<Module>(
            Module::fromBytes(hit->data(), hit->size(), o.load, source));
        info.cacheHit = true;
        info.seconds = elapsed();
        return Function(std::move(module), info);
      }
    }
  }

  if (!o.dumpDir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(o.dumpDir))
      throw Error(o.dumpDir + ": cannot create folder: " + ec.message());
    writeFile(o.dumpDir + "/model.onnx", serialized);
  }
  std::vector<char> artifactBytes = compileToArtifact(c, o.dumpDir);
  if (!info.cachePath.empty())
    publishCached(info.cachePath,
                  llvm::StringRef(artifactBytes.data(), artifactBytes.size()));
  auto module = std::make_shared<Module>(Module::fromBytes(
      artifactBytes.data(), artifactBytes.size(), o.load, source));
  info.seconds = elapsed();
  return Function(std::move(module), info);
}

} // namespace

std::string jit::cacheDirectory(const std::string &configured) {
  return cacheFolder(configured, "jit");
}

Function jit::compile(const Traced &traced, const Options &options) {
  const detail::Graph &g = traced.graph();
  onnx::ModelProto model = g.model();
  std::map<std::string, Tensor> weights;
  std::vector<std::string> missing;
  for (const TensorSpec &p : g.params) {
    auto it = options.weights.find(p.name);
    if (it == options.weights.end())
      missing.push_back(p.name);
    else
      weights.emplace(p.name, it->second);
  }
  std::vector<std::string> unexpected;
  for (const auto &[name, t] : options.weights)
    if (!g.paramIds.count(name))
      unexpected.push_back(name);
  if (!missing.empty() || (options.strict && !unexpected.empty())) {
    auto list = [](const std::vector<std::string> &names) {
      std::string s;
      for (const std::string &n : names)
        s += (s.empty() ? "'" : ", '") + n + "'";
      return s;
    };
    std::string message = "jit::compile: weights do not fit the trace's "
                          "parameters:";
    if (!missing.empty())
      message += " missing " + list(missing) + ";";
    if (options.strict && !unexpected.empty())
      message += " unexpected " + list(unexpected) +
                 " (strict; set Options::strict = false to ignore them);";
    message.pop_back();
    throw Error(message);
  }
  mlir::MLIRContext context;
  Diagnostics diagnostics(context, "");
  if (mlir::failed(
          applyWeights(model, weights, mlir::UnknownLoc::get(&context))))
    throw diagnostics.error();
  return compileProto(model, "traced", options, /*cacheable=*/true);
}

Function jit::compile(const std::string &onnxPath, const Options &options) {
  mlir::MLIRContext context;
  Diagnostics diagnostics(context, onnxPath + ": ");
  onnx::ModelProto model;
  if (mlir::failed(readOnnxFile(context, onnxPath, model)))
    throw diagnostics.error();
  if (!options.weights.empty() &&
      mlir::failed(applyWeights(model, options.weights,
                                mlir::UnknownLoc::get(&context))))
    throw diagnostics.error();
  // Data in external files is not part of the key: such models are not
  // cached.
  bool external = false;
  for (const onnx::TensorProto &t : model.graph().initializer())
    external |= t.data_location() == onnx::TensorProto::EXTERNAL;
  return compileProto(model, onnxPath, options, !external);
}

std::vector<Tensor>
Function::operator()(const std::vector<Tensor> &inputs) const {
  return module_->run(inputs);
}
const std::vector<TensorInfo> &Function::inputs() const {
  return module_->inputs();
}
const std::vector<TensorInfo> &Function::outputs() const {
  return module_->outputs();
}

} // namespace kiln
