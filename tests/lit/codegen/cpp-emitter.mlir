// RUN: kiln-translate --kiln-to-cpp %s | FileCheck %s

// Contractions that are GEMMs (codegen/Gemm.h) call kiln_sgemm (oneDNN when
// it loads) in front of their own loops, which run only without it; the
// leading parallel loops of every generic are shared out by OpenMP.

#cdim = affine_map<(n, m, c, kh, kw, oh, ow) -> (n, c, kh, kw, oh, ow)>
#wdim = affine_map<(n, m, c, kh, kw, oh, ow) -> (m, c, kh, kw)>
#odim = affine_map<(n, m, c, kh, kw, oh, ow) -> (n, m, oh, ow)>
#id4 = affine_map<(n, m, h, w) -> (n, m, h, w)>
#bias = affine_map<(n, m, h, w) -> (m)>

// A conv after im2col: the weights (input 1) are A, shared by both images
// (stride 0); the patches are B, one [c*kh*kw, oh*ow] matrix per image. The
// zero fill only starts the sums: the library overwrites instead (its last
// argument, accumulate, is false) and only the fallback loops fill.
// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK-NOT:  out0[i] = v0;
// CHECK:      const int64_t [[M:m[0-9]+]] = int64_t(1) * 8, [[N:n[0-9]+]] = int64_t(1) * 4 * 4, [[K:k[0-9]+]] = int64_t(1) * 3 * 2 * 2;
// CHECK-NEXT: if (!(kiln_sgemm(int64_t(1) * 2, false, false, [[M]], [[N]], [[K]], in1, 0, in0, [[K]] * [[N]], out0, false))) {
// CHECK-NEXT:   for (int64_t i = 0; i < 256; ++i)
// CHECK-NEXT:     out0[i] = v0;
// CHECK:      #pragma omp parallel for collapse(2) schedule(static) if (int64_t(1) * 2 * 8 * 3 * 2 * 2 * 4 * 4 >= 32768)
// CHECK-NEXT: for (int64_t d0 = 0; d0 < 2; ++d0)
// CHECK:      }
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @conv(%col: tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, %w: tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> tensor<2x8x4x4xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%col, %w : tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> (tensor<2x8x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<2x3x2x2x4x4xf32>, %a1: tensor<8x3x2x2xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<2x8x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    %r = linalg.generic {indexing_maps = [#cdim, #wdim, #odim], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<2x3x2x2x4x4xf32>, tensor<8x3x2x2xf32>) outs(%f : tensor<2x8x4x4xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<2x8x4x4xf32>
    kiln.yield %r : tensor<2x8x4x4xf32>
  }
  return %0 : tensor<2x8x4x4xf32, #kiln.device<cpu>>
}

// A GEMM whose result only an elementwise generic reads (bias, residual,
// relu) runs it on each tile right after the tile's GEMM (CppGemm.cpp):
// TILE covers an image, steps of the first M dim and of the first N dim,
// and the N dims (oh, ow: contiguous in every operand) run as one loop.
// The tiled call is guarded against an epilogue that would overwrite the
// GEMM's inputs; the plain call, its fallback loops and the epilogue's own
// loops run only when it did not run (kiln_sgemm_tiles declines GEMMs under
// 2^20 multiply-adds). Those loops, like those of any elementwise generic,
// run the last two dims (contiguous in every operand) as one.
// CHECK-LABEL: // kiln kernel kiln_k1
// CHECK:      const auto [[TILE:tile[0-9]+]] = [&](int64_t image, int64_t mlo, int64_t mhi, int64_t nlo, int64_t nhi) {
// CHECK-NEXT:   for (int64_t d0 = image; d0 < image + 1; ++d0)
// CHECK-NEXT:     for (int64_t d1 = mlo; d1 < mhi; ++d1)
// CHECK-NEXT:       for (int64_t d3 = nlo * int64_t(1) * 4; d3 < nhi * int64_t(1) * 4; ++d3) {
// CHECK-NEXT:         const float [[R:a[0-9]+]] = out0[d0 * 128 + d1 * 16 + 0 * 4 + d3];
// CHECK-NEXT:         const float [[B:a[0-9]+]] = in2[d1];
// CHECK-NEXT:         const float [[S:a[0-9]+]] = in3[d0 * 128 + d1 * 16 + 0 * 4 + d3];
// CHECK:              out0[d0 * 128 + d1 * 16 + 0 * 4 + d3] = v{{[0-9]+}};
// CHECK-NEXT:       }
// CHECK-NEXT: };
// CHECK-NEXT: const bool [[T:tiled[0-9]+]] = static_cast<const void *>(out0) != static_cast<const void *>(in0) && static_cast<const void *>(out0) != static_cast<const void *>(in1) && kiln_sgemm_tiles(int64_t(1) * 2, false, false, [[M:m[0-9]+]], [[N:n[0-9]+]], [[K:k[0-9]+]], in1, 0, in0, [[K]] * [[N]], out0, false, 8, 4, [[TILE]]);
// CHECK-NEXT: if (![[T]] && !(kiln_sgemm(int64_t(1) * 2, false, false, [[M]], [[N]], [[K]], in1, 0, in0, [[K]] * [[N]], out0, false))) {
// CHECK:      if (![[T]]) {
// CHECK-NEXT: // linalg.generic: parallel, parallel, parallel, parallel
// CHECK-NEXT: #pragma omp parallel for collapse(2) schedule(static)
// CHECK-NEXT: for (int64_t d0 = 0; d0 < 2; ++d0)
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 8; ++d1)
// CHECK-NEXT:     for (int64_t d3 = 0; d3 < 4 * 4; ++d3) {
// CHECK:      out0[d0 * 128 + d1 * 16 + 0 * 4 + d3] = v{{[0-9]+}};
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @conv_epilogue(%col: tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, %w: tensor<8x3x2x2xf32, #kiln.device<cpu>>, %b: tensor<8xf32, #kiln.device<cpu>>, %res: tensor<2x8x4x4xf32, #kiln.device<cpu>>) -> tensor<2x8x4x4xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%col, %w, %b, %res : tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>>, tensor<2x8x4x4xf32, #kiln.device<cpu>>) -> (tensor<2x8x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<2x3x2x2x4x4xf32>, %a1: tensor<8x3x2x2xf32>, %a2: tensor<8xf32>, %a3: tensor<2x8x4x4xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<2x8x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    %r = linalg.generic {indexing_maps = [#cdim, #wdim, #odim], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<2x3x2x2x4x4xf32>, tensor<8x3x2x2xf32>) outs(%f : tensor<2x8x4x4xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<2x8x4x4xf32>
    %e2 = tensor.empty() : tensor<2x8x4x4xf32>
    %y = linalg.generic {indexing_maps = [#id4, #bias, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r, %a2, %a3 : tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<2x8x4x4xf32>) outs(%e2 : tensor<2x8x4x4xf32>) {
    ^bb0(%x: f32, %bb: f32, %rr: f32, %o: f32):
      %s = arith.addf %x, %bb : f32
      %t = arith.addf %s, %rr : f32
      %u = arith.maximumf %t, %zero : f32
      linalg.yield %u : f32
    } -> tensor<2x8x4x4xf32>
    kiln.yield %y : tensor<2x8x4x4xf32>
  }
  return %0 : tensor<2x8x4x4xf32, #kiln.device<cpu>>
}

// Not when something between them touches memory (a fill here): both
// would move past it.
// CHECK-LABEL: // kiln kernel kiln_k2
// CHECK-NOT:  kiln_sgemm_tiles
// CHECK:      if (!(kiln_sgemm(
func.func @conv_epilogue_apart(%col: tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, %w: tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> tensor<2x8x4x4xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%col, %w : tensor<2x3x2x2x4x4xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> (tensor<2x8x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<2x3x2x2x4x4xf32>, %a1: tensor<8x3x2x2xf32>):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %e = tensor.empty() : tensor<2x8x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    %r = linalg.generic {indexing_maps = [#cdim, #wdim, #odim], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<2x3x2x2x4x4xf32>, tensor<8x3x2x2xf32>) outs(%f : tensor<2x8x4x4xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<2x8x4x4xf32>
    %e3 = tensor.empty() : tensor<2x8x4x4xf32>
    %ones = linalg.fill ins(%one : f32) outs(%e3 : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    %e2 = tensor.empty() : tensor<2x8x4x4xf32>
    %y = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r, %ones : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) outs(%e2 : tensor<2x8x4x4xf32>) {
    ^bb0(%x: f32, %rr: f32, %o: f32):
      %t = arith.addf %x, %rr : f32
      linalg.yield %t : f32
    } -> tensor<2x8x4x4xf32>
    kiln.yield %y : tensor<2x8x4x4xf32>
  }
  return %0 : tensor<2x8x4x4xf32, #kiln.device<cpu>>
}

// A batched matmul with a dynamic batch whose B is shared folds the batch
// into M. The GEMM runs only when A's dynamic dim is the loop's (a dim of
// 1 broadcasting runs the loops). It accumulates onto its init, an input.
// CHECK-LABEL: // kiln kernel kiln_k3
// CHECK:      const int64_t [[M:m[0-9]+]] = int64_t(1) * dims[5] * 3, [[N:n[0-9]+]] = int64_t(1) * 5, [[K:k[0-9]+]] = int64_t(1) * 4;
// CHECK-NEXT: if (!(dims[0] == dims[5] && kiln_sgemm(int64_t(1), false, true, [[M]], [[N]], [[K]], in0, 0, in1, 0, out0, true))) {
func.func @matmul(%a: tensor<?x3x4xf32, #kiln.device<cpu>>, %b: tensor<5x4xf32, #kiln.device<cpu>>, %c: tensor<?x3x5xf32, #kiln.device<cpu>>) -> tensor<?x3x5xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%a, %b, %c : tensor<?x3x4xf32, #kiln.device<cpu>>, tensor<5x4xf32, #kiln.device<cpu>>, tensor<?x3x5xf32, #kiln.device<cpu>>) -> (tensor<?x3x5xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<?x3x4xf32>, %a1: tensor<5x4xf32>, %a2: tensor<?x3x5xf32>):
    %r = linalg.generic {indexing_maps = [affine_map<(b, m, k, n) -> (b, m, k)>, affine_map<(b, m, k, n) -> (n, k)>, affine_map<(b, m, k, n) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%a0, %a1 : tensor<?x3x4xf32>, tensor<5x4xf32>) outs(%a2 : tensor<?x3x5xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x3x5xf32>
    kiln.yield %r : tensor<?x3x5xf32>
  }
  return %0 : tensor<?x3x5xf32, #kiln.device<cpu>>
}

// f64 has no library GEMM: loops only. A reduction loop stops the parallel
// prefix.
// CHECK-LABEL: // kiln kernel kiln_k4
// CHECK-NOT:  kiln_sgemm(
// CHECK:      #pragma omp parallel for collapse(1) schedule(static) if (int64_t(1) * 3 * 4 * 5 >= 32768)
// CHECK-NEXT: for (int64_t d0 = 0; d0 < 3; ++d0)
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 4; ++d1)
func.func @matmul_f64(%a: tensor<3x4xf64, #kiln.device<cpu>>, %b: tensor<4x5xf64, #kiln.device<cpu>>, %c: tensor<3x5xf64, #kiln.device<cpu>>) -> tensor<3x5xf64, #kiln.device<cpu>> {
  %0 = kiln.kernel(%a, %b, %c : tensor<3x4xf64, #kiln.device<cpu>>, tensor<4x5xf64, #kiln.device<cpu>>, tensor<3x5xf64, #kiln.device<cpu>>) -> (tensor<3x5xf64, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<3x4xf64>, %a1: tensor<4x5xf64>, %a2: tensor<3x5xf64>):
    %r = linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a0, %a1 : tensor<3x4xf64>, tensor<4x5xf64>) outs(%a2 : tensor<3x5xf64>) {
    ^bb0(%x: f64, %y: f64, %acc: f64):
      %p = arith.mulf %x, %y : f64
      %s = arith.addf %acc, %p : f64
      linalg.yield %s : f64
    } -> tensor<3x5xf64>
    kiln.yield %r : tensor<3x5xf64>
  }
  return %0 : tensor<3x5xf64, #kiln.device<cpu>>
}

// An elementwise op whose second operand's rows are not contiguous (a
// constant index on a dim of size 3) is no GEMM even with a multiply-add
// body. A single loop is shared out whole.
// CHECK-LABEL: // kiln kernel kiln_k5
// CHECK-NOT:  kiln_sgemm(
// CHECK:      #pragma omp parallel for collapse(1) schedule(static) if (int64_t(1) * 8 >= 32768)
func.func @not_gemm(%a: tensor<8xf32, #kiln.device<cpu>>, %b: tensor<8x3xf32, #kiln.device<cpu>>) -> tensor<8xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%a, %b : tensor<8xf32, #kiln.device<cpu>>, tensor<8x3xf32, #kiln.device<cpu>>) -> (tensor<8xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<8xf32>, %a1: tensor<8x3xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i, 1)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a0, %a1 : tensor<8xf32>, tensor<8x3xf32>) outs(%f : tensor<8xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    kiln.yield %r : tensor<8xf32>
  }
  return %0 : tensor<8xf32, #kiln.device<cpu>>
}

// f32 exp, erf and tanh use the backend's own branch-free versions, which
// vectorize; f64 keeps the math library's.
// CHECK-LABEL: // kiln kernel kiln_k6
// CHECK: const float [[E:v[0-9]+]] = kiln_expf(
// CHECK: const float [[F:v[0-9]+]] = kiln_erff([[E]]);
// CHECK: const float {{v[0-9]+}} = kiln_tanhf([[F]]);
// CHECK: const double [[G:v[0-9]+]] = std::exp(
// CHECK: const double {{v[0-9]+}} = std::tanh([[G]]);
func.func @math(%a: tensor<8xf32, #kiln.device<cpu>>, %b: tensor<8xf64, #kiln.device<cpu>>) -> (tensor<8xf32, #kiln.device<cpu>>, tensor<8xf64, #kiln.device<cpu>>) {
  %0:2 = kiln.kernel(%a, %b : tensor<8xf32, #kiln.device<cpu>>, tensor<8xf64, #kiln.device<cpu>>) -> (tensor<8xf32, #kiln.device<cpu>>, tensor<8xf64, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<8xf32>, %a1: tensor<8xf64>):
    %e0 = tensor.empty() : tensor<8xf32>
    %r0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a0 : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
    ^bb0(%x: f32, %o: f32):
      %e = math.exp %x : f32
      %f = math.erf %e : f32
      %t = math.tanh %f : f32
      linalg.yield %t : f32
    } -> tensor<8xf32>
    %e1 = tensor.empty() : tensor<8xf64>
    %r1 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a1 : tensor<8xf64>) outs(%e1 : tensor<8xf64>) {
    ^bb0(%x: f64, %o: f64):
      %e = math.exp %x : f64
      %t = math.tanh %e : f64
      linalg.yield %t : f64
    } -> tensor<8xf64>
    kiln.yield %r0, %r1 : tensor<8xf32>, tensor<8xf64>
  }
  return %0#0, %0#1 : tensor<8xf32, #kiln.device<cpu>>, tensor<8xf64, #kiln.device<cpu>>
}

// A pad whose input read is guarded (kiln.guarded_read) reads only under its
// select, with unclamped indices. It makes the depthwise window's input
// alone, and the window reads each (image, channel) plane only where the pad
// wrote it: the threads share out those two loops, and in each the pad
// writes its plane into a buffer of one plane just before the window reads
// it, while it is in cache. The pad (a constant one, CppPad.cpp) is written
// by rows: rows wholly in the pad filled, the others filled at both ends
// and copied in the middle.
// The window's taps are innermost and its output's last dim (d3) is the loop
// that vectorizes around them; its zero fill and its relu run per element
// inside that loop, around the taps, which add into a register.
// The plane buffers, one per thread, are allocated before the threads start.
// (Rows at least kSplitPlaneWidth wide: narrower ones are flattened, below.)
// CHECK-LABEL: // kiln kernel kiln_k7
// CHECK-NOT:  kiln_minimum
// CHECK:      const int64_t [[T:t[0-9]+]]_stride = (std::max<int64_t>(676, 1) + 15) / 16 * 16;
// CHECK-NEXT: kiln_scratch [[T]]_owner(sizeof(float) * [[T]]_stride * omp_get_max_threads());
// CHECK-NEXT: // linalg.generic:
// CHECK-NEXT: #pragma omp parallel for collapse(2) schedule(static)
// CHECK-NEXT: for (int64_t d0 = 0; d0 < 1; ++d0)
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 2; ++d1) {
// CHECK-NEXT:     // linalg.generic: parallel, parallel, parallel, parallel, one plane
// CHECK-NEXT: float *__restrict [[T]] = static_cast<float *>([[T]]_owner.data) + omp_get_thread_num() * [[T]]_stride;
// CHECK-NEXT: // a pad, by rows
// CHECK-NEXT: for (int64_t r = 0; r < 26; ++r) {
// CHECK-NEXT:   float *row = [[T]] + r * 26;
// CHECK-NEXT:   const int64_t s = r - 1;
// CHECK-NEXT:   if (s < 0 || s >= 24) {
// CHECK-NEXT:     for (int64_t c = 0; c < 26; ++c)
// CHECK-NEXT:       row[c] = v0;
// CHECK-NEXT:     continue;
// CHECK-NEXT:   }
// CHECK-NEXT:   const float *src = in0 + d0 * 1152 + d1 * 576 + 0 * 24 + 0 + s * 24;
// CHECK-NEXT:   for (int64_t c = 0; c < 1; ++c)
// CHECK-NEXT:     row[c] = v0;
// CHECK-NEXT:   std::memcpy(row + 1, src, sizeof(float) * 24);
// CHECK-NEXT:   for (int64_t c = 25; c < 26; ++c)
// CHECK-NEXT:     row[c] = v0;
// CHECK-NEXT: }
// CHECK-NEXT: for (int64_t d2 = 0; d2 < 24; ++d2)
// CHECK-NEXT:   for (int64_t d3 = 0; d3 < 24; ++d3) {
// CHECK-NEXT:     float [[A:acc[0-9]+]] = v0;
// CHECK-NEXT:     for (int64_t d4 = 0; d4 < 1; ++d4)
// CHECK-NEXT:       for (int64_t d5 = 0; d5 < 3; ++d5)
// CHECK-NEXT:         for (int64_t d6 = 0; d6 < 3; ++d6) {
// CHECK-NEXT:           const float a{{[0-9]+}} = [[T]][(d2 + d5) * 26 + (d3 + d6)];
// CHECK:                [[A]] = v{{[0-9]+}};
// CHECK-NEXT:     }
// CHECK-NEXT:     const float [[E:a[0-9]+]] = [[A]];
// CHECK-NEXT:     const float [[R:v[0-9]+]] = kiln_maximum([[E]], v0);
// CHECK-NEXT:     out0[d0 * 1152 + d1 * 576 + d2 * 24 + d3] = [[R]];
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @depthwise(%x: tensor<1x2x24x24xf32, #kiln.device<cpu>>, %w: tensor<2x1x3x3xf32, #kiln.device<cpu>>) -> tensor<1x2x24x24xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x, %w : tensor<1x2x24x24xf32, #kiln.device<cpu>>, tensor<2x1x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x2x24x24xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<1x2x24x24xf32>, %a1: tensor<2x1x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c24 = arith.constant 24 : index
    %pe = tensor.empty() : tensor<1x2x26x26xf32>
    %pad = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%pe : tensor<1x2x26x26xf32>) {
    ^bb0(%o: f32):
      %n = linalg.index 0 : index
      %c = linalg.index 1 : index
      %h = linalg.index 2 : index
      %w2 = linalg.index 3 : index
      %hs = arith.subi %h, %c1 : index
      %ws = arith.subi %w2, %c1 : index
      %h0 = arith.cmpi sge, %hs, %c0 : index
      %h1 = arith.cmpi slt, %hs, %c24 : index
      %hin = arith.andi %h0, %h1 : i1
      %w0 = arith.cmpi sge, %ws, %c0 : index
      %w1 = arith.cmpi slt, %ws, %c24 : index
      %win = arith.andi %w0, %w1 : i1
      %in = arith.andi %hin, %win : i1
      %v = tensor.extract %a0[%n, %c, %hs, %ws] {kiln.guarded_read} : tensor<1x2x24x24xf32>
      %s = arith.select %in, %v, %zero : f32
      linalg.yield %s : f32
    } -> tensor<1x2x26x26xf32>
    %e = tensor.empty() : tensor<1x2x24x24xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x24x24xf32>) -> tensor<1x2x24x24xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, oh, ow, i, kh, kw) -> (n, c + i, oh + kh, ow + kw)>, affine_map<(n, c, oh, ow, i, kh, kw) -> (c, i, kh, kw)>, affine_map<(n, c, oh, ow, i, kh, kw) -> (n, c, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%pad, %a1 : tensor<1x2x26x26xf32>, tensor<2x1x3x3xf32>) outs(%f : tensor<1x2x24x24xf32>) {
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %m = arith.mulf %p, %q : f32
      %a = arith.addf %acc, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x24x24xf32>
    %re = tensor.empty() : tensor<1x2x24x24xf32>
    %relu = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r : tensor<1x2x24x24xf32>) outs(%re : tensor<1x2x24x24xf32>) {
    ^bb0(%in: f32, %o: f32):
      %m = arith.maximumf %in, %zero : f32
      linalg.yield %m : f32
    } -> tensor<1x2x24x24xf32>
    kiln.yield %relu : tensor<1x2x24x24xf32>
  }
  return %0 : tensor<1x2x24x24xf32, #kiln.device<cpu>>
}

// The same window with rows narrower than kSplitPlaneWidth runs them
// flattened: per plane, after the pad, every output position at the pad's
// row width (6) in one loop, at row 0 (the taps read the plane at d3 plus
// their offsets), into a per-thread rows buffer past the plane and its
// zeroed slack; the fill and the relu run there too. Then the first 4
// columns of each row are copied out.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      const int64_t [[T:t[0-9]+]]_stride = (66 + 15) / 16 * 16;
// CHECK-NEXT: kiln_scratch [[T]]_owner(sizeof(float) * [[T]]_stride * omp_get_max_threads());
// CHECK-NEXT: // linalg.generic: parallel, parallel, parallel, parallel, reduction, reduction, reduction, rows flattened
// CHECK-NEXT: #pragma omp parallel for collapse(2) schedule(static)
// CHECK:      // a pad, by rows
// CHECK:      std::memcpy(row + 1, src, sizeof(float) * 4);
// CHECK:      for (int64_t i = 36; i < 42; ++i)
// CHECK-NEXT:   [[T]][i] = 0;
// CHECK-NEXT: float *__restrict [[R:t[0-9]+]] = [[T]] + 42;
// CHECK-NEXT: for (int64_t d3 = 0; d3 < 24; ++d3) {
// CHECK-NEXT:   float [[A:acc[0-9]+]] = v0;
// CHECK-NEXT:   for (int64_t d4 = 0; d4 < 1; ++d4)
// CHECK-NEXT:     for (int64_t d5 = 0; d5 < 3; ++d5)
// CHECK-NEXT:       for (int64_t d6 = 0; d6 < 3; ++d6) {
// CHECK-NEXT:         const float a{{[0-9]+}} = [[T]][(0 + d5) * 6 + (d3 + d6)];
// CHECK:              [[A]] = v{{[0-9]+}};
// CHECK-NEXT:   }
// CHECK-NEXT:   const float [[E:a[0-9]+]] = [[A]];
// CHECK-NEXT:   const float [[V:v[0-9]+]] = kiln_maximum([[E]], v0);
// CHECK-NEXT:   [[R]][0 * 6 + d3] = [[V]];
// CHECK-NEXT: }
// CHECK-NEXT: for (int64_t d2 = 0; d2 < 4; ++d2)
// CHECK-NEXT:   for (int64_t d3 = 0; d3 < 4; ++d3)
// CHECK-NEXT:     out0[d0 * 32 + d1 * 16 + d2 * 4 + d3] = [[R]][d2 * 6 + d3];
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @depthwise_narrow(%x: tensor<1x2x4x4xf32, #kiln.device<cpu>>, %w: tensor<2x1x3x3xf32, #kiln.device<cpu>>) -> tensor<1x2x4x4xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x, %w : tensor<1x2x4x4xf32, #kiln.device<cpu>>, tensor<2x1x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x2x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<1x2x4x4xf32>, %a1: tensor<2x1x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %pe = tensor.empty() : tensor<1x2x6x6xf32>
    %pad = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%pe : tensor<1x2x6x6xf32>) {
    ^bb0(%o: f32):
      %n = linalg.index 0 : index
      %c = linalg.index 1 : index
      %h = linalg.index 2 : index
      %w2 = linalg.index 3 : index
      %hs = arith.subi %h, %c1 : index
      %ws = arith.subi %w2, %c1 : index
      %h0 = arith.cmpi sge, %hs, %c0 : index
      %h1 = arith.cmpi slt, %hs, %c4 : index
      %hin = arith.andi %h0, %h1 : i1
      %w0 = arith.cmpi sge, %ws, %c0 : index
      %w1 = arith.cmpi slt, %ws, %c4 : index
      %win = arith.andi %w0, %w1 : i1
      %in = arith.andi %hin, %win : i1
      %v = tensor.extract %a0[%n, %c, %hs, %ws] {kiln.guarded_read} : tensor<1x2x4x4xf32>
      %s = arith.select %in, %v, %zero : f32
      linalg.yield %s : f32
    } -> tensor<1x2x6x6xf32>
    %e = tensor.empty() : tensor<1x2x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, oh, ow, i, kh, kw) -> (n, c + i, oh + kh, ow + kw)>, affine_map<(n, c, oh, ow, i, kh, kw) -> (c, i, kh, kw)>, affine_map<(n, c, oh, ow, i, kh, kw) -> (n, c, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%pad, %a1 : tensor<1x2x6x6xf32>, tensor<2x1x3x3xf32>) outs(%f : tensor<1x2x4x4xf32>) {
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %m = arith.mulf %p, %q : f32
      %a = arith.addf %acc, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4x4xf32>
    %re = tensor.empty() : tensor<1x2x4x4xf32>
    %relu = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r : tensor<1x2x4x4xf32>) outs(%re : tensor<1x2x4x4xf32>) {
    ^bb0(%in: f32, %o: f32):
      %m = arith.maximumf %in, %zero : f32
      linalg.yield %m : f32
    } -> tensor<1x2x4x4xf32>
    kiln.yield %relu : tensor<1x2x4x4xf32>
  }
  return %0 : tensor<1x2x4x4xf32, #kiln.device<cpu>>
}


// Narrow floats are bits in memory (uint8_t, uint16_t): arith.extf and
// arith.truncf around them call the prelude's conversions, a float8 truncf
// marked kiln.no_saturate asking for Inf/NaN on overflow (bfloat16 never
// saturates).
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK: const uint8_t [[E:a[0-9]+]] = in0[
// CHECK: const float [[W:v[0-9]+]] = static_cast<float>(kiln_decode_f8e4m3fn([[E]]));
// CHECK: const uint16_t {{v[0-9]+}} = kiln_encode_bf16(static_cast<double>([[W]]), false);
// CHECK: const uint8_t [[E2:a[0-9]+]] = in0[
// CHECK: const float [[W2:v[0-9]+]] = static_cast<float>(kiln_decode_f8e4m3fn([[E2]]));
// CHECK: const uint8_t {{v[0-9]+}} = kiln_encode_f8e5m2(static_cast<double>([[W2]]), false);
// CHECK: const uint8_t [[E3:a[0-9]+]] = in0[
// CHECK: const double [[W3:v[0-9]+]] = static_cast<double>(kiln_decode_f8e4m3fn([[E3]]));
// CHECK: const uint8_t {{v[0-9]+}} = kiln_encode_f8e5m2(static_cast<double>([[W3]]), true);
#id = affine_map<(d0) -> (d0)>
func.func @narrow(%x: tensor<4xf8E4M3FN, #kiln.device<cpu>>) -> (tensor<4xbf16, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>) {
  %0:3 = kiln.kernel(%x : tensor<4xf8E4M3FN, #kiln.device<cpu>>) -> (tensor<4xbf16, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4xf8E4M3FN>):
    %e0 = tensor.empty() : tensor<4xbf16>
    %e1 = tensor.empty() : tensor<4xf8E5M2>
    %e2 = tensor.empty() : tensor<4xf8E5M2>
    %r0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<4xf8E4M3FN>) outs(%e0 : tensor<4xbf16>) {
    ^bb0(%v: f8E4M3FN, %o: bf16):
      %w = arith.extf %v : f8E4M3FN to f32
      %b = arith.truncf %w : f32 to bf16
      linalg.yield %b : bf16
    } -> tensor<4xbf16>
    %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<4xf8E4M3FN>) outs(%e1 : tensor<4xf8E5M2>) {
    ^bb0(%v: f8E4M3FN, %o: f8E5M2):
      %w = arith.extf %v : f8E4M3FN to f32
      %n = arith.truncf %w {kiln.no_saturate} : f32 to f8E5M2
      linalg.yield %n : f8E5M2
    } -> tensor<4xf8E5M2>
    %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<4xf8E4M3FN>) outs(%e2 : tensor<4xf8E5M2>) {
    ^bb0(%v: f8E4M3FN, %o: f8E5M2):
      %w = arith.extf %v : f8E4M3FN to f64
      %s = arith.truncf %w : f64 to f8E5M2
      linalg.yield %s : f8E5M2
    } -> tensor<4xf8E5M2>
    kiln.yield %r0, %r1, %r2 : tensor<4xbf16>, tensor<4xf8E5M2>, tensor<4xf8E5M2>
  }
  return %0#0, %0#1, %0#2 : tensor<4xbf16, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>, tensor<4xf8E5M2, #kiln.device<cpu>>
}

// A narrow float constant (a folded conversion) is written as its bits.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK: const uint16_t {{v[0-9]+}} = 16384u;
func.func @narrow_constant() -> tensor<bf16, #kiln.device<cpu>> {
  %0 = kiln.kernel -> (tensor<bf16, #kiln.device<cpu>>) {
    %cst = arith.constant 2.000000e+00 : bf16
    %e = tensor.empty() : tensor<bf16>
    %r = linalg.generic {indexing_maps = [affine_map<() -> ()>], iterator_types = []} outs(%e : tensor<bf16>) {
    ^bb0(%o: bf16):
      linalg.yield %cst : bf16
    } -> tensor<bf16>
    kiln.yield %r : tensor<bf16>
  }
  return %0 : tensor<bf16, #kiln.device<cpu>>
}

// The same conv at batch 1. Without the batch, the patches could also be A
// (transposed, shared) with W's rows as a batch of 8 matrix-vector
// products; the matcher takes the split with both M and N: one GEMM. The
// patches, an image's data (indexed by the batch's unit dim), keep their
// stride; W, which every image shares, has none.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      const int64_t [[M:m[0-9]+]] = int64_t(1) * 8, [[N:n[0-9]+]] = int64_t(1) * 4 * 4, [[K:k[0-9]+]] = int64_t(1) * 3 * 2 * 2;
// CHECK-NEXT: if (!(kiln_sgemm(int64_t(1), false, false, [[M]], [[N]], [[K]], in1, 0, in0, [[K]] * [[N]], out0, false))) {
func.func @conv_batch1(%col: tensor<1x3x2x2x4x4xf32, #kiln.device<cpu>>, %w: tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> tensor<1x8x4x4xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%col, %w : tensor<1x3x2x2x4x4xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> (tensor<1x8x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<1x3x2x2x4x4xf32>, %a1: tensor<8x3x2x2xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x8x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
    %r = linalg.generic {indexing_maps = [#cdim, #wdim, #odim], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<1x3x2x2x4x4xf32>, tensor<8x3x2x2xf32>) outs(%f : tensor<1x8x4x4xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x8x4x4xf32>
    kiln.yield %r : tensor<1x8x4x4xf32>
  }
  return %0 : tensor<1x8x4x4xf32, #kiln.device<cpu>>
}

// A window whose innermost output dim (25 wide, at least kSplitPlaneWidth)
// steps by 2 through its pad's plane reads the plane split: the even
// columns, then the odd ones, each row [2][26]. Every tap then reads a
// contiguous row (d5 % 2 picks the half, d5 / 2 the shift), not every other
// element. The pad writes the split rows itself: padded column c goes to
// (c % 2, c / 2), so input column 2c - 1 to the even half and 2c to the odd.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      const int64_t [[T:t[0-9]+]]_stride = (std::max<int64_t>(2704, 1) + 15) / 16 * 16;
// CHECK-NEXT: kiln_scratch [[T]]_owner(sizeof(float) * [[T]]_stride * 2 * omp_get_max_threads());
// CHECK:      float *__restrict [[T]] = static_cast<float *>([[T]]_owner.data) + omp_get_thread_num() * 2 * [[T]]_stride;
// CHECK-NEXT: // a pad, by rows, split by 2
// CHECK-NEXT: for (int64_t r = 0; r < 52; ++r) {
// CHECK-NEXT:   float *row = [[T]] + r * 52;
// CHECK:        const float *src = in0 + d0 * 5000 + d1 * 2500 + 0 * 50 + 0 + s * 50;
// CHECK-NEXT:   for (int64_t c = 0; c < 1; ++c)
// CHECK-NEXT:     row[c] = v0;
// CHECK-NEXT:   for (int64_t c = 1; c < 26; ++c)
// CHECK-NEXT:     row[c] = src[c * 2 - 1];
// CHECK-NEXT:   for (int64_t c = 0; c < 25; ++c)
// CHECK-NEXT:     row[26 + c] = src[c * 2];
// CHECK-NEXT:   for (int64_t c = 25; c < 26; ++c)
// CHECK-NEXT:     row[26 + c] = v0;
// CHECK-NEXT: }
// CHECK-NEXT: for (int64_t d2 = 0; d2 < 25; ++d2)
// CHECK-NEXT:   for (int64_t d3 = 0; d3 < 25; ++d3) {
// CHECK-NEXT:     float [[A:acc[0-9]+]] = v0;
// CHECK-NEXT:     for (int64_t d4 = 0; d4 < 3; ++d4)
// CHECK-NEXT:       for (int64_t d5 = 0; d5 < 3; ++d5) {
// CHECK-NEXT:         const float {{a[0-9]+}} = [[T]][((d2 * 2) + d4) * 52 + (d5 % 2) * 26 + (d3 + (d5 / 2))];
// CHECK:            }
// CHECK-NEXT:     out0[d0 * 1250 + d1 * 625 + d2 * 25 + d3] = [[A]];
func.func @split_plane(%x: tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> tensor<1x2x25x25xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x : tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> (tensor<1x2x25x25xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<1x2x50x50xf32>):
    %low = arith.constant 0xFF800000 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c50 = arith.constant 50 : index
    %pe = tensor.empty() : tensor<1x2x52x52xf32>
    %pad = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%pe : tensor<1x2x52x52xf32>) {
    ^bb0(%o: f32):
      %n = linalg.index 0 : index
      %c = linalg.index 1 : index
      %h = linalg.index 2 : index
      %w2 = linalg.index 3 : index
      %hs = arith.subi %h, %c1 : index
      %ws = arith.subi %w2, %c1 : index
      %h0 = arith.cmpi sge, %hs, %c0 : index
      %h1 = arith.cmpi slt, %hs, %c50 : index
      %hin = arith.andi %h0, %h1 : i1
      %w0 = arith.cmpi sge, %ws, %c0 : index
      %w1 = arith.cmpi slt, %ws, %c50 : index
      %win = arith.andi %w0, %w1 : i1
      %in = arith.andi %hin, %win : i1
      %v = tensor.extract %a0[%n, %c, %hs, %ws] {kiln.guarded_read} : tensor<1x2x50x50xf32>
      %s = arith.select %in, %v, %low : f32
      linalg.yield %s : f32
    } -> tensor<1x2x52x52xf32>
    %win3 = tensor.empty() : tensor<3x3xf32>
    %e = tensor.empty() : tensor<1x2x25x25xf32>
    %f = linalg.fill ins(%low : f32) outs(%e : tensor<1x2x25x25xf32>) -> tensor<1x2x25x25xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh * 2 + kh, ow * 2 + kw)>, affine_map<(n, c, oh, ow, kh, kw) -> (kh, kw)>, affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%pad, %win3 : tensor<1x2x52x52xf32>, tensor<3x3xf32>) outs(%f : tensor<1x2x25x25xf32>) {
    ^bb0(%p: f32, %unused: f32, %acc: f32):
      %m = arith.maximumf %acc, %p : f32
      linalg.yield %m : f32
    } -> tensor<1x2x25x25xf32>
    kiln.yield %r : tensor<1x2x25x25xf32>
  }
  return %0 : tensor<1x2x25x25xf32, #kiln.device<cpu>>
}

// A plane made by another producer (here a relu) is written as is, then
// copied split into the second half of the thread's buffers, which the
// window reads.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      float *__restrict [[T:t[0-9]+]] = static_cast<float *>([[T]]_owner.data) + omp_get_thread_num() * 2 * [[T]]_stride;
// CHECK:      [[T]][d2 * 50 + d3] = {{v[0-9]+}};
// CHECK:      float *__restrict [[S:t[0-9]+]] = [[T]] + [[T]]_stride;
// CHECK-NEXT: for (int64_t r = 0; r < int64_t(1) * 50; ++r)
// CHECK-NEXT:   for (int64_t q = 0; q < 2; ++q)
// CHECK-NEXT:     for (int64_t h = 0; h < (50 - q + 1) / 2; ++h)
// CHECK-NEXT:       [[S]][(r * 2 + q) * 25 + h] = [[T]][r * 50 + h * 2 + q];
// CHECK:              const float {{a[0-9]+}} = [[S]][((d2 * 2) + d4) * 50 + (d5 % 2) * 25 + (d3 + (d5 / 2))];
func.func @split_plane_copy(%x: tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> tensor<1x2x24x24xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x : tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> (tensor<1x2x24x24xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<1x2x50x50xf32>):
    %low = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    %pe = tensor.empty() : tensor<1x2x50x50xf32>
    %relu = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a0 : tensor<1x2x50x50xf32>) outs(%pe : tensor<1x2x50x50xf32>) {
    ^bb0(%i: f32, %o: f32):
      %m = arith.maximumf %i, %zero : f32
      linalg.yield %m : f32
    } -> tensor<1x2x50x50xf32>
    %win3 = tensor.empty() : tensor<3x3xf32>
    %e = tensor.empty() : tensor<1x2x24x24xf32>
    %f = linalg.fill ins(%low : f32) outs(%e : tensor<1x2x24x24xf32>) -> tensor<1x2x24x24xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh * 2 + kh, ow * 2 + kw)>, affine_map<(n, c, oh, ow, kh, kw) -> (kh, kw)>, affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%relu, %win3 : tensor<1x2x50x50xf32>, tensor<3x3xf32>) outs(%f : tensor<1x2x24x24xf32>) {
    ^bb0(%p: f32, %unused: f32, %acc: f32):
      %m = arith.maximumf %acc, %p : f32
      linalg.yield %m : f32
    } -> tensor<1x2x24x24xf32>
    kiln.yield %r : tensor<1x2x24x24xf32>
  }
  return %0 : tensor<1x2x24x24xf32, #kiln.device<cpu>>
}

// A stem conv (3 input channels, 7x7 window, stride 2: matchRowsConv) runs
// through kiln_conv_rows, no im2col; its bias and relu run on each tile
// (4 channels of an output row) right after it, through
// kiln_conv_rows_tiles (steps of a channel and of a row); its loops run
// only if both decline, the epilogue's own only without tiles. Its zero
// pad (3 rows and columns before, 2 after) is not a pass of its own:
// kiln_conv_rows reads the unpadded 32x32 input with the offsets (3, 3),
// and the pad's loops run only in front of the conv's. The tile epilogue
// may not write over that input either.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK-NOT:  linalg.generic
// CHECK:      const auto [[TILE:tile[0-9]+]] = [&](int64_t image, int64_t mlo, int64_t mhi, int64_t nlo, int64_t nhi) {
// CHECK-NEXT:   for (int64_t d0 = image; d0 < image + 1; ++d0)
// CHECK-NEXT:     for (int64_t d1 = mlo; d1 < mhi; ++d1)
// CHECK-NEXT:       for (int64_t d3 = nlo * int64_t(1) * 16; d3 < nhi * int64_t(1) * 16; ++d3) {
// CHECK:      const bool [[FLAG:tiled[0-9]+]] = static_cast<const void *>(out0) != static_cast<const void *>(in0) && {{.*}}kiln_conv_rows_tiles(1, 1, 3, 8, 37, 37, 32, 32, 3, 3, 7, 7, 2, 2, 16, 16, in0, in1, nullptr, out0, 8, 16, [[TILE]]);
// CHECK-NEXT: if (![[FLAG]] && !kiln_conv_rows(1, 1, 3, 8, 37, 37, 32, 32, 3, 3, 7, 7, 2, 2, 16, 16, in0, in1, nullptr, out0)) {
// CHECK-NEXT: // linalg.generic: parallel, parallel, parallel, parallel
// CHECK:      [[X:t[0-9]+]][d0 * 4107 + d1 * 1369 + d2 * 37 + d3] =
// CHECK:      = [[X]][d0 * 4107 + d2 * 1369 + ((d5 * 2) + d3) * 37 + ((d6 * 2) + d4)];
// CHECK:      if (![[FLAG]]) {
func.func @conv_rows(%arg0: tensor<1x3x32x32xf32, #kiln.device<cpu>>, %arg1: tensor<8x3x7x7xf32, #kiln.device<cpu>>, %arg2: tensor<8xf32, #kiln.device<cpu>>) -> tensor<1x8x16x16xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%arg0, %arg1, %arg2 : tensor<1x3x32x32xf32, #kiln.device<cpu>>, tensor<8x3x7x7xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>>) -> (tensor<1x8x16x16xf32, #kiln.device<cpu>>) {
  ^bb0(%arg3: tensor<1x3x32x32xf32>, %arg4: tensor<8x3x7x7xf32>, %arg5: tensor<8xf32>):
    %cst = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %1 = tensor.empty() : tensor<1x3x37x37xf32>
    %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%1 : tensor<1x3x37x37xf32>) {
    ^bb0(%out: f32):
      %8 = linalg.index 0 : index
      %9 = linalg.index 1 : index
      %10 = linalg.index 2 : index
      %11 = arith.subi %10, %c3 : index
      %12 = arith.cmpi slt, %11, %c32 : index
      %13 = arith.cmpi sge, %11, %c0 : index
      %14 = arith.andi %13, %12 : i1
      %15 = linalg.index 3 : index
      %16 = arith.subi %15, %c3 : index
      %17 = arith.cmpi slt, %16, %c32 : index
      %18 = arith.cmpi sge, %16, %c0 : index
      %19 = arith.andi %18, %17 : i1
      %20 = arith.andi %14, %19 : i1
      %extracted = tensor.extract %arg3[%8, %9, %11, %16] {kiln.guarded_read} : tensor<1x3x32x32xf32>
      %21 = arith.select %20, %extracted, %cst : f32
      linalg.yield %21 : f32
    } -> tensor<1x3x37x37xf32>
    %3 = tensor.empty() : tensor<1x8x16x16xf32>
    %4 = linalg.fill ins(%cst : f32) outs(%3 : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
    %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d5 * 2 + d3, d6 * 2 + d4)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d5, d6)>], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%2, %arg4 : tensor<1x3x37x37xf32>, tensor<8x3x7x7xf32>) outs(%4 : tensor<1x8x16x16xf32>) attrs = {kiln.conv = "rows"} {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %8 = arith.mulf %in, %in_0 : f32
      %9 = arith.addf %out, %8 : f32
      linalg.yield %9 : f32
    } -> tensor<1x8x16x16xf32>
    %6 = tensor.empty() : tensor<1x8x16x16xf32>
    %7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg5, %5 : tensor<8xf32>, tensor<1x8x16x16xf32>) outs(%6 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %8 = arith.addf %in_0, %in : f32
      %9 = arith.maximumf %8, %cst : f32
      linalg.yield %9 : f32
    } -> tensor<1x8x16x16xf32>
    kiln.yield %7 : tensor<1x8x16x16xf32>
  }
  return %0 : tensor<1x8x16x16xf32, #kiln.device<cpu>>
}

// A depthwise 3x3 conv (stride 2, groups = channels) reads its unpadded
// input through the prelude's kiln_dwconv3x3_tiles, the planes' sizes as
// template arguments (stride, input 16x16, output 8x8, pad 1 before), its
// bias (the window's prologue) as an argument and its relu (the window's
// epilogue) on each plane; the window's own loops, over a padded copy of
// each plane, run only if it declines.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      const auto [[TILE:tile[0-9]+]] = [&](int64_t image, int64_t mlo, int64_t mhi, int64_t nlo, int64_t nhi) {
// CHECK:          out0[{{.+}}] = v{{[0-9]+}};
// CHECK:      const bool [[FLAG:tiled[0-9]+]] = static_cast<const void *>(out0) != static_cast<const void *>(in0) && static_cast<const void *>(out0) != static_cast<const void *>(in1) && kiln_dwconv3x3_tiles<2, 16, 16, 8, 8, 1, 1>(1, 8, in0, in1, in2, 0.0f, out0, 8, 8, [[TILE]]);
// CHECK-NEXT: if (![[FLAG]]) {
// CHECK:      // a pad, by rows
// CHECK:      const float a{{[0-9]+}} = in2[d1];
func.func @depthwise_prelude(%arg0: tensor<1x8x16x16xf32, #kiln.device<cpu>>, %arg1: tensor<8x1x3x3xf32, #kiln.device<cpu>>, %arg2: tensor<8xf32, #kiln.device<cpu>>) -> tensor<1x8x8x8xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%arg0, %arg1, %arg2 : tensor<1x8x16x16xf32, #kiln.device<cpu>>, tensor<8x1x3x3xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>>) -> (tensor<1x8x8x8xf32, #kiln.device<cpu>>) {
  ^bb0(%arg3: tensor<1x8x16x16xf32>, %arg4: tensor<8x1x3x3xf32>, %arg5: tensor<8xf32>):
    %cst = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %1 = tensor.empty() : tensor<1x8x18x18xf32>
    %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%1 : tensor<1x8x18x18xf32>) {
    ^bb0(%out: f32):
      %8 = linalg.index 0 : index
      %9 = linalg.index 1 : index
      %10 = linalg.index 2 : index
      %11 = arith.subi %10, %c1 : index
      %12 = arith.cmpi slt, %11, %c16 : index
      %13 = arith.cmpi sge, %11, %c0 : index
      %14 = arith.andi %13, %12 : i1
      %15 = linalg.index 3 : index
      %16 = arith.subi %15, %c1 : index
      %17 = arith.cmpi slt, %16, %c16 : index
      %18 = arith.cmpi sge, %16, %c0 : index
      %19 = arith.andi %18, %17 : i1
      %20 = arith.andi %14, %19 : i1
      %extracted = tensor.extract %arg3[%8, %9, %11, %16] {kiln.guarded_read} : tensor<1x8x16x16xf32>
      %21 = arith.select %20, %extracted, %cst : f32
      linalg.yield %21 : f32
    } -> tensor<1x8x18x18xf32>
    %3 = tensor.empty() : tensor<1x8x8x8xf32>
    %4 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg5 : tensor<8xf32>) outs(%3 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x8x8x8xf32>
    %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1 + d4, d2 * 2 + d5, d3 * 2 + d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%2, %arg4 : tensor<1x8x18x18xf32>, tensor<8x1x3x3xf32>) outs(%4 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %8 = arith.mulf %in, %in_0 : f32
      %9 = arith.addf %out, %8 : f32
      linalg.yield %9 : f32
    } -> tensor<1x8x8x8xf32>
    %6 = tensor.empty() : tensor<1x8x8x8xf32>
    %7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%5 : tensor<1x8x8x8xf32>) outs(%6 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %8 = arith.maximumf %in, %cst : f32
      linalg.yield %8 : f32
    } -> tensor<1x8x8x8xf32>
    kiln.yield %7 : tensor<1x8x8x8xf32>
  }
  return %0 : tensor<1x8x8x8xf32, #kiln.device<cpu>>
}

// Any other depthwise window (5x5, stride 2 here) goes through the
// prelude's kiln_dwconv_tiles, its sizes as arguments before the tensors
// (batch, channels, input 16x16, pads 2 before, window 5x5, strides 2,
// output 8x8), with the same bias argument and epilogue per tile.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      const auto [[TILE:tile[0-9]+]] = [&](int64_t image, int64_t mlo, int64_t mhi, int64_t nlo, int64_t nhi) {
// CHECK:          out0[{{.+}}] = v{{[0-9]+}};
// CHECK:      const bool [[FLAG:tiled[0-9]+]] = static_cast<const void *>(out0) != static_cast<const void *>(in0) && static_cast<const void *>(out0) != static_cast<const void *>(in1) && kiln_dwconv_tiles(1, 8, 16, 16, 2, 2, 5, 5, 2, 2, 8, 8, in0, in1, in2, 0.0f, out0, 8, 8, [[TILE]]);
// CHECK-NEXT: if (![[FLAG]]) {
// CHECK:      const float a{{[0-9]+}} = in2[d1];
func.func @depthwise_window_prelude(%arg0: tensor<1x8x16x16xf32, #kiln.device<cpu>>, %arg1: tensor<8x1x5x5xf32, #kiln.device<cpu>>, %arg2: tensor<8xf32, #kiln.device<cpu>>) -> tensor<1x8x8x8xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%arg0, %arg1, %arg2 : tensor<1x8x16x16xf32, #kiln.device<cpu>>, tensor<8x1x5x5xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>>) -> (tensor<1x8x8x8xf32, #kiln.device<cpu>>) {
  ^bb0(%arg3: tensor<1x8x16x16xf32>, %arg4: tensor<8x1x5x5xf32>, %arg5: tensor<8xf32>):
    %cst = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %1 = tensor.empty() : tensor<1x8x19x19xf32>
    %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%1 : tensor<1x8x19x19xf32>) {
    ^bb0(%out: f32):
      %8 = linalg.index 0 : index
      %9 = linalg.index 1 : index
      %10 = linalg.index 2 : index
      %11 = arith.subi %10, %c2 : index
      %12 = arith.cmpi slt, %11, %c16 : index
      %13 = arith.cmpi sge, %11, %c0 : index
      %14 = arith.andi %13, %12 : i1
      %15 = linalg.index 3 : index
      %16 = arith.subi %15, %c2 : index
      %17 = arith.cmpi slt, %16, %c16 : index
      %18 = arith.cmpi sge, %16, %c0 : index
      %19 = arith.andi %18, %17 : i1
      %20 = arith.andi %14, %19 : i1
      %extracted = tensor.extract %arg3[%8, %9, %11, %16] {kiln.guarded_read} : tensor<1x8x16x16xf32>
      %21 = arith.select %20, %extracted, %cst : f32
      linalg.yield %21 : f32
    } -> tensor<1x8x19x19xf32>
    %3 = tensor.empty() : tensor<1x8x8x8xf32>
    %4 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg5 : tensor<8xf32>) outs(%3 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x8x8x8xf32>
    %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1 + d4, d2 * 2 + d5, d3 * 2 + d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%2, %arg4 : tensor<1x8x19x19xf32>, tensor<8x1x5x5xf32>) outs(%4 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %8 = arith.mulf %in, %in_0 : f32
      %9 = arith.addf %out, %8 : f32
      linalg.yield %9 : f32
    } -> tensor<1x8x8x8xf32>
    %6 = tensor.empty() : tensor<1x8x8x8xf32>
    %7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%5 : tensor<1x8x8x8xf32>) outs(%6 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %8 = arith.maximumf %in, %cst : f32
      linalg.yield %8 : f32
    } -> tensor<1x8x8x8xf32>
    kiln.yield %7 : tensor<1x8x8x8xf32>
  }
  return %0 : tensor<1x8x8x8xf32, #kiln.device<cpu>>
}

// A 3x3 max pool (stride 2) over a pad of its planes with -inf reads the
// unpadded input through the prelude's kiln_maxpool3x3 (sizes, pad before,
// then batch, channels, input, the pad's value, the init, output); the
// window's loops, over each plane padded per thread, run only if it
// declines.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      if (!kiln_maxpool3x3<2, 16, 16, 8, 8, 1, 1>(1, 8, in0, [[NEG:v[0-9]+]], [[NEG]], out0)) {
// CHECK:      // a pad, by rows
// CHECK:      kiln_maximum(
func.func @maxpool_prelude(%arg0: tensor<1x8x16x16xf32, #kiln.device<cpu>>) -> tensor<1x8x8x8xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%arg0 : tensor<1x8x16x16xf32, #kiln.device<cpu>>) -> (tensor<1x8x8x8xf32, #kiln.device<cpu>>) {
  ^bb0(%arg3: tensor<1x8x16x16xf32>):
    %cst = arith.constant 0xFF800000 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %1 = tensor.empty() : tensor<1x8x18x18xf32>
    %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%1 : tensor<1x8x18x18xf32>) {
    ^bb0(%out: f32):
      %8 = linalg.index 0 : index
      %9 = linalg.index 1 : index
      %10 = linalg.index 2 : index
      %11 = arith.subi %10, %c1 : index
      %12 = arith.cmpi slt, %11, %c16 : index
      %13 = arith.cmpi sge, %11, %c0 : index
      %14 = arith.andi %13, %12 : i1
      %15 = linalg.index 3 : index
      %16 = arith.subi %15, %c1 : index
      %17 = arith.cmpi slt, %16, %c16 : index
      %18 = arith.cmpi sge, %16, %c0 : index
      %19 = arith.andi %18, %17 : i1
      %20 = arith.andi %14, %19 : i1
      %extracted = tensor.extract %arg3[%8, %9, %11, %16] {kiln.guarded_read} : tensor<1x8x16x16xf32>
      %21 = arith.select %20, %extracted, %cst : f32
      linalg.yield %21 : f32
    } -> tensor<1x8x18x18xf32>
    %3 = tensor.empty() : tensor<3x3xf32>
    %4 = tensor.empty() : tensor<1x8x8x8xf32>
    %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
    %6 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%2, %3 : tensor<1x8x18x18xf32>, tensor<3x3xf32>) outs(%5 : tensor<1x8x8x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %7 = arith.maximumf %out, %in : f32
      linalg.yield %7 : f32
    } -> tensor<1x8x8x8xf32>
    kiln.yield %6 : tensor<1x8x8x8xf32>
  }
  return %0 : tensor<1x8x8x8xf32, #kiln.device<cpu>>
}

// Trailing reductions that the output does not index (a global average
// pool's sum, here in f64 from f32), too many to unroll as a window's taps
// (kUnrolledTaps), sum into a register per output element
// under omp simd reduction, their two loops as one where every input reads
// them contiguously; the register starts from the output's element (the
// fill before) and is stored after the loop.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:      for (int64_t d1 = 0; d1 < 8; ++d1) {
// CHECK-NEXT:   double [[ACC:acc[0-9]+]] = out0[d0 * 8 + d1];
// CHECK-NEXT: #pragma omp simd reduction(+ : [[ACC]])
// CHECK-NEXT:   for (int64_t d3 = 0; d3 < 6 * 7; ++d3) {
// CHECK:          [[ACC]] = v{{[0-9]+}};
// CHECK:        out0[d0 * 8 + d1] = [[ACC]];
func.func @register_sums(%x: tensor<2x8x6x7xf32, #kiln.device<cpu>>) -> tensor<2x8xf64, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x : tensor<2x8x6x7xf32, #kiln.device<cpu>>) -> (tensor<2x8xf64, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<2x8x6x7xf32>):
    %zero = arith.constant 0.0 : f64
    %e = tensor.empty() : tensor<2x8xf64>
    %f = linalg.fill ins(%zero : f64) outs(%e : tensor<2x8xf64>) -> tensor<2x8xf64>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%a0 : tensor<2x8x6x7xf32>) outs(%f : tensor<2x8xf64>) {
    ^bb0(%x0: f32, %acc: f64):
      %d = arith.extf %x0 : f32 to f64
      %s = arith.addf %acc, %d : f64
      linalg.yield %s : f64
    } -> tensor<2x8xf64>
    kiln.yield %r : tensor<2x8xf64>
  }
  return %0 : tensor<2x8xf64, #kiln.device<cpu>>
}

// Read transposed, the two loops stay apart and only the inner one is a
// simd loop; a maximum reduces with the prelude's NaN-propagating kiln_max.
// CHECK-LABEL: // kiln kernel kiln_k{{[0-9]+}}
// CHECK:        float [[ACC:acc[0-9]+]] = out0[d0 * 8 + d1];
// CHECK-NEXT:   for (int64_t d2 = 0; d2 < 6; ++d2)
// CHECK-NEXT: #pragma omp simd reduction(kiln_max : [[ACC]])
// CHECK-NEXT:     for (int64_t d3 = 0; d3 < 7; ++d3) {
// CHECK:          in0[d0 * 336 + d3 * 48 + d2 * 8 + d1]
// CHECK:        out0[d0 * 8 + d1] = [[ACC]];
func.func @register_max(%x: tensor<2x7x6x8xf32, #kiln.device<cpu>>) -> tensor<2x8xf32, #kiln.device<cpu>> {
  %0 = kiln.kernel(%x : tensor<2x7x6x8xf32, #kiln.device<cpu>>) -> (tensor<2x8xf32, #kiln.device<cpu>>) {
  ^bb0(%a0: tensor<2x7x6x8xf32>):
    %low = arith.constant 0xFF800000 : f32
    %e = tensor.empty() : tensor<2x8xf32>
    %f = linalg.fill ins(%low : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, w, h, c)>, affine_map<(n, c, h, w) -> (n, c)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%a0 : tensor<2x7x6x8xf32>) outs(%f : tensor<2x8xf32>) {
    ^bb0(%x0: f32, %acc: f32):
      %s = arith.maximumf %acc, %x0 : f32
      linalg.yield %s : f32
    } -> tensor<2x8xf32>
    kiln.yield %r : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32, #kiln.device<cpu>>
}
