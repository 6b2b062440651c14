//===- OnnxOps.h - per-node converters (internal) -----------------*- C++
//-*-===//

#ifndef KILN_FRONTEND_ONNXOPS_H
#define KILN_FRONTEND_ONNXOPS_H

#include "ir/KilnDialect.h"

#include <onnx/onnx_pb.h>

#include "llvm/ADT/StringMap.h"

#include <cstring>
#include <functional>
#include <optional>

namespace kiln::onnx_import {

/// Converts a TensorProto to a constant of its type on `device`. Data kept
/// in an external file is read relative to `modelDir`.
mlir::FailureOr<std::pair<mlir::RankedTensorType, mlir::ElementsAttr>>
convertTensor(const onnx::TensorProto &tensor, mlir::Attribute device,
              mlir::Location loc, llvm::StringRef blobName,
              llvm::StringRef modelDir);

/// TensorProto.DataType values newer than the protobuf schema Debian ships
/// (onnx 1.12).
enum OnnxNewerDataType : int {
  kOnnxFloat8E4M3FN = 17,
  kOnnxFloat8E4M3FNUZ = 18,
  kOnnxFloat8E5M2 = 19,
  kOnnxFloat8E5M2FNUZ = 20,
  kOnnxUint4 = 21,
  kOnnxInt4 = 22,
  kOnnxFloat4E2M1 = 23,
  kOnnxFloat8E8M0 = 24,
  kOnnxUint2 = 25,
  kOnnxInt2 = 26,
};

/// The name diagnostics give node `index` of its graph: its own, or
/// OpType_index when it has none.
std::string nodeName(const onnx::NodeProto &node, int index);
/// Where diagnostics place node `index` of its graph: at nodeName, within
/// `file`.
mlir::Location nodeLocation(mlir::Location file, const onnx::NodeProto &node,
                            int index);

/// ONNX TensorProto.DataType -> element type (signless integers); null when
/// kiln does not support it.
mlir::Type elementType(mlir::MLIRContext *ctx, int dataType);

/// A small integer tensor from a shape computation (Shape -> Gather ->
/// Concat -> Reshape): each element an affine expression of the import's
/// symbols, constant unless it depends on a symbolic dim.
struct SymbolicInts {
  std::vector<int64_t> shape;
  std::vector<mlir::AffineExpr> data;
  mlir::Type element;
};

/// The shape computations of one import that depend on symbolic dims
/// (OnnxFold.cpp): the ordinary ops computing them at run time (from
/// kiln.shape) and, per value, what it holds as affine expressions, which
/// Reshape and Expand targets use.
struct ShapeTable {
  llvm::DenseMap<mlir::Value, SymbolicInts> values; // value -> content
  /// Symbol i is dim symbols[i].second of symbols[i].first.
  llvm::SmallVector<std::pair<mlir::Value, int64_t>> symbols;
  /// Dim `i` of `v`: its size when static, else its symbol.
  mlir::AffineExpr dimOf(mlir::Value v, int64_t i);
};

/// A value of the import: a tensor, a sequence of tensors (its length known
/// at compile time), or an optional without a value. An optional with a
/// value is that value.
struct ImportValue {
  enum Kind { Tensor, Sequence, None };
  Kind kind = Tensor;
  llvm::SmallVector<mlir::Value, 1> elements; // a tensor: exactly one

  static ImportValue tensor(mlir::Value v) { return {Tensor, {v}}; }
  static ImportValue sequence(mlir::ValueRange vs) {
    return {Sequence, llvm::SmallVector<mlir::Value, 1>(vs)};
  }
  static ImportValue none() { return {None, {}}; }
  bool isTensor() const { return kind == Tensor; }
  /// The tensor, or null for a sequence or none.
  mlir::Value value() const { return isTensor() ? elements[0] : nullptr; }
  /// "tensor", "sequence" or "none" (the artifact's signature kinds).
  const char *kindName() const {
    return kind == Tensor ? "tensor" : kind == Sequence ? "sequence" : "none";
  }
};
using ImportValues = llvm::SmallVector<ImportValue>;
/// Names in scope while a graph is converted.
using Scope = llvm::StringMap<ImportValue>;

/// What a converter sees of one node.
struct NodeContext {
  const onnx::NodeProto &node;
  mlir::OpBuilder &builder;
  mlir::Location loc;
  mlir::Attribute device;
  llvm::StringRef modelDir;
  int64_t opset;
  /// One per node input; null for an omitted optional input ("").
  llvm::SmallVector<mlir::Value> inputs;
  /// The import's symbolic shape computations.
  ShapeTable *shapes = nullptr;
  /// The ranks the model declares for values (graph outputs, value_info).
  const llvm::StringMap<int64_t> *declaredRanks = nullptr;

  /// Builds subgraph `graph` (a GRAPH attribute of the node) in place with
  /// its inputs bound to `inputs`, reading names it does not define from the
  /// node's scope; returns its outputs.
  std::function<mlir::FailureOr<llvm::SmallVector<mlir::Value>>(
      const onnx::GraphProto &graph, mlir::ValueRange inputs)>
      subgraph;

  /// The rank the model declares for output `i`, if it does.
  std::optional<int64_t> declaredRank(int i) const;

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  /// The graph attribute `name` (a subgraph), or null.
  const onnx::GraphProto *graphAttr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t fallback) const;
  float getFloat(llvm::StringRef name, float fallback) const;
  std::string getString(llvm::StringRef name, llvm::StringRef fallback) const;
  /// Creates kiln op `name` with result types inferred from the operands;
  /// fails (with a diagnostic at the node) when they do not fit the op.
  mlir::FailureOr<mlir::Value>
  create(llvm::StringRef name, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attributes = {});
  mlir::LogicalResult error(const llvm::Twine &message) const;
};

using Converter =
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> (*)(NodeContext &);

/// The converter for ONNX op `opType` (prefixed by its domain outside the
/// default one: "ai.onnx.preview.training.Adam"), or null.
Converter findConverter(llvm::StringRef opType);

/// Op type -> converter (Converters.cpp).
using ConverterTable = llvm::StringMap<Converter>;
/// Adds `rows` to `table`; two converters for one op type are a fatal
/// error (a family file repeating another's row).
void addRows(
    ConverterTable &table,
    std::initializer_list<std::pair<llvm::StringLiteral, Converter>> rows);
/// Each op family's rows, in its file of frontend/ops/.
void addAttentionConverters(ConverterTable &table);
void addCol2ImConverters(ConverterTable &table);
void addControlFlowConverters(ConverterTable &table);
void addConvTransposeConverters(ConverterTable &table);
void addDeformConvConverters(ConverterTable &table);
void addEinsumConverters(ConverterTable &table);
void addElementwiseConverters(ConverterTable &table);
void addFlexAttentionConverters(ConverterTable &table);
void addGeneratorsConverters(ConverterTable &table);
void addIndexedConverters(ConverterTable &table);
void addLayoutConverters(ConverterTable &table);
void addLinearConverters(ConverterTable &table);
void addLossesConverters(ConverterTable &table);
void addMlConverters(ConverterTable &table);
void addNonMaxSuppressionConverters(ConverterTable &table);
void addNormalizationConverters(ConverterTable &table);
void addQuantizeConverters(ConverterTable &table);
void addRandomConverters(ConverterTable &table);
void addRecurrentConverters(ConverterTable &table);
void addReductionsConverters(ConverterTable &table);
void addResizeConverters(ConverterTable &table);
void addSelectionConverters(ConverterTable &table);
void addShapesConverters(ConverterTable &table);
void addSlicingConverters(ConverterTable &table);
void addSpectralConverters(ConverterTable &table);
void addStatefulConverters(ConverterTable &table);
void addTrainingConverters(ConverterTable &table);
void addWindowsConverters(ConverterTable &table);

/// Evaluates a node whose inputs are all small integer constants (shape
/// computations) into constants. nullopt: not such a node, convert it.
std::optional<mlir::FailureOr<llvm::SmallVector<mlir::Value>>>
tryFold(NodeContext &c);

/// Builds a subgraph on import values (ops/Sequences.cpp takes these).
using ValueSubgraph = std::function<mlir::FailureOr<ImportValues>(
    const onnx::GraphProto &graph, llvm::ArrayRef<ImportValue> inputs)>;

/// Ops converted on import values rather than tensors: the sequence and
/// optional ops and Loop (ops/Sequences.cpp, ops/Loop.cpp).
bool isStructural(llvm::StringRef opType);

/// Converts a node that takes or gives sequences or optionals, or Loop;
/// `inputs` are the node's inputs (c.inputs holds the tensors among them,
/// null for the rest). nullopt: a tensor node, for the converter table.
std::optional<mlir::FailureOr<ImportValues>>
convertStructural(NodeContext &c, llvm::ArrayRef<ImportValue> inputs,
                  const ValueSubgraph &subgraph);

/// ONNX Loop unrolled over a trip count known at compile time.
mlir::FailureOr<ImportValues> convertLoop(NodeContext &c,
                                          llvm::ArrayRef<ImportValue> inputs,
                                          const ValueSubgraph &subgraph);

/// Ops kiln supports only when they can be folded (tryFold).
bool isOnlyFolded(llvm::StringRef opType);

/// `ints`, all constant, as a constant.
mlir::Value makeInts(NodeContext &c, const SymbolicInts &ints);

/// What `v` holds when it is a shape computation on symbolic dims, else
/// null.
const SymbolicInts *symbolicInts(NodeContext &c, mlir::Value v);

//===----------------------------------------------------------------------===//
// Building blocks for converters (OnnxBuild.cpp); op families beyond the core
// table live in frontend/ops/<Family>.cpp and use these.
//===----------------------------------------------------------------------===//

using Values = llvm::SmallVector<mlir::Value>;

/// {v}, or failure.
mlir::FailureOr<Values> single(mlir::FailureOr<mlir::Value> v);
/// Checks min <= inputs <= max and that the first `min` are present.
mlir::LogicalResult arity(NodeContext &c, size_t min, size_t max);
/// The node's inputs without the omitted optional ones.
llvm::SmallVector<mlir::Value> presentInputs(NodeContext &c);
/// A 1-D shape or axes input of symbolic length (a graph input under
/// symbolic dims) as one of `length` entries, when the model's declared
/// ranks give it: the ops taking it need its length to know their result's
/// rank. The reshape checks the length at run time.
mlir::Value withLength(NodeContext &c, mlir::Value v,
                       std::optional<int64_t> length);
/// An ints attribute, or `fallback` when absent.
std::vector<int64_t> ints(NodeContext &c, llvm::StringRef name,
                          std::vector<int64_t> fallback);
mlir::RankedTensorType typeOf(mlir::Value v);
/// A rank-0 constant of `v`'s element type on the node's device.
mlir::Value scalarLike(NodeContext &c, mlir::Value v, double value);
/// kiln op `name` (binary, broadcasting) of l and r.
mlir::FailureOr<mlir::Value> binaryOp(NodeContext &c, llvm::StringRef name,
                                      mlir::Value l, mlir::Value r);
/// axis in [-rank, rank) made non-negative, or a diagnostic.
mlir::FailureOr<int64_t> normalizeAxis(NodeContext &c, int64_t axis,
                                       int64_t rank);
/// kiln.reduce of `input` (default: the node's first input) over `axes`.
mlir::FailureOr<mlir::Value> reduce(NodeContext &c, llvm::StringRef kind,
                                    std::vector<int64_t> axes, bool keepdims,
                                    mlir::Value input = {});
/// kiln.reshape to `spec` (ONNX Reshape semantics after folding: 0 copies
/// the input's dim, -1 is inferred).
mlir::FailureOr<mlir::Value> reshapeTo(NodeContext &c, mlir::Value input,
                                       llvm::ArrayRef<int64_t> spec);
/// Split of the node's input 0 along `axis` into `outputs` parts, bounds
/// computed at run time: from the sizes in the node's input 1 when given,
/// else equal parts of ceil(n / outputs).
mlir::FailureOr<Values> splitAtRunTime(NodeContext &c, int64_t axis,
                                       int64_t outputs);
/// A reshape to `dims` (a 0 is a dim of size 0), at most one of them
/// symbolic.
mlir::FailureOr<mlir::Value> reshapeToDims(NodeContext &c, mlir::Value input,
                                           llvm::ArrayRef<int64_t> dims);
/// kiln.reshape_to `x` by `spec` (read at run time) in `mode` (reshape,
/// unsqueeze, squeeze, flatten).
mlir::FailureOr<mlir::Value> reshapeBySpec(NodeContext &c, mlir::Value x,
                                           mlir::Value spec,
                                           llvm::StringRef mode);
/// kiln.pad of `x` by `pads` in `mode`, with the optional `value` and `axes`
/// (null when absent).
mlir::FailureOr<mlir::Value> padBy(NodeContext &c, mlir::Value x,
                                   mlir::Value pads, mlir::Value value,
                                   mlir::Value axes, llvm::StringRef mode);
/// kiln.concat of `parts` along `axis`.
mlir::FailureOr<mlir::Value> concatOf(NodeContext &c, mlir::ValueRange parts,
                                      int64_t axis);
/// The node's `axes` attribute (or `fallback`), each made non-negative for
/// `rank`.
mlir::FailureOr<std::vector<int64_t>>
normalizedAxes(NodeContext &c, std::vector<int64_t> fallback, int64_t rank);
/// `x` with a size-1 dim inserted at `axis` (any number of symbolic dims).
mlir::FailureOr<mlir::Value> unsqueezeAt(NodeContext &c, mlir::Value x,
                                         int64_t axis);
/// `pieces` of one shape stacked along a new dim `axis`.
mlir::FailureOr<mlir::Value>
stackAt(NodeContext &c, llvm::ArrayRef<mlir::Value> pieces, int64_t axis);
/// The shape of `x` as a 1-D int64 tensor (read at run time when dynamic).
mlir::FailureOr<mlir::Value> shapeOfValue(NodeContext &c, mlir::Value x);
/// `v` broadcast to the shape of `like` (at run time when that is dynamic).
mlir::FailureOr<mlir::Value> expandLike(NodeContext &c, mlir::Value v,
                                        mlir::Value like);
/// An int64 constant of `shape` holding `values` on the node's device
/// (`name` names the blob when it is large).
mlir::Value int64Constant(NodeContext &c, llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> values,
                          llvm::StringRef name = "ints");
/// kiln.cast of `input` to `to` with the node's saturate attribute (for
/// float8 results); `input` itself when it has that type.
mlir::FailureOr<Values> castTo(NodeContext &c, mlir::Value input,
                               mlir::Type to);
/// Where `x` is NaN (x != x), as a boolean tensor of x's shape.
mlir::FailureOr<mlir::Value> isNaN(NodeContext &c, mlir::Value x);
/// Dim `axis` of `x` as a rank-0 int64 tensor (a constant when static,
/// else read at run time).
mlir::FailureOr<mlir::Value> dimValue(NodeContext &c, mlir::Value x,
                                      int64_t axis);
/// 0, 1, ..., n - 1 for n = dim `axis` of `x`, as an int64 tensor of rank
/// `rank` whose dims are 1 but dim `at` (a constant when n is static, else
/// a kiln.range sized at run time).
mlir::FailureOr<mlir::Value> iotaAlong(NodeContext &c, mlir::Value x,
                                       int64_t axis, int64_t rank, int64_t at);
/// shifted = x - max(x), exp(shifted) and sum(exp(shifted)) over `axes`.
struct Shifted {
  mlir::Value shifted, exp, sum;
};
mlir::FailureOr<Shifted> shiftedExpSum(NodeContext &c, mlir::Value x,
                                       llvm::ArrayRef<int64_t> axes);

// The values of a constant integer or float tensor (any width), or nothing
// when `v` is not a kiln.constant.
template <typename T>
std::optional<std::vector<T>> constantValues(mlir::Value v) {
  auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!constant)
    return std::nullopt;
  mlir::Type element = constant.getType().getElementType();
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  std::vector<T> out;
  auto read = [&](auto tag) {
    using E = decltype(tag);
    for (size_t i = 0; i + sizeof(E) <= bytes.size(); i += sizeof(E)) {
      E e;
      std::memcpy(&e, bytes.data() + i, sizeof(E));
      out.push_back(static_cast<T>(e));
    }
  };
  if (element.isF32())
    read(float());
  else if (element.isF64())
    read(double());
  else if (element.isInteger(64))
    read(int64_t());
  else if (element.isInteger(32))
    read(int32_t());
  else
    return std::nullopt;
  return out;
}

/// The value of a constant tensor of one element (integer, float or bool),
/// or nothing when `v` is not one.
inline std::optional<int64_t> constantScalar(mlir::Value v) {
  auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!constant || constant.getType().getNumElements() != 1)
    return std::nullopt;
  if (auto values = constantValues<int64_t>(v))
    return values->front();
  if (!constant.getType().getElementType().isInteger(1))
    return std::nullopt;
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  return llvm::any_of(bytes, [](char b) { return b != 0; }) ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// Op families in frontend/ops/, each adding its rows to the table.
//===----------------------------------------------------------------------===//

// ops/Attention.cpp
mlir::FailureOr<Values> convertAttention(NodeContext &c);
mlir::FailureOr<Values> convertRMSNormalization(NodeContext &c);
mlir::FailureOr<Values> convertRotaryEmbedding(NodeContext &c);
// ops/Selection.cpp
mlir::FailureOr<Values> convertArgMax(NodeContext &c);
mlir::FailureOr<Values> convertArgMin(NodeContext &c);
mlir::FailureOr<Values> convertTrilu(NodeContext &c);
mlir::FailureOr<Values> convertHardmax(NodeContext &c);
mlir::FailureOr<Values> convertCumSum(NodeContext &c);
mlir::FailureOr<Values> convertCumProd(NodeContext &c);
mlir::FailureOr<Values> convertTopK(NodeContext &c);
mlir::FailureOr<Values> convertUnique(NodeContext &c);

mlir::FailureOr<Values> convertOneHot(NodeContext &c);

mlir::FailureOr<Values> convertLayerNormalization(NodeContext &c);
mlir::FailureOr<Values> convertBatchNormalization(NodeContext &c);
mlir::FailureOr<Values> convertInstanceNormalization(NodeContext &c);
mlir::FailureOr<Values> convertGroupNormalization(NodeContext &c);
mlir::FailureOr<Values> convertMeanVarianceNormalization(NodeContext &c);
mlir::FailureOr<Values> convertLRN(NodeContext &c);
mlir::FailureOr<Values> convertWindow(NodeContext &c);
mlir::FailureOr<Values> convertAffineGrid(NodeContext &c);
// ops/Col2Im.cpp
mlir::FailureOr<Values> convertCol2Im(NodeContext &c);
/// Col2Im of columns `x` [N, C*K, L] into images of sizes `image` with
/// blocks `block` and pads (rank-0 int64 values, read at run time).
mlir::FailureOr<mlir::Value> col2imAtRunTime(
    NodeContext &c, mlir::Value x, llvm::ArrayRef<mlir::Value> image,
    llvm::ArrayRef<mlir::Value> block, llvm::ArrayRef<mlir::Value> padBegin,
    llvm::ArrayRef<mlir::Value> padEnd, llvm::ArrayRef<int64_t> strides,
    llvm::ArrayRef<int64_t> dilations);
// ops/ConvTranspose.cpp
mlir::FailureOr<Values> convertConvTranspose(NodeContext &c);
// ops/Layout.cpp
mlir::FailureOr<Values> convertDepthToSpace(NodeContext &c);
mlir::FailureOr<Values> convertSpaceToDepth(NodeContext &c);
mlir::FailureOr<Values> convertEyeLike(NodeContext &c);
mlir::FailureOr<Values> convertTile(NodeContext &c);
mlir::FailureOr<Values> convertCompress(NodeContext &c);
mlir::FailureOr<Values> convertNonZero(NodeContext &c);
mlir::FailureOr<Values> convertCenterCropPad(NodeContext &c);
mlir::FailureOr<Values> convertReverseSequence(NodeContext &c);
/// `x` with the first lengths[b] steps along `time` reversed in each batch
/// entry b along `batch` (ReverseSequence).
mlir::FailureOr<mlir::Value> reverseByLengths(NodeContext &c, mlir::Value x,
                                              mlir::Value lengths,
                                              int64_t batch, int64_t time);
/// The indices of the true entries of a 1-D bool `condition`, in order, as
/// a 1-D int64 of a length known at run time.
mlir::FailureOr<mlir::Value> trueIndices(NodeContext &c, mlir::Value condition);
// ops/DeformConv.cpp
mlir::FailureOr<Values> convertDeformConv(NodeContext &c);
// ops/Ml.cpp
mlir::FailureOr<Values> convertBinarizer(NodeContext &c);
mlir::FailureOr<Values> convertArrayFeatureExtractor(NodeContext &c);
// ops/Random.cpp
mlir::FailureOr<Values> convertRandomUniform(NodeContext &c);
mlir::FailureOr<Values> convertRandomUniformLike(NodeContext &c);
mlir::FailureOr<Values> convertRandomNormal(NodeContext &c);
mlir::FailureOr<Values> convertRandomNormalLike(NodeContext &c);
mlir::FailureOr<Values> convertBernoulli(NodeContext &c);
/// Dropout in training mode; `training` is the run-time training_mode when
/// it is not a constant true.
mlir::FailureOr<Values> trainingDropout(NodeContext &c, mlir::Value training);
// ops/MaxPoolIndices.cpp
/// MaxPool's Indices output for input `x` and result `y` (static shapes).
mlir::FailureOr<mlir::Value>
maxPoolIndices(NodeContext &c, mlir::Value x, mlir::Value y,
               llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
               llvm::ArrayRef<int64_t> dilations, llvm::ArrayRef<int64_t> pads,
               bool columnMajor);
// ops/NonMaxSuppression.cpp
mlir::FailureOr<Values> convertNonMaxSuppression(NodeContext &c);
mlir::FailureOr<Values> convertRecurrent(NodeContext &c);
mlir::FailureOr<Values> convertDFT(NodeContext &c);
mlir::FailureOr<Values> convertSTFT(NodeContext &c);
mlir::FailureOr<Values> convertDet(NodeContext &c);
// ops/Einsum.cpp
mlir::FailureOr<Values> convertEinsum(NodeContext &c);

mlir::FailureOr<Values> convertScatterElements(NodeContext &c);
mlir::FailureOr<Values> convertScatterND(NodeContext &c);
mlir::FailureOr<Values> convertTensorScatter(NodeContext &c);
mlir::FailureOr<Values> convertGatherND(NodeContext &c);
mlir::FailureOr<Values> convertMaxUnpool(NodeContext &c);
// ops/Resize.cpp
mlir::FailureOr<Values> convertResize(NodeContext &c);
mlir::FailureOr<Values> convertGridSample(NodeContext &c);
// ops/Quantize.cpp
mlir::FailureOr<Values> convertQuantizeLinear(NodeContext &c);
mlir::FailureOr<Values> convertDequantizeLinear(NodeContext &c);
mlir::FailureOr<Values> convertDynamicQuantizeLinear(NodeContext &c);
mlir::FailureOr<Values> convertMatMulInteger(NodeContext &c);
mlir::FailureOr<Values> convertConvInteger(NodeContext &c);
mlir::FailureOr<Values> convertQLinear(NodeContext &c);

/// Conv (ops/Windows.cpp), for ops that build on it.
mlir::FailureOr<Values> convertConv(NodeContext &c);
// ops/ControlFlow.cpp
mlir::FailureOr<Values> convertIf(NodeContext &c);
mlir::FailureOr<Values> convertScan(NodeContext &c);
// ops/Stateful.cpp
mlir::FailureOr<Values> convertCausalConvWithState(NodeContext &c);
mlir::FailureOr<Values> convertLinearAttention(NodeContext &c);
// ops/FlexAttention.cpp
mlir::FailureOr<Values> convertFlexAttention(NodeContext &c);
// ops/Training.cpp
mlir::FailureOr<Values> convertAdagrad(NodeContext &c);
mlir::FailureOr<Values> convertAdam(NodeContext &c);
mlir::FailureOr<Values> convertMomentum(NodeContext &c);
// ops/Losses.cpp
mlir::FailureOr<Values> convertNegativeLogLikelihoodLoss(NodeContext &c);
mlir::FailureOr<Values> convertSoftmaxCrossEntropyLoss(NodeContext &c);

// ops/HalfPrecision.cpp
/// Runs `convert` on a node whose first input is float16, bfloat16 or a
/// float8 with every input of that type cast to f32, and casts its first
/// `narrowResults` f32 results (all when negative) back: the node computes
/// in f32 and rounds once, as torch and onnxruntime compute softmax and the
/// norms of half-precision tensors. Other nodes go to `convert` as they are.
mlir::FailureOr<Values> computeInFloat32(NodeContext &c, Converter convert,
                                         int narrowResults);
/// computeInFloat32 as a converter of the table.
template <Converter Convert, int NarrowResults = -1>
mlir::FailureOr<Values> inFloat32(NodeContext &c) {
  return computeInFloat32(c, Convert, NarrowResults);
}

/// OpTy on the node's one input.
template <typename OpTy> mlir::FailureOr<Values> unary(NodeContext &c) {
  if (mlir::failed(arity(c, 1, 1)))
    return mlir::failure();
  return single(c.create(OpTy::getOperationName(), c.inputs));
}
/// OpTy on exactly the node's N inputs.
template <typename OpTy, size_t N = 2>
mlir::FailureOr<Values> binary(NodeContext &c) {
  if (mlir::failed(arity(c, N, N)))
    return mlir::failure();
  return single(c.create(OpTy::getOperationName(), c.inputs));
}

} // namespace kiln::onnx_import

#endif // KILN_FRONTEND_ONNXOPS_H
