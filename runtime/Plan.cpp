//===- Plan.cpp - decode and validate the manifest's plan -----------------===//

#include "runtime/Plan.h"

#include <cctype>
#include <cstring>

namespace kiln::plan {

namespace {
using nlohmann::json;

[[noreturn]] void fail(const std::string &message) { throw Error(message); }

/// A JSON value for a message, cut short when long.
std::string show(const json &j) {
  std::string text = j.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

size_t index(const json &j, const std::string &what) {
  if (!j.is_number_unsigned())
    fail(what + " must be a non-negative integer, got " + show(j));
  return j.get<size_t>();
}

const char *kindName(ValueKind kind) {
  switch (kind) {
  case ValueKind::Input:
    return "input";
  case ValueKind::Constant:
    return "constant";
  case ValueKind::Temp:
    return "temp";
  case ValueKind::Alias:
    return "alias";
  }
  return "?";
}

/// Decodes plan.values from the manifest.
void decodeValues(Plan &plan, const json &values,
                  std::optional<size_t> weightsSize) {
  // Large enough for any real tensor, small enough that sums cannot wrap.
  const size_t maxBytes = size_t(1) << 48;
  for (const json &v : values) {
    size_t id = plan.values.size();
    std::string what = "value " + std::to_string(id);
    Value value;
    value.dtype = parseDType(v.at("dtype").get<std::string>());
    value.nbytes = dtypeSize(value.dtype);
    for (const json &d : v.at("shape")) {
      if (!d.is_number_integer() || d.get<int64_t>() < -1)
        fail(what + " has a bad dimension " + show(d));
      int64_t dim = d.get<int64_t>();
      value.shape.push_back(dim);
      if (dim < 0) {
        value.dynamic = plan.dynamic = true;
        continue;
      }
      if (dim && value.nbytes > maxBytes / static_cast<size_t>(dim))
        fail(what + " is too large (" + describe(value.dtype, value.shape) +
             "...)");
      value.nbytes *= static_cast<size_t>(dim);
    }
    value.role = index(v.at("device"), what + "'s device");
    if (value.role >= plan.roles.size())
      fail(what + " is on role " + std::to_string(value.role) +
           ", but the plan has " + std::to_string(plan.roles.size()) +
           " role(s)");
    if (value.dynamic)
      value.nbytes = 0;
    value.root = id;
    std::string kind = v.at("kind").get<std::string>();
    if (kind == "input") {
      value.kind = ValueKind::Input;
    } else if (kind == "temp") {
      value.kind = ValueKind::Temp;
    } else if (kind == "constant") {
      value.kind = ValueKind::Constant;
      if (value.dynamic)
        fail("constant " + what + " has a dynamic shape");
      value.offset = index(v.at("offset"), what + "'s offset");
      if (!weightsSize || value.offset > *weightsSize ||
          value.nbytes > *weightsSize - value.offset)
        fail("constant " + what + " lies outside the weights section");
    } else if (kind == "alias") {
      value.kind = ValueKind::Alias;
      value.aliasOf = index(v.at("of"), what + "'s source");
      if (value.aliasOf >= id)
        fail("alias " + what + " must view an earlier value, not value " +
             std::to_string(value.aliasOf));
      const Value &source = plan.values[value.aliasOf];
      // "view" (-2 copies the source's dim, 0 is a size), or, from
      // artifacts before it, "reshape" (ONNX's spec: 0 copies the dim).
      bool legacy = !v.contains("view");
      if (v.contains(legacy ? "reshape" : "view"))
        for (const json &d : v.at(legacy ? "reshape" : "view")) {
          int64_t lowest = legacy ? -1 : Value::kCopyDim;
          if (!d.is_number_integer() || d.get<int64_t>() < lowest)
            fail(what + " has a bad reshape dimension " + show(d));
          int64_t size = d.get<int64_t>();
          value.reshape.push_back(legacy && size == 0 ? Value::kCopyDim : size);
        }
      if ((value.dynamic || source.dynamic) &&
          value.reshape.size() != value.shape.size())
        fail("alias " + what + " of a dynamic shape needs a reshape spec of " +
             "rank " + std::to_string(value.shape.size()));
      if (!value.dynamic && !source.dynamic && source.nbytes != value.nbytes)
        fail("alias " + what + " (" + std::to_string(value.nbytes) +
             " bytes) views value " + std::to_string(value.aliasOf) + " (" +
             std::to_string(source.nbytes) + " bytes)");
      if (source.role != value.role)
        fail("alias " + what + " is on " + plan.describeRole(value.role) +
             ", but its source value " + std::to_string(value.aliasOf) +
             " is on " + plan.describeRole(source.role) +
             "; an alias is on its source's device");
      value.root = source.root;
    } else {
      fail(what + " has an unknown kind '" + kind + "'");
    }
    plan.values.push_back(std::move(value));
  }
  plan.views.assign(plan.values.size(), {});
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (plan.values[id].kind == ValueKind::Alias)
      plan.views[plan.values[id].aliasOf].push_back(id);
}

/// Decodes manifest["signature"] (sequences and optionals among the graph
/// inputs and outputs), or gives each entry its own tensor port.
void decodeSignature(Plan &plan, const json &m) {
  auto decode = [&](const char *key, const std::vector<TensorInfo> &info,
                    std::vector<PortInfo> &ports) {
    if (!m.contains("signature")) {
      for (size_t i = 0; i < info.size(); ++i)
        ports.push_back({info[i].name, PortInfo::Kind::Tensor, i, 1, false});
      return;
    }
    size_t next = 0;
    for (const json &p : m.at("signature").at(key)) {
      PortInfo port;
      port.name = p.at("name").get<std::string>();
      std::string kind = p.at("kind").get<std::string>();
      std::string what =
          std::string("signature ") + key + " '" + port.name + "'";
      port.kind = kind == "tensor"     ? PortInfo::Kind::Tensor
                  : kind == "sequence" ? PortInfo::Kind::Sequence
                  : kind == "none"
                      ? PortInfo::Kind::None
                      : (fail(what + " has an unknown kind '" + kind + "'"),
                         PortInfo::Kind::None);
      port.count = index(p.at("count"), what + "'s count");
      port.optional = p.value("optional", false);
      if ((port.kind == PortInfo::Kind::Tensor && port.count != 1) ||
          (port.kind == PortInfo::Kind::None && port.count != 0))
        fail(what + " is a " + kind + " of " + std::to_string(port.count) +
             " entries");
      if (port.count > info.size() - next)
        fail(what + " needs more " + key + " than the plan has");
      port.first = next;
      next += port.count;
      ports.push_back(std::move(port));
    }
    if (next != info.size())
      fail(std::string("the signature's ") + key + " cover " +
           std::to_string(next) + " of " + std::to_string(info.size()) +
           " entries");
  };
  decode("inputs", plan.inputInfo, plan.inputPorts);
  decode("outputs", plan.outputInfo, plan.outputPorts);
}

/// Decodes the graph inputs and outputs.
void decodePorts(Plan &plan, const json &m) {
  auto ports = [&](const char *key, std::vector<TensorInfo> &info,
                   std::vector<size_t> &ids) {
    for (const json &p : m.at(key)) {
      std::string singular(key, std::strlen(key) - 1); // "input"
      std::string what =
          "graph " + singular + " '" + p.at("name").get<std::string>() + "'";
      size_t id = index(p.at("value"), what + "'s value");
      if (id >= plan.values.size())
        fail(what + " is value " + std::to_string(id) + " of only " +
             std::to_string(plan.values.size()));
      ids.push_back(id);
      info.push_back({p.at("name").get<std::string>(), plan.values[id].dtype,
                      plan.values[id].shape});
    }
  };
  ports("inputs", plan.inputInfo, plan.inputValues);
  ports("outputs", plan.outputInfo, plan.outputValues);
  decodeSignature(plan, m);
  std::vector<int> uses(plan.values.size(), 0);
  for (size_t i = 0; i < plan.inputValues.size(); ++i) {
    size_t id = plan.inputValues[i];
    if (plan.values[id].kind != ValueKind::Input)
      fail("graph input '" + plan.inputInfo[i].name + "' is value " +
           std::to_string(id) + ", which is not an input value");
    if (uses[id]++)
      fail("input value " + std::to_string(id) +
           " is more than one graph input");
  }
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (plan.values[id].kind == ValueKind::Input && !uses[id])
      fail("input value " + std::to_string(id) + " is no graph input");
}

/// Decodes a "gemm" launch (docs/devices.md) and checks that every matrix
/// it touches lies inside its slot's buffer (`slotBytes`).
CudaKernel::Gemm decodeGemm(const json &j, const std::vector<size_t> &slotBytes,
                            const std::string &what) {
  if (!j.is_object())
    fail(what + "'s gemm must be an object, got " + show(j));
  CudaKernel::Gemm g;
  const json &dtype = j.at("dtype");
  if (dtype != "f32" && dtype != "f64")
    fail(what + "'s gemm dtype must be f32 or f64, got " + show(dtype));
  g.f64 = dtype == "f64";
  auto count = [&](const char *key) {
    const json &v = j.at(key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t(1) << 31))
      fail(what + "'s gemm " + key + " must be an integer in [0, 2^31], got " +
           show(v));
    return v.get<uint64_t>();
  };
  g.batch = count("batch");
  g.m = count("m");
  g.n = count("n");
  g.k = count("k");
  g.strideA = count("stride_a");
  g.strideB = count("stride_b");
  g.strideC = count("stride_c");
  g.transA = j.at("trans_a").get<bool>();
  g.transB = j.at("trans_b").get<bool>();
  const json &beta = j.at("beta");
  if (beta != 0 && beta != 1)
    fail(what + "'s gemm beta must be 0 or 1, got " + show(beta));
  g.beta = beta.get<double>();
  size_t elem = g.f64 ? 8 : 4;
  auto slot = [&](const char *key, uint64_t rows, uint64_t cols,
                  uint64_t stride) {
    size_t s = index(j.at(key), what + "'s gemm slot " + key);
    if (s >= slotBytes.size())
      fail(what + "'s gemm slot " + key + " is " + std::to_string(s) +
           ", but the kernel has " + std::to_string(slotBytes.size()) +
           " slots");
    long double last = g.batch ? (long double)(g.batch - 1) * stride : 0;
    long double need = (last + (long double)rows * cols) * elem;
    if (g.batch && rows && cols && need > (long double)slotBytes[s])
      fail(what + "'s gemm reads or writes past slot " + std::to_string(s) +
           " (" + std::to_string(slotBytes[s]) + " bytes)");
    return s;
  };
  g.a = slot("a", g.m, g.k, g.strideA);
  g.b = slot("b", g.k, g.n, g.strideB);
  g.c = slot("c", g.m, g.n, g.strideC);
  if (g.strideC < g.m * g.n && g.batch > 1)
    fail(what + "'s gemm output matrices overlap (stride_c " +
         std::to_string(g.strideC) + " < m*n)");
  return g;
}

/// Decodes a "conv" launch (docs/devices.md): its shapes must make a conv
/// whose tensors lie inside their slots' buffers (`slotBytes`), y and the
/// workspace apart from the rest, the workspace a scratch slot (not one of
/// the `numArgs` arguments).
CudaKernel::Conv decodeConv(const json &j, const std::vector<size_t> &slotBytes,
                            size_t numArgs, const std::string &what) {
  if (!j.is_object())
    fail(what + "'s conv must be an object, got " + show(j));
  CudaKernel::Conv c;
  if (j.at("dtype") != "f32")
    fail(what + "'s conv dtype must be f32, got " + show(j.at("dtype")));
  auto ints = [&](const char *key, int64_t *to, size_t n) {
    const json &v = j.at(key);
    if (!v.is_array() || v.size() != n)
      fail(what + "'s conv " + key + " must be a list of " + std::to_string(n) +
           " integers, got " + show(v));
    for (size_t i = 0; i < n; ++i) {
      if (!v[i].is_number_unsigned() || v[i].get<uint64_t>() < 1 ||
          v[i].get<uint64_t>() >= (uint64_t(1) << 31))
        fail(what + "'s conv " + key +
             " must hold integers in [1, 2^31), got " + show(v));
      to[i] = v[i].get<int64_t>();
    }
  };
  ints("x_shape", c.x, 4);
  ints("w_shape", c.w, 4);
  ints("y_shape", c.y, 4);
  const json &pads = j.at("pads");
  if (!pads.is_array() || pads.size() != 2 || !pads[0].is_number_unsigned() ||
      !pads[1].is_number_unsigned() || pads[0].get<uint64_t>() >= (1u << 30) ||
      pads[1].get<uint64_t>() >= (1u << 30))
    fail(what + "'s conv pads must be 2 integers in [0, 2^30), got " +
         show(pads));
  c.pads[0] = pads[0].get<int64_t>();
  c.pads[1] = pads[1].get<int64_t>();
  ints("strides", c.strides, 2);
  ints("dilations", c.dilations, 2);
  const json &groups = j.at("groups");
  if (!groups.is_number_unsigned() || groups.get<uint64_t>() < 1 ||
      groups.get<uint64_t>() >= (uint64_t(1) << 31))
    fail(what + "'s conv groups must be an integer in [1, 2^31), got " +
         show(groups));
  c.groups = groups.get<int64_t>();
  const json &beta = j.at("beta");
  if (beta != 0 && beta != 1)
    fail(what + "'s conv beta must be 0 or 1, got " + show(beta));
  c.beta = beta.get<double>();
  // The shapes of one conv: x [N, C, H, W], w [M, C / groups, KH, KW], y [N,
  // M, OH, OW] with OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1.
  bool fits = c.x[0] == c.y[0] && c.w[0] == c.y[1] &&
              c.x[1] == c.w[1] * c.groups && c.w[0] % c.groups == 0;
  for (int i = 0; i < 2; ++i) {
    int64_t window = c.dilations[i] * (c.w[2 + i] - 1) + 1,
            span = c.x[2 + i] + 2 * c.pads[i];
    fits = fits && span >= window &&
           c.y[2 + i] == (span - window) / c.strides[i] + 1;
  }
  if (!fits)
    fail(what + "'s conv shapes do not make a conv (x " +
         show(j.at("x_shape")) + ", w " + show(j.at("w_shape")) + ", y " +
         show(j.at("y_shape")) + ", pads " + show(pads) + ", groups " +
         std::to_string(c.groups) + ")");
  auto slot = [&](const char *key, const int64_t *shape) {
    size_t s = index(j.at(key), what + "'s conv slot " + key);
    if (s >= slotBytes.size())
      fail(what + "'s conv slot " + key + " is " + std::to_string(s) +
           ", but the kernel has " + std::to_string(slotBytes.size()) +
           " slots");
    long double need = 4.0L * shape[0] * shape[1] * shape[2] * shape[3];
    if (need > (long double)slotBytes[s])
      fail(what + "'s conv reads or writes past slot " + std::to_string(s) +
           " (" + std::to_string(slotBytes[s]) + " bytes)");
    return s;
  };
  c.xSlot = slot("x", c.x);
  c.wSlot = slot("w", c.w);
  c.ySlot = slot("y", c.y);
  c.workspace = index(j.at("workspace"), what + "'s conv slot workspace");
  if (c.workspace >= slotBytes.size())
    fail(what + "'s conv slot workspace is " + std::to_string(c.workspace) +
         ", but the kernel has " + std::to_string(slotBytes.size()) + " slots");
  if (c.ySlot == c.xSlot || c.ySlot == c.wSlot || c.workspace == c.xSlot ||
      c.workspace == c.wSlot || c.workspace == c.ySlot || c.workspace < numArgs)
    fail(what +
         "'s conv slots overlap, or its workspace is an argument "
         "(x " +
         std::to_string(c.xSlot) + ", w " + std::to_string(c.wSlot) + ", y " +
         std::to_string(c.ySlot) + ", workspace " +
         std::to_string(c.workspace) + ")");
  if (j.contains("bias")) {
    // The fused form: y = relu(conv + bias [+ z]), overwriting y.
    if (!j.contains("activation") || j.at("activation") != "relu")
      fail(what +
           "'s conv with a bias must have the activation \"relu\", "
           "got " +
           (j.contains("activation") ? show(j.at("activation"))
                                     : std::string("none")));
    if (c.beta != 0)
      fail(what + "'s conv with a bias must overwrite its output (beta 0)");
    int64_t channels[4] = {1, c.y[1], 1, 1};
    c.biasSlot = slot("bias", channels);
    if (j.contains("z"))
      c.zSlot = slot("z", c.y);
    for (size_t s : {*c.biasSlot, c.zSlot.value_or(*c.biasSlot)})
      if (s == c.ySlot || s == c.workspace)
        fail(what + "'s conv bias or z shares slot " + std::to_string(s) +
             " with its output or workspace");
  } else if (j.contains("z") || j.contains("activation")) {
    fail(what + "'s conv has a z or an activation but no bias");
  }
  c.workspaceBytes =
      index(j.at("workspace_bytes"), what + "'s conv workspace_bytes");
  if (c.workspaceBytes > slotBytes[c.workspace])
    fail(what + "'s conv workspace of " + std::to_string(c.workspaceBytes) +
         " bytes is larger than its slot (" +
         std::to_string(slotBytes[c.workspace]) + " bytes)");
  return c;
}

/// Decodes a kernel step's "cuda" object: {"slots": K, "scratch": [bytes...],
/// "launches": [{"entry": NAME, "threads": N}, or {"gemm"|"conv": {...}}
/// with or without the "entry" and "threads" of its stand-in...]}.
CudaKernel decodeCuda(const json &j, const Step &step,
                      const std::vector<Value> &values,
                      const std::string &what) {
  const size_t maxBytes = size_t(1) << 48;
  if (!j.is_object())
    fail(what + "'s \"cuda\" must be an object, got " + show(j));
  CudaKernel cuda;
  cuda.slots = index(j.at("slots"), what + "'s cuda slots");
  const json &scratch = j.at("scratch");
  if (!scratch.is_array())
    fail(what + "'s cuda scratch must be a list of sizes, got " +
         show(scratch));
  for (const json &bytes : scratch) {
    cuda.scratch.push_back(index(bytes, what + "'s cuda scratch size"));
    if (cuda.scratch.back() > maxBytes)
      fail(what + "'s cuda scratch buffer of " +
           std::to_string(cuda.scratch.back()) + " bytes is too large");
  }
  if (cuda.slots != step.args.size() + cuda.scratch.size())
    fail(what + " has " + std::to_string(cuda.slots) + " cuda slots, but " +
         std::to_string(step.args.size()) + " arguments and " +
         std::to_string(cuda.scratch.size()) + " scratch buffers");
  std::vector<size_t> slotBytes;
  for (size_t id : step.args)
    slotBytes.push_back(values[id].nbytes);
  slotBytes.insert(slotBytes.end(), cuda.scratch.begin(), cuda.scratch.end());
  const json &launches = j.at("launches");
  if (!launches.is_array())
    fail(what + "'s cuda launches must be a list, got " + show(launches));
  for (const json &l : launches) {
    std::string launch =
        what + "'s cuda launch " + std::to_string(cuda.launches.size());
    if (!l.is_object())
      fail(launch + " must be an object, got " + show(l));
    CudaKernel::Launch decoded;
    if (l.contains("gemm"))
      decoded.gemm = decodeGemm(l.at("gemm"), slotBytes, launch);
    else if (l.contains("conv"))
      decoded.conv =
          decodeConv(l.at("conv"), slotBytes, step.args.size(), launch);
    // A library launch may name its generated stand-in.
    if (decoded.library() && !l.contains("entry")) {
      cuda.launches.push_back(decoded);
      continue;
    }
    const json &entry = l.at("entry");
    if (!entry.is_string() || entry.get<std::string>().empty())
      fail(launch + " must name its entry point, got " + show(entry));
    for (char c : entry.get<std::string>())
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
            c == '$' || c == '.'))
        fail(launch + " has a bad entry point name " + show(entry));
    const json &threads = l.at("threads");
    if (!threads.is_number_unsigned())
      fail(launch + "'s threads must be a non-negative integer, got " +
           show(threads));
    decoded.entry = entry.get<std::string>();
    decoded.threads = threads.get<uint64_t>();
    cuda.launches.push_back(decoded);
  }
  return cuda;
}

/// Decodes the steps, checking that data flows forward and stays on its role.
void decodeSteps(Plan &plan, const json &steps,
                 const std::function<KernelFn(const std::string &)> &lookup) {
  // computed[v]: value v (a root) holds data at this point of the plan.
  std::vector<bool> computed(plan.values.size(), false);
  for (size_t id = 0; id < plan.values.size(); ++id)
    computed[id] = plan.values[id].kind == ValueKind::Input ||
                   plan.values[id].kind == ValueKind::Constant;
  for (const json &s : steps) {
    std::string what = "step " + std::to_string(plan.steps.size());
    auto valueId = [&](const json &j) {
      size_t id = index(j, what + "'s argument");
      if (id >= plan.values.size())
        fail(what + " refers to value " + std::to_string(id) + " of only " +
             std::to_string(plan.values.size()));
      return id;
    };
    auto reads = [&](size_t id) {
      if (!computed[plan.values[id].root])
        fail(what + " reads value " + std::to_string(id) +
             " before any step computes it");
    };
    auto writes = [&](size_t id) {
      const Value &v = plan.values[id];
      if (v.kind != ValueKind::Temp)
        fail(what + " writes value " + std::to_string(id) + ", which is " +
             (v.kind == ValueKind::Input ? "an " : "a ") + kindName(v.kind) +
             ", not a temp");
      if (computed[id])
        fail(what + " writes value " + std::to_string(id) +
             ", which an earlier step already computed");
      computed[id] = true;
    };
    Step step;
    bool isKernel = s.is_object() && s.contains("kernel");
    step.isCopy = s.is_object() && s.contains("copy");
    if (isKernel == step.isCopy)
      fail(what + " has an unknown kind (expected a \"kernel\" or a \"copy\")");
    if (isKernel) {
      step.kernel = s.at("kernel").get<std::string>();
      if (s.contains("nodes") && s.at("nodes").is_string())
        step.nodes = s.at("nodes").get<std::string>();
      what += " (kernel '" + step.kernel + "')";
      step.fn = lookup(step.kernel);
      if (!step.fn)
        fail("code section lacks kernel '" + step.kernel + "'");
      step.role = index(s.at("device"), what + "'s device");
      if (step.role >= plan.roles.size())
        fail(what + " runs on role " + std::to_string(step.role) +
             ", but the plan has " + std::to_string(plan.roles.size()) +
             " role(s)");
      for (const json &a : s.at("args"))
        step.args.push_back(valueId(a));
      step.numInputs = index(s.at("num_inputs"), what + "'s num_inputs");
      if (step.numInputs > step.args.size())
        fail(what + " has " + std::to_string(step.numInputs) +
             " inputs but only " + std::to_string(step.args.size()) +
             " arguments");
      for (size_t id : step.args)
        if (plan.values[id].role != step.role)
          fail(what + " runs on " + plan.describeRole(step.role) +
               ", but its argument value " + std::to_string(id) + " is on " +
               plan.describeRole(plan.values[id].role));
      bool dynamic = false;
      for (size_t id : step.args)
        dynamic |= plan.values[id].dynamic;
      if (s.contains("dims_data"))
        for (const json &i : s.at("dims_data")) {
          size_t at = index(i, what + "'s dims_data");
          if (at >= step.numInputs)
            fail(what + " reads the data of argument " + std::to_string(at) +
                 ", which is not one of its " + std::to_string(step.numInputs) +
                 " inputs");
          step.dimsData.push_back(at);
          plan.readsData = true;
          if (plan.values[plan.values[step.args[at]].root].kind ==
              ValueKind::Temp)
            plan.lateShapes = true;
        }
      if (s.contains("dims_nodes"))
        step.dimsNodes = s.at("dims_nodes").get<std::vector<std::string>>();
      if (s.contains("dims")) {
        std::string symbol = s.at("dims").get<std::string>();
        // Through void (*)(): the lookup only knows kernel signatures.
        step.dims = reinterpret_cast<DimsFn>(
            reinterpret_cast<void (*)()>(lookup(symbol)));
        if (!step.dims)
          fail("code section lacks dims function '" + symbol + "'");
      } else if (dynamic) {
        fail(what + " has dynamic arguments but no dims function");
      } else if (!step.dimsData.empty()) {
        fail(what + " reads data for its shapes but has no dims function");
      }
      for (size_t i = 0; i < step.numInputs; ++i)
        reads(step.args[i]);
      for (size_t i = step.numInputs; i < step.args.size(); ++i)
        writes(step.args[i]);
      if (s.contains("cuda")) {
        if (dynamic)
          fail(what + " has a \"cuda\" launch description but dynamic "
                      "arguments");
        if (!device::info(plan.roles[step.role].kind).cuda)
          fail(what + " has a \"cuda\" launch description but runs on " +
               plan.describeRole(step.role) + ", which is no cuda role");
        step.cuda = decodeCuda(s.at("cuda"), step, plan.values, what);
      }
    } else {
      what += " (copy)";
      const json &ends = s.at("copy");
      if (!ends.is_array() || ends.size() != 2)
        fail(what + " must name [source, destination], got " + show(ends));
      size_t src = valueId(ends[0]), dst = valueId(ends[1]);
      const Value &from = plan.values[src], &to = plan.values[dst];
      if (from.dtype != to.dtype || from.shape != to.shape)
        fail(what + " copies value " + std::to_string(src) + " " +
             describe(from.dtype, from.shape) + " to value " +
             std::to_string(dst) + " " + describe(to.dtype, to.shape) +
             "; a copy keeps dtype and shape");
      if (from.role == to.role)
        fail(what + " copies value " + std::to_string(src) + " to value " +
             std::to_string(dst) + " on the same " +
             plan.describeRole(to.role) + "; a copy changes the role");
      size_t bytes = index(s.at("bytes"), what + "'s bytes");
      if (bytes != from.nbytes)
        fail(what + " moves " + std::to_string(bytes) + " bytes, but value " +
             std::to_string(src) + " has " + std::to_string(from.nbytes));
      step.args = {src, dst};
      step.numInputs = 1;
      step.role = to.role;
      reads(src);
      writes(dst);
    }
    plan.steps.push_back(std::move(step));
  }
  for (size_t i = 0; i < plan.outputValues.size(); ++i)
    if (!computed[plan.values[plan.outputValues[i]].root])
      fail("graph output '" + plan.outputInfo[i].name + "' (value " +
           std::to_string(plan.outputValues[i]) + ") is never computed");
}
} // namespace

namespace {
void settle(const Plan &plan, Shapes &s, size_t id) {
  size_t n = dtypeSize(plan.values[id].dtype);
  for (int64_t d : s.of[id])
    n *= static_cast<size_t>(d);
  s.nbytes[id] = n;
  s.known[id] = true;
}

// The shape of view `id`, whose source's shape is known.
void resolveView(const Plan &plan, Shapes &s, size_t id) {
  const Value &v = plan.values[id];
  if (v.reshape.empty() && !v.dynamic) {
    s.of[id] = v.shape;
    settle(plan, s, id);
    return;
  }
  const std::vector<int64_t> &from = s.of[v.aliasOf];
  int64_t total = 1, known = 1, inferred = -1;
  for (int64_t d : from)
    total *= d;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < v.reshape.size(); ++i) {
    int64_t d = v.reshape[i];
    if (d == Value::kCopyDim) {
      if (i >= from.size())
        fail("value " + std::to_string(id) + " copies dim " +
             std::to_string(i) + " of " +
             describe(plan.values[v.aliasOf].dtype, from) +
             ", which has no such dim");
      d = from[i];
    }
    if (d == -1)
      inferred = static_cast<int64_t>(i);
    else
      known *= d;
    shape.push_back(d);
  }
  if (inferred >= 0 && known != 0 && total % known == 0)
    shape[inferred] = total / known;
  else if (inferred >= 0 || known != total)
    fail("value " + std::to_string(id) + " cannot view " +
         describe(plan.values[v.aliasOf].dtype, from) + " as " +
         describe(v.dtype, v.reshape));
  for (size_t i = 0; i < shape.size(); ++i)
    if (v.shape[i] >= 0 && v.shape[i] != shape[i])
      fail("value " + std::to_string(id) + " must be " +
           describe(v.dtype, v.shape) + " but views " +
           describe(plan.values[v.aliasOf].dtype, from) + " as " +
           describe(v.dtype, shape));
  s.of[id] = shape;
  settle(plan, s, id);
}

// The views whose source is known, in value order (sources come first).
void resolveViews(const Plan &plan, Shapes &s) {
  for (size_t id = 0; id < plan.values.size(); ++id) {
    const Value &v = plan.values[id];
    if (v.kind == ValueKind::Alias && !s.known[id] && s.known[v.aliasOf])
      resolveView(plan, s, id);
  }
}

// The views of `id`, whose shape just became known, and theirs: a step
// resolves only what its outputs allow (a pass over every value per step
// took a third of a 1,300-step GRU's run).
void resolveViewsOf(const Plan &plan, Shapes &s, size_t id) {
  for (size_t view : plan.views[id])
    if (!s.known[view]) {
      resolveView(plan, s, view);
      resolveViewsOf(plan, s, view);
    }
}

/// A dims function's message with each {node:K} it holds replaced by
/// `node '<nodes[K]>'`.
std::string namingNodes(const std::string &message,
                        const std::vector<std::string> &nodes) {
  std::string out;
  size_t at = 0;
  for (size_t open; (open = message.find("{node:", at)) != std::string::npos;) {
    size_t close = message.find('}', open);
    if (close == std::string::npos)
      break;
    std::string digits = message.substr(open + 6, close - open - 6);
    bool number = !digits.empty() && digits.size() < 9 &&
                  digits.find_first_not_of("0123456789") == std::string::npos;
    size_t k = number ? std::stoul(digits) : nodes.size();
    out += message.substr(at, open - at);
    out += k < nodes.size() ? "node '" + nodes[k] + "'"
                            : message.substr(open, close + 1 - open);
    at = close + 1;
  }
  return out + message.substr(at);
}
} // namespace

Shapes startShapes(const Plan &plan,
                   const std::vector<std::vector<int64_t>> &inputShapes) {
  Shapes s;
  s.of.resize(plan.values.size());
  s.nbytes.resize(plan.values.size());
  s.known.assign(plan.values.size(), false);
  s.stepDims.resize(plan.steps.size());
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (!plan.values[id].dynamic && plan.values[id].kind != ValueKind::Alias) {
      s.of[id] = plan.values[id].shape;
      s.nbytes[id] = plan.values[id].nbytes;
      s.known[id] = true;
    }
  for (size_t i = 0; i < plan.inputValues.size(); ++i) {
    s.of[plan.inputValues[i]] = inputShapes[i];
    settle(plan, s, plan.inputValues[i]);
  }
  resolveViews(plan, s);
  return s;
}

void resolveStep(const Plan &plan, Shapes &s, size_t index,
                 const std::vector<void *> &buffers) {
  const Step &step = plan.steps[index];
  if (step.isCopy) {
    s.of[step.args[1]] = s.of[step.args[0]];
    settle(plan, s, step.args[1]);
    resolveViewsOf(plan, s, step.args[1]);
  } else if (step.dims) {
    std::vector<int64_t> &dims = s.stepDims[index];
    dims.clear();
    std::vector<void *> inputs(step.numInputs, nullptr);
    for (size_t i = 0; i < step.args.size(); ++i) {
      size_t id = step.args[i];
      for (size_t d = 0; d < plan.values[id].shape.size(); ++d)
        dims.push_back(s.known[id] ? s.of[id][d] : plan.values[id].shape[d]);
      if (i < step.numInputs)
        inputs[i] = buffers[id];
    }
    for (size_t i : step.dimsData)
      if (!inputs[i])
        fail(step.describe(index) + " needs the data of its input " +
             std::to_string(i) + " for its shapes before it is computed");
    if (const char *why = step.dims(dims.data(), inputs.data())) {
      std::string shapes;
      for (size_t i = 0; i < step.numInputs; ++i)
        shapes += std::string(i ? ", " : "") +
                  describe(plan.values[step.args[i]].dtype, s.of[step.args[i]]);
      fail(step.describe(index) + " cannot run on inputs of shapes " + shapes +
           ": " + namingNodes(why, step.dimsNodes));
    }
    size_t at = 0;
    for (size_t i = 0; i < step.args.size(); ++i) {
      size_t id = step.args[i];
      size_t rank = plan.values[id].shape.size();
      if (i >= step.numInputs) {
        s.of[id].assign(dims.begin() + at, dims.begin() + at + rank);
        for (int64_t d : s.of[id])
          if (d < 0)
            fail(step.describe(index) + " computed a negative dim for value " +
                 std::to_string(id));
        settle(plan, s, id);
        resolveViewsOf(plan, s, id);
      }
      at += rank;
    }
  }
}

Shapes resolveShapes(const Plan &plan,
                     const std::vector<std::vector<int64_t>> &inputShapes,
                     const std::vector<void *> &buffers) {
  Shapes s = startShapes(plan, inputShapes);
  for (size_t index = 0; index < plan.steps.size(); ++index)
    resolveStep(plan, s, index, buffers);
  return s;
}

std::string Step::describe(size_t index) const {
  return "step " + std::to_string(index) +
         (isCopy ? " (copy)" : " (kernel '" + kernel + "')");
}

bool Plan::hasCopies() const {
  for (const Step &step : steps)
    if (step.isCopy)
      return true;
  return false;
}

std::string Plan::describeRole(size_t role) const {
  return "role " + std::to_string(role) + " '" +
         (role < roles.size() ? roles[role].name : "?") + "'";
}

Plan decode(const nlohmann::json &m, std::optional<size_t> weightsSize,
            const std::function<KernelFn(const std::string &)> &lookup) {
  Plan plan;
  const json &devices = m.at("devices");
  if (!devices.is_array())
    fail("the manifest's devices must be a list of roles, got " +
         show(devices));
  for (const json &d : devices) {
    std::string what = "role " + std::to_string(plan.roles.size());
    std::string kind = d.at("kind").get<std::string>();
    std::string name = d.at("name").get<std::string>();
    std::optional<device::Kind> parsedKind = device::parseKind(kind);
    if (!parsedKind)
      fail(what + " has an unknown kind '" + kind + "' (expected " +
           device::kindList() + ")");
    std::optional<device::Name> parsed = device::parseName(name);
    if (!parsed || parsed->kind != *parsedKind)
      fail(what + " was compiled for '" + name + "', which is not a " + kind +
           " device");
    plan.roles.push_back({parsed->text, *parsedKind});
  }
  decodeValues(plan, m.at("values"), weightsSize);
  decodePorts(plan, m);
  decodeSteps(plan, m.at("steps"), lookup);
  return plan;
}

} // namespace kiln::plan
