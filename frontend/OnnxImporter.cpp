//===- OnnxImporter.cpp - ONNX graphs to func.func in the kiln dialect ----===//
//
// Steps: parse the ModelProto; check that it is well formed (OnnxValidate);
// turn initializers into constants and the remaining graph inputs into
// function arguments; convert the nodes in (topological) order through the
// converter table, collecting every unsupported node before failing; return the
// graph outputs.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/OnnxOps.h"
#include "frontend/OnnxValidate.h"
#include "runtime/SubByte.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fstream>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

// `shape` as kilnc's flags write it: 2x?x4.
static std::string shapeText(ArrayRef<int64_t> shape) {
  std::string text;
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? "x" : "") +
            (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return text;
}

// Whether every static dim of `dims` is a size (not negative) and the
// tensor's bytes fit in int64 (so no later product of its dims overflows);
// else an error naming `what`. Declared sizes reach shape arithmetic
// everywhere in the importer, the passes and the runtime.
static LogicalResult checkSize(Location loc, const Twine &what,
                               ArrayRef<int64_t> dims, Type element) {
  int64_t bytes =
      element.isIntOrFloat()
          ? std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8)
          : 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (ShapedType::isDynamic(d))
      continue;
    if (d < 0)
      return emitError(loc) << what << " has a negative dim (" << d << ")";
    overflow |= llvm::MulOverflow(bytes, d, bytes);
  }
  if (overflow)
    return emitError(loc) << what << " of shape " << shapeText(dims)
                          << " holds more bytes than int64 counts";
  return success();
}

Type kiln::onnx_import::elementType(MLIRContext *ctx, int dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT16:
    return b.getI16Type();
  case onnx::TensorProto::INT8:
    return b.getI8Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case kOnnxFloat8E4M3FN:
    return b.getFloat8E4M3FNType();
  case kOnnxFloat8E4M3FNUZ:
    return b.getFloat8E4M3FNUZType();
  case kOnnxFloat8E5M2:
    return b.getFloat8E5M2Type();
  case kOnnxFloat8E5M2FNUZ:
    return b.getFloat8E5M2FNUZType();
  case kOnnxInt4:
    return b.getIntegerType(4);
  case kOnnxUint4:
    return b.getIntegerType(4, /*isSigned=*/false);
  case kOnnxInt2:
    return b.getIntegerType(2);
  case kOnnxUint2:
    return b.getIntegerType(2, /*isSigned=*/false);
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64: {
    unsigned bits = dataType == onnx::TensorProto::UINT8    ? 8
                    : dataType == onnx::TensorProto::UINT16 ? 16
                    : dataType == onnx::TensorProto::UINT32 ? 32
                                                            : 64;
    return b.getIntegerType(bits, /*isSigned=*/false);
  }
  default:
    return {};
  }
}

std::string kiln::onnx_import::nodeName(const onnx::NodeProto &node,
                                        int index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index)
                             : node.name();
}

Location kiln::onnx_import::nodeLocation(Location file,
                                         const onnx::NodeProto &node,
                                         int index) {
  return makeNodeLoc(file.getContext(), nodeName(node, index), node.op_type(),
                     file);
}

namespace {

std::string dataTypeName(int dataType) {
  // Types newer than the protobuf schema Debian ships (onnx 1.12).
  static const char *newer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
      "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0", "UINT2",          "INT2"};
  if (dataType >= 17 && dataType < 17 + (int)std::size(newer))
    return newer[dataType - 17];
  return onnx::TensorProto::DataType_IsValid(dataType)
             ? onnx::TensorProto::DataType_Name(
                   static_cast<onnx::TensorProto::DataType>(dataType))
             : "#" + std::to_string(dataType);
}

template <typename T, typename Field>
std::vector<char> packed(const Field &field) {
  std::vector<char> bytes(field.size() * sizeof(T));
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return bytes;
}

std::string sanitize(StringRef name) {
  std::string out = "w_";
  for (char c : name)
    out += llvm::isAlnum(c) ? c : '_';
  return out;
}

// Data of a tensor stored outside the model (ONNX external data: keys
// location, offset, length), read relative to the model's folder.
FailureOr<std::vector<char>> readExternalData(const onnx::TensorProto &tensor,
                                              Location loc,
                                              StringRef modelDir) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if ((entry.key() == "offset" &&
              StringRef(entry.value()).getAsInteger(10, offset)) ||
             (entry.key() == "length" &&
              StringRef(entry.value()).getAsInteger(10, length)))
      return emitError(loc) << "tensor '" << tensor.name()
                            << "' has a malformed external data " << entry.key()
                            << " '" << entry.value() << "'";
    hasLength |= entry.key() == "length";
  }
  auto fail = [&](const Twine &why) {
    return emitError(loc) << "tensor '" << tensor.name()
                          << "': external data file '" << location << "' "
                          << why;
  };
  if (location.empty())
    return fail("is not named (no 'location' key)");
  if (llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(location),
                                          llvm::sys::path::end(location)),
                         ".."))
    return fail("must be a relative path inside the model's folder");
  SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot be read: " + file.getError().message());
  StringRef data = (*file)->getBuffer();
  if (offset > data.size() || (hasLength && length > data.size() - offset))
    return fail("is too short for offset " + Twine(offset) + " and length " +
                Twine(length));
  data = data.substr(offset, hasLength ? length : StringRef::npos);
  return std::vector<char>(data.begin(), data.end());
}

// The op type, prefixed by its domain outside the default one
// ("ai.onnx.preview.training.Adam"), as the converter table names it.
std::string qualifiedOpType(const onnx::NodeProto &node) {
  if (node.domain().empty() || node.domain() == "ai.onnx")
    return node.op_type();
  return node.domain() + "." + node.op_type();
}

class Importer {
public:
  Importer(MLIRContext &ctx, const std::string &source,
           const ImportOptions &options)
      : ctx(ctx), source(source),
        modelDir(llvm::sys::path::parent_path(source).str()), builder(&ctx),
        options(options) {}

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model);

private:
  Location fileLoc() { return FileLineColLoc::get(&ctx, source, 0, 0); }
  Location nodeLoc(const onnx::NodeProto &node, int index) {
    return nodeLocation(fileLoc(), node, index);
  }
  FailureOr<Type> inputType(const onnx::TypeProto_Tensor &tensor,
                            StringRef name,
                            llvm::StringMap<SmallVector<int64_t>> &bindings);
  DictionaryAttr signatureEntry(StringRef name, const ImportValue &value,
                                bool optional);
  void collectUnsupported(
      const onnx::GraphProto &graph,
      std::map<std::string, std::vector<std::string>> &unsupported);
  void collectDeclaredRanks(const onnx::GraphProto &graph);
  LogicalResult convertNodes(const onnx::GraphProto &graph, Scope &scope);
  FailureOr<ImportValues> inlineGraph(const onnx::GraphProto &graph,
                                      ArrayRef<ImportValue> inputs,
                                      const Scope &outer, Location loc);
  LogicalResult bindInput(const onnx::ValueInfoProto &input, Block *body,
                          llvm::StringMap<SmallVector<int64_t>> &bindings,
                          SmallVector<std::string> &argNames);

  MLIRContext &ctx;
  std::string source;
  std::string modelDir;
  OpBuilder builder;
  ImportOptions options;
  Attribute device;
  int64_t opset = 0;
  Scope values;
  /// What each graph input and output is (kilnc --sequence-length and
  /// --empty-optional), recorded when one is not a tensor.
  SmallVector<Attribute> inputSignature, outputSignature;
  bool plainSignature = true;
  ShapeTable shapes;
  llvm::StringMap<int64_t> declaredRanks;
  /// Each subgraph's initializers, as constants.
  llvm::DenseMap<const onnx::GraphProto *,
                 SmallVector<std::pair<std::string, Value>>>
      subgraphConstants;
};

// Every node of `graph` and of the graphs in its attributes (If branches,
// Loop and Scan bodies) whose op kiln cannot convert, by op.
void Importer::collectUnsupported(
    const onnx::GraphProto &graph,
    std::map<std::string, std::vector<std::string>> &unsupported) {
  for (auto [index, node] : llvm::enumerate(graph.node())) {
    std::string op = qualifiedOpType(node);
    bool known = findConverter(op) || isOnlyFolded(op) || isStructural(op);
    if (!known) {
      emitError(nodeLoc(node, index)) << "unsupported ONNX op '" << op << "'";
      unsupported[op].push_back(node.name());
    }
    for (const onnx::AttributeProto &a : node.attribute()) {
      if (a.has_g())
        collectUnsupported(a.g(), unsupported);
      for (const onnx::GraphProto &g : a.graphs())
        collectUnsupported(g, unsupported);
    }
  }
}

void Importer::collectDeclaredRanks(const onnx::GraphProto &graph) {
  for (const auto *infos : {&graph.output(), &graph.value_info()})
    for (const onnx::ValueInfoProto &info : *infos)
      if (info.type().has_tensor_type() &&
          info.type().tensor_type().has_shape())
        declaredRanks[info.name()] =
            info.type().tensor_type().shape().dim_size();
  for (const onnx::NodeProto &node : graph.node())
    for (const onnx::AttributeProto &a : node.attribute()) {
      if (a.has_g())
        collectDeclaredRanks(a.g());
      for (const onnx::GraphProto &g : a.graphs())
        collectDeclaredRanks(g);
    }
}

// Converts the nodes of `graph` in order, reading and defining values in
// `scope`.
LogicalResult Importer::convertNodes(const onnx::GraphProto &graph,
                                     Scope &scope) {
  for (auto [index, node] : llvm::enumerate(graph.node())) {
    NodeContext c{node, builder, nodeLoc(node, index), device, modelDir, opset,
                  {},   &shapes, &declaredRanks,       {}};
    auto buildSubgraph = [this, &scope,
                          loc = c.loc](const onnx::GraphProto &g,
                                       ArrayRef<ImportValue> inputs) {
      return inlineGraph(g, inputs, scope, loc);
    };
    c.subgraph = [&](const onnx::GraphProto &g,
                     ValueRange inputs) -> FailureOr<SmallVector<Value>> {
      ImportValues wrapped;
      for (Value v : inputs)
        wrapped.push_back(ImportValue::tensor(v));
      auto outputs = buildSubgraph(g, wrapped);
      if (mlir::failed(outputs))
        return failure();
      SmallVector<Value> tensors;
      for (auto [i, out] : llvm::enumerate(*outputs)) {
        if (!out.isTensor())
          return emitError(c.loc)
                 << "subgraph '" << g.name() << "' output " << i << " is a "
                 << out.kindName() << " where a tensor is needed";
        tensors.push_back(out.value());
      }
      return tensors;
    };
    ImportValues inputs;
    for (const std::string &name : node.input()) {
      if (name.empty()) {
        inputs.push_back(ImportValue::none());
        c.inputs.push_back(Value());
        continue;
      }
      auto it = scope.find(name);
      if (it == scope.end())
        return emitError(c.loc) << "input '" << name
                                << "' is not produced by any earlier node, "
                                   "graph input or initializer";
      inputs.push_back(it->second);
      c.inputs.push_back(it->second.value());
    }
    if (auto structural = convertStructural(c, inputs, buildSubgraph)) {
      if (mlir::failed(*structural))
        return failure();
      for (auto [name, value] : llvm::zip(node.output(), **structural))
        if (!name.empty())
          scope[name] = value;
      continue;
    }
    auto folded = tryFold(c);
    Converter convert = findConverter(qualifiedOpType(node));
    if (!folded && !convert)
      return emitError(c.loc) << "'" << node.op_type()
                              << "' is supported on constant inputs only";
    auto results = folded ? *folded : convert(c);
    if (mlir::failed(results))
      return failure();
    for (auto [i, value] : llvm::enumerate(*results)) {
      auto type = value ? dyn_cast<RankedTensorType>(value.getType())
                        : RankedTensorType(); // an optional output not made
      if (type &&
          mlir::failed(checkSize(
              c.loc, "output " + Twine(i) + " of '" + node.op_type() + "'",
              type.getShape(), type.getElementType())))
        return failure();
    }
    for (auto [name, value] : llvm::zip(node.output(), *results))
      if (!name.empty())
        scope[name] = ImportValue::tensor(value);
  }
  return success();
}

// The outputs of subgraph `graph` (an If branch, a Loop or Scan body) built
// in place: its inputs bound to `inputs`, names it does not define read from
// the enclosing `outer` scope.
FailureOr<ImportValues> Importer::inlineGraph(const onnx::GraphProto &graph,
                                              ArrayRef<ImportValue> inputs,
                                              const Scope &outer,
                                              Location loc) {
  if (graph.input_size() != (int)inputs.size())
    return emitError(loc) << "subgraph '" << graph.name() << "' takes "
                          << graph.input_size() << " inputs, given "
                          << inputs.size();
  Scope scope = outer;
  // Initializers become constants once, however often the graph is built
  // (an unrolled Scan body).
  auto cached = subgraphConstants.find(&graph);
  if (cached == subgraphConstants.end()) {
    SmallVector<std::pair<std::string, Value>> constants;
    for (const auto &init : graph.initializer()) {
      Location at = NameLoc::get(StringAttr::get(&ctx, init.name()), fileLoc());
      auto converted =
          convertTensor(init, device, at, sanitize(init.name()), modelDir);
      if (mlir::failed(converted))
        return failure();
      constants.emplace_back(
          init.name(),
          builder.create<ConstantOp>(at, converted->first, converted->second));
    }
    cached = subgraphConstants.try_emplace(&graph, std::move(constants)).first;
  }
  for (auto &[name, value] : cached->second)
    scope[name] = ImportValue::tensor(value);
  for (auto [info, value] : llvm::zip(graph.input(), inputs)) {
    const auto &t = info.type().tensor_type();
    if (value.isTensor() && info.type().has_tensor_type() && t.has_shape() &&
        t.shape().dim_size() != typeOf(value.value()).getRank())
      return emitError(loc)
             << "subgraph '" << graph.name() << "' input '" << info.name()
             << "' has rank " << t.shape().dim_size() << ", given "
             << typeOf(value.value());
    scope[info.name()] = value;
  }
  if (mlir::failed(convertNodes(graph, scope)))
    return failure();
  ImportValues outputs;
  for (const auto &output : graph.output()) {
    auto it = scope.find(output.name());
    if (it == scope.end())
      return emitError(loc) << "subgraph '" << graph.name() << "' output '"
                            << output.name() << "' is never produced";
    outputs.push_back(it->second);
  }
  return outputs;
}

// The type of graph input `name` of ONNX tensor type `tensor`, with its
// --input-shape binding applied (and consumed); `?` in a binding keeps a dim
// symbolic, which gives a tensor of unknown rank its rank.
FailureOr<Type>
Importer::inputType(const onnx::TypeProto_Tensor &tensor, StringRef name,
                    llvm::StringMap<SmallVector<int64_t>> &bindings) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, name), fileLoc());
  Type element = elementType(&ctx, tensor.elem_type());
  if (!element)
    return emitError(loc) << "input '" << name << "' has unsupported "
                          << "element type "
                          << dataTypeName(tensor.elem_type());
  auto binding = bindings.find(name);
  if (!tensor.has_shape() && binding == bindings.end())
    return emitError(loc) << "input '" << name
                          << "' has no shape (unknown rank): give one with "
                             "--input-shape "
                          << name << "=D0xD1... ('?' for a dim sized at run "
                          << "time)";
  SmallVector<int64_t> dims;
  if (tensor.has_shape())
    for (const auto &dim : tensor.shape().dim())
      dims.push_back(dim.has_dim_value() ? dim.dim_value()
                                         : ShapedType::kDynamic);
  if (binding == bindings.end()) {
    if (mlir::failed(checkSize(loc, "input '" + name + "'", dims, element)))
      return failure();
    return Type(RankedTensorType::get(dims, element, device));
  }
  ArrayRef<int64_t> given = binding->second;
  if (!tensor.has_shape())
    dims.assign(given.size(), ShapedType::kDynamic);
  if (dims.size() != given.size())
    return emitError(fileLoc())
           << "input '" << name << "' has rank " << dims.size()
           << " but the shape given for it, " << shapeText(given)
           << ", has rank " << given.size();
  for (auto [have, want] : llvm::zip(dims, given)) {
    if (ShapedType::isDynamic(want))
      continue;
    if (!ShapedType::isDynamic(have) && have != want)
      return emitError(fileLoc())
             << "input '" << name << "' of shape " << shapeText(dims)
             << " cannot take the given shape " << shapeText(given);
    have = want;
  }
  bindings.erase(binding);
  if (mlir::failed(checkSize(loc, "input '" + name + "'", dims, element)))
    return failure();
  return Type(RankedTensorType::get(dims, element, device));
}

// Graph input `input` as function arguments: one for a tensor, one per
// element for a sequence (its length from --sequence-length, the elements
// named NAME[i]), none for an optional given as empty (--empty-optional).
LogicalResult
Importer::bindInput(const onnx::ValueInfoProto &input, Block *body,
                    llvm::StringMap<SmallVector<int64_t>> &bindings,
                    SmallVector<std::string> &argNames) {
  const std::string &name = input.name();
  Location loc = NameLoc::get(StringAttr::get(&ctx, name), fileLoc());
  const onnx::TypeProto *type = &input.type();
  bool optional = type->has_optional_type();
  if (optional)
    type = &type->optional_type().elem_type();
  auto addArg = [&](const onnx::TypeProto_Tensor &tensor,
                    const std::string &argName) -> FailureOr<Value> {
    auto t = inputType(tensor, argName, bindings);
    if (mlir::failed(t))
      return failure();
    argNames.push_back(argName);
    return Value(body->addArgument(*t, fileLoc()));
  };
  if (llvm::is_contained(options.emptyOptionals, name)) {
    if (!optional)
      return emitError(loc) << "--empty-optional names input '" << name
                            << "', which is not optional";
    values[name] = ImportValue::none();
  } else if (type->has_tensor_type()) {
    auto arg = addArg(type->tensor_type(), name);
    if (mlir::failed(arg))
      return failure();
    values[name] = ImportValue::tensor(*arg);
  } else if (type->has_sequence_type() &&
             type->sequence_type().elem_type().has_tensor_type()) {
    auto length = options.sequenceLengths.find(name);
    if (length == options.sequenceLengths.end())
      return emitError(loc)
             << "input '" << name
             << "' is a sequence: kiln compiles sequences of a length known "
                "at compile time; give it with --sequence-length "
             << name << "=K";
    SmallVector<Value> elements;
    for (int64_t i = 0; i < length->second; ++i) {
      auto arg = addArg(type->sequence_type().elem_type().tensor_type(),
                        name + "[" + std::to_string(i) + "]");
      if (mlir::failed(arg))
        return failure();
      elements.push_back(*arg);
    }
    values[name] = ImportValue::sequence(elements);
  } else {
    return emitError(loc) << "input '" << name << "' is "
                          << (type->has_map_type() ? "a map"
                              : type->has_sequence_type()
                                  ? "a sequence of non-tensors"
                                  : "not a tensor")
                          << ", which kiln does not support";
  }
  inputSignature.push_back(signatureEntry(name, values[name], optional));
  plainSignature &= !optional && values[name].isTensor();
  return success();
}

DictionaryAttr Importer::signatureEntry(StringRef name,
                                        const ImportValue &value,
                                        bool optional) {
  Builder b(&ctx);
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("kind", b.getStringAttr(value.kindName())),
      b.getNamedAttr("count", b.getI64IntegerAttr(value.elements.size()))};
  if (optional)
    fields.push_back(b.getNamedAttr("optional", b.getBoolAttr(true)));
  return b.getDictionaryAttr(fields);
}

OwningOpRef<ModuleOp> Importer::run(const onnx::ModelProto &model) {
  std::string error;
  device = DeviceAttr::parseName(&ctx, options.device, error);
  if (!device) {
    emitError(fileLoc()) << error;
    return nullptr;
  }
  if (mlir::failed(validateModel(model, fileLoc())))
    return nullptr;
  auto opsets = importedOpsets(model);
  opset = opsets.count("") ? opsets[""] : 0;
  const onnx::GraphProto &graph = model.graph();

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  builder.setInsertionPointToEnd(module->getBody());
  auto func = builder.create<func::FuncOp>(fileLoc(), "main",
                                           builder.getFunctionType({}, {}));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  bool failed = false;
  for (const auto &init : graph.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(&ctx, init.name()), fileLoc());
    auto converted =
        convertTensor(init, device, loc, sanitize(init.name()), modelDir);
    if (mlir::failed(converted)) {
      failed = true;
      continue;
    }
    values[init.name()] = ImportValue::tensor(
        builder.create<ConstantOp>(loc, converted->first, converted->second));
  }
  llvm::StringMap<SmallVector<int64_t>> bindings;
  for (const std::string &text : options.inputShapes) {
    std::string name;
    SmallVector<int64_t> dims;
    if (mlir::failed(parseShapeBinding(text, name, dims))) {
      emitError(fileLoc()) << "malformed input shape '" << text
                           << "' (expected NAME=D0xD1x...)";
      return nullptr;
    }
    bindings[name] = dims;
  }
  SmallVector<std::string> argNames;
  for (const auto &input : graph.input()) {
    if (values.count(input.name()))
      continue; // an initializer with a default value
    if (mlir::failed(bindInput(input, body, bindings, argNames)))
      failed = true;
  }
  for (auto &[name, length] : options.sequenceLengths)
    if (llvm::none_of(graph.input(),
                      [&](const auto &in) { return in.name() == name; })) {
      emitError(fileLoc()) << "--sequence-length names no graph input: "
                           << name;
      return nullptr;
    }
  for (const std::string &name : options.emptyOptionals)
    if (llvm::none_of(graph.input(),
                      [&](const auto &in) { return in.name() == name; })) {
      emitError(fileLoc()) << "--empty-optional names no graph input: " << name;
      return nullptr;
    }

  if (!bindings.empty()) {
    SmallVector<StringRef> names;
    for (auto &entry : bindings)
      names.push_back(entry.first());
    llvm::sort(names);
    emitError(fileLoc()) << "--input-shape names no graph input: "
                         << llvm::join(names, ", ");
    return nullptr;
  }

  // Unsupported ops first, all of them (subgraphs included), so the user
  // sees the whole list.
  std::map<std::string, std::vector<std::string>> unsupported;
  collectUnsupported(graph, unsupported);
  if (!unsupported.empty()) {
    auto diag = emitError(fileLoc());
    diag << "model uses " << unsupported.size() << " unsupported op type(s):";
    for (auto &[op, nodes] : unsupported)
      diag << " " << op << " (" << nodes.size() << " node"
           << (nodes.size() == 1 ? "" : "s") << ")";
    return nullptr;
  }
  if (failed)
    return nullptr;

  collectDeclaredRanks(graph);
  if (mlir::failed(convertNodes(graph, values)))
    return nullptr;

  SmallVector<Value> outputs;
  SmallVector<std::string> outputNames;
  for (const auto &output : graph.output()) {
    auto it = values.find(output.name());
    if (it == values.end()) {
      emitError(fileLoc()) << "graph output '" << output.name()
                           << "' is never produced";
      return nullptr;
    }
    const ImportValue &value = it->second;
    for (auto [i, element] : llvm::enumerate(value.elements)) {
      outputs.push_back(element);
      outputNames.push_back(value.isTensor() ? output.name()
                                             : output.name() + "[" +
                                                   std::to_string(i) + "]");
    }
    bool optional = output.type().has_optional_type();
    outputSignature.push_back(signatureEntry(output.name(), value, optional));
    plainSignature &= !optional && value.isTensor();
  }
  builder.create<func::ReturnOp>(fileLoc(), outputs);
  func.setType(builder.getFunctionType(body->getArgumentTypes(),
                                       ValueRange(outputs).getTypes()));
  for (auto [i, name] : llvm::enumerate(argNames))
    func.setArgAttr(i, "kiln.name", builder.getStringAttr(name));
  for (auto [i, name] : llvm::enumerate(outputNames))
    func.setResultAttr(i, "kiln.name", builder.getStringAttr(name));
  if (!plainSignature)
    func->setAttr("kiln.signature",
                  builder.getDictionaryAttr(
                      {builder.getNamedAttr(
                           "inputs", builder.getArrayAttr(inputSignature)),
                       builder.getNamedAttr(
                           "outputs", builder.getArrayAttr(outputSignature))}));
  if (mlir::failed(verify(*module)))
    return nullptr;
  return module;
}
} // namespace

FailureOr<std::pair<RankedTensorType, ElementsAttr>>
kiln::onnx_import::convertTensor(const onnx::TensorProto &tensor,
                                 Attribute device, Location loc,
                                 StringRef blobName, StringRef modelDir) {
  MLIRContext *ctx = loc.getContext();
  Type element = elementType(ctx, tensor.data_type());
  if (!element)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has unsupported element type "
                          << dataTypeName(tensor.data_type());
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  if (failed(checkSize(loc, "tensor '" + tensor.name() + "'", dims, element)))
    return failure();
  auto type = RankedTensorType::get(dims, element, device);
  int64_t count = type.getNumElements();
  unsigned bits = element.getIntOrFloatBitWidth();
  size_t width = (bits + 7) / 8;
  std::vector<char> bytes;
  if (bits == 2 || bits == 4) {
    // Packed 8 / bits values a byte, low bits first, in raw_data (or an
    // external file) or one byte per int32_data entry; held one value a
    // byte, sign- or zero-extended.
    std::string packedBytes = tensor.raw_data();
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      auto external = readExternalData(tensor, loc, modelDir);
      if (failed(external))
        return failure();
      packedBytes.assign(external->begin(), external->end());
    }
    for (int32_t byte : tensor.int32_data())
      packedBytes.push_back(static_cast<char>(byte));
    size_t packed = subbyte::packedSize(count, bits);
    if (packedBytes.size() != packed)
      return emitError(loc)
             << "tensor '" << tensor.name() << "' of type " << type << " needs "
             << packed << " bytes of packed data, has " << packedBytes.size();
    const auto *data = reinterpret_cast<const uint8_t *>(packedBytes.data());
    for (int64_t i = 0; i < count; ++i)
      bytes.push_back(static_cast<char>(
          subbyte::unpack(data, i, bits, element.isSignlessInteger())));
  } else if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    auto external = readExternalData(tensor, loc, modelDir);
    if (failed(external))
      return failure();
    bytes = std::move(*external);
  } else if (tensor.has_raw_data()) {
    bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      bytes = packed<float>(tensor.float_data());
      break;
    case onnx::TensorProto::DOUBLE:
      bytes = packed<double>(tensor.double_data());
      break;
    case onnx::TensorProto::INT64:
      bytes = packed<int64_t>(tensor.int64_data());
      break;
    case onnx::TensorProto::INT32:
      bytes = packed<int32_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::INT16:
      bytes = packed<int16_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      bytes = packed<uint16_t>(tensor.int32_data());
      break;
    case kOnnxFloat8E4M3FN:
    case kOnnxFloat8E4M3FNUZ:
    case kOnnxFloat8E5M2:
    case kOnnxFloat8E5M2FNUZ:
      bytes = packed<uint8_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::BOOL:
      bytes = packed<int8_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::UINT8:
      bytes = packed<uint8_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::UINT16:
      bytes = packed<uint16_t>(tensor.int32_data());
      break;
    case onnx::TensorProto::UINT32:
      bytes = packed<uint32_t>(tensor.uint64_data());
      break;
    case onnx::TensorProto::UINT64:
      bytes = packed<uint64_t>(tensor.uint64_data());
      break;
    }
  }
  if (bytes.size() != static_cast<size_t>(count) * width)
    return emitError(loc) << "tensor '" << tensor.name() << "' of type " << type
                          << " needs " << count * width
                          << " bytes of data, has " << bytes.size();
  return std::make_pair(type, makeConstantAttr(type, bytes, blobName));
}

OwningOpRef<ModuleOp> kiln::importOnnxModel(MLIRContext &context,
                                            const onnx::ModelProto &model,
                                            const std::string &source,
                                            const ImportOptions &options) {
  context.loadDialect<KilnDialect, func::FuncDialect>();
  return Importer(context, source, options).run(model);
}

LogicalResult kiln::readOnnxFile(MLIRContext &context, const std::string &path,
                                 onnx::ModelProto &model) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return emitError(loc) << "cannot open ONNX model file";
  if (!model.ParseFromIstream(&in))
    return emitError(loc) << "not a valid ONNX model (protobuf parse failed)";
  if (!model.has_graph())
    return emitError(loc) << "ONNX model has no graph";
  return success();
}

OwningOpRef<ModuleOp> kiln::importOnnxFile(MLIRContext &context,
                                           const std::string &path,
                                           const ImportOptions &options) {
  onnx::ModelProto model;
  if (failed(readOnnxFile(context, path, model)))
    return nullptr;
  return importOnnxModel(context, model, path, options);
}
