//===- PlacePins.cpp - place ops by the rules of a pins file --------------===//
//
// A pins file is JSON, either {"rules": [...]} or the bare list:
//
//   {"rules": [
//     {"op": "Conv", "device": "sim:0"},
//     {"node": "/encoder/layers\\.[0-1]/.*", "device": "sim:1"},
//     {"op": "kiln.gemm", "node": "/head/.*", "device": "cpu"}]}
//
// Algorithm: parse and validate every rule first (device names, regular
// expressions, fields), so a bad file is one clear error before anything
// moves. Then, for each placeable op in order, the first rule whose `op`
// (the ONNX op type from the op's location, or kiln.NAME) and `node` (a
// regex matched against the whole ONNX node name) both match sets the op's
// kiln.place attribute. Rules that match no op are warnings: usually a typo.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/placement/Profiles.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <nlohmann/json.hpp>
#include <optional>

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEPINS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct Rule {
  std::string op, node; // empty: any
  std::optional<llvm::Regex> regex;
  DeviceAttr device;
  unsigned matched = 0;

  bool matches(Operation *target) const {
    if (!op.empty()) {
      StringRef kilnName = target->getName().getStringRef();
      if (op != kilnName && op != onnxOpType(target->getLoc()))
        return false;
    }
    if (!regex)
      return true;
    SmallVector<StringRef> names;
    std::string all = nodeNames(target->getLoc());
    StringRef(all).split(names, ',', -1, false);
    return llvm::any_of(names, [&](StringRef n) { return regex->match(n); });
  }
};

FailureOr<std::vector<Rule>> parseRules(Location loc, StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(loc) << "cannot read pins file '" << path
                          << "': " << buffer.getError().message();
  StringRef text = (*buffer)->getBuffer();
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded())
    return emitError(loc) << "pins file '" << path << "' is not valid JSON";
  if (j.is_object() && j.contains("rules"))
    j = j["rules"];
  if (!j.is_array())
    return emitError(loc) << "pins file '" << path
                          << "' must hold a list of rules (or {\"rules\": "
                             "[...]})";
  std::vector<Rule> rules;
  for (auto [i, r] : llvm::enumerate(j)) {
    auto fail = [&, i = i]() {
      return emitError(loc)
             << "pins file '" << path << "', rule #" << i + 1 << ": ";
    };
    if (!r.is_object())
      return fail() << "expected an object";
    Rule rule;
    for (auto &[key, value] : r.items()) {
      if (key != "op" && key != "node" && key != "device")
        return fail() << "unknown field '" << key
                      << "' (expected op, node, device)";
      if (!value.is_string())
        return fail() << "'" << key << "' must be a string";
    }
    if (!r.contains("device"))
      return fail() << "needs a 'device'";
    if (!r.contains("op") && !r.contains("node"))
      return fail() << "needs an 'op', a 'node' or both";
    std::string error;
    rule.device = DeviceAttr::parseName(loc.getContext(),
                                        r["device"].get<std::string>(), error);
    if (!rule.device)
      return fail() << error;
    rule.op = r.value("op", "");
    rule.node = r.value("node", "");
    if (r.contains("node")) {
      rule.regex.emplace("^(" + rule.node + ")$");
      if (!rule.regex->isValid(error))
        return fail() << "bad node pattern '" << rule.node << "': " << error;
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

struct PlacePins : kiln::impl::KilnPlacePinsBase<PlacePins> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (rules.empty())
      return;
    auto parsed = parseRules(func.getLoc(), rules);
    if (failed(parsed))
      return signalPassFailure();
    func.walk([&](Operation *op) {
      if (!isPlaceable(op))
        return;
      for (Rule &rule : *parsed)
        if (rule.matches(op)) {
          op->setAttr(kPlaceAttr, rule.device);
          ++rule.matched;
          return;
        }
    });
    for (auto [i, rule] : llvm::enumerate(*parsed))
      if (!rule.matched)
        emitWarning(func.getLoc())
            << "pin rule #" << i + 1 << " ("
            << (rule.op.empty() ? "" : "op " + rule.op)
            << (rule.op.empty() || rule.node.empty() ? "" : ", ")
            << (rule.node.empty() ? "" : "node " + rule.node) << " -> "
            << rule.device.str() << ") matched no op";
  }
};

} // namespace
