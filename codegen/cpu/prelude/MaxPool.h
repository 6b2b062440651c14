//===- MaxPool.h - part of the prelude of generated C++ ---------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: 3x3 max pools read
// straight from the input.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/Depthwise.h"
// kiln prelude text
// A 3x3 max pool, stride S (1 or 2) in both dims, read straight from x
// [batch][c][H][W] as if padded with `pad` (Top rows and Left columns
// before it): y[n][ch][oh][ow] = the max of init and x[n][ch][oh * S +
// i - Top][ow * S + j - Left] over i, j < 3, for HO x WO outputs (NaN if
// any is). A row of outputs takes the max of its three input rows across
// the row, then of each output's three columns of that. Threads split each
// image's output rows, as the stem conv before (kiln_conv_rows) and the
// Winograd bands after it in resnet18 do: its pool took 89-132 us in the
// model against 151-174 for the window's loops over planes padded per
// thread, which took planes (docs/performance-log.md, step 44).
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
