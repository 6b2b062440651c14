//===- Sequences.cpp - sequences and optionals, resolved while importing --===//
//
// kiln's graph level has tensors only. A sequence is a list of tensors whose
// length is known at compile time (a graph input's from kilnc
// --sequence-length; each element its own argument), and an optional is its
// value or none (kilnc --empty-optional). The ops on them are resolved here,
// on ImportValues:
//
//   SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
//   SequenceLength   edits of the list; positions must be constants
//   SequenceAt        a constant position picks the element; a position
//                     known only at run time selects among elements of one
//                     type with a chain of kiln.where
//   ConcatFromSequence  kiln.concat (new_axis: of the elements unsqueezed)
//   SplitToSequence   slices; a scalar split must be a constant, a list of
//                     lengths may be read at run time
//   SequenceMap       the body built once per element
//   Optional, OptionalHasElement, OptionalGetElement, and Identity on a
//   sequence or none: whether an optional has a value is known at compile
//   time (an omitted input has none)
//   If whose branches give sequences or optionals: a constant condition
//                     builds the branch taken; else both, selecting element
//                     by element, which needs the same kinds and lengths
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// The most elements a sequence built here may have.
constexpr int64_t kMaxElements = 4096;

FailureOr<const ImportValue *>
sequenceInput(NodeContext &c, ArrayRef<ImportValue> inputs, size_t i) {
  if (i >= inputs.size() || inputs[i].kind != ImportValue::Sequence)
    return c.error(c.node.op_type() + " needs a sequence as input " + Twine(i) +
                   (i < inputs.size()
                        ? Twine(", given a ") + inputs[i].kindName()
                        : Twine()));
  return &inputs[i];
}

FailureOr<Value> tensorInput(NodeContext &c, ArrayRef<ImportValue> inputs,
                             size_t i) {
  if (i >= inputs.size() || !inputs[i].isTensor())
    return c.error(c.node.op_type() + " needs a tensor as input " + Twine(i));
  return inputs[i].value();
}

// Position input `i` (a constant) made non-negative for `size` elements;
// `end` allows size itself (an insertion at the back). Absent: the default.
FailureOr<int64_t> position(NodeContext &c, ArrayRef<ImportValue> inputs,
                            size_t i, int64_t size, bool end,
                            int64_t fallback) {
  if (i >= inputs.size() || inputs[i].kind == ImportValue::None)
    return fallback;
  std::optional<int64_t> p = constantScalar(inputs[i].value());
  if (!p)
    return c.error(c.node.op_type() +
                   " needs its position as a constant scalar (kiln resolves "
                   "sequences at compile time)");
  int64_t last = end ? size : size - 1;
  if (*p < -size || *p > last)
    return c.error(c.node.op_type() + " position " + Twine(*p) +
                   " is out of range for a sequence of " + Twine(size) +
                   " elements");
  return *p < 0 ? *p + size : *p;
}

FailureOr<ImportValues> one(ImportValue v) { return ImportValues{v}; }

FailureOr<ImportValues> sequenceAt(NodeContext &c,
                                   ArrayRef<ImportValue> inputs) {
  auto seq = sequenceInput(c, inputs, 0);
  if (failed(seq))
    return failure();
  ArrayRef<Value> elements = (*seq)->elements;
  int64_t n = elements.size();
  if (n == 0)
    return c.error("SequenceAt of an empty sequence");
  if (inputs.size() < 2 || !inputs[1].isTensor())
    return c.error("SequenceAt needs a position");
  if (constantScalar(inputs[1].value())) {
    auto p = position(c, inputs, 1, n, /*end=*/false, 0);
    if (failed(p))
      return failure();
    return one(ImportValue::tensor(elements[*p]));
  }
  for (Value e : elements)
    if (e.getType() != elements.front().getType())
      return c.error("SequenceAt with a position known only at run time "
                     "needs elements of one type");
  // where(p == i || p == i - n, e_i, ...), the last element the default.
  OpChain g(c);
  auto p = reshapeToDims(c, inputs[1].value(), {});
  if (failed(p))
    return failure();
  Value result = elements.back();
  for (int64_t i = n - 2; i >= 0; --i) {
    Value at = g.op<EqualOp>({*p, g.scalar(typeOf(*p).getElementType(), i)});
    Value back =
        g.op<EqualOp>({*p, g.scalar(typeOf(*p).getElementType(), i - n)});
    result = g.where(g.op<OrOp>({at, back}), elements[i], result);
  }
  if (g.failed())
    return failure();
  return one(ImportValue::tensor(result));
}

FailureOr<ImportValues> concatFromSequence(NodeContext &c,
                                           ArrayRef<ImportValue> inputs) {
  auto seq = sequenceInput(c, inputs, 0);
  if (failed(seq))
    return failure();
  if ((*seq)->elements.empty())
    return c.error("ConcatFromSequence of an empty sequence");
  bool newAxis = c.getInt("new_axis", 0) != 0;
  const onnx::AttributeProto *axisAttr = c.attr("axis");
  if (!axisAttr)
    return c.error("ConcatFromSequence needs an axis");
  int64_t rank = typeOf((*seq)->elements.front()).getRank();
  auto axis = normalizeAxis(c, axisAttr->i(), rank + (newAxis ? 1 : 0));
  if (failed(axis))
    return failure();
  auto result = newAxis ? stackAt(c, (*seq)->elements, *axis)
                        : concatOf(c, (*seq)->elements, *axis);
  if (failed(result))
    return failure();
  return one(ImportValue::tensor(*result));
}

FailureOr<ImportValues> splitToSequence(NodeContext &c,
                                        ArrayRef<ImportValue> inputs) {
  auto x = tensorInput(c, inputs, 0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  auto axis = normalizeAxis(c, c.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t size = type.getDimSize(*axis);
  if (inputs.size() >= 2 && inputs[1].isTensor()) {
    // Lengths read at run time: as many elements as the split has entries.
    RankedTensorType splitType = typeOf(inputs[1].value());
    bool known = constantValues<int64_t>(inputs[1].value()).has_value();
    if (splitType.getRank() == 1 && !splitType.isDynamicDim(0) &&
        (!known || ShapedType::isDynamic(size))) {
      if (splitType.getDimSize(0) > kMaxElements)
        return c.error("SplitToSequence would give more than " +
                       Twine(kMaxElements) + " elements");
      auto parts = splitAtRunTime(c, *axis, splitType.getDimSize(0));
      if (failed(parts))
        return failure();
      return one(ImportValue::sequence(*parts));
    }
  }
  if (ShapedType::isDynamic(size))
    return c.error("SplitToSequence needs a static size along axis " +
                   Twine(*axis) + ", or a split of lengths of a static count");
  SmallVector<int64_t> lengths;
  bool keepdims = true;
  if (inputs.size() < 2 || inputs[1].kind == ImportValue::None) {
    lengths.assign(size, 1);
    keepdims = c.getInt("keepdims", 1) != 0;
  } else {
    auto split = constantValues<int64_t>(inputs[1].value());
    if (!split)
      return c.error("SplitToSequence needs a scalar split as a constant "
                     "(the number of elements is fixed at compile time)");
    if (typeOf(inputs[1].value()).getRank() == 0) {
      int64_t chunk = split->front();
      if (chunk <= 0)
        return c.error("SplitToSequence's split must be positive");
      for (int64_t at = 0; at < size; at += chunk)
        lengths.push_back(std::min(chunk, size - at));
    } else {
      lengths.assign(split->begin(), split->end());
      int64_t total = 0;
      for (int64_t l : lengths)
        total += l < 0 ? size + 1 : l; // a negative length never fits
      if (total != size)
        return c.error("SplitToSequence's split lengths must be >= 0 and "
                       "sum to " +
                       Twine(size));
    }
  }
  if ((int64_t)lengths.size() > kMaxElements)
    return c.error("SplitToSequence would give more than " +
                   Twine(kMaxElements) + " elements");
  OpChain g(c);
  SmallVector<Value> pieces;
  int64_t start = 0;
  for (int64_t length : lengths) {
    Value piece = g.slice(*x, *axis, start, length);
    start += length;
    if (g.failed())
      return failure();
    if (!keepdims) {
      SmallVector<int64_t> dims(typeOf(piece).getShape());
      dims.erase(dims.begin() + *axis);
      auto squeezed = reshapeToDims(c, piece, dims);
      if (failed(squeezed))
        return failure();
      piece = *squeezed;
    }
    pieces.push_back(piece);
  }
  return one(ImportValue::sequence(pieces));
}

FailureOr<ImportValues> sequenceMap(NodeContext &c,
                                    ArrayRef<ImportValue> inputs,
                                    const ValueSubgraph &subgraph) {
  const onnx::GraphProto *body = c.graphAttr("body");
  if (!body)
    return c.error("SequenceMap needs a body graph");
  auto seq = sequenceInput(c, inputs, 0);
  if (failed(seq))
    return failure();
  size_t n = (*seq)->elements.size();
  for (const ImportValue &in : inputs)
    if (in.kind == ImportValue::Sequence && in.elements.size() != n)
      return c.error("SequenceMap's sequences have " + Twine(n) + " and " +
                     Twine(in.elements.size()) + " elements");
  SmallVector<SmallVector<Value>> outputs(c.node.output_size());
  for (size_t i = 0; i < n; ++i) {
    ImportValues args;
    for (const ImportValue &in : inputs)
      args.push_back(in.kind == ImportValue::Sequence
                         ? ImportValue::tensor(in.elements[i])
                         : in);
    auto results = subgraph(*body, args);
    if (failed(results))
      return failure();
    if (results->size() != outputs.size())
      return c.error("SequenceMap has " + Twine(outputs.size()) +
                     " outputs but its body gives " + Twine(results->size()));
    for (auto [j, r] : llvm::enumerate(*results)) {
      if (!r.isTensor())
        return c.error("SequenceMap's body must give tensors");
      outputs[j].push_back(r.value());
    }
  }
  ImportValues results;
  for (auto &elements : outputs)
    results.push_back(ImportValue::sequence(elements));
  return results;
}

// Selects `a` where `cond`, else `b`, element by element.
FailureOr<ImportValue> select(NodeContext &c, Value cond, const ImportValue &a,
                              const ImportValue &b, size_t output) {
  if (a.kind != b.kind || a.elements.size() != b.elements.size())
    return c.error(
        "If with a condition known only at run time needs both branches to "
        "give output " +
        Twine(output) + " the same kind and length; they give a " +
        a.kindName() + " of " + Twine(a.elements.size()) + " and a " +
        b.kindName() + " of " + Twine(b.elements.size()));
  ImportValue result = a;
  OpChain g(c);
  for (auto [i, pair] : llvm::enumerate(llvm::zip(a.elements, b.elements))) {
    auto [x, y] = pair;
    if (x.getType() != y.getType())
      return c.error("If with a condition known only at run time needs both "
                     "branches to give output " +
                     Twine(output) + " elements of one type");
    result.elements[i] = g.where(cond, x, y);
  }
  if (g.failed())
    return failure();
  return result;
}

FailureOr<ImportValues> ifOnValues(NodeContext &c, ArrayRef<ImportValue> inputs,
                                   const ValueSubgraph &subgraph) {
  const onnx::GraphProto *thenBranch = c.graphAttr("then_branch");
  const onnx::GraphProto *elseBranch = c.graphAttr("else_branch");
  if (!thenBranch || !elseBranch)
    return c.error("If needs then_branch and else_branch graphs");
  auto cond = tensorInput(c, inputs, 0);
  if (failed(cond))
    return failure();
  if (std::optional<int64_t> taken = constantScalar(*cond))
    return subgraph(*taken ? *thenBranch : *elseBranch, {});
  auto thenOutputs = subgraph(*thenBranch, {});
  auto elseOutputs = subgraph(*elseBranch, {});
  if (failed(thenOutputs) || failed(elseOutputs))
    return failure();
  if (thenOutputs->size() != elseOutputs->size())
    return c.error("If's branches give " + Twine(thenOutputs->size()) +
                   " and " + Twine(elseOutputs->size()) + " outputs");
  auto scalar = reshapeToDims(c, *cond, {});
  if (failed(scalar))
    return failure();
  ImportValues results;
  for (size_t i = 0; i < thenOutputs->size(); ++i) {
    auto r = select(c, *scalar, (*thenOutputs)[i], (*elseOutputs)[i], i);
    if (failed(r))
      return failure();
    results.push_back(*r);
  }
  return results;
}

bool givesNonTensor(const onnx::GraphProto *g) {
  return g && llvm::any_of(g->output(), [](const onnx::ValueInfoProto &o) {
           return o.type().has_sequence_type() || o.type().has_optional_type();
         });
}

} // namespace

bool kiln::onnx_import::isStructural(StringRef opType) {
  return llvm::is_contained(
      {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt",
       "SequenceErase", "SequenceLength", "ConcatFromSequence",
       "SplitToSequence", "SequenceMap", "Optional", "OptionalHasElement",
       "OptionalGetElement", "Loop"},
      opType);
}

std::optional<FailureOr<ImportValues>>
kiln::onnx_import::convertStructural(NodeContext &c,
                                     ArrayRef<ImportValue> inputs,
                                     const ValueSubgraph &subgraph) {
  StringRef op = c.node.op_type();
  if (!c.node.domain().empty() && c.node.domain() != "ai.onnx")
    return std::nullopt;
  bool structured = llvm::any_of(inputs, [](const ImportValue &v) {
    return v.kind == ImportValue::Sequence;
  });
  if (op == "Identity" && inputs.size() == 1 && !inputs[0].isTensor())
    return one(inputs[0]);
  if (op == "OptionalGetElement") {
    if (inputs.size() != 1 || inputs[0].kind == ImportValue::None)
      return FailureOr<ImportValues>(
          c.error("OptionalGetElement of an optional that has no value"));
    return one(inputs[0]);
  }
  if (op == "OptionalHasElement") {
    bool has = !inputs.empty() && inputs[0].kind != ImportValue::None;
    OpChain g(c);
    return one(ImportValue::tensor(g.scalar(c.builder.getI1Type(), has)));
  }
  if (op == "If" && (givesNonTensor(c.graphAttr("then_branch")) ||
                     givesNonTensor(c.graphAttr("else_branch"))))
    return ifOnValues(c, inputs, subgraph);
  if (!isStructural(op)) {
    if (structured)
      return FailureOr<ImportValues>(
          c.error(op + " does not take a sequence as input"));
    return std::nullopt;
  }
  auto bounded = [&](const ImportValue &seq) -> FailureOr<ImportValues> {
    if (seq.elements.size() > kMaxElements)
      return c.error("a sequence of more than " + Twine(kMaxElements) +
                     " elements");
    return one(seq);
  };
  if (op == "Loop")
    return convertLoop(c, inputs, subgraph);
  if (op == "SequenceEmpty")
    return one(ImportValue::sequence({}));
  if (op == "SequenceConstruct") {
    SmallVector<Value> elements;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto t = tensorInput(c, inputs, i);
      if (failed(t))
        return FailureOr<ImportValues>(failure());
      elements.push_back(*t);
    }
    return one(ImportValue::sequence(elements));
  }
  if (op == "Optional") {
    if (inputs.empty())
      return one(ImportValue::none());
    return one(inputs[0]);
  }
  if (op == "SequenceAt")
    return sequenceAt(c, inputs);
  if (op == "ConcatFromSequence")
    return concatFromSequence(c, inputs);
  if (op == "SplitToSequence")
    return splitToSequence(c, inputs);
  if (op == "SequenceMap")
    return sequenceMap(c, inputs, subgraph);
  auto seq = sequenceInput(c, inputs, 0);
  if (failed(seq))
    return FailureOr<ImportValues>(failure());
  int64_t n = (*seq)->elements.size();
  ImportValue result = **seq;
  if (op == "SequenceLength") {
    OpChain g(c);
    return one(ImportValue::tensor(g.scalar(c.builder.getI64Type(), n)));
  }
  if (op == "SequenceInsert") {
    auto t = tensorInput(c, inputs, 1);
    auto p = position(c, inputs, 2, n, /*end=*/true, n);
    if (failed(t) || failed(p))
      return FailureOr<ImportValues>(failure());
    result.elements.insert(result.elements.begin() + *p, *t);
    return bounded(result);
  }
  // SequenceErase
  if (n == 0)
    return FailureOr<ImportValues>(
        c.error("SequenceErase of an empty sequence"));
  auto p = position(c, inputs, 1, n, /*end=*/false, n - 1);
  if (failed(p))
    return FailureOr<ImportValues>(failure());
  result.elements.erase(result.elements.begin() + *p);
  return one(result);
}
