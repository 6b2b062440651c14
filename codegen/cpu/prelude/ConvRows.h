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
#if defined(__AVX2__)
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
#endif
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
// A conv by flattened output planes, for convs whose output rows are too
// short for a row's tiles or whose channels come in groups: y[n][g * mg +
// o][oh][ow] = sum over ch < c, i < kh, j < kw of x[n][g * c + ch][oh * sh +
// i - top][ow * sw + j - left] * w[g * mg + o][ch][i][j], mg = m / groups.
// Each image's x is copied padded and split by both strides, [channel][row
// phase][column phase][row][pitch] with pitch wo + (kw - 1) / sw, so that
// output (oh, ow) at flat position f = oh * pitch + ow reads tap (ch, i, j)
// at f plus an offset of the tap alone: a tile is P consecutive f, and the
// pitch - wo columns of each row past wo are computed and dropped (2 of 9
// on a 7x7 plane, none past the tile). A thread takes a block of NV
// vectors of L channels of one group on a band of rows, packs the block's
// weights tap by tap, and per tap reads NV weight vectors and P broadcast
// inputs into P x NV sums; an L x L transpose per vector turns them into
// rows of outputs, stored with lane masks.
typedef float kiln_vf8 __attribute__((vector_size(32)));
// s in every lane (V{} + s would add 0 first: -0 + 0 is +0).
inline void kiln_splat(kiln_vf8 &v, float s) { v = kiln_vf8{s, s, s, s, s, s, s, s}; }
inline kiln_vf8 kiln_fma(kiln_vf8 a, kiln_vf8 b, kiln_vf8 c) {
#if defined(__AVX2__) && defined(__FMA__)
  return kiln_vf8(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(c)));
#else
  return a * b + c;
#endif
}
// r[j] = column j of the L x L matrix with rows r[0..L-1].
inline void kiln_flat_transpose(kiln_vf8 r[8]) {
#if defined(__AVX2__)
  __m256 t[8];
  for (int i = 0; i < 8; ++i)
    t[i] = __m256(r[i]);
  kiln_transpose8(t);
  for (int i = 0; i < 8; ++i)
    r[i] = kiln_vf8(t[i]);
#else
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j)
      std::swap(r[i][j], r[j][i]);
#endif
}
// Lanes [lo, lo + len) of t[j] to y + j * ld for j < rows.
inline void kiln_flat_store(const kiln_vf8 t[8], float *y, int64_t ld, int64_t rows, int64_t lo,
                            int64_t len) {
#if defined(__AVX2__)
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lo - 1)),
                                        _mm256_cmpgt_epi32(_mm256_set1_epi32(lo + len), iota));
  for (int64_t j = 0; j < rows; ++j)
    _mm256_maskstore_ps(y + j * ld - lo, mask, __m256(t[j]));
#else
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t i = lo; i < lo + len; ++i)
      y[j * ld + i - lo] = t[j][i];
#endif
}
// v = the len floats at p, zeros in the lanes past them.
inline void kiln_flat_load(kiln_vf8 &v, const float *p, int64_t len) {
#if defined(__AVX2__)
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(len)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  v = kiln_vf8(_mm256_maskload_ps(p, mask));
#else
  v = kiln_vf8{};
  for (int64_t i = 0; i < len; ++i)
    v[i] = p[i];
#endif
}
#if defined(__AVX512F__)
typedef float kiln_vf16 __attribute__((vector_size(64)));
inline void kiln_flat_load(kiln_vf16 &v, const float *p, int64_t len) {
  v = kiln_vf16(_mm512_maskz_loadu_ps(__mmask16((1u << len) - 1), p));
}
inline void kiln_splat(kiln_vf16 &v, float s) {
  v = kiln_vf16{s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
}
inline kiln_vf16 kiln_fma(kiln_vf16 a, kiln_vf16 b, kiln_vf16 c) {
  return kiln_vf16(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
}
inline void kiln_flat_transpose(kiln_vf16 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; ++i)
    t[i] = __m512(r[i]);
  kiln_transpose16(t);
  for (int i = 0; i < 16; ++i)
    r[i] = kiln_vf16(t[i]);
}
inline void kiln_flat_store(const kiln_vf16 t[16], float *y, int64_t ld, int64_t rows,
                            int64_t lo, int64_t len) {
  const __mmask16 mask = __mmask16(((1u << len) - 1) << lo);
  for (int64_t j = 0; j < rows; ++j)
    _mm512_mask_storeu_ps(y + j * ld - lo, mask, __m512(t[j]));
}
#endif
// The row pieces of flat positions [f0, f1) of a plane of rows of `pitch`
// positions, `wo` kept: piece k is lanes [lo[k], lo[k] + len[k]) at
// output position at[k] (oh * wo + ow). Returns the count.
inline int64_t kiln_flat_pieces(int64_t f0, int64_t f1, int64_t pitch, int64_t wo,
                                int64_t *lo, int64_t *len, int64_t *at) {
  // One division, then row by row.
  int64_t k = 0, oh = f0 / pitch, ow = f0 - oh * pitch;
  for (int64_t f = f0; f < f1; f += pitch - ow, ow = 0, ++oh) {
    if (ow >= wo)
      continue;
    const int64_t n = std::min(wo - ow, f1 - f);
    lo[k] = f - f0, len[k] = n, at[k] = oh * wo + ow, ++k;
  }
  return k;
}
// The P x NV sums of flat positions [f0, f1) (at most P) of the NV * L
// channels (`rows` kept): tap t reads at + offsets[t] and the weight
// vectors at w + t * tstride + v * vstride.
template <typename V, int L, int NV, int P>
inline void kiln_conv_flat_tile(const float *at, const int64_t *offsets, const float *w,
                                int64_t tstride, int64_t vstride, int64_t taps, float *y,
                                int64_t plane, int64_t rows, int64_t f0, int64_t f1,
                                int64_t pitch, int64_t wo) {
  V acc[P][NV];
#pragma GCC unroll 32
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      acc[i][v] = V{};
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = at + offsets[t];
    V wv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      __builtin_memcpy(&wv[v], w + t * tstride + v * vstride, sizeof(V));
#pragma GCC unroll 32
    for (int i = 0; i < P; ++i) {
      V b;
      kiln_splat(b, p[i]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        acc[i][v] = kiln_fma(b, wv[v], acc[i][v]);
    }
  }
  for (int64_t c0 = 0; c0 < P; c0 += L) {
    int64_t lo[L + 1], len[L + 1], pos[L + 1];
    const int64_t pieces =
        kiln_flat_pieces(f0 + c0, std::min(f0 + c0 + L, f1), pitch, wo, lo, len, pos);
    for (int v = 0; v < NV && v * L < rows; ++v) {
      V r[L];
      for (int i = 0; i < L; ++i)
        r[i] = c0 + i < P ? acc[c0 + i][v] : V{};
      kiln_flat_transpose(r);
      for (int64_t k = 0; k < pieces; ++k)
        kiln_flat_store(r, y + v * L * plane + pos[k], plane, std::min<int64_t>(L, rows - v * L),
                        lo[k], len[k]);
    }
  }
}
// The columns of a row that column phase cph of a copy padded and split
// by the column stride takes from the row (kiln_flat_row): [k0, k1) of
// its pitch, the others zeros.
inline void kiln_flat_cols(int64_t iw, int64_t left, int64_t sw, int64_t pitch, int64_t cph,
                           int64_t &k0, int64_t &k1) {
  k0 = std::min(pitch, std::max<int64_t>(0, (left - cph + sw - 1) / sw));
  k1 = std::max(k0, std::min(pitch, (iw + left - cph + sw - 1) / sw));
}
// Phase cph of a row (src, or zeros where null) to o[0, pitch): o[k] =
// src[k * sw + cph - left] for k in [k0, k1), zeros elsewhere.
inline void kiln_flat_phase(const float *src, int64_t left, int64_t sw, int64_t cph,
                            int64_t k0, int64_t k1, int64_t pitch, float *o) {
  if (!src)
    k0 = k1 = pitch;
  const float *s = src ? src + cph - left : nullptr;
#if defined(__AVX512F__)
  // A row of at most 16 columns in one vector, its masks the columns it
  // reads (none outside the row) and writes: loops of a few iterations
  // each cost more than the copy (the 400 planes of 14x14 regnet_x split
  // for its 7x7 grouped convs took 134 us).
  if (pitch <= 16 && sw <= 2) {
    const __mmask16 keep = __mmask16(((1u << k1) - 1) & ~((1u << k0) - 1));
    __m512 v;
    if (sw == 1) {
      v = _mm512_maskz_loadu_ps(keep, s);
    } else {
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512 a = _mm512_maskz_loadu_ps(__mmask16(_pdep_u32(keep & 0xff, 0x5555)), s);
      const __m512 b = _mm512_maskz_loadu_ps(__mmask16(_pdep_u32(keep >> 8, 0x5555)), s + 16);
      v = _mm512_maskz_permutex2var_ps(keep, a, even, b);
    }
    _mm512_mask_storeu_ps(o, kiln_lanes(pitch), v);
    return;
  }
#endif
  // Loops, not memset and memcpy: rows of a 7x7 plane are too short for
  // the calls to pay.
  for (int64_t k = 0; k < k0; ++k)
    o[k] = 0.0f;
  if (sw == 1) {
    for (int64_t k = k0; k < k1; ++k)
      o[k] = s[k];
  } else {
    int64_t k = k0;
#if defined(__AVX512F__)
    // Stride 2: 16 columns from two vectors of the row, the last ones'
    // loads and store masked (a 28-wide row fills no whole vector).
    if (sw == 2) {
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      for (; k < k1; k += 16) {
        const int64_t n = std::min<int64_t>(16, k1 - k), last = 2 * n - 1;
        const __m512 a = _mm512_maskz_loadu_ps(kiln_lanes(last), s + 2 * k);
        const __m512 b = _mm512_maskz_loadu_ps(kiln_lanes(std::max<int64_t>(0, last - 16)),
                                               s + 2 * k + 16);
        _mm512_mask_storeu_ps(o + k, kiln_lanes(n), _mm512_permutex2var_ps(a, even, b));
      }
    }
#endif
    for (; k < k1; ++k)
      o[k] = s[k * sw];
  }
  for (int64_t k = k1; k < pitch; ++k)
    o[k] = 0.0f;
}
// One row of a plane copied padded and split by the column stride, as
// kiln_conv_rows reads it: its columns k * sw + cph - left (zeros outside
// the row, or everywhere without one: src null) to o + cph * sub, k <
// pitch, for each column phase cph < sw.
inline void kiln_flat_row(const float *src, int64_t iw, int64_t left, int64_t sw, int64_t pitch,
                          float *o, int64_t sub) {
  for (int64_t cph = 0; cph < sw; ++cph, o += sub) {
    int64_t k0, k1;
    kiln_flat_cols(iw, left, sw, pitch, cph, k0, k1);
    kiln_flat_phase(src, left, sw, cph, k0, k1, pitch, o);
  }
}
// A plane [h][iw] copied padded and split by both strides, as kiln_conv_flat
// reads it: [row phase][column phase][height][pitch], row q of row phase
// rph being the input's row q * sh + rph - top (zeros outside it). The
// bounds of the phases' columns once per plane: per row (with the
// divisions of a row index) a 7x7 plane's copy took longer than its conv.
inline void kiln_flat_plane(const float *src, int64_t h, int64_t iw, int64_t top, int64_t left,
                            int64_t sh, int64_t sw, int64_t height, int64_t pitch, float *o) {
  const int64_t sub = height * pitch;
  for (int64_t cph = 0; cph < sw; ++cph) {
    int64_t k0, k1;
    kiln_flat_cols(iw, left, sw, pitch, cph, k0, k1);
    for (int64_t rph = 0; rph < sh; ++rph)
      for (int64_t q = 0; q < height; ++q) {
        const int64_t r = q * sh + rph - top;
        kiln_flat_phase(r >= 0 && r < h ? src + r * iw : nullptr, left, sw, cph, k0, k1, pitch,
                        o + (rph * sw + cph) * sub + q * pitch);
      }
  }
}
// The offset of tap (i, j) in a plane copied for a flat conv.
inline int64_t kiln_flat_offset(int64_t i, int64_t j, int64_t sh, int64_t sw, int64_t sub,
                                int64_t pitch) {
  return ((i % sh) * sw + j % sw) * sub + i / sh * pitch + j / sw;
}
// kiln_conv_flat_tiles with blocks of NV vectors of L channels and tiles
// of P flat positions.
template <typename V, int L, int NV, int P, typename F>
inline void kiln_conv_flat_run(int64_t batch, int64_t groups, int64_t c, int64_t m, int64_t h,
                               int64_t iw, int64_t top, int64_t left, int64_t kh, int64_t kw,
                               int64_t sh, int64_t sw, int64_t ho, int64_t wo, const float *x,
                               const float *w, const float *panels, float *y,
                               const F &epilogue) {
  const int64_t pitch = wo + (kw - 1) / sw, height = ho + (kh - 1) / sh;
  const int64_t sub = height * pitch, chplane = sh * sw * sub, image = groups * c * chplane;
  // A tile's lanes past its last output read up to P - 1 positions on.
  kiln_scratch xs_owner(sizeof(float) * (batch * image + P));
  float *__restrict xs = static_cast<float *>(xs_owner.data);
  std::memset(xs + batch * image, 0, sizeof(float) * P);
#pragma omp parallel for schedule(static) if (batch * image >= 4096)
  for (int64_t nc = 0; nc < batch * groups * c; ++nc)
    kiln_flat_plane(x + nc * h * iw, h, iw, top, left, sh, sw, height, pitch,
                    xs + nc * chplane);
  const int64_t taps = c * kh * kw, mg = m / groups, B = NV * L, blocks = (mg + B - 1) / B;
  const int64_t mg16 = (mg + 15) / 16; // blocks of panels per group
  kiln_scratch offsets_owner(sizeof(int64_t) * taps);
  int64_t *offsets = static_cast<int64_t *>(offsets_owner.data);
  for (int64_t ch = 0, t = 0; ch < c; ++ch)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j, ++t)
        offsets[t] = ch * chplane + kiln_flat_offset(i, j, sh, sw, sub, pitch);
  // Bands of rows so that each thread gets several blocks.
  const int64_t threads = omp_get_max_threads(), per = batch * groups * blocks;
  const int64_t want = std::min(ho, std::max<int64_t>(1, (4 * threads + per - 1) / per));
  const int64_t band = (ho + want - 1) / want, bands = (ho + band - 1) / band;
  const int64_t packed = (taps * B + 15) / 16 * 16;
  kiln_scratch wt_owner(sizeof(float) * threads * packed);
  const int64_t plane = ho * wo;
#pragma omp parallel
  {
    float *wt = static_cast<float *>(wt_owner.data) + omp_get_thread_num() * packed;
    int64_t current = -1;
#pragma omp for schedule(static)
    for (int64_t u = 0; u < per * bands; ++u) {
      const int64_t b = u % blocks, r = u / blocks % bands, g = u / (blocks * bands) % groups,
                    n = u / (blocks * bands * groups);
      const int64_t o0 = g * mg + b * B, rows = std::min(B, mg - b * B);
      // The block's weight vectors: v at wv + v * vstride, tap t's next
      // at + t * tstride.
      const float *wv = wt;
      int64_t tstride = B, vstride = L;
      if (panels) {
        const int64_t at = g * mg16 + b * B / 16;
        // Vectors of 16 are blocks of panels; vectors of 8 halves of one
        // (B is 8 or 16 then).
        wv = panels + at * taps * 16 + b * B % 16, tstride = 16;
        vstride = L == 16 ? taps * 16 : L;
      } else if (g * blocks + b != current) {
        current = g * blocks + b;
        for (int64_t l = 0; l < B; ++l)
          for (int64_t t = 0; t < taps; ++t)
            wt[t * B + l] = l < rows ? w[(o0 + l) * taps + t] : 0.0f;
      }
      const float *at = xs + n * image + g * c * chplane;
      float *yb = y + (n * m + o0) * plane;
      const int64_t r0 = r * band, r1 = std::min(ho, r0 + band), f1 = (r1 - 1) * pitch + wo;
      for (int64_t f = r0 * pitch; f < f1; f += P)
        kiln_conv_flat_tile<V, L, NV, P>(at + f, offsets, wv, tstride, vstride, taps, yb, plane,
                                         rows, f, std::min(f + P, f1), pitch, wo);
      epilogue(n, o0, o0 + rows, r0, r1);
    }
  }
}
// A conv by flattened planes (above), with `epilogue(n, mlo, mhi, r0, r1)`
// run by the thread on channels [mlo, mhi) of rows [r0, r1) of image n
// right after computing them: em must be m and en ho, m a multiple of
// groups, else false, having written nothing.
template <typename F>
inline bool kiln_conv_flat_tiles(int64_t batch, int64_t groups, int64_t c, int64_t m, int64_t h,
                                 int64_t iw, int64_t top, int64_t left, int64_t kh, int64_t kw,
                                 int64_t sh, int64_t sw, int64_t ho, int64_t wo, const float *x,
                                 const float *w, const float *panels, float *y, int64_t em,
                                 int64_t en, const F &epilogue) {
  if (em != m || en != ho || groups < 1 || m % groups)
    return false;
  if (batch == 0 || m == 0 || ho == 0 || wo == 0)
    return true;
  const int64_t mg = m / groups;
#if defined(__AVX512F__)
  if (mg % 32 == 0)
    kiln_conv_flat_run<kiln_vf16, 16, 2, 14>(batch, groups, c, m, h, iw, top, left, kh, kw, sh,
                                             sw, ho, wo, x, w, panels, y, epilogue);
  else if (mg > 8)
    kiln_conv_flat_run<kiln_vf16, 16, 1, 16>(batch, groups, c, m, h, iw, top, left, kh, kw, sh,
                                             sw, ho, wo, x, w, panels, y, epilogue);
  else
    kiln_conv_flat_run<kiln_vf8, 8, 1, 16>(batch, groups, c, m, h, iw, top, left, kh, kw, sh, sw,
                                          ho, wo, x, w, panels, y, epilogue);
#elif defined(__AVX2__) && defined(__FMA__)
  if (mg % 16 == 0)
    kiln_conv_flat_run<kiln_vf8, 8, 2, 6>(batch, groups, c, m, h, iw, top, left, kh, kw, sh, sw,
                                          ho, wo, x, w, panels, y, epilogue);
  else
    kiln_conv_flat_run<kiln_vf8, 8, 1, 12>(batch, groups, c, m, h, iw, top, left, kh, kw, sh, sw,
                                           ho, wo, x, w, panels, y, epilogue);
#else
  (void)mg;
  kiln_conv_flat_run<kiln_vf8, 8, 1, 4>(batch, groups, c, m, h, iw, top, left, kh, kw, sh, sw, ho,
                                        wo, x, w, panels, y, epilogue);
#endif
  return true;
}
// With `epilogue(n, mlo, mhi, oh, oh + 1)` run by the thread on each tile
// of channels [mlo, mhi) of output row oh of image n right after computing
// it (as kiln_sgemm_tiles does for a GEMM's tiles): em must be m and en ho
// (steps of a channel and a row), else false, having written nothing.
template <typename F>
inline bool kiln_conv_rows_tiles(int64_t batch, int64_t groups, int64_t c, int64_t m, int64_t hp,
                                 int64_t wp, int64_t h, int64_t iw, int64_t top, int64_t left,
                                 int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ho,
                                 int64_t wo, const float *x, const float *w, const float *panels,
                                 float *y, int64_t em, int64_t en, const F &epilogue) {
  if (groups != 1)
    return kiln_conv_flat_tiles(batch, groups, c, m, h, iw, top, left, kh, kw, sh, sw, ho, wo, x,
                                w, panels, y, em, en, epilogue);
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
      kiln_flat_row(s >= 0 && s < h ? xn + (ch * h + s) * iw : nullptr, iw, left, sw, phase,
                    xs + (ch * hp + r) * row, phase);
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
inline bool kiln_conv_rows(int64_t batch, int64_t groups, int64_t c, int64_t m, int64_t hp,
                           int64_t wp, int64_t h, int64_t iw, int64_t top, int64_t left,
                           int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ho, int64_t wo,
                           const float *x, const float *w, const float *panels, float *y) {
  return kiln_conv_rows_tiles(batch, groups, c, m, hp, wp, h, iw, top, left, kh, kw, sh, sw, ho,
                              wo, x, w, panels, y, m, ho,
                              [](int64_t, int64_t, int64_t, int64_t, int64_t) {});
}

