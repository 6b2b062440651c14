//===- Winograd.h - part of the prelude of generated C++ --------*- C++ -*-===//
//
// Part of the C++ every generated kernel file starts with: 3x3 convolutions by
// Winograd F(2x2, 3x3).
//
// kilnc embeds the text below the "kiln prelude text" line, the parts in the
// order codegen/CMakeLists.txt lists them (codegen/cpu/prelude/Embed.cmake);
// the lines above it let the build compile and test this file as C++
// (tests/unit/PreludeTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "codegen/cpu/prelude/Sgemm.h"
// kiln prelude text
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
// instead (docs/performance-log.md, step 25); so it does where all the
// GEMMs' multiply-adds (tiles x m x c) are under 2^19 each, as in
// densenet121's 3x3 convs of 128 to 32 channels at 14x14 (49 tiles: 6.8 ms
// of its 40 at batch 1, 3.7 by im2col; at 28x28, 196 tiles, Winograd
// stays ahead: 3.8 ms against 5.1; step 64). With an image's tiles at least
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
  if (batch * t < 32 || batch * t * m * c < (int64_t(1) << 19)) {
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

