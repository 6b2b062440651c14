//===- OnnxValidate.cpp - is an ONNX model well formed? -------------------===//
//
// What onnx.checker.check_model rejects and kiln would otherwise compile, or
// trip over later with a less clear message, checked on the ModelProto
// before import and every problem reported:
//
//  * the model: an ir_version, no newer than the newest kiln knows;
//    opset_import present (IR version 3 on), each domain listed once with a
//    version of at least 1, no known domain newer than the newest opset kiln
//    knows; metadata_props keys unique;
//  * each graph (subgraphs too, seeing the names of their enclosing graphs):
//    inputs and initializers named and named once; every node input defined
//    before the node; every name defined once (a node output may not reuse a
//    graph input, an initializer or an earlier output); graph outputs
//    produced;
//  * each node: an op type, some input or output, its domain imported, its
//    attributes named once, typed, holding one value of their type; in the
//    ONNX domains (the default one, ai.onnx.ml, ai.onnx.preview,
//    ai.onnx.preview.training), the op defined in the imported opset and not
//    deprecated there, input and output counts in its range, required
//    inputs and outputs not left empty, no attribute the op does not define
//    (names starting with "__" are internal and pass), attributes of the
//    declared type, required attributes present. Ops of other domains
//    (com.microsoft, ...) have no schema here and pass as they are.
//
// The schemas are frontend/OnnxSchemas.inc, written by
// scripts/gen-onnx-schemas from the onnx package the tests pin: the Debian
// libonnx the importer links (1.12) knows opsets up to 17 only, and for a
// model of a newer opset it finds an op's older schema, which lacks the
// attributes added since.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxValidate.h"
#include "frontend/OnnxOps.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <limits>
#include <optional>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// One op schema of OnnxSchemas.inc.
struct Schema {
  const char *domain;
  const char *op;
  int64_t since;
  /// D: deprecated; U: accepts any attribute.
  const char *flags;
  int64_t minInputs, maxInputs, minOutputs, maxOutputs;
  /// Formal inputs and outputs, space-separated: a name, then '?' when
  /// optional, '*' when variadic.
  const char *inputs, *outputs;
  /// Space-separated NAME:TYPE, '!' in front when required.
  const char *attributes;

  bool has(char flag) const { return StringRef(flags).contains(flag); }
};

constexpr Schema kSchemas[] = {
#define KILN_ONNX_SCHEMA(...) {__VA_ARGS__},
#include "frontend/OnnxSchemas.inc"
};

struct Domain {
  const char *name;
  int64_t newestOpset;
};

constexpr Domain kDomains[] = {
#define KILN_ONNX_DOMAIN(name, newest) {name, newest},
#include "frontend/OnnxSchemas.inc"
};

constexpr int64_t kNewestIrVersion[] = {
#define KILN_ONNX_IR_VERSION(version) version
#include "frontend/OnnxSchemas.inc"
};

// The schemas of each op, oldest first, keyed "domain/op".
const llvm::StringMap<SmallVector<const Schema *, 4>> &schemasByOp() {
  static const auto table = [] {
    llvm::StringMap<SmallVector<const Schema *, 4>> map;
    for (const Schema &s : kSchemas)
      map[(Twine(s.domain) + "/" + s.op).str()].push_back(&s);
    return map;
  }();
  return table;
}

std::optional<int64_t> newestOpset(StringRef domain) {
  for (const Domain &d : kDomains)
    if (domain == d.name)
      return d.newestOpset;
  return std::nullopt;
}

StringRef canonicalDomain(StringRef domain) {
  return domain == "ai.onnx" ? StringRef() : domain;
}

std::string domainName(StringRef domain) {
  return domain.empty() ? "ai.onnx" : domain.str();
}

// "opset 17" in the default domain, "opset 3 of ai.onnx.ml" elsewhere.
std::string opsetText(StringRef domain, int64_t version) {
  std::string text = "opset " + std::to_string(version);
  return domain.empty() ? text : text + " of " + domain.str();
}

// The op as converters and messages name it: domain-qualified outside the
// default domain.
std::string opName(StringRef domain, StringRef op) {
  return "'" + (domain.empty() ? op.str() : (domain + "." + op).str()) + "'";
}

std::string typeName(int type) {
  return onnx::AttributeProto::AttributeType_IsValid(type)
             ? onnx::AttributeProto::AttributeType_Name(
                   static_cast<onnx::AttributeProto::AttributeType>(type))
             : "#" + std::to_string(type);
}

// "1 input", "2 to 3 inputs", "at least 1 input".
std::string countText(int64_t min, int64_t max, StringRef noun) {
  std::string text = min == max ? std::to_string(min)
                     : max == std::numeric_limits<int32_t>::max()
                         ? "at least " + std::to_string(min)
                         : std::to_string(min) + " to " + std::to_string(max);
  return text + " " + noun.str() + (min == 1 && min == max ? "" : "s");
}

// The types of the value fields `a` sets.
SmallVector<int> valueFields(const onnx::AttributeProto &a) {
  using A = onnx::AttributeProto;
  SmallVector<int> fields;
  auto add = [&](bool set, int type) {
    if (set)
      fields.push_back(type);
  };
  add(a.has_f(), A::FLOAT);
  add(a.has_i(), A::INT);
  add(a.has_s(), A::STRING);
  add(a.has_t(), A::TENSOR);
  add(a.has_g(), A::GRAPH);
  add(a.has_sparse_tensor(), A::SPARSE_TENSOR);
  add(a.has_tp(), A::TYPE_PROTO);
  add(a.floats_size(), A::FLOATS);
  add(a.ints_size(), A::INTS);
  add(a.strings_size(), A::STRINGS);
  add(a.tensors_size(), A::TENSORS);
  add(a.graphs_size(), A::GRAPHS);
  add(a.sparse_tensors_size(), A::SPARSE_TENSORS);
  add(a.type_protos_size(), A::TYPE_PROTOS);
  return fields;
}

// The names a graph can read, each with what defined it ("is already a
// graph input", "is already defined by node 'x'"), and those of the graphs
// around it.
struct Scope {
  const Scope *parent = nullptr;
  llvm::StringMap<std::string> defined;

  const std::string *find(StringRef name) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->defined.find(name);
      if (it != s->defined.end())
        return &it->second;
    }
    return nullptr;
  }
};

class Validator {
public:
  Validator(const onnx::ModelProto &model, Location file)
      : model(model), file(file), opsets(importedOpsets(model)) {}

  LogicalResult run();

private:
  InFlightDiagnostic error(Location loc) {
    failed = true;
    return emitError(loc);
  }
  void checkModel();
  void checkGraph(const onnx::GraphProto &graph, Scope &scope, Location at,
                  const std::string &what);
  void checkNode(const onnx::NodeProto &node, Location loc, Scope &scope);
  void checkAttribute(const onnx::AttributeProto &a, Location loc);
  void checkSchema(const onnx::NodeProto &node, StringRef domain,
                   int64_t version, Location loc);
  void checkFormals(const onnx::NodeProto &node, const Schema &schema,
                    bool outputs, Location loc);

  const onnx::ModelProto &model;
  Location file;
  std::map<std::string, int64_t> opsets;
  /// Imported domains whose nodes are not checked against the schemas (their
  /// import is already reported).
  llvm::StringSet<> unchecked;
  /// Each domain used but not imported: its first node, and how many more.
  struct Unimported {
    Location first;
    std::string op;
    int more = 0;
  };
  std::map<std::string, Unimported> unimported;
  bool failed = false;
};

void Validator::checkModel() {
  int64_t ir = model.ir_version();
  if (ir <= 0)
    error(file) << "model has no ir_version";
  else if (ir > kNewestIrVersion[0])
    error(file) << "model has IR version " << ir
                << ", newer than the newest kiln knows (" << kNewestIrVersion[0]
                << ")";
  if (ir > 0 && ir < 3 && model.opset_import_size())
    error(file) << "model of IR version " << ir
                << " has an opset_import (IR versions before 3 have none)";
  if (ir >= 3 && !model.opset_import_size())
    error(file) << "model has an empty opset_import (a model of IR version 3 "
                   "or later gives the opset version of each domain it uses)";
  std::map<std::string, int64_t> seen;
  for (const onnx::OperatorSetIdProto &o : model.opset_import()) {
    StringRef domain = canonicalDomain(o.domain());
    auto [it, fresh] = seen.try_emplace(domain.str(), o.version());
    if (!fresh) {
      error(file) << "opset_import lists domain '" << domainName(domain)
                  << "' twice (versions " << it->second << " and "
                  << o.version() << ")";
      unchecked.insert(domain);
    }
    if (o.version() < 1) {
      error(file) << "opset_import gives domain '" << domainName(domain)
                  << "' version " << o.version() << " (versions start at 1)";
      unchecked.insert(domain);
    } else if (auto newest = newestOpset(domain);
               newest && o.version() > *newest) {
      error(file) << "model imports opset " << o.version() << " of domain '"
                  << domainName(domain)
                  << "', newer than the newest kiln knows (" << *newest << ")";
      unchecked.insert(domain);
    }
  }
  llvm::StringSet<> keys;
  for (const auto &entry : model.metadata_props())
    if (!keys.insert(entry.key()).second)
      error(file) << "metadata_props has key '" << entry.key()
                  << "' more than once";
}

void Validator::checkGraph(const onnx::GraphProto &graph, Scope &scope,
                           Location at, const std::string &what) {
  bool main = !scope.parent;
  for (auto [i, input] : llvm::enumerate(graph.input())) {
    if (input.name().empty())
      error(at) << what << " input " << i << " has no name";
    else if (scope.defined.count(input.name()))
      error(at) << what << " input '" << input.name() << "' is listed twice";
    else
      scope.defined[input.name()] =
          main ? "is already a graph input" : "is already an input of " + what;
  }
  llvm::StringSet<> initializers;
  auto addInitializer = [&](const std::string &name, size_t i) {
    if (name.empty())
      error(at) << what << " initializer " << i << " has no name";
    else if (!initializers.insert(name).second)
      error(at) << what << " initializer '" << name << "' is defined twice";
    else
      scope.defined.try_emplace(name,
                                main ? "is already an initializer"
                                     : "is already an initializer of " + what);
  };
  for (auto [i, init] : llvm::enumerate(graph.initializer()))
    addInitializer(init.name(), i);
  for (auto [i, init] : llvm::enumerate(graph.sparse_initializer()))
    addInitializer(init.values().name(), graph.initializer_size() + i);

  for (auto [index, node] : llvm::enumerate(graph.node())) {
    Location loc = nodeLocation(file, node, index);
    checkNode(node, loc, scope);
    for (const std::string &output : node.output()) {
      if (output.empty()) // an optional output left out
        continue;
      if (const std::string *definer = scope.find(output))
        error(loc) << "output '" << output << "' " << *definer
                   << " (an ONNX graph defines each name once)";
      else
        scope.defined[output] =
            "is already defined by node '" + nodeName(node, index) + "'";
    }
  }
  for (auto [i, output] : llvm::enumerate(graph.output())) {
    if (output.name().empty())
      error(at) << what << " output " << i << " has no name";
    else if (!scope.find(output.name()))
      error(at) << what << " output '" << output.name()
                << "' is never produced";
  }
}

void Validator::checkNode(const onnx::NodeProto &node, Location loc,
                          Scope &scope) {
  if (node.op_type().empty())
    error(loc) << "node has no op_type";
  if (!node.input_size() && !node.output_size())
    error(loc) << "node has no inputs and no outputs";
  for (const std::string &input : node.input())
    if (!input.empty() && !scope.find(input))
      error(loc) << "input '" << input
                 << "' is not produced by any earlier node, graph input or "
                    "initializer";

  llvm::StringSet<> names;
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (!a.name().empty() && !names.insert(a.name()).second)
      error(loc) << "attribute '" << a.name() << "' is given more than once";
    checkAttribute(a, loc);
    // Subgraphs see the names defined so far.
    auto subgraph = [&](const onnx::GraphProto &g, const std::string &what) {
      Scope inner{&scope, {}};
      checkGraph(g, inner, loc, what);
    };
    if (a.has_g())
      subgraph(a.g(), "subgraph '" + a.name() + "'");
    for (auto [i, g] : llvm::enumerate(a.graphs()))
      subgraph(g, "subgraph '" + a.name() + "[" + std::to_string(i) + "]'");
  }

  if (node.op_type().empty())
    return;
  StringRef domain = canonicalDomain(node.domain());
  auto version = opsets.find(domain.str());
  if (version == opsets.end()) {
    auto [it, fresh] =
        unimported.try_emplace(domain.str(), Unimported{loc, node.op_type()});
    if (!fresh)
      ++it->second.more;
    return;
  }
  if (newestOpset(domain) && !unchecked.contains(domain))
    checkSchema(node, domain, version->second, loc);
}

// The attribute's form, whatever its op: a name, a type, one value of that
// type.
void Validator::checkAttribute(const onnx::AttributeProto &a, Location loc) {
  if (a.name().empty())
    error(loc) << "an attribute has no name";
  SmallVector<int> fields = valueFields(a);
  if (fields.size() > 1) {
    auto diag = error(loc);
    diag << "attribute '" << a.name() << "' holds more than one value (";
    llvm::interleave(
        fields, diag, [&](int type) { diag << typeName(type); }, " and ");
    diag << ")";
  } else if (a.type() == onnx::AttributeProto::UNDEFINED) {
    if (model.ir_version() >= 2)
      error(loc) << "attribute '" << a.name() << "' has no type";
  } else if (fields.size() == 1 && fields[0] != a.type()) {
    error(loc) << "attribute '" << a.name() << "' is declared "
               << typeName(a.type()) << " but holds " << typeName(fields[0])
               << " data";
  }
}

void Validator::checkSchema(const onnx::NodeProto &node, StringRef domain,
                            int64_t version, Location loc) {
  const std::string &op = node.op_type();
  auto versions = schemasByOp().find((domain + "/" + op).str());
  if (versions == schemasByOp().end()) {
    error(loc) << "op " << opName(domain, op)
               << " is not defined in any opset of domain '"
               << domainName(domain) << "'";
    return;
  }
  const Schema *schema = nullptr;
  for (const Schema *s : versions->second)
    if (s->since <= version)
      schema = s;
  if (!schema) {
    error(loc) << "op " << opName(domain, op) << " is not defined in "
               << opsetText(domain, version) << " (it appeared in opset "
               << versions->second.front()->since << ")";
    return;
  }
  if (schema->has('D')) {
    auto diag = error(loc);
    diag << "op " << opName(domain, op) << " is deprecated in "
         << opsetText(domain, version);
    if (schema->since != version)
      diag << " (since opset " << schema->since << ")";
    return;
  }
  std::string where = opsetText(domain, version);
  if (node.input_size() < schema->minInputs ||
      node.input_size() > schema->maxInputs)
    error(loc) << "op " << opName(domain, op) << " takes "
               << countText(schema->minInputs, schema->maxInputs, "input")
               << " in " << where << ", the node has " << node.input_size();
  if (node.output_size() < schema->minOutputs ||
      node.output_size() > schema->maxOutputs)
    error(loc) << "op " << opName(domain, op) << " gives "
               << countText(schema->minOutputs, schema->maxOutputs, "output")
               << " in " << where << ", the node has " << node.output_size();
  checkFormals(node, *schema, /*outputs=*/false, loc);
  checkFormals(node, *schema, /*outputs=*/true, loc);

  // NAME:TYPE -> (TYPE, required).
  llvm::StringMap<std::pair<StringRef, bool>> declared;
  SmallVector<StringRef> names, entries;
  StringRef(schema->attributes).split(entries, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    bool required = entry.consume_front("!");
    auto [name, type] = entry.split(':');
    declared[name] = {type, required};
    names.push_back(name);
  }
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (StringRef(a.name()).starts_with("__")) // internal to a tool
      continue;
    auto it = declared.find(a.name());
    if (it == declared.end()) {
      if (schema->has('U'))
        continue;
      auto diag = error(loc);
      diag << "attribute '" << a.name() << "' is not defined for op "
           << opName(domain, op) << " in " << where;
      if (names.empty())
        diag << " (it has no attributes)";
      else
        diag << " (its attributes: " << llvm::join(names, ", ") << ")";
      continue;
    }
    StringRef expected = it->second.first;
    if (a.type() != onnx::AttributeProto::UNDEFINED &&
        typeName(a.type()) != expected) {
      error(loc) << "attribute '" << a.name() << "' of op "
                 << opName(domain, op) << " is " << typeName(a.type())
                 << ", must be " << expected;
      continue;
    }
    bool missing = (expected == "TENSOR" && !a.has_t()) ||
                   (expected == "GRAPH" && !a.has_g()) ||
                   (expected == "SPARSE_TENSOR" && !a.has_sparse_tensor()) ||
                   (expected == "TYPE_PROTO" && !a.has_tp());
    if (missing)
      error(loc) << "attribute '" << a.name() << "' of op "
                 << opName(domain, op) << " holds no " << expected;
  }
  for (StringRef name : names)
    if (declared[name].second &&
        llvm::none_of(node.attribute(), [&](const onnx::AttributeProto &a) {
          return a.name() == name;
        }))
      error(loc) << "required attribute '" << name << "' of op "
                 << opName(domain, op) << " is missing";
}

// A formal input (output) that is neither optional nor variadic may not be
// given as "".
void Validator::checkFormals(const onnx::NodeProto &node, const Schema &schema,
                             bool outputs, Location loc) {
  SmallVector<StringRef> formals;
  StringRef(outputs ? schema.outputs : schema.inputs)
      .split(formals, ' ', -1, /*KeepEmpty=*/false);
  const auto &actual = outputs ? node.output() : node.input();
  for (auto [i, name] : llvm::enumerate(actual)) {
    if (i >= formals.size())
      break; // past a variadic last one, or counted above
    StringRef formal = formals[i];
    if (formal.ends_with("*"))
      break;
    if (name.empty() && !formal.ends_with("?"))
      error(loc) << (outputs ? "output " : "input ") << i << " ('" << formal
                 << "') of op "
                 << opName(canonicalDomain(node.domain()), node.op_type())
                 << " is required, the node leaves it empty";
  }
}

LogicalResult Validator::run() {
  checkModel();
  Scope scope;
  checkGraph(model.graph(), scope, file, "graph");
  for (auto &[domain, use] : unimported) {
    auto diag = error(use.first);
    diag << "op " << opName(domain, use.op) << " is in domain '"
         << domainName(domain)
         << "', which the model's opset_import does not list";
    if (use.more)
      diag << " (" << use.more << " more node"
           << (use.more == 1 ? " uses" : "s use") << " the domain)";
  }
  return failure(failed);
}

} // namespace

std::map<std::string, int64_t>
kiln::onnx_import::importedOpsets(const onnx::ModelProto &model) {
  std::map<std::string, int64_t> opsets;
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    opsets[canonicalDomain(o.domain()).str()] = o.version();
  if (model.ir_version() > 0 && model.ir_version() < 3 && opsets.empty())
    opsets[""] = 1;
  return opsets;
}

LogicalResult kiln::onnx_import::validateModel(const onnx::ModelProto &model,
                                               Location file) {
  return Validator(model, file).run();
}
