//===- ConvRows.h - part of the prelude of generated C++ --------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: convolutions over
// few input channels (network stems), row by row.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/Winograd.h"
// kiln prelude text
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
// (docs/performance-log.md, step 51: resnet18's stem 630-690 us against
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

