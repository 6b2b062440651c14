//===- CppEmitter.cpp - kernels as C++ functions for the CPU --------------===//
//
// One function per kernel, `extern "C" void SYMBOL(void **buffers)`; every
// linalg op becomes a loop nest over its loop ranges in the generic's
// dimension order, and local tensors live on the heap. A kernel with dynamic
// dims also gets `extern "C" const char *SYMBOL_dims(int64_t *dims, void
// *const *inputs)`, which computes its outputs' dims from its inputs' dims
// and data (shapes given as tensors) and checks that they agree,
// and reads all of them from `buffers[N]` (N: the number of arguments).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CEmitter.h"
#include "codegen/Gemm.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace kiln;

std::string kiln::cppType(Type t) { return cTypeName(t, kCppStyle); }

namespace {

/// Loops with fewer iterations than this run on one thread.
constexpr int64_t kParallelWork = 32768;

constexpr const char *kPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <algorithm>
#include <map>
#include <new>
#include <omp.h>

namespace {
// NaN-propagating max/min, as arith.maximumf/minimumf (and torch) define them.
template <typename T> inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
// The bits of x as a T of the same size (arith.bitcast).
template <typename T, typename F> inline T kiln_bitcast(F x) { return __builtin_bit_cast(T, x); }
template <typename T> inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }

// f32 exp and erf without branches or calls, so that loops over them
// vectorize (with -fno-trapping-math); NaN in, NaN out.
inline float kiln_pow2i(int32_t n) { return __builtin_bit_cast(float, (n + 127) << 23); }
// exp(x) = 2^n e^r with n = round(x log2(e)) and r = x - n ln(2), ln(2) in
// two parts; e^r by Cephes' polynomial; 2^n applied in two halves so that
// subnormal results come out right. Within 1 ulp of exp.
inline float kiln_expf(float x) {
  float c = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float n = std::floor(c * 1.44269504088896341f + 0.5f);
  float r = c - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t k = static_cast<int32_t>(n), h = k / 2;
  float y = p * kiln_pow2i(h) * kiln_pow2i(k - h);
  return x != x ? x : y;
}
// erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (the rational approximation of
// Eigen and XLA), +-1 beyond; within 6 ulp of erf.
inline float kiln_erff(float x) {
  float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  float x2 = c * c;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  float y = c * p / q;
  return x != x ? x : y;
}
} // namespace

// A kernel's local tensors. Blocks go back to a per-thread cache and are
// reused by the next request they fit (with at most half to spare), so a
// model run again touches no fresh pages; big blocks would otherwise be
// mmap'ed and faulted in on every call.
struct kiln_scratch_cache {
  std::multimap<size_t, void *> free;
  ~kiln_scratch_cache() {
    for (auto &block : free)
      std::free(block.second);
  }
};
inline kiln_scratch_cache &kiln_scratch_blocks() {
  thread_local kiln_scratch_cache cache;
  return cache;
}
struct kiln_scratch {
  explicit kiln_scratch(size_t bytes) : size((bytes + 63) / 64 * 64) {
    std::multimap<size_t, void *> &free = kiln_scratch_blocks().free;
    auto it = free.lower_bound(size);
    if (it != free.end() && it->first <= 2 * size) {
      size = it->first;
      data = it->second;
      free.erase(it);
    } else if (!(data = std::aligned_alloc(64, size))) {
      throw std::bad_alloc();
    }
  }
  ~kiln_scratch() { kiln_scratch_blocks().free.emplace(size, data); }
  kiln_scratch(const kiln_scratch &) = delete;
  kiln_scratch &operator=(const kiln_scratch &) = delete;
  size_t size;
  void *data = nullptr;
};

// OpenMP's worker threads outlive a parallel loop: the runtime must stay
// loaded when this code is unloaded, or the idle threads crash the process.
static const bool kiln_openmp_pinned =
    dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;

// oneDNN's row-major sgemm, dlopen'ed once per process ($KILN_DNNL names the
// library; "none" turns it off), or null: then kernels run their own loops.
typedef int (*kiln_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                             const float *, int64_t, float, float *, int64_t);
inline kiln_sgemm_fn kiln_dnnl_sgemm() {
  static const kiln_sgemm_fn fn = []() -> kiln_sgemm_fn {
    const char *env = std::getenv("KILN_DNNL");
    if (env && !std::strcmp(env, "none"))
      return nullptr;
    const char *names[] = {env && *env ? env : "libdnnl.so.3", "libdnnl.so.2"};
    for (const char *name : names)
      if (void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))
        if (void *sym = dlsym(lib, "dnnl_sgemm"))
          return reinterpret_cast<kiln_sgemm_fn>(sym);
    return nullptr;
  }();
  return fn;
}

// C[i] = A[i] * B (+ C[i] when accumulating) for every batch i, with A
// row-major [m, k] and B packed as [ceil(n / 16)][k][16] panels (zero past
// n): threads share out the panels, each streamed once per 4 rows of A.
// False, having written nothing, when m is above max_rows, or 1 (oneDNN's
// matrix-vector product streams B as fast).
typedef float kiln_v8 __attribute__((vector_size(32)));
inline kiln_v8 kiln_load8(const float *p) {
  kiln_v8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <int R>
inline void kiln_packed_rows(int64_t k, const float *__restrict a, const float *__restrict b,
                             float *__restrict c, int64_t ldc, int64_t width, bool accumulate) {
  kiln_v8 s[R][2];
  for (int i = 0; i < R; ++i)
    s[i][0] = s[i][1] = kiln_v8{};
  for (int64_t x = 0; x < k; ++x) {
    kiln_v8 b0 = kiln_load8(b + x * 16), b1 = kiln_load8(b + x * 16 + 8);
    for (int i = 0; i < R; ++i) {
      float v = a[i * k + x];
      s[i][0] += v * b0;
      s[i][1] += v * b1;
    }
  }
  for (int i = 0; i < R; ++i) {
    float row[16];
    __builtin_memcpy(row, &s[i][0], sizeof(kiln_v8));
    __builtin_memcpy(row + 8, &s[i][1], sizeof(kiln_v8));
    for (int64_t j = 0; j < width; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + row[j] : row[j];
  }
}
inline bool kiln_sgemm_packed(int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t strideA, const float *packed, float *c, bool accumulate,
                              int64_t max_rows) {
  if (m > max_rows || m == 1)
    return false;
  const int64_t panels = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (batch * m * n * k >= 32768)
  for (int64_t t = 0; t < batch * panels; ++t) {
    const int64_t i = t / panels, j = t % panels, width = std::min<int64_t>(16, n - j * 16);
    const float *b = packed + j * k * 16;
    for (int64_t r = 0; r < m; r += 4) {
      const float *ar = a + i * strideA + r * k;
      float *cr = c + (i * m + r) * n + j * 16;
      switch (std::min<int64_t>(4, m - r)) {
      case 4: kiln_packed_rows<4>(k, ar, b, cr, n, width, accumulate); break;
      case 3: kiln_packed_rows<3>(k, ar, b, cr, n, width, accumulate); break;
      case 2: kiln_packed_rows<2>(k, ar, b, cr, n, width, accumulate); break;
      default: kiln_packed_rows<1>(k, ar, b, cr, n, width, accumulate); break;
      }
    }
  }
  return true;
}

// C[i] = A[i] * B[i] (+ C[i] when accumulating) for every batch i
// (row-major; A is [k, m] when transposed, B [n, k]); false, having written
// nothing, without a library.
inline bool kiln_sgemm(int64_t batch, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                       const float *a, int64_t strideA, const float *b, int64_t strideB, float *c,
                       bool accumulate) {
  kiln_sgemm_fn gemm = kiln_dnnl_sgemm();
  if (!gemm)
    return false;
  if (m == 0 || n == 0)
    return true;
  if (k == 0) {
    if (!accumulate)
      std::memset(c, 0, sizeof(float) * batch * m * n);
    return true;
  }
  for (int64_t i = 0; i < batch; ++i)
    if (gemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a + i * strideA,
             transA ? m : k, b + i * strideB, transB ? k : n, accumulate ? 1.0f : 0.0f,
             c + i * m * n, n) != 0) {
      if (i == 0)
        return false; // rejected before writing anything
      std::abort();
    }
  return true;
}
)";

static_assert(kPackedColumns == 16,
              "kiln_sgemm_packed in kPrelude reads panels of 16 columns");

class CppEmitter : public CEmitter {
public:
  CppEmitter(KernelOp kernel, raw_ostream &os)
      : CEmitter(kernel, kCppStyle), os(os) {}
  LogicalResult emit(StringRef symbol);
  LogicalResult emitDims(StringRef symbol);

private:
  raw_ostream &decls() override { return os; }
  raw_ostream &body() override { return os; }
  void declareBuffer(RankedTensorType type, const std::string &name,
                     const std::string &count) override {
    std::string n =
        type.hasStaticShape()
            ? std::to_string(std::max<int64_t>(type.getNumElements(), 1))
            : "std::max<int64_t>(" + count + ", 1)";
    os << llvm::formatv(
        "  kiln_scratch {1}_owner(sizeof({0}) * {2});\n"
        "  {0} *__restrict {1} = static_cast<{0} *>({1}_owner.data);\n",
        typeName(type.getElementType()), name, n);
  }
  void emitFill(RankedTensorType, const std::string &count,
                const std::string &out, const std::string &value) override {
    os << llvm::formatv(
        "  for (int64_t i = 0; i < {0}; ++i)\n    {1}[i] = {2};\n", count, out,
        value);
  }
  void emitCopy(const std::string &to, const std::string &from,
                RankedTensorType type, const std::string &count) override {
    os << llvm::formatv("  std::memcpy({0}, {1}, sizeof({2}) * {3});\n", to,
                        from, typeName(type.getElementType()), count);
  }
  LogicalResult emitGenericLoops(linalg::GenericOp op) override;
  bool defersFill(linalg::FillOp fill) override;
  bool absorbed(Operation *op) override;
  bool emitGemmCall(linalg::GenericOp op);
  linalg::GenericOp planeProducer(linalg::GenericOp op, unsigned &planes);
  void declarePlanes(Value plane);
  LogicalResult emitPlane(linalg::GenericOp producer, unsigned planes,
                          std::string indent);

  raw_ostream &os;
};

/// The f32 GEMM (Gemm.h) `op` is, if any.
static std::optional<GemmMatch> libraryGemm(linalg::GenericOp op) {
  std::optional<GemmMatch> g = matchGemm(op);
  if (!g || !g->element.isF32())
    return std::nullopt;
  return g;
}

/// The zero fill that only initialises `op`. When `op` is a library GEMM,
/// the GEMM overwrites instead of accumulating, and only its fallback loops
/// need the fill.
static linalg::FillOp zeroFillOf(linalg::GenericOp op) {
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getResult(0).hasOneUse())
    return {};
  auto zero = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto value = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
  if (!value || !value.getValue().isZero())
    return {};
  return fill;
}

bool CppEmitter::defersFill(linalg::FillOp fill) {
  if (!fill.getResult(0).hasOneUse())
    return false;
  auto user = dyn_cast<linalg::GenericOp>(*fill->getUsers().begin());
  return user && zeroFillOf(user) == fill && libraryGemm(user);
}

/// `if (!kiln_sgemm(...)) {` in front of the loops of an f32 GEMM (Gemm.h):
/// the loops run only without oneDNN, or when a dynamic dim of an operand is
/// not the loop's size (a dim of 1 broadcasting). True when emitted.
bool CppEmitter::emitGemmCall(linalg::GenericOp op) {
  std::optional<GemmMatch> g = libraryGemm(op);
  if (!g)
    return false;
  linalg::FillOp fill = zeroFillOf(op);
  auto size = [&](ArrayRef<unsigned> dims) {
    std::string product = "int64_t(1)";
    for (unsigned d : dims)
      product += " * " + loopRange(op, d);
    return product;
  };
  std::string m = fresh("m"), n = fresh("n"), k = fresh("k");
  os << llvm::formatv("  const int64_t {0} = {1}, {2} = {3}, {4} = {5};\n", m,
                      size(g->m), n, size(g->n), k, size(g->k));
  std::string check;
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto type = cast<RankedTensorType>(input->get().getType());
    AffineMap map = op.getMatchingIndexingMap(input);
    for (auto [i, e] : llvm::enumerate(map.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && type.isDynamicDim(i)) {
        std::string dim = dimExpr(input->get(), i),
                    range = loopRange(op, d.getPosition());
        if (dim != range)
          check += dim + " == " + range + " && ";
      }
  }
  std::string strideA = g->batchedA ? m + " * " + k : "0";
  std::string strideB = g->batchedB ? k + " * " + n : "0";
  std::string call = llvm::formatv(
      "kiln_sgemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
      "{11})",
      size(g->batch), g->transA, g->transB, m, n, k,
      bufferFor(op.getDpsInputs()[g->a]), strideA,
      bufferFor(op.getDpsInputs()[1 - g->a]), strideB,
      bufferFor(op.getResult(0)), !fill);
  // B packed by kiln-pack-weights: small M streams the panels first.
  if (auto input = op->getAttrOfType<IntegerAttr>(kPackedB))
    call = llvm::formatv(
        "(kiln_sgemm_packed({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}) "
        "|| {10})",
        size(g->batch), m, n, k, bufferFor(op.getDpsInputs()[g->a]), strideA,
        bufferFor(kernel.getBody().front().getArgument(input.getInt())),
        bufferFor(op.getResult(0)), !fill, kPackedRows, call);
  os << "  if (!(" << check << call << ")) {\n";
  if (fill)
    emitFillOp(fill);
  return true;
}

/// The number of leading loops of `op` when they are parallel, index its
/// output in order (d0, d1, ...), and are followed only by reductions that
/// unroll (kUnrolledTaps); else 0. Such a window computes each output
/// element whole inside its parallel loops: its init can be written there
/// first, and an elementwise epilogue applied there after.
static unsigned unrolledWindow(linalg::GenericOp op) {
  if (libraryGemm(op))
    return 0;
  auto iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  size_t p = iterators.size();
  int64_t tail = 1;
  while (p > 0 && iterators[p - 1] == utils::IteratorType::reduction &&
         !ShapedType::isDynamic(ranges[p - 1])) {
    tail *= ranges[p - 1];
    --p;
  }
  if (p == iterators.size() || p < 2 || tail > kUnrolledTaps)
    return 0;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() != p)
    return 0;
  for (unsigned d = 0; d < p; ++d)
    if (iterators[d] != utils::IteratorType::parallel ||
        out.getResult(d) != getAffineDimExpr(d, op.getContext()))
      return 0;
  return p;
}

/// Whether `op` is all-parallel over `p` loops, writes its output in loop
/// order, and does not read its init: its body can run inside the parallel
/// loops of an unrolledWindow.
static bool fitsWindowLoops(linalg::GenericOp op, unsigned p) {
  if (op.getNumDpsInits() != 1 || op.getNumLoops() != p ||
      op.getNumParallelLoops() != p ||
      !op.getMatchingBlockArgument(op.getDpsInitOperand(0)).use_empty())
    return false;
  return op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity();
}

/// The elementwise generic applied to each element of window `op` (its only
/// user, reading it in loop order), computed inside the window's loops.
static linalg::GenericOp windowEpilogue(linalg::GenericOp op) {
  unsigned p = unrolledWindow(op);
  Value result = op.getResult(0);
  if (!p || !result.hasOneUse())
    return {};
  auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
  // Emitted once, in the window: its own result has one use too.
  if (!user || !fitsWindowLoops(user, p) || !user.getResult(0).hasOneUse())
    return {};
  // Its other inputs must be ready when the window runs (an average pool's
  // divisor is a window computed after the sums), and static: one with a
  // dynamic dim could broadcast the window's, and the window's loops would
  // not cover the epilogue's.
  for (OpOperand *input : user.getDpsInputOperands()) {
    Value v = input->get();
    if (v == result) {
      if (!user.getMatchingIndexingMap(input).isIdentity())
        return {};
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if ((type && !type.hasStaticShape()) ||
        (v.getDefiningOp() && !v.getDefiningOp()->isBeforeInBlock(op)))
      return {};
  }
  return user;
}

/// The fill or generic that only initialises window `op`, computed per
/// element inside its loops.
static Operation *windowPrologue(linalg::GenericOp op) {
  unsigned p = unrolledWindow(op);
  Value init = op.getDpsInits()[0];
  Operation *def = init.getDefiningOp();
  if (!p || !def || !init.hasOneUse())
    return nullptr;
  if (isa<linalg::FillOp>(def))
    return def;
  auto generic = dyn_cast<linalg::GenericOp>(def);
  if (!generic || !fitsWindowLoops(generic, p))
    return nullptr;
  // Not also another window's epilogue: it is emitted in one place.
  for (OpOperand *input : generic.getDpsInputOperands())
    if (auto window = input->get().getDefiningOp<linalg::GenericOp>())
      if (window != op && windowEpilogue(window) == generic)
        return nullptr;
  return def;
}

/// The all-parallel generic (a pad, say) that makes an input of window
/// `op` for it alone, when the window's first `planes` loops (its images and
/// channels) read only what the producer writes at the same indices: the
/// producer then runs plane by plane inside those loops, just before the
/// window reads the plane, while it is in cache. Its own inputs must be the
/// kernel's (nothing in between may overwrite them).
linalg::GenericOp CppEmitter::planeProducer(linalg::GenericOp op,
                                            unsigned &planes) {
  unsigned p = unrolledWindow(op);
  if (p < 3)
    return {};
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  Block *kernelBody = &kernel.getBody().front();
  auto fromKernel = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == kernelBody;
  };
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto producer = input->get().getDefiningOp<linalg::GenericOp>();
    if (!producer || !input->get().hasOneUse() ||
        producer.getNumDpsInits() != 1 ||
        producer.getNumParallelLoops() != producer.getNumLoops() ||
        !producer.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() ||
        !producer.getMatchingIndexingMap(producer.getDpsInitOperand(0))
             .isIdentity() ||
        !llvm::all_of(producer.getDpsInputs(), fromKernel))
      continue;
    bool kernelReads = true;
    producer.getRegion().walk(
        [&](tensor::ExtractOp e) { kernelReads &= fromKernel(e.getTensor()); });
    if (!kernelReads)
      continue;
    // The window's index into the plane, with its taps of one trip at 0.
    AffineMap read = op.getMatchingIndexingMap(input);
    SmallVector<AffineExpr> zeroed;
    for (unsigned d = 0; d < read.getNumDims(); ++d)
      zeroed.push_back(d >= p && ranges[d] == 1
                           ? getAffineConstantExpr(0, op.getContext())
                           : getAffineDimExpr(d, op.getContext()));
    unsigned n = 0;
    while (n + 1 < p && n < read.getNumResults() &&
           read.getResult(n).replaceDims(zeroed) ==
               getAffineDimExpr(n, op.getContext()) &&
           loopRange(producer, n) == loopRange(op, n))
      ++n;
    // Images and channels at least: fewer would leave the threads too
    // little to share at batch 1 (a channel multiplier reads c floordiv M).
    if (n < 2 || n == producer.getNumLoops())
      continue;
    planes = n;
    return producer;
  }
  return {};
}

bool CppEmitter::absorbed(Operation *op) {
  if (op->getNumResults() != 1 || !op->getResult(0).hasOneUse())
    return false;
  Operation *user = *op->getUsers().begin();
  if (auto window = dyn_cast<linalg::GenericOp>(user)) {
    if (windowPrologue(window) == op)
      return true;
    unsigned planes = 0;
    if (planeProducer(window, planes) == op)
      return true;
  }
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    for (OpOperand *input : generic.getDpsInputOperands())
      if (auto window = input->get().getDefiningOp<linalg::GenericOp>())
        if (windowEpilogue(window) == generic)
          return true;
  return false;
}

/// How many leading loops of `op` to share out between threads: parallel
/// loops whose dim the output is indexed by (so that no two iterations write
/// one element), leaving the innermost loop whole to vectorize. In an
/// unrolledWindow that is the last parallel loop, around the taps.
static unsigned parallelPrefix(linalg::GenericOp op) {
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto iterators = op.getIteratorTypesArray();
  size_t limit = std::max<size_t>(1, iterators.size() - 1);
  if (unsigned p = unrolledWindow(op))
    limit = std::min<size_t>(limit, p - 1);
  unsigned n = 0;
  while (n < limit && iterators[n] == utils::IteratorType::parallel &&
         llvm::is_contained(out.getResults(),
                            getAffineDimExpr(n, op.getContext())))
    ++n;
  return n;
}

LogicalResult CppEmitter::emitGenericLoops(linalg::GenericOp op) {
  Operation *prologue = windowPrologue(op);
  linalg::GenericOp epilogue = windowEpilogue(op);
  unsigned p = unrolledWindow(op);
  unsigned planes = 0;
  linalg::GenericOp producer = planeProducer(op, planes);
  if (producer) {
    // Its buffer holds one plane, declared in the loops (per thread).
    nameBuffer(producer.getResult(0));
    planeDims[producer.getResult(0)] = planes;
    declareOperands(producer);
  }
  declareOperands(op); // before the loops
  if (prologue)
    if (auto generic = dyn_cast<linalg::GenericOp>(prologue))
      declareOperands(generic);
  if (epilogue)
    declareOperands(epilogue);
  bool gemm = emitGemmCall(op);
  SmallVector<std::string> ranges;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    ranges.push_back(loopRange(op, d));
    if (ranges.back().empty())
      return op.emitOpError()
             << "has a dynamic loop the kernel emitter cannot size";
  }
  if (producer)
    declarePlanes(producer.getResult(0));
  os << "  // linalg.generic: " << iteratorList(op) << "\n";
  // The leading parallel loops are shared out between the threads of the
  // OpenMP pool (the one oneDNN uses too) when there is enough work.
  if (unsigned shared = producer ? planes : parallelPrefix(op)) {
    std::string work = "int64_t(1)";
    for (const std::string &size : ranges)
      work += " * " + size;
    os << llvm::formatv("#pragma omp parallel for collapse({0}) "
                        "schedule(static) if ({1} >= {2})\n",
                        shared, work, kParallelWork);
  }
  // With a prologue or epilogue, the last parallel loop's body holds them
  // around the reduction loops.
  bool around = prologue || epilogue;
  std::string indent = "  ", outer;
  for (auto [dim, size] : llvm::enumerate(ranges)) {
    os << indent
       << llvm::formatv("for (int64_t d{0} = 0; d{0} < {1}; ++d{0})", dim,
                        size);
    bool opens = dim + 1 == ranges.size() || (around && dim + 1 == p);
    os << (opens || (producer && dim + 1 == planes) ? " {\n" : "\n");
    indent += "  ";
    if (producer && dim + 1 == planes &&
        failed(emitPlane(producer, planes, indent)))
      return failure();
    if (around && dim + 1 == p) {
      outer = indent;
      if (auto fill = dyn_cast_or_null<linalg::FillOp>(prologue))
        os << indent << bufferFor(fill.getResult(0)) << "["
           << index(op.getResult(0),
                    op.getMatchingIndexingMap(op.getDpsInitOperand(0)))
           << "] = " << scalarOf(fill.getInputs()[0]) << ";\n";
      else if (prologue && failed(emitGenericBody(
                               cast<linalg::GenericOp>(prologue), indent)))
        return failure();
    }
  }
  if (ranges.empty())
    os << indent << "{\n";
  if (failed(emitGenericBody(op, indent)))
    return failure();
  if (around) {
    os << outer << "}\n";
    // The epilogue reads the element just computed, where it was written
    // (a dynamic dim of it cannot broadcast).
    if (epilogue) {
      Value result = op.getResult(0);
      reads[result] =
          bufferFor(result) + "[" +
          index(result, op.getMatchingIndexingMap(op.getDpsInitOperand(0))) +
          "]";
      LogicalResult ok = emitGenericBody(epilogue, outer);
      reads.erase(result);
      if (failed(ok))
        return failure();
    }
  }
  os << "  }\n";
  if (producer)
    os << "  }\n";
  if (gemm)
    os << "  }\n";
  return success();
}

/// One buffer of one plane of `plane` per thread, allocated before the
/// threads start: a failed allocation inside them could not reach the caller.
void CppEmitter::declarePlanes(Value plane) {
  std::string name = bufferFor(plane);
  os << llvm::formatv(
      "  const int64_t {0}_stride = (std::max<int64_t>({1}, 1) + 15) / 16 * "
      "16;\n"
      "  kiln_scratch {0}_owner(sizeof({2}) * {0}_stride * "
      "omp_get_max_threads());\n",
      name, numElements(plane),
      typeName(getElementTypeOrSelf(plane.getType())));
}

/// The loops of `producer` after its first `planes`, which the caller has
/// opened: one plane of it, in the thread's buffer.
LogicalResult CppEmitter::emitPlane(linalg::GenericOp producer, unsigned planes,
                                    std::string indent) {
  os << indent << "// linalg.generic: " << iteratorList(producer)
     << ", one plane\n";
  Value plane = producer.getResult(0);
  std::string name = bufferFor(plane);
  os << llvm::formatv("{0}{1} *__restrict {2} = static_cast<{1} *>({2}_owner."
                      "data) + omp_get_thread_num() * {2}_stride;\n",
                      indent, typeName(getElementTypeOrSelf(plane.getType())),
                      name);
  for (unsigned d = planes; d < producer.getNumLoops(); ++d) {
    std::string size = loopRange(producer, d);
    if (size.empty())
      return producer.emitOpError()
             << "has a dynamic loop the kernel emitter cannot size";
    os << indent
       << llvm::formatv("for (int64_t d{0} = 0; d{0} < {1}; ++d{0})", d, size)
       << (d + 1 == producer.getNumLoops() ? " {\n" : "\n");
    indent += "  ";
  }
  if (failed(emitGenericBody(producer, indent)))
    return failure();
  os << indent.substr(2) << "}\n";
  return success();
}

LogicalResult CppEmitter::emitDims(StringRef symbol) {
  os << "extern \"C\" const char *" << symbol
     << "_dims(int64_t *dims, void *const *inputs) {\n";
  if (failed(emitDimsBody(symbol.str())))
    return failure();
  os << "}\n";
  return success();
}

LogicalResult CppEmitter::emit(StringRef symbol) {
  Block &block = kernel.getBody().front();
  os << "// kiln kernel " << symbol << ", from " << kernel.getLoc() << "\n";
  os << "extern \"C\" void " << symbol << "(void **buffers) {\n";
  if (hasDynamicShape(kernel))
    os << "  const int64_t *dims = static_cast<const int64_t *>(buffers["
       << block.getNumArguments() + kernel.getNumResults() << "]);\n";
  size_t slot = 0;
  SmallVector<std::string> inputs, outputs;
  for (BlockArgument arg : block.getArguments()) {
    std::string type =
        typeName(cast<RankedTensorType>(arg.getType()).getElementType());
    std::string name = "in" + std::to_string(arg.getArgNumber());
    os << llvm::formatv("  const {0} *__restrict {1} = static_cast<const {0} "
                        "*>(buffers[{2}]);\n",
                        type, name, slot++);
    inputs.push_back(name);
  }
  for (auto [j, type] : llvm::enumerate(kernel.getResultTypes())) {
    std::string name = "out" + std::to_string(j);
    os << llvm::formatv(
        "  {0} *__restrict {1} = static_cast<{0} *>(buffers[{2}]);\n",
        typeName(cast<RankedTensorType>(type).getElementType()), name, slot++);
    outputs.push_back(name);
  }
  if (failed(emitOps(inputs, outputs)))
    return failure();
  os << "}\n";
  return success();
}
} // namespace

std::string kiln::kernelPrelude() {
  return kPrelude +
         ("namespace {\n" + narrowFloatFunctions("inline", kCppStyle) +
          "} // namespace\n");
}

FailureOr<std::string> kiln::emitKernelCpp(KernelOp kernel, StringRef symbol) {
  if (failed(checkElementTypes(kernel, kCppStyle, "C++")))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  CppEmitter emitter(kernel, os);
  if (failed(emitter.emit(symbol)))
    return failure();
  // The dims function, from a fresh emitter (its own scalar names).
  if (hasDynamicShape(kernel) &&
      failed(CppEmitter(kernel, os).emitDims(symbol)))
    return failure();
  return text;
}
