//===- ControlFlow.cpp - If and Scan, built in place ----------------------===//
//
// kiln's graph level has no regions: a subgraph is built in place, inline,
// through NodeContext::subgraph, reading outer values by name.
//
//   If    with a constant condition builds only the branch taken. With a
//         condition known at run time it builds both and selects each output
//         with kiln.where, which needs the branches' outputs to have one
//         type; both branches are computed.
//   Scan  is unrolled over its (static) sequence length: the body is built
//         once per step on that step's slices, the state threaded through,
//         and the per-step scan outputs stacked. Scan-8's batch axis is
//         unrolled too.
//
// If with sequence or optional outputs, the optional ops and Loop work on
// ImportValues: Sequences.cpp and Loop.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// The most steps a Scan is unrolled to (each builds the whole body).
constexpr int64_t kMaxUnroll = 4096;

// `v` without its size-1 dim `axis`.
FailureOr<Value> dropAxis(NodeContext &c, Value v, int64_t axis) {
  SmallVector<int64_t> dims(typeOf(v).getShape());
  dims.erase(dims.begin() + axis);
  return reshapeToDims(c, v, dims);
}

// Step `index` of `v` along `axis`, that axis removed.
FailureOr<Value> stepOf(NodeContext &c, Value v, int64_t axis, int64_t index) {
  OpChain chain(c);
  Value slice = chain.slice(v, axis, index, 1);
  if (chain.failed())
    return failure();
  return dropAxis(c, slice, axis);
}

// `pieces` (one per step, in step order) stacked along a new `axis`,
// last step first when `reverse`.
FailureOr<Value> stack(NodeContext &c, SmallVector<Value> pieces, int64_t axis,
                       bool reverse) {
  if (reverse)
    std::reverse(pieces.begin(), pieces.end());
  return stackAt(c, pieces, axis);
}

struct ScanSpec {
  const onnx::GraphProto *body;
  std::vector<int64_t> inAxes, inDirections, outAxes, outDirections;
};

// One Scan-9 scan over `states` and `scans`: the final states, then the
// stacked scan outputs.
FailureOr<Values> scanOnce(NodeContext &c, const ScanSpec &spec, Values states,
                           ValueRange scans) {
  int64_t length = -1;
  SmallVector<int64_t> axes;
  for (auto [i, v] : llvm::enumerate(scans)) {
    int64_t rank = typeOf(v).getRank();
    int64_t axis = i < spec.inAxes.size() ? spec.inAxes[i] : 0;
    if (axis < -rank || axis >= rank)
      return c.error("Scan input axis " + Twine(axis) + " is out of range " +
                     "for rank " + Twine(rank));
    axis = axis < 0 ? axis + rank : axis;
    int64_t size = typeOf(v).getDimSize(axis);
    if (ShapedType::isDynamic(size))
      return c.error("Scan needs a static sequence length (scan input " +
                     Twine(i) + " has a symbolic dim " + Twine(axis) + ")");
    if (length >= 0 && size != length)
      return c.error("Scan inputs have sequence lengths " + Twine(length) +
                     " and " + Twine(size));
    length = size;
    axes.push_back(axis);
  }
  if (length <= 0)
    return c.error("Scan needs a sequence length of at least 1");
  if (length > kMaxUnroll)
    return c.error("Scan over " + Twine(length) + " steps is longer than " +
                   Twine(kMaxUnroll) + ", the most kiln unrolls");
  size_t numStates = states.size();
  SmallVector<SmallVector<Value>> pieces;
  for (int64_t t = 0; t < length; ++t) {
    Values bodyInputs = states;
    for (auto [i, v] : llvm::enumerate(scans)) {
      bool reverse = i < spec.inDirections.size() && spec.inDirections[i];
      auto step = stepOf(c, v, axes[i], reverse ? length - 1 - t : t);
      if (failed(step))
        return failure();
      bodyInputs.push_back(*step);
    }
    auto outputs = c.subgraph(*spec.body, bodyInputs);
    if (failed(outputs))
      return failure();
    if (outputs->size() < numStates)
      return c.error("Scan body gives " + Twine(outputs->size()) +
                     " outputs, fewer than its " + Twine(numStates) +
                     " states");
    for (size_t i = 0; i < numStates; ++i) {
      if (typeOf((*outputs)[i]).getShape() != typeOf(states[i]).getShape())
        return c.error("Scan state " + Twine(i) + " changes shape in the " +
                       "body (from " + Twine(typeOf(states[i]).getRank()) +
                       "-D to " + Twine(typeOf((*outputs)[i]).getRank()) +
                       "-D or another size)");
      states[i] = (*outputs)[i];
    }
    pieces.resize(outputs->size() - numStates);
    for (size_t k = numStates; k < outputs->size(); ++k)
      pieces[k - numStates].push_back((*outputs)[k]);
  }
  Values results = states;
  for (auto [k, steps] : llvm::enumerate(pieces)) {
    int64_t rank = typeOf(steps.front()).getRank() + 1;
    int64_t axis = k < spec.outAxes.size() ? spec.outAxes[k] : 0;
    if (axis < -rank || axis >= rank)
      return c.error("Scan output axis " + Twine(axis) + " is out of range " +
                     "for rank " + Twine(rank));
    axis = axis < 0 ? axis + rank : axis;
    bool reverse = k < spec.outDirections.size() && spec.outDirections[k];
    auto stacked = stack(c, steps, axis, reverse);
    if (failed(stacked))
      return failure();
    results.push_back(*stacked);
  }
  return results;
}

} // namespace

FailureOr<Values> kiln::onnx_import::convertIf(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  const onnx::GraphProto *thenBranch = c.graphAttr("then_branch");
  const onnx::GraphProto *elseBranch = c.graphAttr("else_branch");
  if (!thenBranch || !elseBranch)
    return c.error("If needs then_branch and else_branch graphs");
  Value cond = c.inputs[0];
  if (typeOf(cond).hasStaticShape() && typeOf(cond).getNumElements() != 1)
    return c.error("If's condition must hold one element");
  for (const onnx::GraphProto *branch : {thenBranch, elseBranch})
    if (branch->output_size() != c.node.output_size())
      return c.error("If has " + Twine(c.node.output_size()) +
                     " outputs but a branch gives " +
                     Twine(branch->output_size()));
  if (std::optional<int64_t> taken = constantScalar(cond))
    return c.subgraph(*taken ? *thenBranch : *elseBranch, {});
  auto thenOutputs = c.subgraph(*thenBranch, {});
  auto elseOutputs = c.subgraph(*elseBranch, {});
  if (failed(thenOutputs) || failed(elseOutputs))
    return failure();
  if (thenOutputs->size() != elseOutputs->size())
    return c.error("If's branches give " + Twine(thenOutputs->size()) +
                   " and " + Twine(elseOutputs->size()) + " outputs");
  auto scalarCond = reshapeToDims(c, cond, {});
  if (failed(scalarCond))
    return failure();
  Values results;
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(*thenOutputs, *elseOutputs))) {
    auto [a, b] = pair;
    if (a.getType() != b.getType()) {
      std::string types;
      llvm::raw_string_ostream os(types);
      os << a.getType() << " and " << b.getType();
      return c.error("If with a condition known only at run time needs both "
                     "branches to give output " +
                     Twine(i) + " one type; they give " + os.str());
    }
    auto selected = c.create(WhereOp::getOperationName(), {*scalarCond, a, b});
    if (failed(selected))
      return failure();
    results.push_back(*selected);
  }
  return results;
}

FailureOr<Values> kiln::onnx_import::convertScan(NodeContext &c) {
  ScanSpec spec{c.graphAttr("body"), ints(c, "scan_input_axes", {}),
                ints(c, "scan_input_directions", {}),
                ints(c, "scan_output_axes", {}),
                ints(c, "scan_output_directions", {})};
  if (!spec.body)
    return c.error("Scan needs a body graph");
  if (spec.body->output_size() != c.node.output_size())
    return c.error("Scan has " + Twine(c.node.output_size()) +
                   " outputs but its body gives " +
                   Twine(spec.body->output_size()));
  int64_t numScans = c.getInt("num_scan_inputs", 0);
  if (c.opset >= 9) {
    if (numScans < 1 || numScans > (int64_t)c.inputs.size())
      return c.error("Scan's num_scan_inputs " + Twine(numScans) +
                     " does not fit its " + Twine(c.inputs.size()) + " inputs");
    if (llvm::is_contained(c.inputs, Value()))
      return c.error("Scan's inputs must all be given");
    size_t numStates = c.inputs.size() - numScans;
    Values states(c.inputs.begin(), c.inputs.begin() + numStates);
    return scanOnce(c, spec, states,
                    ValueRange(c.inputs).drop_front(numStates));
  }
  // Scan-8: input 0 is sequence_lens; every other input has a batch axis 0
  // and scans along axis 1 (the body sees one batch entry).
  if (numScans < 1 || numScans + 1 > (int64_t)c.inputs.size())
    return c.error("Scan's num_scan_inputs " + Twine(numScans) +
                   " does not fit its " + Twine(c.inputs.size()) + " inputs");
  if (c.inputs[0])
    return c.error("Scan-8 with sequence_lens is not supported (give every "
                   "sequence its full length)");
  spec.inDirections = ints(c, "directions", {});
  ValueRange operands = ValueRange(c.inputs).drop_front();
  if (llvm::is_contained(operands, Value()))
    return c.error("Scan's inputs must all be given");
  if (typeOf(operands.front()).getRank() < 1)
    return c.error("Scan-8 inputs need a batch axis");
  int64_t batch = typeOf(operands.front()).getDimSize(0);
  if (ShapedType::isDynamic(batch) || batch < 1)
    return c.error("Scan-8 needs a static batch size");
  size_t numStates = operands.size() - numScans;
  SmallVector<Values> perBatch;
  for (int64_t b = 0; b < batch; ++b) {
    Values entries;
    for (Value v : operands) {
      if (typeOf(v).getRank() < 1 || typeOf(v).getDimSize(0) != batch)
        return c.error("Scan-8 inputs must share batch size " + Twine(batch));
      auto entry = stepOf(c, v, 0, b);
      if (failed(entry))
        return failure();
      entries.push_back(*entry);
    }
    auto results =
        scanOnce(c, spec, Values(entries.begin(), entries.begin() + numStates),
                 ValueRange(entries).drop_front(numStates));
    if (failed(results))
      return failure();
    perBatch.push_back(*results);
  }
  Values results;
  for (size_t i = 0; i < perBatch.front().size(); ++i) {
    SmallVector<Value> entries;
    for (const Values &r : perBatch)
      entries.push_back(r[i]);
    auto stacked = stack(c, entries, 0, /*reverse=*/false);
    if (failed(stacked))
      return failure();
    results.push_back(*stacked);
  }
  return results;
}

void kiln::onnx_import::addControlFlowConverters(ConverterTable &table) {
  addRows(table, {
                     {"If", convertIf},
                     {"Scan", convertScan},
                 });
}
