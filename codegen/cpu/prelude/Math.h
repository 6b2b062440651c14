//===- Math.h - part of the prelude of generated C++ ------------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: the includes, NaN-
// propagating max and min, bit casts, and f32 exp and erf that vectorize.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
// kiln prelude text
#include <cmath>
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
// tanh(x) as Cephes' tanhf computes it, without branches: x + x^3 P(x^2) for
// |x| < 0.625, else 1 - 2 / (e^2|x| + 1) with x's sign (+-1 for large |x|:
// kiln_expf clamps). Within 2 ulp of tanh (every float checked against
// double tanh); NaN in, NaN out. std::tanh is a library call per element:
// a GELU of 16K elements (GPT's MLP at batch 8) took 0.9 ms with it.
inline float kiln_tanhf(float x) {
  const float a = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const float small = x == 0.0f ? x : p * z * x + x; // -0 stays -0
  const float big = 1.0f - 2.0f / (kiln_expf(a + a) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : (x != x ? x : signed_big);
}
} // namespace

