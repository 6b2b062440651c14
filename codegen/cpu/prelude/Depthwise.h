//===- Depthwise.h - part of the prelude of generated C++ -------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: depthwise 3x3
// convolutions read straight from the input.
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/ConvRows.h"
// kiln prelude text
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
// false, having written nothing (docs/performance-log.md, steps 39 and 42).
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
  // (docs/performance-log.md, step 57).
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
// A depthwise conv of any window and stride (its window kh x kw, strides
// sh and sw): y[n][ch][oh][ow] = init + sum over i < kh, j < kw of
// x[n][ch][oh * sh + i - top][ow * sw + j - left] * w[ch][i][j] (init
// bias[ch], or `init` without a bias), the taps in the window's order.
// Vectors run along channels, whatever the plane's size: a thread takes L
// channels of an image, copies their planes into its own buffer padded
// with zeros, [row][column][L] (L x L register transposes by input row),
// and sums up to 8 outputs of a row at a time, each tap one FMA of L
// channels per output; the sums go back to the planes by L x L transposes
// of L consecutive outputs. Against vectors along flattened planes (step
// 66's kiln_dwconv_flat) it ran 1.6-3.7x faster on every 5x5 and 7x7
// window of stride 1 from 7x7 to 56x56 planes; strided ones had run the
// window's loops (docs/performance-log.md, step 68). Threads take blocks of L
// channels and run `epilogue(n, c0, c1, 0, ho)` on each right after it: em
// must be c and en ho, else false, having written nothing. (The 3x3
// windows of stride 1 or 2 keep kiln_dwconv3x3, faster still on them.)
// U outputs of a row of kiln_dwconv from `at` (their first tap's
// input), the next output sw vectors on.
template <typename V, int U>
inline void kiln_dwconv_chans_block(const V *at, const V *wv, V b, int64_t kh, int64_t kw,
                                    int64_t wp, int64_t sw, V *out) {
  V acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    acc[u] = b;
  for (int64_t i = 0; i < kh; ++i, at += wp, wv += kw)
    for (int64_t j = 0; j < kw; ++j) {
      const V w = wv[j];
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u)
        acc[u] = kiln_fma(at[u * sw + j], w, acc[u]);
    }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    out[u] = acc[u];
}
template <typename V>
inline void kiln_dwconv_chans_span(int64_t u, const V *at, const V *wv, V b, int64_t kh,
                                   int64_t kw, int64_t wp, int64_t sw, V *out) {
  switch (u) {
  case 8: return kiln_dwconv_chans_block<V, 8>(at, wv, b, kh, kw, wp, sw, out);
  case 7: return kiln_dwconv_chans_block<V, 7>(at, wv, b, kh, kw, wp, sw, out);
  case 6: return kiln_dwconv_chans_block<V, 6>(at, wv, b, kh, kw, wp, sw, out);
  case 5: return kiln_dwconv_chans_block<V, 5>(at, wv, b, kh, kw, wp, sw, out);
  case 4: return kiln_dwconv_chans_block<V, 4>(at, wv, b, kh, kw, wp, sw, out);
  case 3: return kiln_dwconv_chans_block<V, 3>(at, wv, b, kh, kw, wp, sw, out);
  case 2: return kiln_dwconv_chans_block<V, 2>(at, wv, b, kh, kw, wp, sw, out);
  default: return kiln_dwconv_chans_block<V, 1>(at, wv, b, kh, kw, wp, sw, out);
  }
}
// Channels [c0, c0 + nc) of image n of kiln_dwconv into y, through a
// thread's buffers: xs the padded planes [hp][wp] (their pad zero), wv
// the weights [taps], ys the outputs [ho * wo rounded up to L]. Apart
// from the epilogue's template, so that a kernel file compiles it once
// however many convs call it.
template <typename V, int L>
inline void kiln_dwconv_chans_block_of(int64_t n, int64_t c, int64_t c0, int64_t h, int64_t iw,
                                       int64_t top, int64_t left, int64_t kh, int64_t kw,
                                       int64_t sh, int64_t sw, int64_t ho, int64_t wo,
                                       const float *x, const float *wt, const float *bias,
                                       float init, float *y, V *xs, V *wv, V *ys) {
  const int64_t hp = (ho - 1) * sh + kh, wp = (wo - 1) * sw + kw, taps = kh * kw;
  const int64_t r0 = std::max<int64_t>(0, -top), r1 = std::min(h, hp - top);
  const int64_t q0 = std::max<int64_t>(0, -left), q1 = std::min(iw, wp - left);
  const int64_t size = ho * wo, nc = std::min<int64_t>(L, c - c0);
  // Rows of at most 8 outputs, as even as they come: 7 and 7 of 14.
  const int64_t spans = (wo + 7) / 8, u = (wo + spans - 1) / spans;
  const float *src = x + (n * c + c0) * h * iw;
  V b;
  for (int l = 0; l < L; ++l)
    b[l] = l < nc ? (bias ? bias[c0 + l] : init) : 0.0f;
  for (int64_t t = 0; t < taps; ++t)
    for (int l = 0; l < L; ++l)
      wv[t][l] = l < nc ? wt[(c0 + l) * taps + t] : 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t q = q0; q < q1; q += L) {
      const int64_t len = std::min<int64_t>(L, q1 - q);
      V rows[L];
      for (int l = 0; l < L; ++l) {
        if (l < nc)
          kiln_flat_load(rows[l], src + l * h * iw + r * iw + q, len);
        else
          rows[l] = V{};
      }
      kiln_flat_transpose(rows);
      V *at = xs + (r + top) * wp + q + left;
      for (int64_t k = 0; k < len; ++k)
        at[k] = rows[k];
    }
  for (int64_t oh = 0; oh < ho; ++oh)
    for (int64_t ow = 0; ow < wo; ow += u)
      kiln_dwconv_chans_span<V>(std::min(u, wo - ow), xs + oh * sh * wp + ow * sw, wv, b, kh, kw,
                                wp, sw, ys + oh * wo + ow);
  float *dst = y + (n * c + c0) * size;
  for (int64_t p = 0; p < size; p += L) {
    const int64_t len = std::min<int64_t>(L, size - p);
    V rows[L];
    for (int k = 0; k < L; ++k)
      rows[k] = k < len ? ys[p + k] : V{};
    kiln_flat_transpose(rows);
    kiln_flat_store(rows, dst + p, size, nc, 0, len);
  }
}
template <typename V, int L, typename F>
inline void kiln_dwconv_chans_run(int64_t batch, int64_t c, int64_t h, int64_t iw, int64_t top,
                                  int64_t left, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                  int64_t ho, int64_t wo, const float *x, const float *wt,
                                  const float *bias, float init, float *y, const F &epilogue) {
  const int64_t hp = (ho - 1) * sh + kh, wp = (wo - 1) * sw + kw, taps = kh * kw;
  const int64_t blocks = (c + L - 1) / L, size = ho * wo;
  const int64_t per = hp * wp + taps + (size + L - 1) / L * L;
  kiln_scratch owner(sizeof(V) * per * omp_get_max_threads());
#pragma omp parallel if (batch * c * size * taps >= 32768)
  {
    V *xs = static_cast<V *>(owner.data) + omp_get_thread_num() * per;
    // The pad stays zero: every block writes the same positions.
    std::memset(static_cast<void *>(xs), 0, sizeof(V) * hp * wp);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < batch * blocks; ++blk) {
      const int64_t n = blk / blocks, c0 = blk % blocks * L;
      kiln_dwconv_chans_block_of<V, L>(n, c, c0, h, iw, top, left, kh, kw, sh, sw, ho, wo, x, wt,
                                       bias, init, y, xs, xs + hp * wp, xs + hp * wp + taps);
      epilogue(n, c0, std::min(c, c0 + L), 0, ho);
    }
  }
}
template <typename F>
inline bool kiln_dwconv_tiles(int64_t batch, int64_t c, int64_t h, int64_t iw, int64_t top,
                              int64_t left, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                              int64_t ho, int64_t wo, const float *x, const float *wt,
                              const float *bias, float init, float *y, int64_t em, int64_t en,
                              const F &epilogue) {
  if (em != c || en != ho)
    return false;
  if (batch == 0 || c == 0 || ho == 0 || wo == 0)
    return true;
#if defined(__AVX512F__)
  kiln_dwconv_chans_run<kiln_vf16, 16>(batch, c, h, iw, top, left, kh, kw, sh, sw, ho, wo, x, wt,
                                       bias, init, y, epilogue);
#else
  kiln_dwconv_chans_run<kiln_vf8, 8>(batch, c, h, iw, top, left, kh, kw, sh, sw, ho, wo, x, wt,
                                     bias, init, y, epilogue);
#endif
  return true;
}
inline bool kiln_dwconv(int64_t batch, int64_t c, int64_t h, int64_t iw, int64_t top,
                        int64_t left, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ho,
                        int64_t wo, const float *x, const float *wt, const float *bias,
                        float init, float *y) {
  return kiln_dwconv_tiles(batch, c, h, iw, top, left, kh, kw, sh, sw, ho, wo, x, wt, bias, init,
                           y, c, ho, [](int64_t, int64_t, int64_t, int64_t, int64_t) {});
}