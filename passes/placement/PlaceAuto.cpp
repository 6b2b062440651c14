//===- PlaceAuto.cpp - cost-based placement ------------------------------===//
//
// Chooses a device for every op that has none yet (pins are kept) so that the
// estimated latency of one run is lowest.
//
// Cost model: an op's time on a device is the roofline estimate of its
// profile (FLOPs against peak, bytes against bandwidth, plus launch). A run
// is simulated by list scheduling in program order: each device runs its ops
// one at a time; a value read on another device is copied once per
// destination, on that destination's copy stream, starting when both the
// value and the stream are free; graph inputs start on the default device
// (the first of `devices`), results must reach it (or `output-device`).
// Constants are placed ahead of time on every device that uses them, so they
// cost memory, not transfers. A device whose weights plus largest single op
// working set exceed its capacity makes the assignment infeasible.
//
// Search: start from the best single-device assignment, then repeatedly
// apply the best move of a contiguous run of ops (in program order: the
// "regions" of a model, from one op to all of them, at a geometric range of
// lengths and starts) onto one device, while a move lowers the estimate by
// more than 0.1%. Each step is one simulation per candidate move, O(ops).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

#include "llvm/Support/FormatVariadic.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEAUTO
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct Node {
  Operation *op;
  bool pinned;
  std::vector<double> seconds; // per device; infinity when unsupported
  struct Input {
    int producer; // node index; -1 for a graph input
    uint64_t bytes;
    int key; // the value's index, for one copy per (value, device)
  };
  std::vector<Input> inputs;
  std::vector<size_t> constants; // weight ids it reads
  uint64_t workingSet = 0;
};

struct Problem {
  std::vector<DeviceProfile> devices;
  std::vector<Node> nodes;
  std::vector<uint64_t> constantBytes;
  std::vector<Node::Input> outputs;
  int numValues = 0;
  unsigned outputDevice = 0;

  double latency(const std::vector<unsigned> &assign) const {
    const double inf = std::numeric_limits<double>::infinity();
    size_t k = devices.size();
    // Capacity: weights on each device plus its largest op working set.
    std::vector<uint64_t> weights(k, 0), largest(k, 0);
    std::vector<std::vector<bool>> has(
        k, std::vector<bool>(constantBytes.size(), false));
    for (size_t i = 0; i < nodes.size(); ++i) {
      unsigned d = assign[i];
      if (nodes[i].seconds[d] == inf)
        return inf;
      largest[d] = std::max(largest[d], nodes[i].workingSet);
      for (size_t c : nodes[i].constants)
        if (!has[d][c]) {
          has[d][c] = true;
          weights[d] += constantBytes[c];
        }
    }
    for (size_t d = 0; d < k; ++d)
      if (devices[d].capacityBytes &&
          weights[d] + largest[d] > devices[d].capacityBytes)
        return inf;

    std::vector<double> deviceFree(k, 0), copyFree(k, 0),
        finish(nodes.size(), 0);
    std::vector<std::vector<double>> copied(k,
                                            std::vector<double>(numValues, -1));
    auto arrive = [&](const Node::Input &in, unsigned d) {
      unsigned src = in.producer < 0 ? 0 : assign[in.producer];
      double ready = in.producer < 0 ? 0 : finish[in.producer];
      if (src == d)
        return ready;
      double &done = copied[d][in.key];
      if (done < 0) {
        double start = std::max(copyFree[d], ready);
        done = start + devices[src].transferSeconds(in.bytes, devices[d]);
        copyFree[d] = done;
      }
      return done;
    };
    for (size_t i = 0; i < nodes.size(); ++i) {
      unsigned d = assign[i];
      double start = deviceFree[d];
      for (const Node::Input &in : nodes[i].inputs)
        start = std::max(start, arrive(in, d));
      finish[i] = start + nodes[i].seconds[d];
      deviceFree[d] = finish[i];
    }
    double end = 0;
    for (const Node::Input &out : outputs)
      end = std::max(end, arrive(out, outputDevice));
    for (double f : finish)
      end = std::max(end, f);
    return end;
  }
};

struct PlaceAuto : kiln::impl::KilnPlaceAutoBase<PlaceAuto> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto loaded = loadProfiles(func.getLoc(), devices, profiles);
    if (failed(loaded))
      return signalPassFailure();
    Problem p;
    p.devices = *loaded;
    size_t k = p.devices.size();
    auto indexOf = [&](Attribute d) -> int {
      for (size_t i = 0; i < k; ++i)
        if (p.devices[i].device == d)
          return i;
      return -1;
    };
    if (!outputDevice.empty()) {
      int out = llvm::find_if(p.devices,
                              [&](const DeviceProfile &d) {
                                return d.device.str() == outputDevice;
                              }) -
                p.devices.begin();
      if (out == static_cast<int>(k)) {
        emitError(func.getLoc()) << "output device '" << outputDevice
                                 << "' is not among the devices in use";
        return signalPassFailure();
      }
      p.outputDevice = out;
    }

    DenseMap<Value, int> producer, valueKey;
    DenseMap<Operation *, size_t> constantIds;
    auto keyOf = [&](Value v) {
      auto [it, inserted] = valueKey.try_emplace(v, p.numValues);
      if (inserted)
        ++p.numValues;
      return it->second;
    };
    std::vector<unsigned> assign;
    const double inf = std::numeric_limits<double>::infinity();
    for (Operation &op : func.getBody().front()) {
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        constantIds[&op] = p.constantBytes.size();
        p.constantBytes.push_back(tensorBytes(constant.getResult()));
        continue;
      }
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          p.outputs.push_back(
              {producer.lookup(v) - 1, tensorBytes(v), keyOf(v)});
        continue;
      }
      if (!isPlaceable(&op))
        continue;
      Node node{&op, false, {}, {}, {}, 0};
      DeviceAttr pin = placedDevice(&op);
      if (pin && indexOf(pin) < 0) {
        // Pinned outside the candidate set: schedule it as its own device.
        p.devices.push_back(defaultProfile(pin));
        k = p.devices.size();
      }
      node.pinned = static_cast<bool>(pin);
      for (size_t d = 0; d < k; ++d) {
        bool allowed =
            pin ? p.devices[d].device == pin : p.devices[d].supports(&op);
        node.seconds.push_back(allowed ? p.devices[d].seconds(&op) : inf);
      }
      for (Value v : op.getOperands()) {
        node.workingSet += tensorBytes(v);
        if (Operation *def = v.getDefiningOp())
          if (isa<ConstantOp>(def)) {
            node.constants.push_back(constantIds.lookup(def));
            continue;
          }
        node.inputs.push_back(
            {producer.lookup(v) - 1, tensorBytes(v), keyOf(v)});
      }
      for (Value r : op.getResults()) {
        node.workingSet += tensorBytes(r);
        producer[r] = p.nodes.size() + 1;
      }
      p.nodes.push_back(std::move(node));
    }
    for (Node &node : p.nodes)
      node.seconds.resize(k, inf);
    size_t n = p.nodes.size();
    if (n == 0)
      return;

    // The best single device (ops it cannot run on their first capable one).
    double best = inf;
    for (size_t d = 0; d < k; ++d) {
      std::vector<unsigned> trial(n);
      for (size_t i = 0; i < n; ++i) {
        trial[i] = d;
        if (p.nodes[i].seconds[d] == inf)
          for (size_t e = 0; e < k; ++e)
            if (p.nodes[i].seconds[e] != inf) {
              trial[i] = e;
              break;
            }
      }
      double l = p.latency(trial);
      if (l < best || assign.empty()) {
        best = l;
        assign = trial;
      }
    }
    if (best == inf) {
      emitError(func.getLoc())
          << "no placement fits the devices' memory capacities";
      return signalPassFailure();
    }

    // Region moves while they help.
    std::vector<size_t> lengths;
    for (size_t len = 1; len < n; len = std::max(len + 1, len * 3 / 2))
      lengths.push_back(len);
    lengths.push_back(n);
    for (unsigned round = 0; round < 64; ++round) {
      double bestMove = best;
      size_t moveStart = 0, moveLen = 0, moveDevice = 0;
      std::vector<unsigned> trial = assign;
      for (size_t len : lengths) {
        size_t step = std::max<size_t>(1, len / 4);
        for (size_t start = 0; start + len <= n; start += step)
          for (size_t d = 0; d < k; ++d) {
            bool changed = false;
            for (size_t i = start; i < start + len; ++i)
              if (!p.nodes[i].pinned && p.nodes[i].seconds[d] != inf &&
                  trial[i] != d) {
                trial[i] = d;
                changed = true;
              }
            if (changed) {
              double l = p.latency(trial);
              if (l < bestMove) {
                bestMove = l;
                moveStart = start;
                moveLen = len;
                moveDevice = d;
              }
              std::copy(assign.begin() + start, assign.begin() + start + len,
                        trial.begin() + start);
            }
          }
      }
      if (!(bestMove < best * 0.999))
        break;
      for (size_t i = moveStart; i < moveStart + moveLen; ++i)
        if (!p.nodes[i].pinned && p.nodes[i].seconds[moveDevice] != inf)
          assign[i] = moveDevice;
      best = bestMove;
    }
    for (size_t i = 0; i < n; ++i)
      if (!p.nodes[i].pinned)
        p.nodes[i].op->setAttr(kPlaceAttr, p.devices[assign[i]].device);
    emitRemark(func.getLoc())
        << "auto placement: estimated latency "
        << llvm::formatv("{0:F1}", best * 1e6).str() << " us";
  }
};

} // namespace
