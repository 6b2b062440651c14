//===- Report.cpp - placement tables, saved placements, dot pictures ------===//

#include "passes/placement/Report.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace kiln;

namespace {

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.1f %s", value, units[unit]);
  return text;
}

std::string typeText(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << tensor.getElementType() << "[";
  llvm::interleave(tensor.getShape(), os, ",");
  os << "]";
  return text;
}

DeviceAttr deviceOf(Operation *op) {
  for (Type t : op->getResultTypes())
    if (DeviceAttr d = getDevice(t))
      return d;
  return {};
}

std::string firstNode(Location loc) {
  std::string names = nodeNames(loc);
  return names.substr(0, names.find(','));
}

// The ONNX node producing `v`, or "input NAME" for an argument.
std::string valueName(func::FuncOp func, Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "kiln.name");
    return "input " + (name ? name.str() : std::to_string(arg.getArgNumber()));
  }
  return firstNode(v.getLoc());
}

struct DeviceSummary {
  unsigned ops = 0, copiesIn = 0;
  double seconds = 0;
  uint64_t weights = 0, copyBytesIn = 0, live = 0, peak = 0;
};

} // namespace

std::string kiln::placementTable(func::FuncOp func,
                                 ArrayRef<DeviceProfile> profiles) {
  Block &body = func.getBody().front();
  ProfileSet known(profiles);
  llvm::MapVector<Attribute, DeviceSummary> devices;
  for (const DeviceProfile &p : profiles)
    devices[p.device];

  // Liveness: the index of each value's last use (the return counts).
  DenseMap<Operation *, unsigned> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  DenseMap<Value, unsigned> lastUse;
  auto noteUses = [&](Value v, unsigned defined) {
    unsigned last = defined;
    for (Operation *user : v.getUsers())
      last = std::max(last, index.lookup(user));
    lastUse[v] = last;
  };
  std::vector<std::vector<Value>> dying(body.getOperations().size() + 1);
  auto track = [&](Value v, unsigned defined, bool view) {
    noteUses(v, defined);
    DeviceAttr d = getDevice(v.getType());
    if (!d || view)
      return;
    devices[d].live += tensorBytes(v);
    devices[d].peak = std::max(devices[d].peak, devices[d].live);
    dying[lastUse[v]].push_back(v);
  };
  for (BlockArgument arg : body.getArguments())
    track(arg, 0, false);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "#     op             ONNX node                          device        "
        "est. us\n";
  unsigned row = 0;
  std::string copies;
  llvm::raw_string_ostream cs(copies);
  for (Operation &op : body) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (DeviceAttr d = deviceOf(&op)) {
        devices[d].weights += tensorBytes(constant.getResult());
        devices[d].live += tensorBytes(constant.getResult());
        devices[d].peak = std::max(devices[d].peak, devices[d].live);
      }
      continue;
    }
    if (isa<func::ReturnOp>(op))
      continue;
    DeviceAttr d = deviceOf(&op);
    if (!d)
      continue;
    const DeviceProfile &p = known.get(d);
    if (auto copy = dyn_cast<CopyOp>(op)) {
      DeviceAttr from = getDevice(copy.getInput().getType());
      uint64_t bytes = tensorBytes(copy.getResult());
      double us = from ? p.transferSeconds(bytes, known.get(from)) * 1e6 : 0;
      cs << llvm::format("  %-34s %-8s -> %-8s %12s %10.1f us\n",
                         valueName(func, copy.getInput()).c_str(),
                         from ? from.str().c_str() : "?", d.str().c_str(),
                         humanBytes(bytes).c_str(), us);
      devices[d].copiesIn++;
      devices[d].copyBytesIn += bytes;
      devices[d].seconds += us * 1e-6;
    } else {
      double us = p.seconds(&op) * 1e6;
      os << llvm::format("%-5u %-14s %-34s %-8s %12.1f\n", row++,
                         op.getName().stripDialect().str().c_str(),
                         firstNode(op.getLoc()).c_str(), d.str().c_str(), us);
      devices[d].ops++;
      devices[d].seconds += us * 1e-6;
    }
    for (Value result : op.getResults())
      track(result, index[&op], isa<ReshapeOp>(op));
    for (Value v : dying[index[&op]])
      devices[getDevice(v.getType())].live -= tensorBytes(v);
  }
  unsigned copyCount = 0;
  uint64_t copyBytes = 0;
  for (auto &[d, s] : devices) {
    copyCount += s.copiesIn;
    copyBytes += s.copyBytesIn;
  }
  os << "\ncopies: " << copyCount << ", " << humanBytes(copyBytes) << "\n";
  os << copies;
  os << "\n"
     << "device      ops   est. busy us    copies in      weights  peak "
        "memory\n";
  for (auto &[d, s] : devices)
    os << llvm::format(
        "%-8s %6u %14.1f %12s %12s %12s\n", cast<DeviceAttr>(d).str().c_str(),
        s.ops, s.seconds * 1e6, humanBytes(s.copyBytesIn).c_str(),
        humanBytes(s.weights).c_str(), humanBytes(s.peak).c_str());
  return text;
}

nlohmann::json kiln::placementRules(func::FuncOp func) {
  // Per node, the devices of its ops in order.
  llvm::MapVector<std::string, SmallVector<std::pair<std::string, DeviceAttr>>,
                  std::map<std::string, unsigned>>
      byNode;
  func.walk([&](Operation *op) {
    if (!isPlaceable(op))
      return;
    DeviceAttr d = deviceOf(op);
    std::string node = firstNode(op->getLoc());
    if (d && !node.empty())
      byNode[node].push_back({op->getName().getStringRef().str(), d});
  });
  auto escape = [](StringRef name) {
    std::string out;
    for (char c : name) {
      if (StringRef(".^$|()[]{}*+?\\").contains(c))
        out += '\\';
      out += c;
    }
    return out;
  };
  nlohmann::json rules = nlohmann::json::array();
  for (auto &[node, ops] : byNode) {
    bool same = llvm::all_of(
        ops, [&](auto &p) { return p.second == ops.front().second; });
    if (same) {
      rules.push_back(
          {{"node", escape(node)}, {"device", ops.front().second.str()}});
      continue;
    }
    std::vector<std::string> done;
    for (auto &[name, d] : ops) {
      if (llvm::is_contained(done, name))
        continue;
      done.push_back(name);
      rules.push_back(
          {{"node", escape(node)}, {"op", name}, {"device", d.str()}});
    }
  }
  return {{"rules", rules}};
}

std::string kiln::placementDot(func::FuncOp func) {
  static const char *fills[] = {"#dbe8fb", "#fde2cf", "#d9f2d9",
                                "#f3dcf5", "#fbf3c8", "#d8f1f3"};
  Block &body = func.getBody().front();
  DenseMap<Value, std::string> source; // the node that provides a value
  llvm::MapVector<Attribute, std::vector<std::string>> clusters;
  std::string edges;
  llvm::raw_string_ostream es(edges);
  // Labels keep their "\n" line breaks; quotes are escaped.
  auto quote = [](StringRef s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"')
        out += '\\';
      out += c;
    }
    return out + "\"";
  };
  for (BlockArgument arg : body.getArguments()) {
    std::string id = "in" + std::to_string(arg.getArgNumber());
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "kiln.name");
    std::string label =
        (name ? name.str() : id) + "\\n" + typeText(arg.getType());
    clusters[getDevice(arg.getType())].push_back(
        id + " [shape=ellipse, label=" + quote(label) + "];");
    source[arg] = id;
  }
  unsigned kernels = 0, views = 0;
  for (Operation &op : body) {
    if (isa<ConstantOp>(op))
      continue;
    if (auto copy = dyn_cast<CopyOp>(op)) {
      // Drawn on the edges from the copied value to the copy's users.
      source[copy.getResult()] = source.lookup(copy.getInput());
      continue;
    }
    std::string id, label;
    if (isa<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, "kiln.name");
        std::string out = "out" + std::to_string(i);
        clusters[getDevice(v.getType())].push_back(
            out + " [shape=ellipse, label=" +
            quote((name ? name.str() : out) + "\\n" + typeText(v.getType())) +
            "];");
      }
    } else if (isa<KernelOp>(op)) {
      id = "k" + std::to_string(kernels++);
      std::string names = nodeNames(op.getLoc());
      if (names.size() > 60)
        names = names.substr(0, 57) + "...";
      label = "kernel " + std::to_string(kernels - 1) + "\\n" + names;
    } else {
      id = "v" + std::to_string(views++);
      label =
          op.getName().stripDialect().str() + "\\n" + firstNode(op.getLoc());
    }
    if (!id.empty())
      clusters[deviceOf(&op)].push_back(
          id + " [label=" + quote(label) +
          (isa<KernelOp>(op) ? "" : ", style=\"filled,dashed\"") + "];");
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      std::string from = source.lookup(operand);
      if (from.empty())
        continue; // a constant
      std::string to = isa<func::ReturnOp>(op) ? "out" + std::to_string(i) : id;
      if (auto copy = operand.getDefiningOp<CopyOp>())
        es << "  " << from << " -> " << to << " [color=\"#c0392b\", "
           << "penwidth=2, label="
           << quote("copy " + humanBytes(tensorBytes(operand))) << "];\n";
      else
        es << "  " << from << " -> " << to << ";\n";
    }
    for (Value result : op.getResults())
      source[result] = id;
  }
  std::string text = "digraph kiln {\n  rankdir=TB;\n  node [shape=box, "
                     "style=filled, fillcolor=white, fontname=Helvetica];\n";
  unsigned c = 0;
  for (auto &[device, nodes] : clusters) {
    auto d = dyn_cast_or_null<DeviceAttr>(device);
    text += "  subgraph cluster_" + std::to_string(c) +
            " {\n    label=" + quote(d ? d.str() : "?") +
            ";\n    style=filled;\n    fillcolor=" + quote(fills[c % 6]) +
            ";\n";
    for (const std::string &n : nodes)
      text += "    " + n + "\n";
    text += "  }\n";
    ++c;
  }
  return text + edges + "}\n";
}
