//===- Transpose.h - part of the prelude of generated C++ -------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: transposes of the
// last two dims in tiles.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/MaxPool.h"
// kiln prelude text
// out[b][r][c] = in[b][c][r] for b < batch, r < rows, c < cols (4-byte
// elements): an attention's keys [N, H, S, D] turned into [N, H, D, S]. The
// generated loops read the input with a stride of `rows` elements, one
// gathered element per output (gpt_step's 2 MB at batch 8 took 0.46 ms).
// Here threads take tiles of 16x16 (8x8 with AVX2 alone), each read as rows
// of the input into vectors, transposed in registers and written as rows of
// the output; the edges with lane masks. Scalar tiles without AVX2.
inline bool kiln_transpose2d(int64_t batch, int64_t rows, int64_t cols, const float *in,
                             float *out) {
#if defined(__AVX512F__)
  constexpr int64_t T = 16;
#else
  constexpr int64_t T = 8;
#endif
  const int64_t tr = (rows + T - 1) / T, tc = (cols + T - 1) / T;
#pragma omp parallel for collapse(2) schedule(static) if (batch * rows * cols >= 32768)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tr * tc; ++t) {
      const int64_t r0 = t / tc * T, c0 = t % tc * T;
      const int64_t nr = std::min(T, rows - r0), nc = std::min(T, cols - c0);
      const float *src = in + b * rows * cols + c0 * rows + r0;
      float *dst = out + b * rows * cols + r0 * cols + c0;
#if defined(__AVX512F__)
      const __mmask16 rmask = kiln_lanes(nr), cmask = kiln_lanes(nc);
      __m512 v[16];
      for (int64_t i = 0; i < 16; ++i)
        v[i] = i < nc ? _mm512_maskz_loadu_ps(rmask, src + i * rows) : _mm512_setzero_ps();
      kiln_transpose16(v);
      for (int64_t j = 0; j < nr; ++j)
        _mm512_mask_storeu_ps(dst + j * cols, cmask, v[j]);
#elif defined(__AVX2__)
      const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i rmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(nr)), iota);
      const __m256i cmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(nc)), iota);
      __m256 v[8];
      for (int64_t i = 0; i < 8; ++i)
        v[i] = i < nc ? _mm256_maskload_ps(src + i * rows, rmask) : _mm256_setzero_ps();
      kiln_transpose8(v);
      for (int64_t j = 0; j < nr; ++j)
        _mm256_maskstore_ps(dst + j * cols, cmask, v[j]);
#else
      for (int64_t j = 0; j < nr; ++j)
        for (int64_t i = 0; i < nc; ++i)
          dst[j * cols + i] = src[i * rows + j];
#endif
    }
  return true;
}
