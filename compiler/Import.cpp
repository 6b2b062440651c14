//===- Import.cpp - the options, and the model as a kiln graph ------------===//

#include "compiler/Compiler.h"
#include "compiler/Diagnostics.h"

#include "codegen/Plan.h"
#include "frontend/OnnxImporter.h"
#include "passes/placement/Chunks.h"

#include <onnx/onnx_pb.h>

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

namespace {
// For --placement=data:K and pipeline:K: the model specialised for each
// chunk size of the batch, as private @main_chunk_<size> functions beside
// @main (see kiln-place-data). Each is a fresh import, so shape
// computations fold for that size.
LogicalResult addChunkFunctions(MLIRContext &context, ModuleOp module,
                                const CompileOptions &options,
                                const onnx::ModelProto &model,
                                const ImportOptions &importOptions,
                                unsigned parts) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto split = splitDimsOf(main, options.pipeline.splitDims);
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

// NAME=K of --sequence-length, or nullopt.
std::optional<std::pair<std::string, int64_t>>
parseSequenceLength(StringRef text) {
  auto [name, count] = text.rsplit('=');
  int64_t length;
  if (name.empty() || count.getAsInteger(10, length) || length < 0)
    return std::nullopt;
  return std::make_pair(name.str(), length);
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

LogicalResult setPlacement(CompileOptions &options, StringRef text,
                           std::string &error) {
  std::optional<PlacementStrategy> strategy = parsePlacementStrategy(text);
  if (!strategy) {
    error = "--placement=" + text.str() +
            " is not a strategy (available: single, auto, data:K, "
            "pipeline:K)";
    return failure();
  }
  options.pipeline.placement = *strategy;
  return success();
}

LogicalResult Compilation::checkOptions() {
  if (options.cxx.optLevel < 0 || options.cxx.optLevel > 3)
    return fail("-O" + Twine(options.cxx.optLevel) + " is not one of -O0..-O3");
  const std::string &sanitize = options.cxx.sanitize;
  for (StringRef name : llvm::split(StringRef(sanitize), ','))
    if (!sanitize.empty() && name != "address" && name != "undefined")
      return fail("--sanitize=" + sanitize + ": '" + name +
                  "' is not one of address, undefined");
  if (!isCudaArch(options.cuda.arch))
    return fail("--cuda-arch=" + options.cuda.arch +
                " is not a CUDA architecture (expected sm_NN, e.g. sm_80)");
  const PipelineOptions &pipeline = options.pipeline;
  if (pipeline.devices.empty())
    return fail("no device to compile for");
  bool parallel = pipeline.placement.kind == PlacementStrategy::Kind::Data ||
                  pipeline.placement.kind == PlacementStrategy::Kind::Pipeline;
  if (parallel && (pipeline.placement.parts == 0 ||
                   pipeline.placement.parts > pipeline.devices.size()))
    return fail("--placement=" + pipeline.placement.str() +
                " needs K between 1 and the number of --devices (" +
                Twine(pipeline.devices.size()) + ")");
  if (pipeline.placement.kind == PlacementStrategy::Kind::Pipeline &&
      pipeline.microbatches == 0)
    return fail("--microbatches must be at least 1");
  for (const std::string &text : options.sequenceLengths)
    if (!parseSequenceLength(text))
      return fail("malformed sequence length '" + text +
                  "' (expected NAME=K, K >= 0)");
  if (!options.weights.empty() && options.model)
    return fail("weights from a file need the model from a file too");
  return success();
}

LogicalResult Compilation::import() {
  progress->stage("importing", options.input);
  onnx::ModelProto fileModel;
  const onnx::ModelProto *model = options.model;
  if (!model) {
    if (failed(readOnnxFile(context_, options.input, fileModel)))
      return failure();
    model = &fileModel;
  }
  if (!options.weights.empty()) {
    std::map<std::string, Tensor> weights;
    try {
      weights = load_safetensors(options.weights, options.weightOptions);
    } catch (const Error &e) {
      return fail(e.what());
    }
    if (failed(applyWeights(
            fileModel, weights,
            FileLineColLoc::get(&context_, options.weights, 0, 0))))
      return failure();
  }
  ImportOptions importOptions;
  importOptions.device = options.pipeline.devices.front();
  importOptions.emptyOptionals = options.emptyOptionals;
  for (const std::string &text : options.sequenceLengths) {
    auto [name, length] = *parseSequenceLength(text);
    importOptions.sequenceLengths[name] = length;
  }
  // A shape given for a sequence input applies to each of its elements
  // NAME[i] not given one of their own; the importer and the shape pass
  // see only the elements' names.
  const std::vector<std::string> &given = options.pipeline.inputShapes;
  inputShapes.clear();
  for (const std::string &binding : given) {
    std::string name = StringRef(binding).rsplit('=').first.str();
    auto length = importOptions.sequenceLengths.find(name);
    if (length == importOptions.sequenceLengths.end()) {
      inputShapes.push_back(binding);
      continue;
    }
    std::string dims = StringRef(binding).rsplit('=').second.str();
    for (int64_t i = 0; i < length->second; ++i) {
      std::string element = name + "[" + std::to_string(i) + "]";
      if (llvm::none_of(given, [&](const std::string &b) {
            return StringRef(b).starts_with(element + "=");
          }))
        inputShapes.push_back(element + "=" + dims);
    }
  }
  importOptions.inputShapes = inputShapes;
  module_ = importOnnxModel(context_, *model, options.input, importOptions);
  if (!module_)
    return failure();
  const PlacementStrategy &strategy = options.pipeline.placement;
  if (strategy.kind != PlacementStrategy::Kind::Data &&
      strategy.kind != PlacementStrategy::Kind::Pipeline)
    return success();
  unsigned parts = strategy.kind == PlacementStrategy::Kind::Data
                       ? strategy.parts
                       : options.pipeline.microbatches;
  if (succeeded(addChunkFunctions(context_, *module_, options, *model,
                                  importOptions, parts)))
    return success();
  errs << prefix << "note: --placement=" << strategy.str()
       << " imports the model once per chunk size of the batch; its inputs "
          "need a symbolic (dynamic) batch dim\n";
  return failure();
}

} // namespace kiln
