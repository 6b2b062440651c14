// RUN: kiln-translate --kiln-to-cuda %s | FileCheck %s
// RUN: kiln-translate --kiln-to-cpp %s | FileCheck %s --check-prefix=CPP

// The CUDA backend: one __global__ phase per linalg op, each a grid-stride
// loop over its parallel iterations, taking the kernel's slots by value.

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// Elementwise: one thread per element, the flat index split into d0, d1.
// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK: struct kiln_k0_slots { void *p[3]; };
// CHECK: extern "C" __global__ void __launch_bounds__(256) kiln_k0_p0(kiln_k0_slots s) {
// CHECK:   const float *__restrict__ in0 = (const float *)s.p[0];
// CHECK:   const float *__restrict__ in1 = (const float *)s.p[1];
// CHECK:   float *__restrict__ out0 = (float *)s.p[2];
// CHECK:   for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < 12; i += (int64_t)gridDim.x * blockDim.x) {
// CHECK:     const int d1 = r % 4;
// CHECK:     const int d0 = r % 3;
// CHECK:     const float [[A:a[0-9]+]] = in0[d0 * 4 + d1];
// CHECK:     const float [[B:a[0-9]+]] = in1[d1];
// CHECK:     const float [[S:v[0-9]+]] = [[A]] + [[B]];
// CHECK:     const float [[E:v[0-9]+]] = exp([[S]]);
// CHECK:     out0[d0 * 4 + d1] = [[E]];
// CHECK: // slots 3, scratch [], launches: kiln_k0_p0(12)

// CPP-LABEL: // kiln kernel kiln_k0
// CPP: extern "C" void kiln_k0(void **buffers) {
// CPP:   for (int64_t d0 = 0; d0 < 3; ++d0)
// CPP:     for (int64_t d1 = 0; d1 < 4; ++d1) {
// CPP:       = kiln_expf(

func.func @elementwise(%x: tensor<3x4xf32, #kiln.device<cuda:0>>, %b: tensor<4xf32, #kiln.device<cuda:0>>) -> tensor<3x4xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %b : tensor<3x4xf32, #kiln.device<cuda:0>>, tensor<4xf32, #kiln.device<cuda:0>>) -> (tensor<3x4xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<3x4xf32>, %a1: tensor<4xf32>):
    %e = tensor.empty() : tensor<3x4xf32>
    %r = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]} ins(%a0, %a1 : tensor<3x4xf32>, tensor<4xf32>) outs(%e : tensor<3x4xf32>) {
    ^bb0(%in: f32, %in1: f32, %out: f32):
      %s = arith.addf %in, %in1 : f32
      %x1 = math.exp %s : f32
      linalg.yield %x1 : f32
    } -> tensor<3x4xf32>
    kiln.yield %r : tensor<3x4xf32>
  }
  return %0 : tensor<3x4xf32, #kiln.device<cuda:0>>
}

// A row sum through a local buffer, then a division by it: the fill and the
// reduction write a scratch slot (one f32 per row), the reduction keeps its
// accumulator in a register, and the last phase reads the scratch.
// CHECK-LABEL: // kiln kernel kiln_k1
// CHECK: struct kiln_k1_slots { void *p[3]; };
// CHECK: kiln_k1_p0(kiln_k1_slots s) {
// CHECK:   float *__restrict__ [[T:t[0-9]+]] = (float *)s.p[2];
// CHECK:   i < 3;
// CHECK:     [[T]][i] = [[ZERO:v[0-9]+]];
// CHECK: kiln_k1_p1(kiln_k1_slots s) {
// CHECK:   i < 3;
// CHECK:     // linalg.generic: parallel, reduction
// CHECK:     const int d0 = r % 3;
// CHECK:     float [[ACC:acc[0-9]+]] = [[T]][d0];
// CHECK:     for (int d1 = 0; d1 < 5; ++d1) {
// CHECK:       const float [[X:a[0-9]+]] = in0[d0 * 5 + d1];
// CHECK:       const float [[SUM:v[0-9]+]] = [[ACC]] + [[X]];
// CHECK:       [[ACC]] = [[SUM]];
// CHECK:     }
// CHECK:     [[T]][d0] = [[ACC]];
// CHECK: kiln_k1_p2(kiln_k1_slots s) {
// CHECK:   i < 15;
// CHECK:     out0[d0 * 5 + d1] =
// CHECK: // slots 3, scratch [12], launches: kiln_k1_p0(3) kiln_k1_p1(3) kiln_k1_p2(15)
func.func @normalize(%x: tensor<3x5xf32, #kiln.device<cuda:0>>) -> tensor<3x5xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<3x5xf32, #kiln.device<cuda:0>>) -> (tensor<3x5xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<3x5xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<3xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
    %sum = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%a0 : tensor<3x5xf32>) outs(%f : tensor<3xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %acc, %in : f32
      linalg.yield %s : f32
    } -> tensor<3xf32>
    %e2 = tensor.empty() : tensor<3x5xf32>
    %r = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%a0, %sum : tensor<3x5xf32>, tensor<3xf32>) outs(%e2 : tensor<3x5xf32>) {
    ^bb0(%in: f32, %s: f32, %out: f32):
      %d = arith.divf %in, %s : f32
      linalg.yield %d : f32
    } -> tensor<3x5xf32>
    kiln.yield %r : tensor<3x5xf32>
  }
  return %0 : tensor<3x5xf32, #kiln.device<cuda:0>>
}

// An output map that is not one-to-one over the parallel dims (both d0 and
// d1 write row d0): the loop nest runs serially in one thread.
// CHECK-LABEL: // kiln kernel kiln_k2
// CHECK:   i < 1;
// CHECK:     // linalg.generic: parallel, parallel (serial: the output map is not one-to-one)
// CHECK:     for (int d0 = 0; d0 < 2; ++d0) {
// CHECK:       for (int d1 = 0; d1 < 3; ++d1) {
// CHECK:         out0[d0] =
// CHECK: // slots 2, scratch [], launches: kiln_k2_p0(1)
func.func @last_column(%x: tensor<2x3xf32, #kiln.device<cuda:0>>) -> tensor<2xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<2x3xf32, #kiln.device<cuda:0>>) -> (tensor<2xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<2x3xf32>):
    %e = tensor.empty() : tensor<2xf32>
    %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "parallel"]} ins(%a0 : tensor<2x3xf32>) outs(%e : tensor<2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<2xf32>
    kiln.yield %r : tensor<2xf32>
  }
  return %0 : tensor<2xf32, #kiln.device<cuda:0>>
}

// float16 is __half (cuda_fp16.h); math goes through float.
// CHECK-LABEL: // kiln kernel kiln_k3
// CHECK:   const __half *__restrict__ in0 = (const __half *)s.p[0];
// CHECK:     const __half [[H:v[0-9]+]] = tanh(static_cast<float>([[IN:a[0-9]+]]));
// CPP-LABEL: // kiln kernel kiln_k3
// CPP:       const _Float16 [[H:v[0-9]+]] = std::tanh(static_cast<float>(
func.func @half(%x: tensor<8xf16, #kiln.device<cuda:0>>) -> tensor<8xf16, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<8xf16, #kiln.device<cuda:0>>) -> (tensor<8xf16, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<8xf16>):
    %e = tensor.empty() : tensor<8xf16>
    %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a0 : tensor<8xf16>) outs(%e : tensor<8xf16>) {
    ^bb0(%in: f16, %out: f16):
      %t = math.tanh %in : f16
      linalg.yield %t : f16
    } -> tensor<8xf16>
    kiln.yield %r : tensor<8xf16>
  }
  return %0 : tensor<8xf16, #kiln.device<cuda:0>>
}

// A long reduction with few outputs: a warp per output. Each lane folds a
// strided share from the identity, shuffles combine the lanes, and lane 0
// folds the result into the output (here the fill's -inf).
// CHECK-LABEL: // kiln kernel kiln_k4
// CHECK: kiln_k4_p1(kiln_k4_slots s) {
// CHECK:   i < 128;
// CHECK:     // linalg.generic: parallel, reduction (one warp per output)
// CHECK:     const int lane = (int)(i & 31);
// CHECK:     int r = i >> 5;
// CHECK:     const int d0 = r % 4;
// CHECK:     float [[ACC:acc[0-9]+]] = -INFINITY;
// CHECK:     for (int q = lane; q < 64; q += 32) {
// CHECK:       const int d1 = rq % 64;
// CHECK:       const float [[X:a[0-9]+]] = in0[d0 * 64 + d1];
// CHECK:       const float [[M:v[0-9]+]] = kiln_maximum([[ACC]], [[X]]);
// CHECK:       [[ACC]] = [[M]];
// CHECK:     for (int offset = 16; offset > 0; offset >>= 1)
// CHECK:       [[ACC]] = kiln_maximum([[ACC]], __shfl_down_sync(0xffffffffu, [[ACC]], offset));
// CHECK:     if (lane == 0)
// CHECK:       out0[d0] = kiln_maximum(out0[d0], [[ACC]]);
// CHECK: // slots 2, scratch [], launches: kiln_k4_p0(4) kiln_k4_p1(128)
func.func @row_max(%x: tensor<4x64xf32, #kiln.device<cuda:0>>) -> tensor<4xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<4x64xf32, #kiln.device<cuda:0>>) -> (tensor<4xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<4x64xf32>):
    %ninf = arith.constant 0xFF800000 : f32
    %e = tensor.empty() : tensor<4xf32>
    %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    %m = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%a0 : tensor<4x64xf32>) outs(%f : tensor<4xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %r = arith.maximumf %acc, %in : f32
      linalg.yield %r : f32
    } -> tensor<4xf32>
    kiln.yield %m : tensor<4xf32>
  }
  return %0 : tensor<4xf32, #kiln.device<cuda:0>>
}

// A contraction cuBLAS can do: a GEMM launch on the slots, whose entry
// point is only its generated stand-in (64x64 tiles of C through shared
// memory), for where cuBLAS does not load.
// Here B is shared by both batches and used transposed (stored n x k), so
// the batch folds into M: one 6x4 by 4x10 GEMM. Its init is a zero fill,
// which the GEMM does instead (beta 0): no phase at all.
// CHECK-LABEL: // kiln kernel kiln_k5
// CHECK: kiln_k5_p0(kiln_k5_slots s)
// CHECK: i < 256;
// CHECK: // generated stand-in for the GEMM launch: C[6x10] = A * B (K 4)
// CHECK: __shared__ float kiln_as[16][64];
// CHECK: kiln_as[kk][mm] = gm < 6 && gk < 4 ? A[gm * 4 + gk] : (float)0;
// CHECK: kiln_bs[kk][nn] = gn < 10 && gk < 4 ? B[gn * 4 + gk] : (float)0;
// CHECK: __syncthreads();
// CHECK: C[gm * 10 + gn] = acc[r][c];
// CHECK-NOT: kiln_k5_p1
// CHECK: // slots 3, scratch [], launches: gemm{"a":0,"b":1,"batch":1,"beta":0,"c":2,"dtype":"f32","k":4,"m":6,"n":10,"stride_a":0,"stride_b":0,"stride_c":60,"trans_a":false,"trans_b":true}/kiln_k5_p0(256)
func.func @batched_matmul(%a: tensor<2x3x4xf32, #kiln.device<cuda:0>>, %b: tensor<10x4xf32, #kiln.device<cuda:0>>) -> tensor<2x3x10xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%a, %b : tensor<2x3x4xf32, #kiln.device<cuda:0>>, tensor<10x4xf32, #kiln.device<cuda:0>>) -> (tensor<2x3x10xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<2x3x4xf32>, %a1: tensor<10x4xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<2x3x10xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(b, m, k, n) -> (b, m, k)>, affine_map<(b, m, k, n) -> (n, k)>, affine_map<(b, m, k, n) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%a0, %a1 : tensor<2x3x4xf32>, tensor<10x4xf32>) outs(%f : tensor<2x3x10xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<2x3x10xf32>
    kiln.yield %r : tensor<2x3x10xf32>
  }
  return %0 : tensor<2x3x10xf32, #kiln.device<cuda:0>>
}

// An unsigned max (kept in signless i32) folds with unsigned compares from 0.
// CHECK-LABEL: // kiln kernel kiln_k6
// CHECK:     int32_t [[ACC:acc[0-9]+]] = 0;
// CHECK:       [[ACC]] = kiln_umax([[ACC]], __shfl_down_sync(0xffffffffu, [[ACC]], offset));
// CHECK:       out0[d0] = kiln_umax(out0[d0], [[ACC]]);
func.func @row_umax(%x: tensor<2x64xi32, #kiln.device<cuda:0>>) -> tensor<2xi32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<2x64xi32, #kiln.device<cuda:0>>) -> (tensor<2xi32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<2x64xi32>):
    %zero = arith.constant 0 : i32
    %e = tensor.empty() : tensor<2xi32>
    %f = linalg.fill ins(%zero : i32) outs(%e : tensor<2xi32>) -> tensor<2xi32>
    %m = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%a0 : tensor<2x64xi32>) outs(%f : tensor<2xi32>) {
    ^bb0(%in: i32, %acc: i32):
      %r = arith.maxui %acc, %in : i32
      linalg.yield %r : i32
    } -> tensor<2xi32>
    kiln.yield %m : tensor<2xi32>
  }
  return %0 : tensor<2xi32, #kiln.device<cuda:0>>
}

// A direct 2-D conv (codegen/Gemm.h's matchLibraryConv) on an input the
// kernel padded: a cuDNN launch with the strides, dilations and groups read
// off the input's map, and a workspace slot of its own (slot 3: the
// im2col size, 1x4x3x3x4x3 floats). Its zero init is left to it (beta 0).
// CHECK-LABEL: // kiln kernel kiln_k7
// CHECK-NOT: kiln_k7_p1
// CHECK: // slots 4, scratch [1728], launches: conv{"beta":0,"dilations":[1,2],"dtype":"f32","groups":2,"pads":[0,0],"strides":[2,1],"w":1,"w_shape":[6,2,3,3],"workspace":3,"workspace_bytes":1728,"x":0,"x_shape":[1,4,9,7],"y":2,"y_shape":[1,6,4,3]}/kiln_k7_p0(72)
#cin = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 3) * 2 + d2, d5 * 2 + d3, d6 + d4 * 2)>
#cw = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d4)>
#cout = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d5, d6)>
func.func @conv_groups(%x: tensor<1x4x9x7xf32, #kiln.device<cuda:0>>, %w: tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x6x4x3xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w : tensor<1x4x9x7xf32, #kiln.device<cuda:0>>, tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x6x4x3xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x4x9x7xf32>, %a1: tensor<6x2x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x6x4x3xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x4x3xf32>) -> tensor<1x6x4x3xf32>
    %r = linalg.generic {indexing_maps = [#cin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<1x4x9x7xf32>, tensor<6x2x3x3xf32>) outs(%f : tensor<1x6x4x3xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x6x4x3xf32>
    kiln.yield %r : tensor<1x6x4x3xf32>
  }
  return %0 : tensor<1x6x4x3xf32, #kiln.device<cuda:0>>
}

// The same conv with an output one column narrower than its window fits is no
// library conv: generated loops, after the fill.
// CHECK-LABEL: // kiln kernel kiln_k8
// CHECK: // slots 3, scratch [], launches: kiln_k8_p0(48) kiln_k8_p1(48)
func.func @conv_misfit(%x: tensor<1x4x9x7xf32, #kiln.device<cuda:0>>, %w: tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x6x4x2xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w : tensor<1x4x9x7xf32, #kiln.device<cuda:0>>, tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x6x4x2xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x4x9x7xf32>, %a1: tensor<6x2x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x6x4x2xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x4x2xf32>) -> tensor<1x6x4x2xf32>
    %r = linalg.generic {indexing_maps = [#cin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<1x4x9x7xf32>, tensor<6x2x3x3xf32>) outs(%f : tensor<1x6x4x2xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x6x4x2xf32>
    kiln.yield %r : tensor<1x6x4x2xf32>
  }
  return %0 : tensor<1x6x4x2xf32, #kiln.device<cuda:0>>
}

// A zero pad of the planes before such a conv, the same before and after,
// is cuDNN's to do: no pad phase, the conv reads the kernel's input (slot
// 0) with pads [1, 1]. Padded only above, it stays a phase that the conv
// reads from scratch (slot 3) without pads.
#pid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#pin = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d5 + d3, d6 + d4)>
// CHECK-LABEL: // kiln kernel kiln_k9
// CHECK: kiln_k9_p0(kiln_k9_slots s)
// CHECK: // generated stand-in for the conv launch: a thread per output
// CHECK: const int64_t ih = oh * 1 - 1 + kh * 1;
// CHECK: if (ih < 0 || ih >= 5)
// CHECK: acc += xp[ih * 5 + iw] * wp[kh * 3 + kw];
// CHECK: y[i] = acc;
// CHECK-NOT: kiln_k9_p1
// CHECK: // slots 4, scratch [1800], launches: conv{"beta":0,"dilations":[1,1],"dtype":"f32","groups":1,"pads":[1,1],"strides":[1,1],"w":1,"w_shape":[3,2,3,3],"workspace":3,"workspace_bytes":1800,"x":0,"x_shape":[1,2,5,5],"y":2,"y_shape":[1,3,5,5]}/kiln_k9_p0(75)
func.func @conv_padded(%x: tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, %w: tensor<3x2x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x3x5x5xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w : tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, tensor<3x2x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x3x5x5xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x2x5x5xf32>, %a1: tensor<3x2x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ctop = arith.constant 1 : index
    %c5 = arith.constant 5 : index
    %pe = tensor.empty() : tensor<1x2x7x7xf32>
    %pad = linalg.generic {indexing_maps = [#pid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%pe : tensor<1x2x7x7xf32>) {
    ^bb0(%out: f32):
      %i0 = linalg.index 0 : index
      %i1 = linalg.index 1 : index
      %i2 = linalg.index 2 : index
      %r = arith.subi %i2, %ctop : index
      %rhi = arith.cmpi slt, %r, %c5 : index
      %rlo = arith.cmpi sge, %r, %c0 : index
      %rok = arith.andi %rlo, %rhi : i1
      %i3 = linalg.index 3 : index
      %q = arith.subi %i3, %c1 : index
      %qhi = arith.cmpi slt, %q, %c5 : index
      %qlo = arith.cmpi sge, %q, %c0 : index
      %qok = arith.andi %qlo, %qhi : i1
      %ok = arith.andi %rok, %qok : i1
      %v = tensor.extract %a0[%i0, %i1, %r, %q] {kiln.guarded_read} : tensor<1x2x5x5xf32>
      %sel = arith.select %ok, %v, %zero : f32
      linalg.yield %sel : f32
    } -> tensor<1x2x7x7xf32>
    %e = tensor.empty() : tensor<1x3x5x5xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x5x5xf32>) -> tensor<1x3x5x5xf32>
    %c = linalg.generic {indexing_maps = [#pin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%pad, %a1 : tensor<1x2x7x7xf32>, tensor<3x2x3x3xf32>) outs(%f : tensor<1x3x5x5xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x3x5x5xf32>
    kiln.yield %c : tensor<1x3x5x5xf32>
  }
  return %0 : tensor<1x3x5x5xf32, #kiln.device<cuda:0>>
}

// CHECK-LABEL: // kiln kernel kiln_k10
// CHECK: kiln_k10_p0(kiln_k10_slots s) {
// CHECK: // slots 5, scratch [336, 1440], launches: kiln_k10_p0(84) conv{"beta":0,"dilations":[1,1],"dtype":"f32","groups":1,"pads":[0,0],"strides":[1,1],"w":1,"w_shape":[3,2,3,3],"workspace":4,"workspace_bytes":1440,"x":3,"x_shape":[1,2,6,7],"y":2,"y_shape":[1,3,4,5]}/kiln_k10_p1(60)
func.func @conv_padded_above(%x: tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, %w: tensor<3x2x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x3x4x5xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w : tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, tensor<3x2x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x3x4x5xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x2x5x5xf32>, %a1: tensor<3x2x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ctop = arith.constant 1 : index
    %c5 = arith.constant 5 : index
    %pe = tensor.empty() : tensor<1x2x6x7xf32>
    %pad = linalg.generic {indexing_maps = [#pid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%pe : tensor<1x2x6x7xf32>) {
    ^bb0(%out: f32):
      %i0 = linalg.index 0 : index
      %i1 = linalg.index 1 : index
      %i2 = linalg.index 2 : index
      %r = arith.subi %i2, %ctop : index
      %rhi = arith.cmpi slt, %r, %c5 : index
      %rlo = arith.cmpi sge, %r, %c0 : index
      %rok = arith.andi %rlo, %rhi : i1
      %i3 = linalg.index 3 : index
      %q = arith.subi %i3, %c1 : index
      %qhi = arith.cmpi slt, %q, %c5 : index
      %qlo = arith.cmpi sge, %q, %c0 : index
      %qok = arith.andi %qlo, %qhi : i1
      %ok = arith.andi %rok, %qok : i1
      %v = tensor.extract %a0[%i0, %i1, %r, %q] {kiln.guarded_read} : tensor<1x2x5x5xf32>
      %sel = arith.select %ok, %v, %zero : f32
      linalg.yield %sel : f32
    } -> tensor<1x2x6x7xf32>
    %e = tensor.empty() : tensor<1x3x4x5xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x4x5xf32>) -> tensor<1x3x4x5xf32>
    %c = linalg.generic {indexing_maps = [#pin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%pad, %a1 : tensor<1x2x6x7xf32>, tensor<3x2x3x3xf32>) outs(%f : tensor<1x3x4x5xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x3x4x5xf32>
    kiln.yield %c : tensor<1x3x4x5xf32>
  }
  return %0 : tensor<1x3x4x5xf32, #kiln.device<cuda:0>>
}

// Longer still (2048 terms, 4 per lane of a block of 256) with few outputs:
// a block per output. Each warp shuffles its lanes together, lane 0 of each
// puts the warp's result in shared memory, and after a barrier the first
// warp folds those 8 into the output; a second barrier keeps the partials
// until they are read. Threads are a multiple of the block size, so every
// thread of a block reaches both barriers.
// CHECK-LABEL: // kiln kernel kiln_k11
// CHECK: kiln_k11_p1(kiln_k11_slots s) {
// CHECK:   i < 512;
// CHECK:     // linalg.generic: parallel, reduction (one block per output)
// CHECK:     const int lane = (int)(i & 31);
// CHECK:     const int warp = (int)((i & 255) >> 5);
// CHECK:     int r = i >> 8;
// CHECK:     const int d0 = r % 2;
// CHECK:     float [[ACC:acc[0-9]+]] = 0;
// CHECK:     for (int q = (int)(i & 255); q < 2048; q += 256) {
// CHECK:       [[ACC]] = [[S:v[0-9]+]];
// CHECK:     for (int offset = 16; offset > 0; offset >>= 1)
// CHECK:       [[ACC]] = [[ACC]] + __shfl_down_sync(0xffffffffu, [[ACC]], offset);
// CHECK:     __shared__ float [[P:partial[0-9]+]][8];
// CHECK:     if (lane == 0)
// CHECK:       [[P]][warp] = [[ACC]];
// CHECK:     __syncthreads();
// CHECK:     if (warp == 0) {
// CHECK:       [[ACC]] = lane < 8 ? [[P]][lane] : 0;
// CHECK:       for (int offset = 4; offset > 0; offset >>= 1)
// CHECK:         [[ACC]] = [[ACC]] + __shfl_down_sync(0xffffffffu, [[ACC]], offset);
// CHECK:       if (lane == 0)
// CHECK:         out0[d0] = out0[d0] + [[ACC]];
// CHECK:     }
// CHECK:     __syncthreads();
// CHECK: // slots 2, scratch [], launches: kiln_k11_p0(2) kiln_k11_p1(512)
func.func @long_row_sum(%x: tensor<2x2048xf32, #kiln.device<cuda:0>>) -> tensor<2xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x : tensor<2x2048xf32, #kiln.device<cuda:0>>) -> (tensor<2xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<2x2048xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<2xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
    %m = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%a0 : tensor<2x2048xf32>) outs(%f : tensor<2xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %r = arith.addf %acc, %in : f32
      linalg.yield %r : f32
    } -> tensor<2xf32>
    kiln.yield %m : tensor<2xf32>
  }
  return %0 : tensor<2xf32, #kiln.device<cuda:0>>
}

// A conv whose only user adds a per-channel bias and a residual and applies
// a ReLU (maximumf with 0) is one fused cuDNN call: bias (slot 2) and z
// (slot 3, the residual input) ride on the launch, which writes the kernel's
// output (slot 4); no phase is left, and the stand-in does the same.
#chan = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: // kiln kernel kiln_k12
// CHECK: kiln_k12_p0(kiln_k12_slots s)
// CHECK: // generated stand-in for the conv launch: a thread per output
// CHECK: acc += ((const float *)s.p[2])[m];
// CHECK-NEXT: acc += ((const float *)s.p[3])[i];
// CHECK-NEXT: acc = acc > 0.f ? acc : 0.f;
// CHECK-NEXT: y[i] = acc;
// CHECK-NOT: kiln_k12_p1
// CHECK: // slots 6, scratch [648], launches: conv{"activation":"relu","beta":0,"bias":2,"dilations":[1,1],"dtype":"f32","groups":1,"pads":[0,0],"strides":[1,1],"w":1,"w_shape":[3,2,3,3],"workspace":5,"workspace_bytes":648,"x":0,"x_shape":[1,2,5,5],"y":4,"y_shape":[1,3,3,3],"z":3}/kiln_k12_p0(27)
func.func @conv_bias_residual_relu(%x: tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, %w: tensor<3x2x3x3xf32, #kiln.device<cuda:0>>, %b: tensor<3xf32, #kiln.device<cuda:0>>, %z: tensor<1x3x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x3x3x3xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w, %b, %z : tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, tensor<3x2x3x3xf32, #kiln.device<cuda:0>>, tensor<3xf32, #kiln.device<cuda:0>>, tensor<1x3x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x3x3x3xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x2x5x5xf32>, %a1: tensor<3x2x3x3xf32>, %a2: tensor<3xf32>, %a3: tensor<1x3x3x3xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x3x3x3xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32>
    %c = linalg.generic {indexing_maps = [#pin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) outs(%f : tensor<1x3x3x3xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x3x3x3xf32>
    %e2 = tensor.empty() : tensor<1x3x3x3xf32>
    %r = linalg.generic {indexing_maps = [#chan, #pid, #pid, #pid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a2, %c, %a3 : tensor<3xf32>, tensor<1x3x3x3xf32>, tensor<1x3x3x3xf32>) outs(%e2 : tensor<1x3x3x3xf32>) {
    ^bb0(%bias: f32, %conv: f32, %res: f32, %out: f32):
      %s1 = arith.addf %conv, %bias : f32
      %s2 = arith.addf %s1, %res : f32
      %m = arith.maximumf %s2, %zero : f32
      linalg.yield %m : f32
    } -> tensor<1x3x3x3xf32>
    kiln.yield %r : tensor<1x3x3x3xf32>
  }
  return %0 : tensor<1x3x3x3xf32, #kiln.device<cuda:0>>
}

// Without the ReLU, cuDNN's fused call would be limited to one algorithm:
// the bias stays a generated phase after a plain conv launch.
// CHECK-LABEL: // kiln kernel kiln_k13
// CHECK: // slots 5, scratch [648], launches: conv{"beta":0,"dilations":[1,1],"dtype":"f32","groups":1,"pads":[0,0],"strides":[1,1],"w":1,"w_shape":[3,2,3,3],"workspace":4,"workspace_bytes":648,"x":0,"x_shape":[1,2,5,5],"y":3,"y_shape":[1,3,3,3]}/kiln_k13_p0(27) kiln_k13_p1(27)
func.func @conv_bias(%x: tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, %w: tensor<3x2x3x3xf32, #kiln.device<cuda:0>>, %b: tensor<3xf32, #kiln.device<cuda:0>>) -> tensor<1x3x3x3xf32, #kiln.device<cuda:0>> {
  %0 = kiln.kernel(%x, %w, %b : tensor<1x2x5x5xf32, #kiln.device<cuda:0>>, tensor<3x2x3x3xf32, #kiln.device<cuda:0>>, tensor<3xf32, #kiln.device<cuda:0>>) -> (tensor<1x3x3x3xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a0: tensor<1x2x5x5xf32>, %a1: tensor<3x2x3x3xf32>, %a2: tensor<3xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x3x3x3xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32>
    %c = linalg.generic {indexing_maps = [#pin, #cw, #cout], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%a0, %a1 : tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) outs(%f : tensor<1x3x3x3xf32>) attrs = {kiln.conv = "library"} {
    ^bb0(%in: f32, %wt: f32, %acc: f32):
      %p = arith.mulf %in, %wt : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x3x3x3xf32>
    %e2 = tensor.empty() : tensor<1x3x3x3xf32>
    %r = linalg.generic {indexing_maps = [#chan, #pid, #pid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a2, %c : tensor<3xf32>, tensor<1x3x3x3xf32>) outs(%e2 : tensor<1x3x3x3xf32>) {
    ^bb0(%bias: f32, %conv: f32, %out: f32):
      %s1 = arith.addf %conv, %bias : f32
      linalg.yield %s1 : f32
    } -> tensor<1x3x3x3xf32>
    kiln.yield %r : tensor<1x3x3x3xf32>
  }
  return %0 : tensor<1x3x3x3xf32, #kiln.device<cuda:0>>
}
