//===- PlacePipeline.cpp - pipeline (model) parallel placement ------------===//
//
// Cuts the model into K contiguous stages, one per device of `devices`, and
// runs `microbatches` chunks of the batch through them, so that while stage
// 1 works on micro-batch m, stage 0 already works on m+1 (GPipe's schedule,
// compiled).
//
// Algorithm:
//  - The batch is cut into torch.chunk pieces and @main is rebuilt from the
//    per-size specialisations exactly as for data parallelism (Chunks.cpp);
//    only the device of each op differs: its stage's.
//  - Stages, per specialisation: ops in program order with their estimated
//    time on each stage's device (its profile's roofline); a dynamic program
//    over cut points minimises the slowest stage (the pipeline's period),
//    each stage non-empty when there are enough ops. A stage is feasible only
//    if its weights plus its largest op working set fit its device's
//    capacity. O(K n^2) with prefix sums.
//  - Plan order is micro-batch major; each device's stream runs its steps in
//    plan order and waits only for its inputs, so micro-batch m+1 enters
//    stage 0 as soon as stage 0 is done with m.
// The stages and their estimated times are reported as a remark.
//
//===----------------------------------------------------------------------===//

#include "passes/placement/Chunks.h"

#include "llvm/Support/FormatVariadic.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEPIPELINE
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct Stages {
  DenseMap<Operation *, unsigned> stageOf;
  std::vector<std::pair<size_t, size_t>> ranges; // [first, last) op index
  std::vector<double> seconds;
};

FailureOr<Stages> partition(func::FuncOp replica,
                            ArrayRef<DeviceProfile> profiles) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Operation *> ops;
  for (Operation &op : replica.getBody().front())
    if (isPlaceable(&op))
      ops.push_back(&op);
  size_t n = ops.size(), k = profiles.size();
  // prefix[s][i]: time of ops [0, i) on stage s's device.
  std::vector<std::vector<double>> prefix(k, std::vector<double>(n + 1, 0));
  std::vector<uint64_t> weights(n, 0), working(n, 0);
  DenseSet<Operation *> counted;
  for (size_t i = 0; i < n; ++i) {
    for (size_t s = 0; s < k; ++s)
      prefix[s][i + 1] =
          prefix[s][i] +
          (profiles[s].supports(ops[i]) ? profiles[s].seconds(ops[i]) : inf);
    for (Value v : ops[i]->getOperands()) {
      working[i] += tensorBytes(v);
      if (auto c = v.getDefiningOp<ConstantOp>())
        if (counted.insert(c).second)
          weights[i] += tensorBytes(v);
    }
    for (Value v : ops[i]->getResults())
      working[i] += tensorBytes(v);
  }
  auto cost = [&](size_t s, size_t i, size_t j) {
    uint64_t w = 0, peak = 0;
    for (size_t x = i; x < j; ++x) {
      w += weights[x];
      peak = std::max(peak, working[x]);
    }
    if (profiles[s].capacityBytes && w + peak > profiles[s].capacityBytes)
      return inf;
    return prefix[s][j] - prefix[s][i];
  };
  // best[s][j]: the lowest bottleneck placing ops [0, j) on stages 0..s.
  std::vector<std::vector<double>> best(k, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(k, std::vector<size_t>(n + 1, 0));
  bool nonEmpty = n >= k;
  for (size_t j = nonEmpty ? 1 : 0; j <= n; ++j)
    best[0][j] = cost(0, 0, j);
  for (size_t s = 1; s < k; ++s)
    for (size_t j = 0; j <= n; ++j)
      for (size_t i = 0; i <= j; ++i) {
        if (nonEmpty && (i == j || i < s))
          continue;
        double b = std::max(best[s - 1][i], cost(s, i, j));
        if (b < best[s][j]) {
          best[s][j] = b;
          cut[s][j] = i;
        }
      }
  if (best[k - 1][n] == inf)
    return emitError(replica.getLoc())
           << "no split into " << k
           << " pipeline stages fits the devices' capacities and op support";
  Stages stages;
  stages.ranges.resize(k);
  size_t end = n;
  for (size_t s = k; s-- > 0;) {
    size_t begin = s ? cut[s][end] : 0;
    stages.ranges[s] = {begin, end};
    end = begin;
  }
  for (size_t s = 0; s < k; ++s) {
    auto [i, j] = stages.ranges[s];
    stages.seconds.push_back(prefix[s][j] - prefix[s][i]);
    for (size_t x = i; x < j; ++x)
      stages.stageOf[ops[x]] = s;
  }
  return stages;
}

struct PlacePipeline : kiln::impl::KilnPlacePipelineBase<PlacePipeline> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      emitError(module.getLoc()) << "pipeline placement needs @main";
      return signalPassFailure();
    }
    if (failed(rewrite(module, main)))
      return signalPassFailure();
  }

  LogicalResult rewrite(ModuleOp module, func::FuncOp main) {
    Location loc = main.getLoc();
    auto loaded = loadProfiles(loc, devices, profiles);
    if (failed(loaded))
      return failure();
    if (devices.empty())
      return emitError(loc) << "pipeline placement needs devices";
    DeviceAttr output = loaded->front().device;
    if (!outputDevice.empty()) {
      auto parsed = parseDevices(loc, {outputDevice});
      if (failed(parsed))
        return failure();
      output = parsed->front();
    }
    if (microbatches < 1)
      return emitError(loc) << "pipeline placement needs at least one "
                               "micro-batch";
    auto split = splitDimsOf(main, splitDims);
    if (failed(split))
      return failure();
    auto [dims, batch] = *split;
    std::vector<int64_t> sizes = chunkSizes(batch, microbatches);

    DenseMap<Operation *, Stages> stagesOf; // per specialisation
    for (int64_t size : sizes) {
      auto replica = module.lookupSymbol<func::FuncOp>("main_chunk_" +
                                                       std::to_string(size));
      if (!replica || stagesOf.count(replica))
        continue; // rewriteAsChunks reports a missing one
      auto stages = partition(replica, *loaded);
      if (failed(stages))
        return failure();
      std::string text;
      for (auto [s, range] : llvm::enumerate(stages->ranges))
        text += llvm::formatv("{0}{1}: {2} ops from #{3}, est. {4:F1} us",
                              s ? "; " : "", (*loaded)[s].device.str(),
                              range.second - range.first, range.first,
                              stages->seconds[s] * 1e6)
                    .str();
      emitRemark(loc) << "pipeline stages for micro-batches of " << size << ": "
                      << text;
      stagesOf[replica] = std::move(*stages);
    }
    return rewriteAsChunks(
        module, main, dims, batch, sizes,
        [&](size_t, func::FuncOp replica, Operation *op) {
          return (*loaded)[stagesOf[replica].stageOf.lookup(op)].device;
        },
        output);
  }
};

} // namespace
