//===- Loop.cpp - ONNX Loop, unrolled at compile time ---------------------===//
//
// kiln's graph level has no loops: a Loop whose trip count and condition are
// known at compile time is unrolled. Each iteration builds the body in place
// (NodeContext-level subgraph on ImportValues, so loop-carried values may be
// sequences that grow), with the iteration number and the condition as
// constants; the body's condition output must fold to a constant too. The
// loop-carried values thread through; scan outputs are stacked along a new
// axis 0. A trip count or condition known only at run time is refused with a
// clear error (kiln would need a loop in the plan).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"
#include "frontend/OpChain.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// The most iterations a Loop is unrolled to (each builds the whole body).
constexpr int64_t kMaxUnroll = 4096;

} // namespace

FailureOr<ImportValues>
kiln::onnx_import::convertLoop(NodeContext &c, ArrayRef<ImportValue> inputs,
                               const ValueSubgraph &subgraph) {
  const onnx::GraphProto *bodyGraph = c.graphAttr("body");
  if (!bodyGraph)
    return c.error("Loop needs a body graph");
  const onnx::GraphProto &body = *bodyGraph;
  if (inputs.size() < 2)
    return c.error("Loop needs a trip count and a condition input (either "
                   "may be empty)");
  size_t numCarried = inputs.size() - 2;
  if (body.input_size() != (int)numCarried + 2 ||
      body.output_size() < (int)numCarried + 1)
    return c.error("Loop's body takes " + Twine(body.input_size()) +
                   " inputs and gives " + Twine(body.output_size()) +
                   " outputs, which do not fit " + Twine(numCarried) +
                   " loop-carried values");
  size_t numScans = body.output_size() - 1 - numCarried;
  if (c.node.output_size() > (int)(numCarried + numScans))
    return c.error("Loop has more outputs than its body gives");

  std::optional<int64_t> trips;
  if (inputs[0].kind != ImportValue::None) {
    trips =
        inputs[0].isTensor() ? constantScalar(inputs[0].value()) : std::nullopt;
    if (!trips)
      return c.error("Loop's trip count is known only at run time; kiln "
                     "unrolls loops, so it must be a constant");
  }
  bool cond = true;
  if (inputs[1].kind != ImportValue::None) {
    std::optional<int64_t> given =
        inputs[1].isTensor() ? constantScalar(inputs[1].value()) : std::nullopt;
    if (!given)
      return c.error("Loop's condition is known only at run time; kiln "
                     "unrolls loops, so it must be a constant");
    cond = *given != 0;
  }
  if (!trips && cond)
    trips = std::numeric_limits<int64_t>::max(); // until the body says stop

  ImportValues carried(inputs.begin() + 2, inputs.end());
  SmallVector<SmallVector<Value>> scans(numScans);
  OpChain g(c);
  int64_t iteration = 0;
  for (; cond && iteration < *trips; ++iteration) {
    if (iteration == kMaxUnroll)
      return c.error("Loop runs more than " + Twine(kMaxUnroll) +
                     " iterations, the most kiln unrolls");
    ImportValues args = {
        ImportValue::tensor(g.scalar(c.builder.getI64Type(), iteration)),
        ImportValue::tensor(g.scalar(c.builder.getI1Type(), 1))};
    if (g.failed())
      return failure();
    args.append(carried.begin(), carried.end());
    auto outputs = subgraph(body, args);
    if (failed(outputs))
      return failure();
    std::optional<int64_t> next = (*outputs)[0].isTensor()
                                      ? constantScalar((*outputs)[0].value())
                                      : std::nullopt;
    if (!next)
      return c.error("Loop's body computes its condition at run time; kiln "
                     "unrolls loops, so it must fold to a constant");
    cond = *next != 0;
    for (size_t i = 0; i < numCarried; ++i)
      carried[i] = (*outputs)[1 + i];
    for (size_t i = 0; i < numScans; ++i) {
      const ImportValue &out = (*outputs)[1 + numCarried + i];
      if (!out.isTensor())
        return c.error("Loop's scan output " + Twine(i) + " is a " +
                       out.kindName() + ", not a tensor");
      scans[i].push_back(out.value());
    }
  }

  ImportValues results(carried.begin(), carried.end());
  for (auto [i, pieces] : llvm::enumerate(scans)) {
    if (pieces.empty())
      return c.error("Loop runs no iterations, so the shape of its scan "
                     "output " +
                     Twine(i) + " is unknown");
    auto stacked = stackAt(c, pieces, 0);
    if (failed(stacked))
      return failure();
    results.push_back(ImportValue::tensor(*stacked));
  }
  results.resize(c.node.output_size());
  return results;
}
