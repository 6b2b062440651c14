//===- Sgemm.h - part of the prelude of generated C++ -----------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: GEMMs: oneDNN's
// sgemm found at run time, kiln's own over packed panels and 1x1-conv blocks,
// split-K, and tiles with epilogues.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/Scratch.h"
// kiln prelude text
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
// K 160-4608, 2 threads; docs/performance-log.md, step 30). N = 1025 gained
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
// 0.70-0.92x (docs/performance-log.md, step 56).
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
// (docs/performance-log.md, step 41). Larger K ran slower than oneDNN in the
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
  // 8.4-8.8 in all, docs/performance-log.md step 32).
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

// `outer` runs of kiln_sgemm's batch of `batch` GEMMs, each operand moving
// by its stride within a run and by its outer stride from run to run: 0 for
// the operand every run shares (a grouped conv's weight, one matrix per
// group, is the same for every image; its im2col windows and output move
// by an image's groups). False when oneDNN refused (before any write).
inline bool kiln_sgemm_runs(int64_t outer, int64_t batch, bool transA, bool transB, int64_t m,
                            int64_t n, int64_t k, const float *a, int64_t strideA,
                            int64_t outerA, const float *b, int64_t strideB, int64_t outerB,
                            float *c, bool accumulate) {
  for (int64_t i = 0; i < outer; ++i)
    if (!kiln_sgemm(batch, transA, transB, m, n, k, a + i * outerA, strideA, b + i * outerB,
                    strideB, c + i * batch * m * n, accumulate)) {
      if (i == 0)
        return false;
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
// (docs/performance-log.md, step 45). The steps go by rows where M splits so
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
// docs/performance-log.md, step 34), and the epilogue gets step ranges. (Smaller
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
// linear layers faster than one tile per thread (docs/performance-log.md, step 27).
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

