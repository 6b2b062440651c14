//===- CppPrelude.cpp - what every C++ kernel file starts with -----------===//
//
// Includes and helpers of the generated C++: NaN-propagating max/min, f32
// exp/erf that vectorize, the scratch block cache, OpenMP pinning, and the
// GEMMs (oneDNN's, found at run time, and kiln's own over packed panels).
//
//===----------------------------------------------------------------------===//

#include "codegen/CEmitter.h"
#include "codegen/CppEmitter.h"

using namespace kiln;

namespace {
constexpr const char *kPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <algorithm>
#include <vector>
#include <new>
#include <omp.h>
#include <sys/mman.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {
// NaN-propagating max/min, as arith.maximumf/minimumf (and torch) define them.
// The NaN test is on b, the new element where a accumulates (a window's
// running max): testing a, GCC folds a chain of them into selects between
// masks, and the taps of a max pool stop vectorizing (5x slower).
template <typename T> inline T kiln_maximum(T a, T b) { return (b != b || b > a) ? b : a; }
// The bits of x as a T of the same size (arith.bitcast).
template <typename T, typename F> inline T kiln_bitcast(F x) { return __builtin_bit_cast(T, x); }
template <typename T> inline T kiln_minimum(T a, T b) { return (b != b || b < a) ? b : a; }
// Them as OpenMP reductions, so that `omp simd` vectorizes a row's max or
// min (codegen/CppRows.cpp); max and min are idempotent, so each lane may
// start from the initial value.
#pragma omp declare reduction(kiln_max : float, double : omp_out = kiln_maximum(omp_out, omp_in)) \
    initializer(omp_priv = omp_orig)
#pragma omp declare reduction(kiln_min : float, double : omp_out = kiln_minimum(omp_out, omp_in)) \
    initializer(omp_priv = omp_orig)

// f32 exp and erf without branches or calls, so that loops over them
// vectorize (with -fno-trapping-math); NaN in, NaN out.
// 2^n for n in [-126, 127]; unsigned, so that the shift is defined for any n
// (exp's junk n of a NaN input).
inline float kiln_pow2i(int32_t n) {
  return __builtin_bit_cast(float, (static_cast<uint32_t>(n) + 127u) << 23);
}
// exp(x) = 2^n e^r with n = round(x log2(e)) and r = x - n ln(2), ln(2) in
// two parts; e^r by Cephes' polynomial; 2^n applied in two halves so that
// subnormal results come out right. Within 1.03 ulp of exp (every float
// checked against double exp). n is rounded by adding 1.5 * 2^23, whose
// low bits then hold it as an integer: no round or convert instructions.
// A NaN stays NaN through the clamp and the polynomial: no final select.
inline float kiln_expf(float x) {
  float c = x < -104.0f ? -104.0f : x;
  c = c > 89.0f ? 89.0f : c;
  const float shifter = 12582912.0f;
  float t = c * 1.44269504088896341f + shifter;
  float n = t - shifter;
  int32_t k = __builtin_bit_cast(int32_t, t) - __builtin_bit_cast(int32_t, shifter);
  float r = c - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t h = k >> 1;
  return p * kiln_pow2i(h) * kiln_pow2i(k - h);
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
// mmap'ed and faulted in on every call. The smallest block that fits is
// taken, of those the one released last: the most likely still in cache.
// Blocks of 2 MiB and more in huge pages, as the runtime's own (its
// runtime/HostMemory.cpp says why); KILN_HUGE_PAGES=0 turns that off.
inline void *kiln_allocate(size_t bytes) {
  static const char *setting = getenv("KILN_HUGE_PAGES");
  static const bool huge = !setting || strcmp(setting, "0") != 0;
  const size_t align = huge && bytes >= (size_t(2) << 20) ? size_t(2) << 20 : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void *data = std::aligned_alloc(align, rounded);
  if (data && align > 64)
    madvise(data, rounded, MADV_HUGEPAGE);
  return data;
}
struct kiln_scratch_cache {
  std::vector<std::pair<size_t, void *>> free; // the last released last
  ~kiln_scratch_cache() {
    for (auto &block : free)
      std::free(block.second);
  }
};
inline kiln_scratch_cache &kiln_scratch_blocks() {
  thread_local kiln_scratch_cache cache;
  return cache;
}
// Under kilnc --sanitize=address the bytes of a block past the request
// are poisoned, and a released block entirely, so that a kernel reading
// past a scratch tensor is reported even in a reused, larger block.
#if defined(__SANITIZE_ADDRESS__)
inline void kiln_poison(void *p, size_t n) { ASAN_POISON_MEMORY_REGION(p, n); }
inline void kiln_unpoison(void *p, size_t n) { ASAN_UNPOISON_MEMORY_REGION(p, n); }
#else
inline void kiln_poison(void *, size_t) {}
inline void kiln_unpoison(void *, size_t) {}
#endif
struct kiln_scratch {
  explicit kiln_scratch(size_t bytes) : size((bytes + 63) / 64 * 64) {
    std::vector<std::pair<size_t, void *>> &free = kiln_scratch_blocks().free;
    size_t best = free.size();
    for (size_t i = free.size(); i-- > 0;)
      if (free[i].first >= size && free[i].first <= 2 * size &&
          (best == free.size() || free[i].first < free[best].first))
        best = i;
    if (best < free.size()) {
      size = free[best].first;
      data = free[best].second;
      free.erase(free.begin() + best);
    } else if (!(data = kiln_allocate(size))) {
      throw std::bad_alloc();
    }
    kiln_unpoison(data, bytes);
    kiln_poison(static_cast<char *>(data) + bytes, size - bytes);
  }
  ~kiln_scratch() { release(); }
  // Hands the memory back before the end of its scope.
  void release() {
    if (data) {
      kiln_poison(data, size);
      kiln_scratch_blocks().free.emplace_back(size, data);
    }
    data = nullptr;
  }
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
inline kiln_sgemm_fn kiln_dnnl_sgemm_entry() {
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
// That sgemm, but a product whose N is one past a multiple of 16 (a 7x7
// plane: 49 columns) runs as one call on all columns but the last and one
// on the last: oneDNN 2.6 takes a slow path for a single column left over,
// and the two calls took 0.73-0.91x the time of one (M 160-1280, N 17-145,
// K 160-4608, 2 threads; docs/performance.md, step 30). N = 1025 gained
// nothing: from 1024 on, one call. Nonzero, having written nothing, when
// oneDNN rejects the call.
inline int kiln_sgemm_split(char transA, char transB, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                            float beta, float *c, int64_t ldc) {
  kiln_sgemm_fn gemm = kiln_dnnl_sgemm_entry();
  if (n <= 16 || n % 16 != 1 || n >= 1024)
    return gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (int rc = gemm(transA, transB, m, n - 1, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return rc;
  const float *last = b + (transB == 'T' || transB == 't' ? (n - 1) * ldb : n - 1);
  if (gemm(transA, transB, m, 1, k, alpha, a, lda, last, ldb, beta, c + n - 1, ldc) != 0)
    std::abort(); // the same call on one column fewer ran
  return 0;
}
inline kiln_sgemm_fn kiln_dnnl_sgemm() {
  static const kiln_sgemm_fn fn = kiln_dnnl_sgemm_entry() ? &kiln_sgemm_split : nullptr;
  return fn;
}

// C[i] = A[i] * B (+ C[i] when accumulating) for every batch i, with A
// row-major [m, k] and B packed as [ceil(n / 16)][k][16] panels (zero past
// n): threads share out the panels, each streamed once per 8 rows of A (6
// past 8 rows without AVX-512). False, having written nothing, when m is
// above max_rows (above 16 on CPUs with AVX-512, where oneDNN's sgemm runs
// in vectors of 16 and these panels in vectors of 8). Without AVX-512 the
// panels ran BERT's linear layers (128 rows, K and N 256 and 1024) in
// 0.89-0.99x oneDNN's time in a harness, and the model at batch 1 in
// 0.70-0.92x (docs/performance.md, step 56).
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
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
    s[i][0] = s[i][1] = kiln_v8{};
  for (int64_t x = 0; x < k; ++x) {
    kiln_v8 b0 = kiln_load8(b + x * 16), b1 = kiln_load8(b + x * 16 + 8);
#pragma GCC unroll 8
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
// One row through a panel: a matrix-vector product bound by reading the
// panel, so four independent sums over k keep the loads in flight.
inline void kiln_packed_row(int64_t k, const float *__restrict a, const float *__restrict b,
                            float *__restrict c, int64_t width, bool accumulate) {
  kiln_v8 s[4][2] = {};
  int64_t x = 0;
  for (; x + 4 <= k; x += 4) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      s[u][0] += a[x + u] * kiln_load8(b + (x + u) * 16);
      s[u][1] += a[x + u] * kiln_load8(b + (x + u) * 16 + 8);
    }
  }
  for (; x < k; ++x) {
    s[0][0] += a[x] * kiln_load8(b + x * 16);
    s[0][1] += a[x] * kiln_load8(b + x * 16 + 8);
  }
  float row[16];
  const kiln_v8 lo = (s[0][0] + s[1][0]) + (s[2][0] + s[3][0]);
  const kiln_v8 hi = (s[0][1] + s[1][1]) + (s[2][1] + s[3][1]);
  __builtin_memcpy(row, &lo, sizeof lo);
  __builtin_memcpy(row + 8, &hi, sizeof hi);
  for (int64_t j = 0; j < width; ++j)
    c[j] = accumulate ? c[j] + row[j] : row[j];
}
// Rows of A a pass over a panel: up to 8 (16 sums of 8), but 6 past 8
// rows without AVX-512, whose 16 registers do not hold 16 sums and their
// operands (spilled, 8 rows took 1.2-1.35x the time of 6 at M = 128).
inline int64_t kiln_packed_block(int64_t m) {
#if defined(__AVX512F__)
  return 8;
#else
  return m <= 8 ? 8 : 6;
#endif
}
// The most rows of A the panels take, of the compiler's max_rows.
inline int64_t kiln_packed_max_rows(int64_t max_rows) {
#if defined(__AVX512F__)
  return std::min<int64_t>(max_rows, 16);
#else
  return max_rows;
#endif
}
inline bool kiln_sgemm_packed(int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t strideA, const float *packed, float *c, bool accumulate,
                              int64_t max_rows) {
  if (m > kiln_packed_max_rows(max_rows))
    return false;
  const int64_t panels = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (batch * m * n * k >= 32768)
  for (int64_t t = 0; t < batch * panels; ++t) {
    const int64_t i = t / panels, j = t % panels, width = std::min<int64_t>(16, n - j * 16);
    const float *b = packed + j * k * 16;
    if (m == 1) {
      kiln_packed_row(k, a + i * strideA, b, c + i * n + j * 16, width, accumulate);
      continue;
    }
    for (int64_t r = 0; r < m; r += kiln_packed_block(m)) {
      const float *ar = a + i * strideA + r * k;
      float *cr = c + (i * m + r) * n + j * 16;
      switch (std::min<int64_t>(kiln_packed_block(m), m - r)) {
      case 8: kiln_packed_rows<8>(k, ar, b, cr, n, width, accumulate); break;
      case 7: kiln_packed_rows<7>(k, ar, b, cr, n, width, accumulate); break;
      case 6: kiln_packed_rows<6>(k, ar, b, cr, n, width, accumulate); break;
      case 5: kiln_packed_rows<5>(k, ar, b, cr, n, width, accumulate); break;
      case 4: kiln_packed_rows<4>(k, ar, b, cr, n, width, accumulate); break;
      case 3: kiln_packed_rows<3>(k, ar, b, cr, n, width, accumulate); break;
      case 2: kiln_packed_rows<2>(k, ar, b, cr, n, width, accumulate); break;
      default: kiln_packed_rows<1>(k, ar, b, cr, n, width, accumulate); break;
      }
    }
  }
  return true;
}

// A GEMM of K at most 16 with one A for the whole batch (a 1x1 conv of few
// input channels: mobilenet_v2's 16->96 expansion at 112x112), by kiln's
// own AVX-512 blocks: 6 rows of C by 4 vectors of 16 columns in 24
// registers, each row's A broadcast, the last vector of a row masked. oneDNN
// spends most of such a GEMM on its setup per call (packing, K loop): 274-287
// us against 373-379 in the model, and the depthwise conv after it 133-135
// against 152-154, its planes now on the core that wrote them
// (docs/performance.md, step 41). Larger K ran slower than oneDNN in the
// model (the 56x56 expansions of K 24 by 25 us and more), and a product of
// 16 rows (K 32) took 1.25-1.35x oneDNN's time in a harness. The sums run in
// the order of K, as oneDNN's do at this size (bit-identical in the harness).
#if defined(__AVX512F__)
// The first min(n, 16) lanes of a vector.
inline __mmask16 kiln_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}
// p[0], p[2], ..., p[30]: the even columns of 32 (a stride of 2).
inline __m512 kiln_even16(const float *p) {
  const __m512i even =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + 16));
}
inline bool kiln_pointwise_applies(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
                                   int64_t k, int64_t strideA) {
  return !transA && !transB && strideA == 0 && k > 0 && k <= 16 && m >= 32 &&
         batch * m * n * k >= (int64_t(1) << 20);
}
// R rows of C = A B over V vectors of 16 columns, the last one's lanes
// `last` only: A row-major (lda k), B and C rows ldb and ldc apart.
template <int R, int V>
inline void kiln_pointwise_block(int64_t k, const float *__restrict a,
                                 const float *__restrict b, int64_t ldb, float *__restrict c,
                                 int64_t ldc, __mmask16 last, bool accumulate) {
  __m512 s[R][V];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      s[i][v] = _mm512_setzero_ps();
  for (int64_t x = 0; x < k; ++x) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V - 1; ++v)
      bv[v] = _mm512_loadu_ps(b + x * ldb + 16 * v);
    bv[V - 1] = _mm512_maskz_loadu_ps(last, b + x * ldb + 16 * (V - 1));
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 w = _mm512_set1_ps(a[i * k + x]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        s[i][v] = _mm512_fmadd_ps(w, bv[v], s[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    float *p = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 lanes = v == V - 1 ? last : __mmask16(0xffff);
      __m512 o = s[i][v];
      if (accumulate)
        o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(lanes, p + 16 * v));
      _mm512_mask_storeu_ps(p + 16 * v, lanes, o);
    }
  }
}
template <int V>
inline void kiln_pointwise_rows(int64_t rows, int64_t k, const float *a, const float *b,
                                int64_t ldb, float *c, int64_t ldc, __mmask16 last,
                                bool accumulate) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6)
    kiln_pointwise_block<6, V>(k, a + r * k, b, ldb, c + r * ldc, ldc, last, accumulate);
  a += r * k;
  c += r * ldc;
  switch (rows - r) {
  case 5: kiln_pointwise_block<5, V>(k, a, b, ldb, c, ldc, last, accumulate); break;
  case 4: kiln_pointwise_block<4, V>(k, a, b, ldb, c, ldc, last, accumulate); break;
  case 3: kiln_pointwise_block<3, V>(k, a, b, ldb, c, ldc, last, accumulate); break;
  case 2: kiln_pointwise_block<2, V>(k, a, b, ldb, c, ldc, last, accumulate); break;
  case 1: kiln_pointwise_block<1, V>(k, a, b, ldb, c, ldc, last, accumulate); break;
  default: break;
  }
}
// C rows [r0, r1) by columns [c0, c1) of C = A B (B's rows ldb apart):
// column blocks of 64, each through all the rows.
inline void kiln_pointwise_tile(int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t k,
                                const float *a, const float *b, int64_t ldb, float *c,
                                int64_t ldc, bool accumulate) {
  a += r0 * k;
  c += r0 * ldc;
  for (int64_t j = c0; j < c1; j += 64) {
    const int64_t w = std::min<int64_t>(64, c1 - j), v = (w + 15) / 16;
    const __mmask16 last = kiln_lanes(w - 16 * (v - 1));
    switch (v) {
    case 4: kiln_pointwise_rows<4>(r1 - r0, k, a, b + j, ldb, c + j, ldc, last, accumulate); break;
    case 3: kiln_pointwise_rows<3>(r1 - r0, k, a, b + j, ldb, c + j, ldc, last, accumulate); break;
    case 2: kiln_pointwise_rows<2>(r1 - r0, k, a, b + j, ldb, c + j, ldc, last, accumulate); break;
    default: kiln_pointwise_rows<1>(r1 - r0, k, a, b + j, ldb, c + j, ldc, last, accumulate); break;
    }
  }
}
// kiln_pointwise_tile on tiles of whole steps (as kiln_sgemm_tiles's: em
// of M, en of N), each at least 128 columns wide and 24 KiB at most, so
// that `epilogue(i, m0, m1, n0, n1)` reads it from L1. A thread takes the
// tiles of a rows' range across all columns, so whole channels of a conv:
// a depthwise conv after it, whose threads take planes, reads them on the
// core that wrote them.
template <typename F>
inline void kiln_pointwise_tiles(int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                                 const float *b, int64_t strideB, float *c, bool accumulate,
                                 int64_t em, int64_t en, const F &epilogue) {
  const int64_t rows = m / em, cols = n / en;
  const int64_t tn = std::min(en, (128 + cols - 1) / cols);
  int64_t tm = std::max<int64_t>(1, (int64_t(24) << 10) / (tn * cols * rows * 4));
  if (tm * rows > 6)
    tm = std::max<int64_t>(1, tm * rows / 6 * 6 / rows);
  tm = std::min(tm, em);
  const int64_t mt = (em + tm - 1) / tm, nt = (en + tn - 1) / tn;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < batch * mt * nt; ++t) {
    const int64_t i = t / (mt * nt), m0 = (t / nt) % mt * tm, n0 = t % nt * tn;
    const int64_t m1 = std::min(em, m0 + tm), n1 = std::min(en, n0 + tn);
    kiln_pointwise_tile(m0 * rows, m1 * rows, n0 * cols, n1 * cols, k, a, b + i * strideB, n,
                        c + i * m * n, n, accumulate);
    epilogue(i, m0, m1, n0, n1);
  }
}
#else
inline bool kiln_pointwise_applies(int64_t, bool, bool, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
template <typename F>
inline void kiln_pointwise_tiles(int64_t, int64_t, int64_t, int64_t, const float *, const float *,
                                 int64_t, float *, bool, int64_t, int64_t, const F &) {}
#endif

// C[i] = A[i] * B[i] (+ C[i] when accumulating) for every batch i
// (row-major; A is [k, m] when transposed, B [n, k]); false, having written
// nothing, without a library (kiln_pointwise's GEMMs need none).
inline bool kiln_sgemm(int64_t batch, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                       const float *a, int64_t strideA, const float *b, int64_t strideB, float *c,
                       bool accumulate) {
  if (kiln_pointwise_applies(batch, transA, transB, m, n, k, strideA)) {
    kiln_pointwise_tiles(batch, m, n, k, a, b, strideB, c, accumulate, m, n,
                         [](int64_t, int64_t, int64_t, int64_t, int64_t) {});
    return true;
  }
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
  const auto one = [&](int64_t i) {
    return gemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a + i * strideA,
                transA ? m : k, b + i * strideB, transB ? k : n, accumulate ? 1.0f : 0.0f,
                c + i * m * n, n) == 0;
  };
  // Small GEMMs (attention's per-head products, 2^20 multiply-adds each)
  // run one per thread at a time: oneDNN's threads inside each one cost
  // more than they share out (BERT's at batch 32: 15.3-16.6 ms against
  // 8.4-8.8 in all, docs/performance.md step 32).
  // Larger ones run outside any parallel region: inside one, even an
  // inactive one (an `if` clause), oneDNN runs on one thread. oneDNN
  // rejects a call for its arguments alone, which all the calls share: all
  // of them or none.
  if (batch > 1 && m * n * k <= (int64_t(1) << 21)) {
    int64_t failed = 0;
#pragma omp parallel for schedule(static) reduction(+ : failed)
    for (int64_t i = 0; i < batch; ++i)
      failed += !one(i);
    if (failed == batch)
      return false; // rejected before writing anything
    if (failed != 0)
      std::abort();
    return true;
  }
  for (int64_t i = 0; i < batch; ++i)
    if (!one(i)) {
      if (i == 0)
        return false; // rejected before writing anything
      std::abort();
    }
  return true;
}

// kiln_sgemm_tiles's product of few rows over a long K, an image at a time
// (mobilenet_v2's projections at 28x28 and 14x14, 32-96 rows, K 144-576; A
// shared, neither transposed): each of `threads` threads multiplies a share
// of K into a partial C, then takes a share of C's steps, summing the
// partials into it and running the epilogue on them. Each thread reads the
// rows of B that the depthwise conv before wrote on its core, not all of B:
// those projections took 31-44 us against 52-71 at 28x28, and at 14x14
// 36-40 against 44-48 (K 384) and 80-82 against 86-92 (K 576) in the model
// (docs/performance.md, step 45). The steps go by rows where M splits so
// (as in kiln_sgemm_tiles), else by columns. The partial sums round
// differently from one product over K, so the plain call's results are not
// these bit for bit.
template <typename F>
inline void kiln_sgemm_split_k(kiln_sgemm_fn gemm, int64_t batch, int64_t m, int64_t n,
                               int64_t k, const float *a, const float *b, int64_t strideB,
                               float *c, bool accumulate, int64_t em, int64_t en,
                               int64_t threads, const F &epilogue) {
  const int64_t rows = m / em, cols = n / en;
  kiln_scratch parts_owner(sizeof(float) * (threads - 1) * m * n);
  float *parts = static_cast<float *>(parts_owner.data);
  const bool byRows = em >= threads && em / threads * rows >= 16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    for (int64_t i = 0; i < batch; ++i) {
      float *ci = c + i * m * n;
      const int64_t k0 = t * k / T, k1 = (t + 1) * k / T;
      float *dst = t == 0 ? ci : parts + (t - 1) * m * n;
      if (gemm('N', 'N', m, n, k1 - k0, 1.0f, a + k0, k, b + i * strideB + k0 * n, n,
               t == 0 && accumulate ? 1.0f : 0.0f, dst, n) != 0)
        std::abort();
#pragma omp barrier
      const int64_t steps = byRows ? em : en;
      const int64_t s0 = t * steps / T, s1 = (t + 1) * steps / T;
      const int64_t r0 = byRows ? s0 * rows : 0, r1 = byRows ? s1 * rows : m;
      const int64_t c0 = byRows ? 0 : s0 * cols, c1 = byRows ? n : s1 * cols;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t u = 1; u < T; ++u) {
          const float *p = parts + (u - 1) * m * n + r * n;
          float *q = ci + r * n;
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j)
            q[j] += p[j];
        }
      if (s1 > s0)
        epilogue(i, byRows ? s0 : 0, byRows ? s1 : em, byRows ? 0 : s0, byRows ? en : s1);
#pragma omp barrier
    }
  }
}

// kiln_sgemm in one tile of C per thread, each tile's `epilogue(i, m0, m1, n0,
// n1)` run by its thread right after its GEMM, on what it just wrote. M is em
// steps of m / em rows (the epilogue's loop over its first M dim), N en steps
// of n / en columns; tiles split the larger of M and N, but M first with K
// above 64 while half the rows are 16 or more (mobilenet_v2's 14x14
// projections, 96x196x576: 59 against 67 us, 0.79-0.88x in the model;
// docs/performance.md, step 34), and the epilogue gets step ranges. (Smaller
// tiles, to keep each in L2, were slower on mobilenet_v2's 1x1 convs of K 960
// and BERT's linear layers: oneDNN's sgemm works best on large ones.) With K at
// most 64 the GEMM is bound by writing C, and tiles of at most 128 KiB of C,
// split along N first, let the epilogue read C from L2: mobilenet_v2's 16->96
// expansion at 112x112, batch 8, 0.85x the time of one tile per thread (kernel
// harness, medians of 5 alternated rounds). False, having written nothing,
// without oneDNN or below 2^20 multiply-adds: a GEMM that small gains little
// from tiles, and the plain call keeps its results bit-identical to those of
// the same GEMM without an epilogue (a plan that puts the epilogue in another
// kernel, on another device). Nor when B is one matrix for the whole batch (a
// linear layer's weight) and K is above 64: oneDNN's own threading ran BERT's
// linear layers faster than one tile per thread (docs/performance.md, step 27).
template <typename F>
inline bool kiln_sgemm_tiles(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
                             int64_t k, const float *a, int64_t strideA, const float *b,
                             int64_t strideB, float *c, bool accumulate, int64_t em, int64_t en,
                             const F &epilogue) {
  if (kiln_pointwise_applies(batch, transA, transB, m, n, k, strideA)) {
    kiln_pointwise_tiles(batch, m, n, k, a, b, strideB, c, accumulate, em, en, epilogue);
    return true;
  }
  kiln_sgemm_fn gemm = kiln_dnnl_sgemm();
  if (!gemm || batch * m * n * k < (int64_t(1) << 20) || (strideB == 0 && k > 64))
    return false;
  const int64_t rows = m / em, cols = n / en, threads = omp_get_max_threads();
  if (batch * 2 <= threads && k >= 128 && n >= 128 && m * n <= 32768 && !transA && !transB &&
      strideA == 0) {
    kiln_sgemm_split_k(gemm, batch, m, n, k, a, b, strideB, c, accumulate, em, en, threads,
                       epilogue);
    return true;
  }
  int64_t tm = em, tn = en;
  while (batch * ((em + tm - 1) / tm) * ((en + tn - 1) / tn) < threads && (tm > 1 || tn > 1)) {
    if (tm > 1 && ((k > 64 && (tm + 1) / 2 * rows >= 16) || tm * rows >= tn * cols || tn == 1))
      tm = (tm + 1) / 2;
    else
      tn = (tn + 1) / 2;
  }
  if (k <= 64)
    while (tm * rows * tn * cols * int64_t(sizeof(float)) > (int64_t(128) << 10) &&
           (tm > 1 || tn > 1)) {
      if (tn > 1)
        tn = (tn + 1) / 2;
      else
        tm = (tm + 1) / 2;
    }
  const int64_t mt = (em + tm - 1) / tm, nt = (en + tn - 1) / tn;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < batch * mt * nt; ++t) {
    const int64_t i = t / (mt * nt), m0 = (t / nt) % mt * tm, n0 = t % nt * tn;
    const int64_t m1 = std::min(em, m0 + tm), n1 = std::min(en, n0 + tn);
    const int64_t r0 = m0 * rows, c0 = n0 * cols;
    if (gemm(transA ? 'T' : 'N', transB ? 'T' : 'N', (m1 - m0) * rows, (n1 - n0) * cols, k, 1.0f,
             a + i * strideA + (transA ? r0 : r0 * k), transA ? m : k,
             b + i * strideB + (transB ? c0 * k : c0), transB ? k : n, accumulate ? 1.0f : 0.0f,
             c + i * m * n + r0 * n + c0, n) != 0)
      std::abort();
    epilogue(i, m0, m1, n0, n1);
  }
  return true;
}

// Row r of B^T d B from row r of B^T d: (a0 - a2, a1 + a2, a2 - a1, a1 - a3),
// written `stride` apart. (The transforms are spelled out in scalars: with
// small arrays GCC left the tile loops scalar, 0.7x slower at 64x56x56.)
inline void kiln_winograd_in(float a0, float a1, float a2, float a3, float *o, int64_t stride) {
  o[0] = a0 - a2;
  o[stride] = a1 + a2;
  o[2 * stride] = a2 - a1;
  o[3 * stride] = a1 - a3;
}
// The column sums of A^T M A for one column j of the tile's 16 products.
inline void kiln_winograd_col(const float *q, int64_t stride, float &s0, float &s1) {
  const float a0 = q[0], a1 = q[4 * stride], a2 = q[8 * stride], a3 = q[12 * stride];
  s0 = a0 + a1 + a2;
  s1 = a1 - a2 - a3;
}
// The 2x2 outputs A^T M A of the tile whose 16 products lie `stride` apart.
inline void kiln_winograd_out(const float *q, int64_t stride, float &r00, float &r01, float &r10,
                              float &r11) {
  float s00, s01, s02, s03, s10, s11, s12, s13;
  kiln_winograd_col(q, stride, s00, s10);
  kiln_winograd_col(q + stride, stride, s01, s11);
  kiln_winograd_col(q + 2 * stride, stride, s02, s12);
  kiln_winograd_col(q + 3 * stride, stride, s03, s13);
  r00 = s00 + s01 + s02;
  r01 = s01 - s02 - s03;
  r10 = s10 + s11 + s12;
  r11 = s11 - s12 - s13;
}
// The outputs of `tiles` whole tiles in a row, their first `Rows` rows.
template <int Rows>
inline void kiln_winograd_tiles(const float *q, int64_t stride, float *o, int64_t wo,
                                int64_t tiles) {
#pragma omp simd
  for (int64_t tx = 0; tx < tiles; ++tx) {
    float r00, r01, r10, r11;
    kiln_winograd_out(q + tx, stride, r00, r01, r10, r11);
    o[2 * tx] = r00;
    o[2 * tx + 1] = r01;
    if constexpr (Rows == 2) {
      o[wo + 2 * tx] = r10;
      o[wo + 2 * tx + 1] = r11;
    }
  }
}
// The input transform B^T d B of tiles [tx0, tx1) of a tile row whose top
// input row is p (rows wp apart): tile tx's 16 products go to o[tx], sv
// apart.
inline void kiln_winograd_in_row(const float *p, int64_t wp, float *o, int64_t sv, int64_t tx0,
                                 int64_t tx1) {
#pragma omp simd
  for (int64_t tx = tx0; tx < tx1; ++tx) {
    const float *p0 = p + 2 * tx, *p1 = p0 + wp, *p2 = p1 + wp, *p3 = p2 + wp;
    float *q = o + tx;
    kiln_winograd_in(p0[0] - p2[0], p0[1] - p2[1], p0[2] - p2[2], p0[3] - p2[3], q, sv);
    kiln_winograd_in(p1[0] + p2[0], p1[1] + p2[1], p1[2] + p2[2], p1[3] + p2[3], q + 4 * sv, sv);
    kiln_winograd_in(p2[0] - p1[0], p2[1] - p1[1], p2[2] - p1[2], p2[3] - p1[3], q + 8 * sv, sv);
    kiln_winograd_in(p1[0] - p3[0], p1[1] - p3[1], p1[2] - p3[2], p1[3] - p3[3], q + 12 * sv,
                     sv);
  }
}
// Tiles [tx0, tx1) of tile row ty of a Winograd conv's output from their
// products q (sm apart) into o (row 2 ty, column 2 tx0 of an ho x wo
// plane): whole tiles with vectors; the last tile of an odd width and the
// last row of an odd height cut short.
inline void kiln_winograd_row(const float *q, int64_t sm, float *o, int64_t ho, int64_t wo,
                              int64_t ty, int64_t tx0, int64_t tx1) {
  const int64_t whole = std::min(tx1, wo / 2) - tx0;
  const bool two = 2 * ty + 1 < ho;
  if (two)
    kiln_winograd_tiles<2>(q, sm, o, wo, whole);
  else
    kiln_winograd_tiles<1>(q, sm, o, wo, whole);
  if (tx0 + whole < tx1) {
    float r00, r01, r10, r11;
    kiln_winograd_out(q + whole, sm, r00, r01, r10, r11);
    o[2 * whole] = r00;
    if (two)
      o[wo + 2 * whole] = r10;
  }
}
// The tiles [t0, t1) of image n of kiln_winograd3x3 by one thread: their
// input transform into v (stride sv between the 16 products), the 16 GEMMs
// into mt (oneDNN on the calling thread alone, inside a parallel loop) and
// the output transform into y. False, having written nothing to y, if
// oneDNN rejects a GEMM.
inline bool kiln_winograd_band(kiln_sgemm_fn gemm, int64_t n, int64_t t0, int64_t t1, int64_t c,
                               int64_t m, int64_t hp, int64_t wp, int64_t ho, int64_t wo,
                               const float *x, const float *u, float *__restrict v,
                               float *__restrict mt, float *y) {
  const int64_t tw = (wo + 1) / 2, cols = t1 - t0, sv = c * cols, sm = m * cols;
  // Each row of tiles in the band: from tile tx0 to tx1 of tile row ty, at
  // column `at` of v and mt.
  const auto rows = [&](const auto &row) {
    for (int64_t tt = t0; tt < t1;) {
      const int64_t ty = tt / tw, tx0 = tt % tw, tx1 = std::min(tw, tx0 + (t1 - tt));
      row(ty, tx0, tx1, tt - t0);
      tt += tx1 - tx0;
    }
  };
  for (int64_t ch = 0; ch < c; ++ch)
    rows([&](int64_t ty, int64_t tx0, int64_t tx1, int64_t at) {
      kiln_winograd_in_row(x + (n * c + ch) * hp * wp + 2 * ty * wp, wp,
                           v + ch * cols + at - tx0, sv, tx0, tx1);
    });
  for (int64_t e = 0; e < 16; ++e)
    if (gemm('N', 'N', m, cols, c, 1.0f, u + e * m * c, c, v + e * sv, cols, 0.0f, mt + e * sm,
             cols) != 0)
      return false;
  for (int64_t mm = 0; mm < m; ++mm)
    rows([&](int64_t ty, int64_t tx0, int64_t tx1, int64_t at) {
      kiln_winograd_row(mt + mm * cols + at, sm, y + (n * m + mm) * ho * wo + 2 * ty * wo + 2 * tx0,
                        ho, wo, ty, tx0, tx1);
    });
  return true;
}
// y[n][m][h][w] = sum over ch, i, j of x[n][ch][h + i][w + j] * w[m][ch][i][j]
// (a 3x3 conv, stride 1) by Winograd F(2x2, 3x3), with x padded to
// [batch][c][hp][wp] and u the weight transformed as U[16][m][c]
// (kiln-pack-weights). Images go in chunks of about 4 MiB of transformed
// tiles: the input transform B^T d B of each 4x4 tile (tiles step by 2, so
// x needs whole tiles: hp >= 2 * ceil(ho / 2) + 2), 16 oneDNN GEMMs
// [m x c] x [c x tiles], and the output transform A^T M A of each tile's
// 2x2 outputs. With fewer than 32 tiles in all (resnet18's layer4 at batch
// 1: 16), the 16 GEMMs are too narrow to pay for reading U, 16/9 the size
// of w: the conv runs as im2col and one GEMM on w[m][c][3][3] per image
// instead (docs/performance.md, step 25). With an image's tiles at least
// as many as the output channels (U no bigger than an image's transformed
// tiles: resnet18's layers 1 and 2), each thread takes bands of an image's
// tiles of at most 2 MiB of transformed tiles and products
// (kiln_winograd_band): 435-459 against 620-643 us for layer1's conv,
// 415-450 against 597-616 for layer2's (harness, 2 threads); layer3's
// (256 channels, 49 tiles) took 587-610 against 479-497, each thread
// reading all of U. False, having written nothing, without oneDNN or whole
// tiles.
inline bool kiln_winograd3x3(int64_t batch, int64_t c, int64_t m, int64_t hp, int64_t wp,
                             int64_t ho, int64_t wo, const float *x, const float *w,
                             const float *u, float *y) {
  kiln_sgemm_fn gemm = kiln_dnnl_sgemm();
  const int64_t th = (ho + 1) / 2, tw = (wo + 1) / 2, t = th * tw;
  if (!gemm || hp < 2 * th + 2 || wp < 2 * tw + 2)
    return false;
  if (batch == 0 || m == 0 || t == 0)
    return true;
  if (batch * t < 32) {
    const int64_t o = ho * wo;
    kiln_scratch col_owner(sizeof(float) * 9 * std::max<int64_t>(c, 1) * o);
    float *__restrict col = static_cast<float *>(col_owner.data);
    for (int64_t n = 0; n < batch; ++n) {
#pragma omp parallel for schedule(static) if (c * o >= 4096)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j)
            for (int64_t h = 0; h < ho; ++h) {
              const float *p = x + ((n * c + ch) * hp + h + i) * wp + j;
              float *q = col + (ch * 9 + i * 3 + j) * o + h * wo;
              for (int64_t v = 0; v < wo; ++v)
                q[v] = p[v];
            }
      if (gemm('N', 'N', m, o, 9 * c, 1.0f, w, 9 * c, col, o, 0.0f, y + n * m * o, o) != 0) {
        if (n == 0)
          return false; // rejected before writing anything
        std::abort();
      }
    }
    return true;
  }
  if (m <= t) {
    const int64_t threads = omp_get_max_threads();
    int64_t bt = std::max<int64_t>(1, (int64_t(2) << 20) / (64 * (c + m)));
    int64_t bands = (t + bt - 1) / bt;
    // At least a band per thread, and at batch 1 a multiple of the threads.
    if (batch * bands < threads)
      bands = (threads + batch - 1) / batch;
    if (batch == 1)
      bands = (bands + threads - 1) / threads * threads;
    bt = (t + bands - 1) / bands;
    bands = (t + bt - 1) / bt;
    int64_t rejected = 0;
#pragma omp parallel for schedule(static) reduction(+ : rejected)
    for (int64_t job = 0; job < batch * bands; ++job) {
      const int64_t n = job / bands, t0 = job % bands * bt, t1 = std::min(t, t0 + bt);
      kiln_scratch v_owner(sizeof(float) * 16 * std::max<int64_t>(c, 1) * (t1 - t0));
      kiln_scratch mt_owner(sizeof(float) * 16 * m * (t1 - t0));
      if (!kiln_winograd_band(gemm, n, t0, t1, c, m, hp, wp, ho, wo, x, u,
                              static_cast<float *>(v_owner.data),
                              static_cast<float *>(mt_owner.data), y))
        ++rejected;
    }
    // oneDNN rejects a call for its arguments alone, which the bands share
    // but for their widths: all of them or none.
    if (rejected == batch * bands)
      return false;
    if (rejected)
      std::abort();
    return true;
  }
  const int64_t chunk =
      std::max<int64_t>(1, std::min<int64_t>(batch, (int64_t(4) << 20) /
                                                        std::max<int64_t>(1, 64 * c * t)));
  kiln_scratch v_owner(sizeof(float) * 16 * std::max<int64_t>(c, 1) * t * chunk);
  kiln_scratch mt_owner(sizeof(float) * 16 * m * t * chunk);
  float *__restrict v = static_cast<float *>(v_owner.data);
  float *__restrict mt = static_cast<float *>(mt_owner.data);
  for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
    const int64_t images = std::min(chunk, batch - n0), cols = images * t;
    const int64_t sv = c * cols, sm = m * cols;
#pragma omp parallel for collapse(3) schedule(static) if (images * c * t >= 4096)
    for (int64_t i = 0; i < images; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t ty = 0; ty < th; ++ty)
          kiln_winograd_in_row(x + ((n0 + i) * c + ch) * hp * wp + 2 * ty * wp, wp,
                               v + ch * cols + i * t + ty * tw, sv, 0, tw);
    for (int64_t e = 0; e < 16; ++e)
      if (gemm('N', 'N', m, cols, c, 1.0f, u + e * m * c, c, v + e * sv, cols, 0.0f,
               mt + e * sm, cols) != 0) {
        if (n0 == 0 && e == 0)
          return false; // rejected before writing anything
        std::abort();
      }
#pragma omp parallel for collapse(3) schedule(static) if (images * m * t >= 4096)
    for (int64_t i = 0; i < images; ++i)
      for (int64_t mm = 0; mm < m; ++mm)
        for (int64_t ty = 0; ty < th; ++ty)
          kiln_winograd_row(mt + mm * cols + i * t + ty * tw, sm,
                            y + ((n0 + i) * m + mm) * ho * wo + 2 * ty * wo, ho, wo, ty, 0, tw);
  }
  return true;
}

// A conv over a few input channels (a network's stem, where im2col's K, c *
// kh * kw, is too small for a GEMM to run well), by output rows:
// y[n][m][oh][ow] = sum over ch < c, i < kh, j < kw of x[n][ch][oh * sh +
// i][ow * sw + j] * w[m][ch][i][j], x [batch][c][h][iw] read as if padded
// with zeros to [batch][c][hp][wp] (top rows and left columns before it).
// Each image's x is first copied so padded and split by the column stride
// (column ow * sw + j goes to phase j % sw, column ow + j / sw), so that
// each tap reads the inputs of a row of outputs contiguously. Then each
// thread takes an output row, block of channels by block of channels.
// With AVX-512 a block is 32 channels, and a tile 14 outputs of the row by
// the block's 2 vectors of 16 channels: per tap 2 weight vectors (packed
// tap by tap, aligned) and 14 broadcast inputs feed 28 sums, which a 16x16
// transpose per vector turns into 14 outputs of each channel's row
// (docs/performance.md, step 51: resnet18's stem 630-690 us against
// 900-1010 with the outputs in the vectors). With AVX2 and FMA (16
// registers of 8) a block is 16 channels and a tile 6 outputs: 12 sums,
// 2 weight vectors and a broadcast input; an 8x8 transpose per vector
// stores them (step 54, Zen 3: resnet18's stem 1.6-3.0 ms against 3.2-5.0
// with the outputs in the vectors, mobilenet_v2's 255-440 us against
// 360-750; tiles of 7, with one weight vector read from L1 at each FMA,
// 1.9-2.9 ms and 250-510). Otherwise a block is 4 channels, whose sums
// over all taps stay in vectors of 8 outputs, up to 3 at a time (16
// registers hold no more: as 6 vectors of 16 in pairs of registers,
// resnet18's stem took 22 ms against 0.9).
#if defined(__AVX512F__)
constexpr int64_t kiln_rows_block = 32, kiln_rows_tile = 14;
// r[j] = column j of the 16x16 matrix with rows r[0..15].
inline void kiln_transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(t[4 * i + h]), b = _mm512_castps_pd(t[4 * i + h + 2]);
      r[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}
// The sums of kiln_rows_tile outputs (the lanes of `lanes`) of `rows`
// channels (at most 16 V) written to y, row r at y + r * ldy: tap t reads
// at + offsets[t], its weights are the V vectors at w + 32 t.
template <int V>
inline void kiln_conv_rows_tile(const float *at, const int64_t *offsets, const float *w,
                                int64_t taps, float *y, int64_t ldy, int64_t rows,
                                __mmask16 lanes) {
  constexpr int P = kiln_rows_tile;
  __m512 acc[P][V];
  for (int i = 0; i < P; ++i)
    for (int v = 0; v < V; ++v)
      acc[i][v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = at + offsets[t];
    __m512 wv[V];
    for (int v = 0; v < V; ++v)
      wv[v] = _mm512_load_ps(w + kiln_rows_block * t + 16 * v);
    for (int i = 0; i < P; ++i) {
      const __m512 b = _mm512_set1_ps(p[i]);
      for (int v = 0; v < V; ++v)
        acc[i][v] = _mm512_fmadd_ps(b, wv[v], acc[i][v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = i < P ? acc[i][v] : _mm512_setzero_ps();
    kiln_transpose16(r);
    for (int j = 0; j < 16 && 16 * v + j < rows; ++j)
      _mm512_mask_storeu_ps(y + (16 * v + j) * ldy, lanes, r[j]);
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int64_t kiln_rows_block = 16, kiln_rows_tile = 6;
// r[j] = column j of the 8x8 matrix with rows r[0..7].
inline void kiln_transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}
// The sums of `width` (at most kiln_rows_tile) outputs of `rows` channels
// (at most 8 V) written to y, row r at y + r * ldy, 8 at a time when
// `whole` (the next tile of the row then writes over the lanes past
// width): tap t reads at + offsets[t], its weights are the V vectors at
// w + 16 t.
template <int V>
inline void kiln_conv_rows_tile(const float *at, const int64_t *offsets, const float *w,
                                int64_t taps, float *y, int64_t ldy, int64_t rows,
                                int64_t width, bool whole) {
  constexpr int P = kiln_rows_tile;
  __m256 acc[P][V];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v)
      acc[i][v] = _mm256_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = at + offsets[t];
    __m256 wv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v)
      wv[v] = _mm256_load_ps(w + kiln_rows_block * t + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const __m256 b = _mm256_broadcast_ss(p + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v)
        acc[i][v] = _mm256_fmadd_ps(b, wv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      r[i] = i < P ? acc[i][v] : _mm256_setzero_ps();
    kiln_transpose8(r);
    for (int j = 0; j < 8 && 8 * v + j < rows; ++j) {
      float *o = y + (8 * v + j) * ldy;
      if (whole) {
        _mm256_storeu_ps(o, r[j]);
      } else {
        alignas(32) float row[8];
        _mm256_store_ps(row, r[j]);
        for (int64_t i = 0; i < width; ++i)
          o[i] = row[i];
      }
    }
  }
}
#else
constexpr int64_t kiln_rows_block = 4, kiln_rows_lanes = 8, kiln_rows_vectors = 3;
typedef float kiln_vrow __attribute__((vector_size(4 * kiln_rows_lanes)));
// The sums of 4 output channels for V vectors of outputs, written to sums
// as [4][V * kiln_rows_lanes]: tap t reads at + offsets[t], its 4 weights
// are w[4 t..].
template <int V>
inline void kiln_conv_rows_tile(const float *at, const int64_t *offsets, const float *w,
                                int64_t taps, float *y, int64_t ldy) {
  kiln_vrow acc[4][V];
  for (int v = 0; v < V; ++v)
    acc[0][v] = acc[1][v] = acc[2][v] = acc[3][v] = kiln_vrow{};
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = at + offsets[t];
    const float s0 = w[4 * t], s1 = w[4 * t + 1], s2 = w[4 * t + 2], s3 = w[4 * t + 3];
    const kiln_vrow b0 = kiln_vrow{} + s0, b1 = kiln_vrow{} + s1, b2 = kiln_vrow{} + s2,
                    b3 = kiln_vrow{} + s3;
    for (int v = 0; v < V; ++v) {
      kiln_vrow in;
      std::memcpy(&in, p + kiln_rows_lanes * v, sizeof(in));
      acc[0][v] += in * b0;
      acc[1][v] += in * b1;
      acc[2][v] += in * b2;
      acc[3][v] += in * b3;
    }
  }
  for (int r = 0; r < 4; ++r)
    std::memcpy(y + r * ldy, acc[r], sizeof(acc[r]));
}
#endif
// With `epilogue(n, mlo, mhi, oh, oh + 1)` run by the thread on each tile
// of channels [mlo, mhi) of output row oh of image n right after computing
// it (as kiln_sgemm_tiles does for a GEMM's tiles): em must be m and en ho
// (steps of a channel and a row), else false, having written nothing.
template <typename F>
inline bool kiln_conv_rows_tiles(int64_t batch, int64_t c, int64_t m, int64_t hp, int64_t wp,
                                 int64_t h, int64_t iw, int64_t top, int64_t left, int64_t kh,
                                 int64_t kw, int64_t sh, int64_t sw, int64_t ho, int64_t wo,
                                 const float *x, const float *w, float *y, int64_t em, int64_t en,
                                 const F &epilogue) {
  if (em != m || en != ho)
    return false;
  if (batch == 0 || m == 0 || ho == 0 || wo == 0)
    return true;
  constexpr int64_t B = kiln_rows_block;
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  const int64_t span = (wo + kiln_rows_tile - 1) / kiln_rows_tile * kiln_rows_tile;
#else
  constexpr int64_t L = kiln_rows_lanes;
  const int64_t vectors = (wo + L - 1) / L,
                chunks = (vectors + kiln_rows_vectors - 1) / kiln_rows_vectors;
  const int64_t per = (vectors + chunks - 1) / chunks, span = vectors * L;
#endif
  // Zeros past the last tile's taps.
  const int64_t phase = span + kw, row = sw * phase, plane = hp * row;
  const int64_t taps = c * kh * kw, blocks = (m + B - 1) / B;
  kiln_scratch xs_owner(sizeof(float) * std::max<int64_t>(c * plane, 1));
  float *__restrict xs = static_cast<float *>(xs_owner.data);
  // Each tap's offset in xs, by phase (column j = q * sw + ph of the
  // window), and the weights of each block of channels tap by tap; past
  // the last channel, a block repeats it (and keeps no sums).
  kiln_scratch offsets_owner(sizeof(int64_t) * taps);
  kiln_scratch wt_owner(sizeof(float) * blocks * taps * B);
  int64_t *offsets = static_cast<int64_t *>(offsets_owner.data);
  float *wt = static_cast<float *>(wt_owner.data);
  int64_t t = 0;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t ph = 0; ph < sw; ++ph)
        for (int64_t q = 0; q * sw + ph < kw; ++q, ++t) {
          offsets[t] = ch * plane + i * row + ph * phase + q;
          for (int64_t b = 0; b < blocks; ++b)
            for (int64_t r = 0; r < B; ++r)
              wt[(b * taps + t) * B + r] =
                  w[std::min(b * B + r, m - 1) * taps + (ch * kh + i) * kw + q * sw + ph];
        }
  for (int64_t n = 0; n < batch; ++n) {
    const float *xn = x + n * c * h * iw;
    // Row by row across the channels, so that each thread copies the rows
    // its output rows read below (static schedules alike). Phase ph holds
    // the padded columns q * sw + ph, source column q * sw + ph - left.
#pragma omp parallel for schedule(static) if (c * hp * wp >= 4096)
    for (int64_t rc = 0; rc < c * hp; ++rc) {
      const int64_t ch = rc % c, r = rc / c, s = r - top;
      float *o = xs + (ch * hp + r) * row;
      if (s < 0 || s >= h) {
        std::memset(o, 0, sizeof(float) * row);
        continue;
      }
      const float *src = xn + (ch * h + s) * iw;
      const int64_t inside = std::min(iw + left, wp);
      for (int64_t ph = 0; ph < sw; ++ph) {
        float *op = o + ph * phase;
        const int64_t first = std::min(phase, (left - ph + sw - 1) / sw);
        const int64_t end = std::max(first, std::min(phase, (inside - ph + sw - 1) / sw));
        std::memset(op, 0, sizeof(float) * first);
        if (sw == 1) {
          std::memcpy(op + first, src + first - left, sizeof(float) * (end - first));
        } else {
          int64_t q = first;
#if defined(__AVX512F__)
          // Stride 2: 16 columns of a phase from two vectors of the row:
          // mobilenet_v2's copy 35-44 us against 47-51 one by one.
          if (sw == 2)
            for (; q + 16 <= end && 2 * q + ph - left + 32 <= iw; q += 16)
              _mm512_storeu_ps(op + q, kiln_even16(src + 2 * q + ph - left));
#endif
          for (; q < end; ++q)
            op[q] = src[q * sw + ph - left];
        }
        std::memset(op + end, 0, sizeof(float) * (phase - end));
      }
    }
    // A thread runs all blocks of channels on an output row before the
    // next row, while the input rows it reads are in L1, and the epilogue
    // on each block's row right after it: mobilenet_v2's stem (27 taps) took
    // 118-121 us against 192-215 block by block, resnet18's (147 taps)
    // 770-780 against 828-868 (harness, 2 threads, 4 alternated runs).
#pragma omp parallel for schedule(static)
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t b = 0; b < blocks; ++b) {
        const float *wb = wt + b * taps * B;
        const int64_t rows = std::min(B, m - b * B);
        float *yb = y + ((n * m + b * B) * ho + oh) * wo;
#if defined(__AVX512F__)
        for (int64_t p0 = 0; p0 < wo; p0 += kiln_rows_tile) {
          const float *at = xs + oh * sh * row + p0;
          const __mmask16 lanes = kiln_lanes(std::min(kiln_rows_tile, wo - p0));
          if (rows > 16)
            kiln_conv_rows_tile<2>(at, offsets, wb, taps, yb + p0, ho * wo, rows, lanes);
          else
            kiln_conv_rows_tile<1>(at, offsets, wb, taps, yb + p0, ho * wo, rows, lanes);
        }
#elif defined(__AVX2__) && defined(__FMA__)
        for (int64_t p0 = 0; p0 < wo; p0 += kiln_rows_tile) {
          const float *at = xs + oh * sh * row + p0;
          const int64_t width = std::min(kiln_rows_tile, wo - p0);
          const bool whole = p0 + 8 <= wo;
          if (rows > 8)
            kiln_conv_rows_tile<2>(at, offsets, wb, taps, yb + p0, ho * wo, rows, width, whole);
          else
            kiln_conv_rows_tile<1>(at, offsets, wb, taps, yb + p0, ho * wo, rows, width, whole);
        }
#else
        alignas(64) float sums[4 * kiln_rows_vectors * L];
        for (int64_t v0 = 0; v0 < vectors; v0 += per) {
          const int64_t nv = std::min(per, vectors - v0);
          const float *at = xs + oh * sh * row + v0 * L;
          const int64_t width = std::min(nv * L, wo - v0 * L);
          float *yt = yb + v0 * L;
          const bool direct = width == nv * L && rows == 4;
          float *out = direct ? yt : sums;
          const int64_t ld = direct ? ho * wo : nv * L;
          switch (nv) {
          case 1: kiln_conv_rows_tile<1>(at, offsets, wb, taps, out, ld); break;
          case 2: kiln_conv_rows_tile<2>(at, offsets, wb, taps, out, ld); break;
          default: kiln_conv_rows_tile<3>(at, offsets, wb, taps, out, ld); break;
          }
          if (!direct)
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(yt + r * ho * wo, sums + r * nv * L, sizeof(float) * width);
        }
#endif
        epilogue(n, b * B, b * B + rows, oh, oh + 1);
      }
  }
  return true;
}
inline bool kiln_conv_rows(int64_t batch, int64_t c, int64_t m, int64_t hp, int64_t wp,
                           int64_t h, int64_t iw, int64_t top, int64_t left, int64_t kh,
                           int64_t kw, int64_t sh, int64_t sw, int64_t ho, int64_t wo,
                           const float *x, const float *w, float *y) {
  return kiln_conv_rows_tiles(batch, c, m, hp, wp, h, iw, top, left, kh, kw, sh, sw, ho, wo, x,
                              w, y, m, ho, [](int64_t, int64_t, int64_t, int64_t, int64_t) {});
}

// A depthwise 3x3 conv, stride S (1 or 2) in both dims, read straight from x
// [batch][c][H][W] as if padded with zeros (Top rows and Left columns before
// it): y[n][ch][oh][ow] = init + sum over i, j < 3 of x[n][ch][oh * S + i -
// Top][ow * S + j - Left] * w[ch][i][j] for HO x WO outputs, init bias[ch] (or
// `init` without a bias). Each output row reads three input rows (a row outside
// x reads zeros) at columns ow * S + j - Left: the columns whose three taps all
// lie inside x run as one vector loop, the others one by one, each sum in the
// window's order. The plane sizes are template arguments: as function
// arguments, 960 planes of 7x7 took 40 us against 20. Planes of at most 256
// outputs at stride 1 whose rows keep their width run flattened, 16 outputs a
// vector, on CPUs with AVX-512 (kiln_dwconv3x3_flat): mobilenet_v2's 960 planes
// of 7x7 took 23-25 us against 39-43 by rows (and 35-42 through the window's
// own loops, which such planes keep without AVX-512), its 14x14 ones 27-28
// against 28-31; its 28x28 ones, flattened, 67-69 against 55-59. Threads take
// planes, and run `epilogue(n, ch, ch + 1, 0, HO)` on each right after it (as
// kiln_sgemm_tiles does for a GEMM's tiles): em must be c and en HO, else
// false, having written nothing (docs/performance.md, steps 39 and 42).
// An output of kiln_dwconv3x3 at input column q (its first tap's) whose taps
// may lie outside the w columns of rows r0, r1, r2 (zeros there).
inline float kiln_dw_edge(const float *r0, const float *r1, const float *r2, int64_t q,
                          int64_t w, const float *k, float b) {
  const auto at = [w](const float *r, int64_t col) {
    return col >= 0 && col < w ? r[col] : 0.0f;
  };
  return b + at(r0, q) * k[0] + at(r0, q + 1) * k[1] + at(r0, q + 2) * k[2] + at(r1, q) * k[3] +
         at(r1, q + 1) * k[4] + at(r1, q + 2) * k[5] + at(r2, q) * k[6] + at(r2, q + 1) * k[7] +
         at(r2, q + 2) * k[8];
}
#if defined(__AVX512F__)
// A stride-1 depthwise plane whose rows are as wide as its input's (W ==
// WO) has each tap (i, j) read the plane flattened at a fixed shift, (i -
// Top) W + j - Left: its 16 outputs a vector take 9 masked loads (the
// lanes whose tap lies outside x, or past the plane, read zeros) and 9
// FMAs, whatever the width of the rows. The masks, by tap and vector.
template <int64_t H, int64_t W, int64_t HO, int64_t Top, int64_t Left> struct kiln_dw_flat {
  static constexpr int64_t size = HO * W, vectors = (size + 15) / 16;
  __mmask16 mask[9][vectors], last;
  int64_t shift[9];
  kiln_dw_flat() {
    for (int64_t t = 0; t < 9; ++t) {
      const int64_t i = t / 3, j = t % 3;
      shift[t] = (i - Top) * W + j - Left;
      for (int64_t v = 0; v < vectors; ++v) {
        unsigned m = 0;
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t p = v * 16 + l, r = p / W + i - Top, q = p % W + j - Left;
          if (p < size && r >= 0 && r < H && q >= 0 && q < W)
            m |= 1u << l;
        }
        mask[t][v] = __mmask16(m);
      }
    }
    last = kiln_lanes(size - 16 * (vectors - 1));
  }
};
template <int64_t H, int64_t W, int64_t HO, int64_t Top, int64_t Left>
inline void kiln_dwconv3x3_flat(const float *__restrict xp, const float *k, float b,
                                float *__restrict yp) {
  static const kiln_dw_flat<H, W, HO, Top, Left> f;
  __m512 kv[9];
  for (int t = 0; t < 9; ++t)
    kv[t] = _mm512_set1_ps(k[t]);
  for (int64_t v = 0; v < f.vectors; ++v) {
    __m512 acc = _mm512_set1_ps(b);
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(f.mask[t][v], xp + v * 16 + f.shift[t]), kv[t],
                            acc);
    _mm512_mask_storeu_ps(yp + v * 16, v == f.vectors - 1 ? f.last : __mmask16(0xffff), acc);
  }
}
#endif
template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top, int64_t Left,
          typename F>
inline bool kiln_dwconv3x3_tiles(int64_t batch, int64_t c, const float *x, const float *wt,
                                 const float *bias, float init, float *y, int64_t em, int64_t en,
                                 const F &epilogue) {
  static_assert((S == 1 || S == 2) && H > 0 && W > 0, "a stride of 1 or 2, a plane");
  if (em != c || en != HO)
    return false;
  // Rows outside x read zeros (not x's first row with a weight of 0: an
  // infinity there would make a NaN where the pad makes none).
  static const float zeros[W] = {};
  // Interior columns: ow * S - Left >= 0 and ow * S - Left + 2 < W.
  constexpr int64_t lo = std::min(WO, (Left + S - 1) / S);
  constexpr int64_t hi = std::max(lo, std::min(WO, W + Left - 2 > 0 ? (W + Left - 3) / S + 1 : 0));
  const auto planeRows = [&](int64_t plane) {
    const int64_t ch = plane % c;
    const float *xp = x + plane * H * W;
    const float *k = wt + ch * 9;
    const float k00 = k[0], k01 = k[1], k02 = k[2], k10 = k[3], k11 = k[4], k12 = k[5],
                k20 = k[6], k21 = k[7], k22 = k[8];
    const float b = bias ? bias[ch] : init;
    float *yp = y + plane * HO * WO;
    for (int64_t oh = 0; oh < HO; ++oh) {
      const int64_t i0 = oh * S - Top;
      const float *__restrict r0 = i0 >= 0 && i0 < H ? xp + i0 * W : zeros;
      const float *__restrict r1 = i0 + 1 >= 0 && i0 + 1 < H ? xp + (i0 + 1) * W : zeros;
      const float *__restrict r2 = i0 + 2 >= 0 && i0 + 2 < H ? xp + (i0 + 2) * W : zeros;
      float *__restrict o = yp + oh * WO;
#pragma omp simd
      for (int64_t ow = lo; ow < hi; ++ow) {
        const int64_t q = ow * S - Left;
        o[ow] = b + r0[q] * k00 + r0[q + 1] * k01 + r0[q + 2] * k02 + r1[q] * k10 +
                r1[q + 1] * k11 + r1[q + 2] * k12 + r2[q] * k20 + r2[q + 1] * k21 +
                r2[q + 2] * k22;
      }
      // The columns with a tap outside x, in the same order of sums.
      for (int64_t ow = 0; ow < lo; ++ow)
        o[ow] = kiln_dw_edge(r0, r1, r2, ow * S - Left, W, k, b);
      for (int64_t ow = hi; ow < WO; ++ow)
        o[ow] = kiln_dw_edge(r0, r1, r2, ow * S - Left, W, k, b);
    }
  };
#if defined(__AVX512F__)
  if constexpr (S == 1 && W == WO && HO * WO <= 256) {
#pragma omp parallel for schedule(static) if (batch * c * HO * WO >= 4096)
    for (int64_t plane = 0; plane < batch * c; ++plane) {
      const int64_t n = plane / c, ch = plane % c;
      kiln_dwconv3x3_flat<H, W, HO, Top, Left>(x + plane * H * W, wt + ch * 9,
                                               bias ? bias[ch] : init, y + plane * HO * WO);
      epilogue(n, ch, ch + 1, 0, HO);
    }
    return true;
  }
#else
  // Rows of 7 at stride 1 ran faster as the window's own loops over the
  // plane flattened: 27-34 us for mobilenet_v2's 960 planes of 7x7, 32-36
  // by rows here, 2 of 7 columns at the edges.
  if constexpr (S == 1 && WO < 8)
    return false;
#endif
  // At stride 2 each input row is split once into its even and odd
  // columns of the row padded with zeros (Left before it): tap j of output
  // column ow reads padded column 2 ow + j, so taps 0, 1, 2 read even[ow],
  // odd[ow] and even[ow + 1], and every tap runs as a contiguous vector
  // loop, the edges included, in the same order of sums as planeRows.
  // Rows of fewer than 24 outputs go by planeRows: mobilenet_v2's planes
  // of 7 outputs took 61-68 us split against 35-50 (batch 1), of 14 55-71
  // against 45-54; 16 and 20 came out even, 24 and 28 faster split
  // (docs/performance.md, step 57).
  if constexpr (S == 2 && WO >= 24 && WO <= 1024) {
#pragma omp parallel for schedule(static) if (batch * c * HO * WO >= 4096)
    for (int64_t plane = 0; plane < batch * c; ++plane) {
      const int64_t n = plane / c, ch = plane % c;
      const float *xp = x + plane * H * W;
      const float *k = wt + ch * 9;
      const float b = bias ? bias[ch] : init;
      float *yp = y + plane * HO * WO;
      constexpr int64_t U = WO + 1;
      float split[3][2][U]; // input row r in slot (r + 3 Top + 3) % 3: even, odd
      int64_t done = -Top - 1;
      for (int64_t oh = 0; oh < HO; ++oh) {
        const int64_t i0 = 2 * oh - Top;
        for (int64_t r = std::max(done + 1, i0); r <= i0 + 2; ++r) {
          float *__restrict e = split[(r + 3 * Top + 3) % 3][0], *__restrict o = e + U;
          if (r < 0 || r >= H) {
            std::fill(e, e + U, 0.0f);
            std::fill(o, o + U, 0.0f);
            continue;
          }
          const float *__restrict row = xp + r * W;
          // Padded columns 2u and 2u + 1 are row's 2u - Left and 2u + 1 - Left.
          constexpr int64_t first = (Left + 1) / 2,
                            last = std::max(first, std::min(U, (W + Left) / 2));
          const auto edge = [&](int64_t u) {
            const int64_t q = 2 * u - Left;
            e[u] = q >= 0 && q < W ? row[q] : 0.0f;
            o[u] = q + 1 >= 0 && q + 1 < W ? row[q + 1] : 0.0f;
          };
          for (int64_t u = 0; u < first; ++u)
            edge(u);
#pragma omp simd
          for (int64_t u = first; u < last; ++u) {
            e[u] = row[2 * u - Left];
            o[u] = row[2 * u + 1 - Left];
          }
          for (int64_t u = last; u < U; ++u)
            edge(u);
        }
        done = i0 + 2;
        const int64_t s0 = (i0 + 3 * Top + 3) % 3, s1 = (s0 + 1) % 3, s2 = (s0 + 2) % 3;
        const float *__restrict e0 = split[s0][0], *__restrict o0 = split[s0][1];
        const float *__restrict e1 = split[s1][0], *__restrict o1 = split[s1][1];
        const float *__restrict e2 = split[s2][0], *__restrict o2 = split[s2][1];
        const float k00 = k[0], k01 = k[1], k02 = k[2], k10 = k[3], k11 = k[4], k12 = k[5],
                    k20 = k[6], k21 = k[7], k22 = k[8];
        float *__restrict out = yp + oh * WO;
#pragma omp simd
        for (int64_t ow = 0; ow < WO; ++ow)
          out[ow] = b + e0[ow] * k00 + o0[ow] * k01 + e0[ow + 1] * k02 + e1[ow] * k10 +
                    o1[ow] * k11 + e1[ow + 1] * k12 + e2[ow] * k20 + o2[ow] * k21 +
                    e2[ow + 1] * k22;
      }
      epilogue(n, ch, ch + 1, 0, HO);
    }
    return true;
  }
#pragma omp parallel for schedule(static) if (batch * c * HO * WO >= 4096)
  for (int64_t plane = 0; plane < batch * c; ++plane) {
    const int64_t n = plane / c, ch = plane % c;
    planeRows(plane);
    epilogue(n, ch, ch + 1, 0, HO);
  }
  return true;
}
template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top, int64_t Left>
inline bool kiln_dwconv3x3(int64_t batch, int64_t c, const float *x, const float *wt,
                           const float *bias, float init, float *y) {
  return kiln_dwconv3x3_tiles<S, H, W, HO, WO, Top, Left>(
      batch, c, x, wt, bias, init, y, c, HO, [](int64_t, int64_t, int64_t, int64_t, int64_t) {});
}

// A 3x3 max pool, stride S (1 or 2) in both dims, read straight from x
// [batch][c][H][W] as if padded with `pad` (Top rows and Left columns
// before it): y[n][ch][oh][ow] = the max of init and x[n][ch][oh * S +
// i - Top][ow * S + j - Left] over i, j < 3, for HO x WO outputs (NaN if
// any is). A row of outputs takes the max of its three input rows across
// the row, then of each output's three columns of that. Threads split each
// image's output rows, as the stem conv before (kiln_conv_rows) and the
// Winograd bands after it in resnet18 do: its pool took 89-132 us in the
// model against 151-174 for the window's loops over planes padded per
// thread, which took planes (docs/performance.md, step 44).
template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top, int64_t Left>
inline bool kiln_maxpool3x3(int64_t batch, int64_t c, const float *x, float pad, float init,
                            float *y) {
  static_assert((S == 1 || S == 2) && H > 0 && W > 0, "a stride of 1 or 2, a plane");
  // A row of maxima and one of pad values live on the stack.
  if constexpr (W > 16384 || Top < 0 || Left < 0)
    return false;
  // The row's maxima at columns -Left.., and past W as far as the last
  // vectors of inputs and outputs reach.
  constexpr int64_t span =
      std::max((W + 15) / 16 * 16 + Left, ((WO + 15) / 16 * 16 - 1) * S + 19);
  const float edge = kiln_maximum(init, pad);
  float padded[W]; // a row outside x
  for (int64_t q = 0; q < W; ++q)
    padded[q] = pad;
  const auto row = [&](const float *xp, int64_t oh, float *__restrict o) {
    float m[span];
    const int64_t i0 = oh * S - Top;
    const float *__restrict r0 = i0 >= 0 && i0 < H ? xp + i0 * W : padded;
    const float *__restrict r1 = i0 + 1 >= 0 && i0 + 1 < H ? xp + (i0 + 1) * W : padded;
    const float *__restrict r2 = i0 + 2 >= 0 && i0 + 2 < H ? xp + (i0 + 2) * W : padded;
    for (int64_t q = 0; q < Left; ++q)
      m[q] = edge;
    for (int64_t q = Left + W; q < span; ++q)
      m[q] = edge;
#if defined(__AVX512F__)
    // vmaxps, then NaN where an operand was one (vmaxps returns its second
    // operand then, which may not be the NaN): resnet18's pool 59-64 us in a
    // harness, 72 with kiln_maximum's compare, compare and blend for each
    // max. (vrangeps's max, one instruction, drops a NaN.)
    const __m512 nan = _mm512_set1_ps(__builtin_nanf(""));
    const auto max3 = [&](__m512 a, __m512 b, __m512 c) {
      const __mmask16 k = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) |
                          _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
      return _mm512_mask_mov_ps(_mm512_max_ps(_mm512_max_ps(a, b), c), k, nan);
    };
    const __m512 first = _mm512_set1_ps(init);
    for (int64_t q = 0; q < W; q += 16) {
      const __mmask16 k = kiln_lanes(W - q);
      __m512 v = max3(_mm512_maskz_loadu_ps(k, r0 + q), _mm512_maskz_loadu_ps(k, r1 + q),
                      _mm512_maskz_loadu_ps(k, r2 + q));
      v = _mm512_mask_mov_ps(_mm512_max_ps(v, first),
                             _mm512_cmp_ps_mask(v, first, _CMP_UNORD_Q), nan);
      _mm512_mask_storeu_ps(m + Left + q, k, v);
    }
    for (int64_t ow = 0; ow < WO; ow += 16) {
      const __mmask16 k = kiln_lanes(WO - ow);
      const float *p = m + S * ow;
      __m512 v;
      if constexpr (S == 2) {
        // 16 outputs from 2 x 16 maxima: even, odd and even again, one on.
        v = max3(kiln_even16(p), kiln_even16(p + 1), kiln_even16(p + 2));
      } else {
        v = max3(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 1), _mm512_loadu_ps(p + 2));
      }
      _mm512_mask_storeu_ps(o + ow, k, v);
    }
#else
#pragma omp simd
    for (int64_t q = 0; q < W; ++q)
      m[Left + q] = kiln_maximum(kiln_maximum(kiln_maximum(init, r0[q]), r1[q]), r2[q]);
#pragma omp simd
    for (int64_t ow = 0; ow < WO; ++ow)
      o[ow] = kiln_maximum(kiln_maximum(m[ow * S], m[ow * S + 1]), m[ow * S + 2]);
#endif
  };
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(HO, omp_get_max_threads()));
#pragma omp parallel for schedule(static) if (batch * c * HO * WO >= 4096)
  for (int64_t job = 0; job < batch * parts; ++job) {
    const int64_t n = job / parts, part = job % parts;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t oh = part * HO / parts; oh < (part + 1) * HO / parts; ++oh)
        row(x + (n * c + ch) * H * W, oh, y + ((n * c + ch) * HO + oh) * WO);
  }
  return true;
}
)";

static_assert(kPackedColumns == 16,
              "kiln_sgemm_packed in kPrelude reads panels of 16 columns");
} // namespace

std::string kiln::kernelPrelude() {
  return kPrelude +
         ("namespace {\n" + narrowFloatFunctions("inline", kCppStyle) +
          "} // namespace\n");
}
