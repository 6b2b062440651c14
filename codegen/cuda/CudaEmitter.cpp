//===- CudaEmitter.cpp - kernels as CUDA C++ for NVRTC --------------------===//
//
// The CUDA flavour of CEmitter: every fill, copy and linalg.generic is a
// phase (its own __global__ function). A generic whose output map is a
// permutation of all its parallel dims runs one thread per output element:
// the thread decomposes its flat index into the parallel dims, loads the
// output once, runs the reduction dims as loops with the accumulator in a
// register and stores once. A long associative reduction with few outputs
// instead gives each output a warp (lanes combine by shuffles) or, when it
// is longer still, a whole block (each warp's result goes through shared
// memory to the first warp). Any other generic (an output map that is not
// one-to-one over the parallel dims) runs its loop nest serially in one
// thread: slow, but correct for whatever linalg allows.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CudaEmitter.h"
#include "codegen/CEmitter.h"
#include "codegen/CppKernel.h"
#include "codegen/Gemm.h"
#include "codegen/cuda/CudaFallback.h"

#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <optional>

using namespace mlir;
using namespace kiln;

namespace {

constexpr const char *kPrelude = R"(// kiln CUDA kernels (NVRTC)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT64_C(c) c##LL
#define NAN __int_as_float(0x7fc00000)
#define INFINITY __int_as_float(0x7f800000)
// NaN-propagating max/min, as arith.maximumf/minimumf (and torch) define them.
template <typename T> __device__ inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
// The bits of x as a T of the same size (arith.bitcast).
template <typename T, typename F> __device__ inline T kiln_bitcast(F x) { T t; memcpy(&t, &x, sizeof(T)); return t; }
template <typename T> __device__ inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
// Unsigned max/min of values kept in signed types (warp reductions).
__device__ inline int kiln_umax(int a, int b) { return (unsigned)a > (unsigned)b ? a : b; }
__device__ inline long long kiln_umax(long long a, long long b) { return (unsigned long long)a > (unsigned long long)b ? a : b; }
__device__ inline int kiln_umin(int a, int b) { return (unsigned)a < (unsigned)b ? a : b; }
__device__ inline long long kiln_umin(long long a, long long b) { return (unsigned long long)a < (unsigned long long)b ? a : b; }
)";

struct Combiner;

/// Warp reductions pay off from this many reduction iterations per output,
/// and only while outputs are too few to fill the GPU one thread each.
constexpr int64_t kWarpMinTrips = 32;
constexpr int64_t kWarpMaxOutputs = 32768;
/// A block per output (kCudaBlockSize lanes) from this many iterations, 4
/// per lane, while the outputs' blocks are too few to fill an H200's 132
/// multiprocessors a few times over.
constexpr int64_t kBlockMinTrips = 4 * kCudaBlockSize;
constexpr int64_t kBlockMaxOutputs = 2048;
/// The most scratch a cuDNN conv's workspace takes (an algorithm needing
/// more is not chosen).
constexpr int64_t kCudnnWorkspaceMax = int64_t(32) << 20;

std::optional<nlohmann::json>
cublasGemm(linalg::GenericOp op, function_ref<nlohmann::json(Value)> slot);
std::optional<ConvMatch> libraryConv(linalg::GenericOp op);

class CudaEmitter : public CEmitter {
public:
  explicit CudaEmitter(KernelOp kernel) : CEmitter(kernel, kCudaStyle) {}
  FailureOr<CudaKernel> emit(StringRef symbol);

private:
  struct Phase {
    int64_t threads;
    std::string text;
    nlohmann::json library; // {"gemm": ...} or {"conv": ...}, or null
  };
  raw_ostream &decls() override { return declOs; }
  raw_ostream &body() override { return *phaseOs; }
  void declareBuffer(RankedTensorType type, const std::string &name,
                     const std::string &) override {
    size_t slot = numArgs + scratch.size();
    Type element = type.getElementType();
    int64_t bytes =
        element.isIndex() ? 8 : (element.getIntOrFloatBitWidth() + 7) / 8;
    scratch.push_back(type.getNumElements() * bytes);
    declOs << llvm::formatv("  {0} *__restrict__ {1} = ({0} *)s.p[{2}];\n",
                            typeName(type.getElementType()), name, slot);
    slotOf[name] = slot;
  }
  /// Splits the flat index `var` into the generic's dims of kind `kind`,
  /// row-major in dim order (`const idx dK = var % size; var /= size;`).
  void splitIndex(raw_ostream &os, StringRef var, linalg::GenericOp op,
                  utils::IteratorType kind, StringRef indent) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    auto iterators = op.getIteratorTypesArray();
    for (int64_t d = ranges.size() - 1; d >= 0; --d)
      if (iterators[d] == kind)
        os << llvm::formatv("{3}const {2} d{0} = {4} % {1};\n"
                            "{3}{4} /= {1};\n",
                            d, ranges[d], idx, indent, var);
  }
  raw_ostream &beginPhase(int64_t threads) {
    phases.push_back({threads, "", nullptr});
    phaseStream =
        std::make_unique<llvm::raw_string_ostream>(phases.back().text);
    phaseOs = phaseStream.get();
    return *phaseOs;
  }
  void emitFill(RankedTensorType type, const std::string &,
                const std::string &out, const std::string &value) override {
    beginPhase(type.getNumElements())
        << llvm::formatv("    {0}[i] = {1};\n", out, value);
  }
  void emitCopy(const std::string &to, const std::string &from,
                RankedTensorType type, const std::string &) override {
    beginPhase(type.getNumElements())
        << llvm::formatv("    {0}[i] = {1}[i];\n", to, from);
  }
  void emitSliceCopy(const SliceCopy &copy) override {
    // A thread per element: j along the block, then the loops' indices from
    // the innermost out.
    // (Kernels on a cuda device have static shapes.)
    raw_ostream &os = beginPhase(copy.source.getNumElements());
    os << "    // tensor.insert_slice: " << copy.count << " elements a block\n";
    os << llvm::formatv("    {0} r = i / ({1}), j = i % ({1});\n", idx,
                        copy.count);
    std::string to = copy.offset + " + j", from = "j";
    for (int64_t k = copy.outer.size() - 1; k >= 0; --k) {
      os << llvm::formatv("    {0} s{1} = r % ({2});\n    r /= ({2});\n", idx,
                          k, copy.outer[k]);
      to += llvm::formatv(" + s{0} * ({1})", k, copy.toStrides[k]).str();
      from += llvm::formatv(" + s{0} * ({1})", k, copy.fromStrides[k]).str();
    }
    os << llvm::formatv("    (void)r;\n    {0}[{1}] = {2}[{3}];\n", copy.to, to,
                        copy.from, from);
  }
  LogicalResult emitGenericLoops(linalg::GenericOp op) override;
  /// A zero fill that only initialises a library launch: the launch
  /// overwrites instead (beta 0).
  bool defersFill(linalg::FillOp fill) override {
    if (!fill.getResult(0).hasOneUse())
      return false;
    auto user = dyn_cast<linalg::GenericOp>(*fill->getUsers().begin());
    if (!user || zeroFillOf(user) != fill)
      return false;
    auto noSlot = [](Value) { return nlohmann::json(0); };
    return (gemmLibrary && cublasGemm(user, noSlot)) ||
           (convLibrary && libraryConv(user));
  }
  /// `op` with `lanes` threads (a warp, 32, or a block, kCudaBlockSize) per
  /// output, folding their partial results with `combiner`.
  LogicalResult emitLaneReduction(linalg::GenericOp op,
                                  const struct Combiner &combiner,
                                  int64_t lanes);
  /// A direct 2-D conv cuDNN can run (codegen/Gemm.h's matchLibraryConv):
  /// the launch's description, with a workspace scratch slot of its own.
  std::optional<nlohmann::json> cudnnConv(linalg::GenericOp op);
  /// The zero pad of the planes `pad` is when its one user is a library conv
  /// and it pads as cuDNN can (the same before and after): the conv then
  /// reads the pad's input, padding it itself, and the pad is not emitted.
  std::optional<cpp::PadMatch> absorbablePad(linalg::GenericOp pad);
  bool absorbed(Operation *op) override {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    return generic && (absorbablePad(generic) || fusedEpilogues.count(op));
  }
  /// The elementwise ops that cuDNN's fused convs compute.
  llvm::SmallPtrSet<Operation *, 4> fusedEpilogues;

public:
  bool warpReductions = true;
  bool gemmLibrary = true;
  bool convLibrary = true;
  bool convFusion = true;
  bool libraryFallbacks = true;

private:
  size_t numArgs = 0;
  std::map<std::string, size_t> slotOf; // buffer name -> slot
  /// The type of loop indices: 32-bit (cheaper division on GPUs) when every
  /// tensor of the kernel and every launch fits, else 64-bit.
  const char *idx = "int64_t";
  std::vector<int64_t> scratch;
  std::vector<Phase> phases;
  std::string declText;
  llvm::raw_string_ostream declOs{declText};
  std::unique_ptr<llvm::raw_string_ostream> phaseStream;
  raw_ostream *phaseOs = nullptr;
};

/// Whether the output map names every parallel dim once and otherwise holds
/// only constants.
bool oneThreadPerOutput(linalg::GenericOp op) {
  AffineMap out = op.getIndexingMapsArray().back();
  auto iterators = op.getIteratorTypesArray();
  llvm::SmallBitVector seen(iterators.size());
  for (AffineExpr e : out.getResults()) {
    if (isa<AffineConstantExpr>(e))
      continue; // a fixed index (a kept size-1 dim) is one-to-one too
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || seen.test(dim.getPosition()) ||
        iterators[dim.getPosition()] != utils::IteratorType::parallel)
      return false;
    seen.set(dim.getPosition());
  }
  for (auto [d, it] : llvm::enumerate(iterators))
    if (it == utils::IteratorType::parallel && !seen.test(d))
      return false;
  return true;
}

/// A reduction whose body folds each iteration into the accumulator with one
/// associative op can be split over the lanes of a warp: how to combine two
/// partial results (`{a}`, `{b}`) and the op's identity, in CUDA C.
struct Combiner {
  std::string expr;
  std::string identity;
};

std::optional<Combiner> warpCombiner(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  BlockArgument acc = body.getArguments().back();
  Type t = acc.getType();
  if (!acc.hasOneUse() ||
      !(t.isF32() || t.isF64() || t.isInteger(32) || t.isInteger(64)))
    return std::nullopt;
  Operation *fold = *acc.getUsers().begin();
  if (fold->getNumOperands() != 2 || fold->getNumResults() != 1 ||
      body.getTerminator()->getOperand(0) != fold->getResult(0))
    return std::nullopt;
  bool isFloat = isa<FloatType>(t);
  std::string lowest =
      isFloat ? "-INFINITY"
              : (t.isInteger(32) ? "(-2147483647 - 1)"
                                 : "(-INT64_C(9223372036854775807) - 1)");
  std::string highest =
      isFloat
          ? "INFINITY"
          : (t.isInteger(32) ? "2147483647" : "INT64_C(9223372036854775807)");
  return llvm::TypeSwitch<Operation *, std::optional<Combiner>>(fold)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) {
        return Combiner{"{a} + {b}", "0"};
      })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) {
        return Combiner{"{a} * {b}", "1"};
      })
      .Case<arith::MaximumFOp, arith::MaxSIOp>([&](auto) {
        return Combiner{"kiln_maximum({a}, {b})", lowest};
      })
      .Case<arith::MinimumFOp, arith::MinSIOp>([&](auto) {
        return Combiner{"kiln_minimum({a}, {b})", highest};
      })
      .Case<arith::MaxUIOp>([](auto) {
        return Combiner{"kiln_umax({a}, {b})", "0"};
      })
      .Case<arith::MinUIOp>([](auto) {
        return Combiner{"kiln_umin({a}, {b})", "-1"};
      })
      // fmax/fmin ignore a NaN operand: NaN is their identity.
      .Case<arith::MaxNumFOp>([](auto) {
        return Combiner{"fmax({a}, {b})", "NAN"};
      })
      .Case<arith::MinNumFOp>([](auto) {
        return Combiner{"fmin({a}, {b})", "NAN"};
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::string combine(const Combiner &c, const std::string &a,
                    const std::string &b) {
  std::string e = c.expr;
  e.replace(e.find("{a}"), 3, a);
  e.replace(e.find("{b}"), 3, b);
  return e;
}

LogicalResult CudaEmitter::emitLaneReduction(linalg::GenericOp op,
                                             const Combiner &combiner,
                                             int64_t lanes) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto iterators = op.getIteratorTypesArray();
  int64_t outputs = 1, trips = 1;
  for (auto [d, it] : llvm::enumerate(iterators))
    (it == utils::IteratorType::parallel ? outputs : trips) *= ranges[d];
  bool block = lanes > 32;
  // Threads are a multiple of the block size, so every thread of a block
  // takes the grid-stride loop equally often: __syncthreads is uniform.
  raw_ostream &os = beginPhase(outputs * lanes);
  os << "    // linalg.generic: " << iteratorList(op) << " (one "
     << (block ? "block" : "warp") << " per output)\n";
  os << "    const int lane = (int)(i & 31);\n";
  if (block)
    os << llvm::formatv("    const int warp = (int)((i & {0}) >> 5);\n",
                        lanes - 1);
  os << llvm::formatv("    {0} r = i >> {1};\n", idx, llvm::Log2_64(lanes));
  splitIndex(os, "r", op, utils::IteratorType::parallel, "    ");
  Value result = op.getResult(0);
  std::string type = typeName(getElementTypeOrSelf(result.getType()));
  std::string acc = fresh("acc");
  os << llvm::formatv("    {0} {1} = {2};\n", type, acc, combiner.identity);
  std::string first =
      block ? llvm::formatv("(int)(i & {0})", lanes - 1).str() : "lane";
  os << llvm::formatv("    for ({1} q = {2}; q < {0}; q += {3}) {{\n", trips,
                      idx, first, lanes);
  os << "      " << idx << " rq = q;\n";
  splitIndex(os, "rq", op, utils::IteratorType::reduction, "      ");
  if (failed(emitGenericBody(op, "      ", acc)))
    return failure();
  os << "    }\n";
  auto shuffle = [&](int64_t from, StringRef indent) {
    os << indent
       << llvm::formatv("for (int offset = {0}; offset > 0; "
                        "offset >>= 1)\n",
                        from);
    os << indent << "  " << acc << " = "
       << combine(combiner, acc,
                  "__shfl_down_sync(0xffffffffu, " + acc + ", offset)")
       << ";\n";
  };
  shuffle(16, "    ");
  std::string out = bufferFor(result) + "[" +
                    index(result, op.getIndexingMapsArray().back()) + "]";
  if (!block) {
    os << "    if (lane == 0)\n      " << out << " = "
       << combine(combiner, out, acc) << ";\n";
    return success();
  }
  // Each warp's result to shared memory; the first warp folds them.
  int64_t warps = lanes / 32;
  std::string partial = fresh("partial");
  os << llvm::formatv("    __shared__ {0} {1}[{2}];\n", type, partial, warps);
  os << llvm::formatv("    if (lane == 0)\n      {0}[warp] = {1};\n", partial,
                      acc);
  os << "    __syncthreads();\n";
  os << "    if (warp == 0) {\n";
  os << llvm::formatv("      {0} = lane < {1} ? {2}[lane] : {3};\n", acc, warps,
                      partial, combiner.identity);
  shuffle(warps / 2, "      ");
  os << "      if (lane == 0)\n        " << out << " = "
     << combine(combiner, out, acc) << ";\n";
  os << "    }\n";
  // The partials are read before the next output's overwrite them.
  os << "    __syncthreads();\n";
  return success();
}

/// Whether a library launch computing `op` may overwrite its output (beta
/// 0): the init is uninitialised or a zero fill left to it (defersFill).
bool overwrites(linalg::GenericOp op) {
  return op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() || zeroFillOf(op);
}

/// A contraction cuBLAS can run (codegen/Gemm.h) with static sizes below
/// 2^31: the launch's description, with `slot` naming its buffers.
std::optional<nlohmann::json>
cublasGemm(linalg::GenericOp op, function_ref<nlohmann::json(Value)> slot) {
  std::optional<GemmMatch> g = matchGemm(op);
  // A strided batch has one stride per operand: an operand shared by only
  // some batch dims runs as loops.
  if (!g || g->sharedLeadA || g->sharedLeadB)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  const int64_t limit = int64_t(1) << 31;
  auto size = [&](ArrayRef<unsigned> dims) -> std::optional<int64_t> {
    int64_t n = 1;
    for (unsigned d : dims) {
      if (ShapedType::isDynamic(ranges[d]))
        return std::nullopt;
      n *= ranges[d];
    }
    if (n >= limit)
      return std::nullopt;
    return n;
  };
  auto batches = size(g->batch), M = size(g->m), N = size(g->n), K = size(g->k);
  if (!batches || !M || !N || !K)
    return std::nullopt;
  return nlohmann::json{{"dtype", g->element.isF64() ? "f64" : "f32"},
                        {"batch", *batches},
                        {"m", *M},
                        {"n", *N},
                        {"k", *K},
                        {"trans_a", g->transA},
                        {"trans_b", g->transB},
                        {"stride_a", g->batchedA ? *M * *K : 0},
                        {"stride_b", g->batchedB ? *K * *N : 0},
                        {"stride_c", *M * *N},
                        {"beta", overwrites(op) ? 0 : 1},
                        {"a", slot(op.getDpsInputs()[g->a])},
                        {"b", slot(op.getDpsInputs()[1 - g->a])},
                        {"c", slot(op.getResult(0))}};
}

/// A direct 2-D conv cuDNN can run (codegen/Gemm.h's matchLibraryConv)
/// with every tensor under 2^31 elements.
std::optional<ConvMatch> libraryConv(linalg::GenericOp op) {
  std::optional<ConvMatch> c = matchLibraryConv(op);
  const int64_t limit = int64_t(1) << 31;
  if (c)
    for (Value v :
         {op.getDpsInputs()[0], op.getDpsInputs()[1], op.getResult(0)})
      if (cast<RankedTensorType>(v.getType()).getNumElements() >= limit)
        return std::nullopt;
  return c;
}

std::optional<cpp::PadMatch> CudaEmitter::absorbablePad(linalg::GenericOp pad) {
  if (!convLibrary || !pad || !pad->hasOneUse())
    return std::nullopt;
  auto user = dyn_cast<linalg::GenericOp>(*pad->getUsers().begin());
  if (!user || user.getDpsInputs()[0] != pad.getResult(0) || !libraryConv(user))
    return std::nullopt;
  std::optional<cpp::PadMatch> match = cpp::planePad(pad);
  if (!match || !matchPattern(match->value, m_PosZeroFloat()))
    return std::nullopt;
  auto in = cast<RankedTensorType>(match->input.getType());
  auto out = cast<RankedTensorType>(pad.getResult(0).getType());
  for (int64_t i : {2, 3})
    if (out.getDimSize(i) - in.getDimSize(i) - match->begin[i] !=
        match->begin[i])
      return std::nullopt;
  return match;
}

std::optional<nlohmann::json> CudaEmitter::cudnnConv(linalg::GenericOp op) {
  std::optional<ConvMatch> c = libraryConv(op);
  if (!c)
    return std::nullopt;
  // The input, or what its absorbed pad pads (cuDNN pads it instead).
  Value x = op.getDpsInputs()[0];
  int64_t pads[2] = {0, 0};
  if (auto pad = x.getDefiningOp<linalg::GenericOp>())
    if (std::optional<cpp::PadMatch> match = absorbablePad(pad)) {
      x = match->input;
      pads[0] = match->begin[2];
      pads[1] = match->begin[3];
    }
  // A bias + ReLU (+ residual) after the conv runs in the same cuDNN call
  // when the conv's result goes nowhere else and the operands do not share
  // the output's memory.
  std::optional<ConvEpilogue> epilogue;
  if (convFusion && overwrites(op))
    epilogue = matchConvEpilogue(op);
  if (epilogue) {
    std::string y = bufferFor(epilogue->op.getResult(0));
    if (bufferFor(epilogue->bias) == y ||
        (epilogue->z && bufferFor(epilogue->z) == y))
      epilogue.reset();
  }
  Value y = epilogue ? epilogue->op.getResult(0) : op.getResult(0);
  if (epilogue)
    fusedEpilogues.insert(epilogue->op);
  else
    copyInit(op.getDpsInits()[0], op.getResult(0));
  size_t xSlot = slotOf.at(bufferFor(x)),
         wSlot = slotOf.at(bufferFor(op.getDpsInputs()[1])),
         ySlot = slotOf.at(bufferFor(y));
  auto in = cast<RankedTensorType>(x.getType());
  auto weight = cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  auto out = cast<RankedTensorType>(op.getResult(0).getType());
  // The workspace: at most what im2col would take (the GEMM path's scratch),
  // capped at kCudnnWorkspaceMax; cuDNN's fastest algorithm that fits runs.
  int64_t columns = in.getDimSize(0) * weight.getNumElements() /
                    weight.getDimSize(0) * c->groups * out.getDimSize(2) *
                    out.getDimSize(3) * 4;
  int64_t workspace = std::min(columns, kCudnnWorkspaceMax);
  size_t slot = numArgs + scratch.size();
  scratch.push_back(workspace);
  auto dims = [](RankedTensorType t) {
    return nlohmann::json(t.getShape().vec());
  };
  nlohmann::json conv{{"dtype", "f32"},
                      {"x_shape", dims(in)},
                      {"w_shape", dims(weight)},
                      {"y_shape", dims(out)},
                      {"pads", {pads[0], pads[1]}},
                      {"strides", {c->strides[0], c->strides[1]}},
                      {"dilations", {c->dilations[0], c->dilations[1]}},
                      {"groups", c->groups},
                      {"beta", overwrites(op) ? 0 : 1},
                      {"x", xSlot},
                      {"w", wSlot},
                      {"y", ySlot},
                      {"workspace", slot},
                      {"workspace_bytes", workspace}};
  if (epilogue) {
    conv["bias"] = slotOf.at(bufferFor(epilogue->bias));
    if (epilogue->z)
      conv["z"] = slotOf.at(bufferFor(epilogue->z));
    conv["activation"] = "relu";
  }
  return conv;
}

LogicalResult CudaEmitter::emitGenericLoops(linalg::GenericOp op) {
  // Before declareOperands: a conv may read its pad's input instead.
  if (convLibrary)
    if (std::optional<nlohmann::json> conv = cudnnConv(op)) {
      phases.push_back({0, "", {{"conv", *conv}}});
      return success();
    }
  declareOperands(op);
  if (gemmLibrary) {
    auto slot = [&](Value v) -> nlohmann::json {
      return slotOf.at(bufferFor(v));
    };
    if (std::optional<nlohmann::json> gemm = cublasGemm(op, slot)) {
      phases.push_back({0, "", {{"gemm", *gemm}}});
      return success();
    }
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto iterators = op.getIteratorTypesArray();
  bool parallel = oneThreadPerOutput(op);
  int64_t threads = 1, trips = 1;
  for (auto [d, it] : llvm::enumerate(iterators))
    (it == utils::IteratorType::parallel ? threads : trips) *= ranges[d];
  // Few outputs with long reductions leave most of the GPU idle: give each
  // output a warp, or for the longest a block, instead of a thread.
  if (parallel && warpReductions && trips >= kWarpMinTrips &&
      threads <= kWarpMaxOutputs)
    if (std::optional<Combiner> combiner = warpCombiner(op))
      return emitLaneReduction(op, *combiner,
                               trips >= kBlockMinTrips &&
                                       threads <= kBlockMaxOutputs
                                   ? kCudaBlockSize
                                   : 32);
  if (!parallel)
    threads = 1;
  raw_ostream &os = beginPhase(threads);
  os << "    // linalg.generic: " << iteratorList(op)
     << (parallel ? "" : " (serial: the output map is not one-to-one)") << "\n";
  std::string indent = "    ";
  if (parallel) {
    os << "    " << idx << " r = i;\n";
    splitIndex(os, "r", op, utils::IteratorType::parallel, "    ");
    os << "    (void)r;\n";
  }
  bool reduces = !parallel || llvm::any_of(iterators, [](auto it) {
    return it == utils::IteratorType::reduction;
  });
  std::string acc;
  Value result = op.getResult(0);
  std::string out = bufferFor(result);
  std::string outIndex = index(result, op.getIndexingMapsArray().back());
  if (parallel && reduces) {
    acc = fresh("acc");
    os << llvm::formatv("    {0} {1} = {2}[{3}];\n",
                        typeName(getElementTypeOrSelf(result.getType())), acc,
                        out, outIndex);
  }
  unsigned loops = 0;
  for (auto [d, it] : llvm::enumerate(iterators)) {
    if (parallel && it == utils::IteratorType::parallel)
      continue;
    os << indent
       << llvm::formatv("for ({2} d{0} = 0; d{0} < {1}; ++d{0}) {{\n", d,
                        ranges[d], idx);
    indent += "  ";
    ++loops;
  }
  if (failed(emitGenericBody(op, indent, acc)))
    return failure();
  for (; loops; --loops) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  if (!acc.empty())
    os << llvm::formatv("    {0}[{1}] = {2};\n", out, outIndex, acc);
  return success();
}

FailureOr<CudaKernel> CudaEmitter::emit(StringRef symbol) {
  Block &block = kernel.getBody().front();
  // Launches are at most 32x a tensor's elements (a warp per output), or
  // kBlockMaxOutputs blocks.
  constexpr int64_t kInt32Limit = (int64_t(1) << 31) / 64;
  bool small = true;
  auto fits = [&](Type t) {
    if (auto tensor = dyn_cast<RankedTensorType>(t))
      small &= tensor.getNumElements() < kInt32Limit;
  };
  kernel.walk([&](Operation *op) {
    llvm::for_each(op->getOperandTypes(), fits);
    llvm::for_each(op->getResultTypes(), fits);
  });
  for (Type t : block.getArgumentTypes())
    small &= cast<RankedTensorType>(t).getNumElements() < kInt32Limit;
  idx = small ? "int" : "int64_t";
  SmallVector<std::string> inputs, outputs;
  for (BlockArgument arg : block.getArguments()) {
    std::string name = "in" + std::to_string(arg.getArgNumber());
    declOs << llvm::formatv(
        "  const {0} *__restrict__ {1} = (const {0} *)s.p[{2}];\n",
        typeName(cast<RankedTensorType>(arg.getType()).getElementType()), name,
        numArgs);
    slotOf[name] = numArgs++;
    inputs.push_back(name);
  }
  for (auto [j, type] : llvm::enumerate(kernel.getResultTypes())) {
    std::string name = "out" + std::to_string(j);
    declOs << llvm::formatv(
        "  {0} *__restrict__ {1} = ({0} *)s.p[{2}];\n",
        typeName(cast<RankedTensorType>(type).getElementType()), name, numArgs);
    slotOf[name] = numArgs++;
    outputs.push_back(name);
  }
  if (failed(emitOps(inputs, outputs)))
    return failure();

  CudaKernel result;
  result.slots = numArgs + scratch.size();
  result.scratch = scratch;
  std::string &text = result.source;
  llvm::raw_string_ostream os(text);
  os << "// kiln kernel " << symbol << ", from " << kernel.getLoc() << "\n";
  os << llvm::formatv("struct {0}_slots {{ void *p[{1}]; };\n", symbol,
                      std::max<size_t>(result.slots, 1));
  // A __global__ function over `threads` threads; `declare`: with the
  // kernel's typed buffer pointers.
  auto entryPoint = [&](size_t p, int64_t threads, const std::string &body,
                        bool declare) {
    std::string entry = (symbol + "_p" + Twine(p)).str();
    os << llvm::formatv("extern \"C\" __global__ void __launch_bounds__({0}) "
                        "{1}({2}_slots s) {{\n",
                        kCudaBlockSize, entry, symbol);
    if (declare)
      os << declText;
    os << "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; "
          "i < "
       << threads << "; i += (int64_t)gridDim.x * blockDim.x) {\n";
    os << body << "  }\n}\n";
    return nlohmann::json{{"entry", entry}, {"threads", threads}};
  };
  for (auto [p, phase] : llvm::enumerate(phases)) {
    if (phase.library.is_null()) {
      result.launches.push_back(entryPoint(p, phase.threads, phase.text, true));
      continue;
    }
    nlohmann::json launch = phase.library;
    if (libraryFallbacks) {
      CudaFallback f = launch.contains("gemm") ? gemmFallback(launch["gemm"])
                                               : convFallback(launch["conv"]);
      launch.update(entryPoint(p, f.threads, f.text, false));
    }
    result.launches.push_back(launch);
  }
  result.usesHalf = text.find("__half") != std::string::npos;
  return result;
}
} // namespace

std::string kiln::cudaPrelude(bool half) {
  return std::string(half ? "#include <cuda_fp16.h>\n" : "") + kPrelude +
         narrowFloatFunctions("__device__ inline", kCudaStyle);
}

FailureOr<CudaKernel> kiln::emitKernelCuda(KernelOp kernel, StringRef symbol,
                                           const CudaOptions &options) {
  if (failed(checkElementTypes(kernel, kCudaStyle, "CUDA")))
    return failure();
  SmallVector<Type> types(kernel->getOperandTypes());
  llvm::append_range(types, kernel->getResultTypes());
  for (Type type : types)
    if (!cast<RankedTensorType>(type).hasStaticShape())
      return kernel.emitOpError()
             << "has the dynamic type " << type
             << ", which the CUDA backend does not support yet; bind the "
                "symbolic input dims at compile time (kilnc --input-shape "
                "NAME=D0xD1...)";
  CudaEmitter emitter(kernel);
  emitter.warpReductions = options.warpReductions;
  emitter.gemmLibrary = options.gemmLibrary;
  emitter.convLibrary = options.convLibrary;
  emitter.convFusion = options.convFusion;
  emitter.libraryFallbacks = options.libraryFallbacks;
  return emitter.emit(symbol);
}
