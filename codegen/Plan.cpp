//===- Plan.cpp - number values, pack weights, list kernel calls ----------===//

#include "codegen/Plan.h"

#include "codegen/CEmitter.h"
#include "runtime/Artifact.h"

using namespace mlir;
using namespace kiln;

std::string kiln::dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (isNarrowFloat(t))
    return narrowFloatName(t);
  if (t.isInteger(1))
    return "bool";
  for (unsigned w : {2, 4, 8, 16, 32, 64})
    if (t.isInteger(w))
      return (t.isUnsignedInteger() ? "u" : "i") + std::to_string(w);
  return "";
}

FailureOr<Plan> kiln::buildPlan(func::FuncOp func,
                                ArrayRef<std::string> deviceOrder) {
  Plan plan;
  nlohmann::json values = nlohmann::json::array();
  DenseMap<Value, size_t> ids;

  // Roles: the devices the plan uses, those of `deviceOrder` first (in its
  // order), then the rest in order of first use.
  SmallVector<DeviceAttr> used;
  auto note = [&](Type t) {
    if (DeviceAttr d = getDevice(t))
      if (!llvm::is_contained(used, d))
        used.push_back(d);
  };
  for (Type t : func.getArgumentTypes())
    note(t);
  for (Operation &op : func.getBody().front())
    for (Type t : op.getResultTypes())
      note(t);
  for (Type t : func.getResultTypes())
    note(t);
  for (const std::string &name : deviceOrder)
    for (DeviceAttr d : used)
      if (d.str() == name && !llvm::is_contained(plan.roles, d))
        plan.roles.push_back(d);
  for (DeviceAttr d : used)
    if (!llvm::is_contained(plan.roles, d))
      plan.roles.push_back(d);
  auto roleOf = [&](DeviceAttr d) {
    return static_cast<size_t>(llvm::find(plan.roles, d) - plan.roles.begin());
  };
  nlohmann::json devices = nlohmann::json::array();
  for (DeviceAttr d : plan.roles)
    devices.push_back({{"name", d.str()}, {"kind", d.getKind().str()}});

  auto addValue = [&](Value v, const char *kind) -> FailureOr<size_t> {
    auto type = cast<RankedTensorType>(v.getType());
    std::string dtype = dtypeName(type.getElementType());
    DeviceAttr device = getDevice(type);
    if (dtype.empty() || !device)
      return emitError(v.getLoc()) << "cannot plan a value of type " << type
                                   << " (needs a supported dtype and a device)";
    std::vector<int64_t> shape; // -1: dynamic
    for (int64_t d : type.getShape())
      shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    values.push_back({{"dtype", dtype},
                      {"shape", shape},
                      {"device", roleOf(device)},
                      {"kind", kind}});
    ids[v] = values.size() - 1;
    return values.size() - 1;
  };

  nlohmann::json inputs = nlohmann::json::array();
  for (BlockArgument arg : func.getArguments()) {
    auto id = addValue(arg, "input");
    if (failed(id))
      return failure();
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "kiln.name");
    inputs.push_back(
        {{"name",
          name ? name.str() : "input_" + std::to_string(arg.getArgNumber())},
         {"value", *id}});
  }
  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json outputs = nlohmann::json::array();
  for (Operation &op : func.getBody().front()) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto id = addValue(constant.getResult(), "constant");
      if (failed(id))
        return failure();
      std::vector<char> bytes = getConstantBytes(constant.getValue());
      size_t offset = (plan.weights.size() + artifact::kAlignment - 1) /
                      artifact::kAlignment * artifact::kAlignment;
      plan.weights.resize(offset, 0);
      plan.weights.insert(plan.weights.end(), bytes.begin(), bytes.end());
      values[*id]["offset"] = offset;
      continue;
    }
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      std::string symbol = "kiln_k" + std::to_string(plan.kernels.size());
      nlohmann::json args = nlohmann::json::array();
      for (Value input : kernel.getInputs())
        args.push_back(ids.lookup(input));
      for (Value result : kernel.getResults()) {
        auto id = addValue(result, "temp");
        if (failed(id))
          return failure();
        args.push_back(*id);
      }
      DeviceAttr device = kernel.getNumResults()
                              ? getDevice(kernel.getResult(0).getType())
                              : plan.roles.front();
      steps.push_back({{"kernel", symbol},
                       {"args", args},
                       {"num_inputs", kernel.getInputs().size()},
                       {"nodes", nodeNames(kernel.getLoc())},
                       {"device", roleOf(device)}});
      if (needsDimsFunction(kernel))
        steps.back()["dims"] = symbol + "_dims"; // see CppEmitter.cpp
      if (SmallVector<unsigned> data = kernelDimsData(kernel); !data.empty())
        steps.back()["dims_data"] =
            std::vector<unsigned>(data.begin(), data.end());
      plan.kernels.emplace_back(kernel, symbol);
      continue;
    }
    if (auto copy = dyn_cast<CopyOp>(op)) {
      auto id = addValue(copy.getResult(), "temp");
      if (failed(id))
        return failure();
      steps.push_back({{"copy", {ids.lookup(copy.getInput()), *id}},
                       {"bytes", tensorBytes(copy.getResult())}}); // 0: dynamic
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, "kiln.name");
        outputs.push_back(
            {{"name", name ? name.str() : "output_" + std::to_string(i)},
             {"value", ids.lookup(value)}});
      }
      continue;
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      // A view: the same bytes as its input.
      auto id = addValue(reshape.getResult(), "alias");
      if (failed(id))
        return failure();
      values[*id]["of"] = ids.lookup(reshape.getInput());
      // kiln.reshape's shape as it is (kReshapeCopy is the runtime's
      // kCopyDim): "view", which runtimes before it reject for dynamic
      // shapes rather than read a 0 as a copy.
      values[*id]["view"] = reshape.getShape().vec();
      continue;
    }
    return op.emitOpError() << "cannot be placed in a host plan (expected "
                               "constants, kernels, copies, reshapes and a "
                               "return only)";
  }
  plan.manifest = {{"devices", devices},
                   {"values", values},
                   {"inputs", inputs},
                   {"outputs", outputs},
                   {"steps", steps}};
  // Graph inputs and outputs that are sequences or optionals (the importer's
  // kiln.signature): each stands for `count` consecutive ports.
  if (auto signature = func->getAttrOfType<DictionaryAttr>("kiln.signature")) {
    nlohmann::json ports = nlohmann::json::object();
    for (StringRef key : {"inputs", "outputs"}) {
      nlohmann::json entries = nlohmann::json::array();
      for (Attribute a : signature.getAs<ArrayAttr>(key)) {
        auto entry = cast<DictionaryAttr>(a);
        entries.push_back(
            {{"name", entry.getAs<StringAttr>("name").str()},
             {"kind", entry.getAs<StringAttr>("kind").str()},
             {"count", entry.getAs<IntegerAttr>("count").getInt()},
             {"optional", static_cast<bool>(entry.get("optional"))}});
      }
      ports[key.str()] = entries;
    }
    plan.manifest["signature"] = ports;
  }
  return plan;
}
