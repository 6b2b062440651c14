//===- PlaceData.cpp - data parallel: scatter, replicate, gather ----------===//
//
// What nn.DataParallel does at run time, compiled: the batch of every split
// input is cut along its split dim into chunks the way torch.chunk cuts it
// (ceil(N/K) each, the last one smaller, possibly fewer than K chunks), each
// chunk runs a replica of the model on its own device, and the outputs are
// concatenated along the same dim on the output device.
//
// Input: a module whose @main is the model at the full batch, plus, for every
// chunk size s, a private @main_chunk_<s>: the same model specialised for
// batch s (kilnc imports it once per size, so every shape computation in it
// folds for that size).
//
// Algorithm:
//  - Work out the chunks from the split inputs (`split-dims` NAME=D, default
//    dim 0 for every input; D = -1 replicates an input whole). All split
//    inputs must agree on the batch.
//  - Replace @main's body (Chunks.cpp): slice every split input on the
//    default device (the scatter), clone chunk r's function with every op
//    given kiln.place = device r (copy insertion later moves the slices
//    there), and concatenate every output across chunks with kiln.place =
//    `output-device`.
//  - Constants equal in type and bytes are shared by all replicas (copy
//    insertion then gives each device its own copy ahead of time).
//
//===----------------------------------------------------------------------===//

#include "passes/placement/Chunks.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEDATA
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct PlaceData : kiln::impl::KilnPlaceDataBase<PlaceData> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      emitError(module.getLoc()) << "data parallel placement needs @main";
      return signalPassFailure();
    }
    if (failed(rewrite(module, main)))
      return signalPassFailure();
  }

  LogicalResult rewrite(ModuleOp module, func::FuncOp main) {
    Location loc = main.getLoc();
    auto targets = parseDevices(loc, devices);
    if (failed(targets))
      return failure();
    if (targets->empty())
      return emitError(loc) << "data parallel placement needs devices";
    DeviceAttr output = targets->front();
    if (!outputDevice.empty()) {
      auto parsed = parseDevices(loc, {outputDevice});
      if (failed(parsed))
        return failure();
      output = parsed->front();
    }
    auto split = splitDimsOf(main, splitDims);
    if (failed(split))
      return failure();
    auto [dims, batch] = *split;
    std::vector<int64_t> sizes = chunkSizes(batch, targets->size());
    return rewriteAsChunks(
        module, main, dims, batch, sizes,
        [&](size_t chunk, func::FuncOp, Operation *) {
          return (*targets)[chunk];
        },
        output);
  }
};

} // namespace
