// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on convolutions and pools (passes/lowering/Window.cpp).

// conv (f64; an f32 one of static sizes runs its groups as GEMMs, below):
// input padded by a generic whose read of the input is guarded (made
// only inside it, so its indices are unclamped: d2 - 1, d3 - 1; the
// unpadded n and c read their dims as they are), bias broadcast into the
// init, then one generic with strided, dilated input reads and grouped
// channels. Its 2 x 3 x 3 = 18 taps loop innermost: [n, m, oh, ow, c, kh, kw].
// The lowering names what it chose (kiln.conv): here "direct" loops.
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 2) * 2 + d4, d2 * 2 + d5, d3 * 2 + d6 * 2)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x4x8x8xf64>)
// CHECK:   %[[I0:.+]] = linalg.index 0
// CHECK:   %[[I1:.+]] = linalg.index 1
// CHECK:   %[[I2:.+]] = linalg.index 2
// CHECK:   %[[H:.+]] = arith.subi %[[I2]]
// CHECK:   %[[I3:.+]] = linalg.index 3
// CHECK:   %[[V:.+]] = arith.subi %[[I3]]
// CHECK-NOT: arith.minsi
// CHECK:   %[[READ:.+]] = tensor.extract %{{.+}}[%[[I0]], %[[I1]], %[[H]], %[[V]]] {kiln.guarded_read}
// CHECK:   arith.select %{{.+}}, %[[READ]]
// CHECK: %[[BIAS:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<4xf64>)
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[PAD]], %{{.+}} : tensor<1x4x8x8xf64>, tensor<4x2x3x3xf64>) outs(%[[BIAS]] : tensor<1x4x3x2xf64>) attrs = {{ *}}{kiln.conv = "direct"}
func.func @conv(%x: tensor<1x4x6x6xf64, #kiln.device<cpu>>, %w: tensor<4x2x3x3xf64, #kiln.device<cpu>>, %b: tensor<4xf64, #kiln.device<cpu>>) -> tensor<1x4x3x2xf64, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w, %b : tensor<1x4x6x6xf64, #kiln.device<cpu>>, tensor<4x2x3x3xf64, #kiln.device<cpu>>, tensor<4xf64, #kiln.device<cpu>>) -> (tensor<1x4x3x2xf64, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x4x6x6xf64, #kiln.device<cpu>>, %c: tensor<4x2x3x3xf64, #kiln.device<cpu>>, %d: tensor<4xf64, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>, group = 2} : tensor<1x4x6x6xf64, #kiln.device<cpu>>, tensor<4x2x3x3xf64, #kiln.device<cpu>>, tensor<4xf64, #kiln.device<cpu>> -> tensor<1x4x3x2xf64, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x4x3x2xf64, #kiln.device<cpu>>
  }
  return %k : tensor<1x4x3x2xf64, #kiln.device<cpu>>
}

// -----

// An f32 conv without groups: padding, then im2col (a gather into
// [n, c, kh, kw, oh, ow], no clamps: the padding is not fused into it, as it
// would be recomputed for every window), then a GEMM-shaped generic from a
// zero fill, then the bias, which fuses with the relu epilogue.
// CHECK-DAG: #[[WIN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4 * 2 + d2, d5 * 2 + d3)>
// CHECK-DAG: #[[COL:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d3, d4, d5, d6)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d4)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d5, d6)>
// CHECK-DAG: #[[CH:.+]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @conv_gemm
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<2x3x8x8xf32>)
// CHECK: %[[PATCHES:.+]] = linalg.generic {indexing_maps = [#[[WIN]], #{{.+}}], {{.*}} ins(%[[PAD]] : tensor<2x3x8x8xf32>) outs(%{{.+}} : tensor<2x3x3x3x3x3xf32>)
// CHECK-NOT: arith.select
// CHECK: %[[ZERO:.+]] = linalg.fill
// CHECK: %[[SUMS:.+]] = linalg.generic {indexing_maps = [#[[COL]], #[[W]], #[[OUT]]], {{.*}} ins(%[[PATCHES]], %{{.+}} : tensor<2x3x3x3x3x3xf32>, tensor<4x3x3x3xf32>) outs(%[[ZERO]] : tensor<2x4x3x3xf32>) attrs = {{ *}}{kiln.conv = "gemm"}
// CHECK: linalg.generic {indexing_maps = [#[[CH]], #{{.+}}, #{{.+}}], {{.*}} ins(%{{.+}}, %[[SUMS]] : tensor<4xf32>, tensor<2x4x3x3xf32>)
// CHECK:   arith.addf
// CHECK:   arith.maximumf
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield
func.func @conv_gemm(%x: tensor<2x3x6x6xf32, #kiln.device<cpu>>, %w: tensor<4x3x3x3xf32, #kiln.device<cpu>>, %b: tensor<4xf32, #kiln.device<cpu>>) -> tensor<2x4x3x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w, %b : tensor<2x3x6x6xf32, #kiln.device<cpu>>, tensor<4x3x3x3xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>) -> (tensor<2x4x3x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3x6x6xf32, #kiln.device<cpu>>, %c: tensor<4x3x3x3xf32, #kiln.device<cpu>>, %d: tensor<4xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<2x3x6x6xf32, #kiln.device<cpu>>, tensor<4x3x3x3xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<2x4x3x3xf32, #kiln.device<cpu>>
    %r = kiln.relu %y : tensor<2x4x3x3xf32, #kiln.device<cpu>> -> tensor<2x4x3x3xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<2x4x3x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x4x3x3xf32, #kiln.device<cpu>>
}

// -----

// An f32 conv with groups of several channels on the CPU that is dilated,
// or whose groups sum too many taps to run by rows (below): im2col with the
// groups apart ([n, g, c, kh, kw, oh, ow]), then loops [n, g, m, c, kh, kw,
// oh, ow] into sums [n, g, m, oh, ow] from zeros; the weight's channel is a
// flattened pair (g * 3 + m), which codegen/Gemm.h reads as two dims: a
// batch [n, g] of GEMMs whose weight is the same for every image. A generic
// then adds the bias to the sums of output channel m (group m floordiv 3).
// A 1x1 stride-1 window reads the input itself (channel g * 600 + c), and
// without a bias the last generic only copies.
// CHECK-DAG: #[[GRWIN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1 * 2 + d2, d5 + d3 * 2, d6 + d4 * 2)>
// CHECK-DAG: #[[GRCOL:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d3, d4, d5, d6, d7)>
// CHECK-DAG: #[[GRW:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1 * 3 + d2, d3, d4, d5)>
// CHECK-DAG: #[[GRSUMS:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d6, d7)>
// CHECK-DAG: #[[GRBACK:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 floordiv 3, d1 mod 3, d2, d3)>
// CHECK-DAG: #[[GRIN1:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1 * 600 + d3, d6, d7)>
// CHECK-LABEL: func.func @conv_groups_gemm
// CHECK: %[[GRPATCHES:.+]] = linalg.generic {indexing_maps = [#[[GRWIN]], #{{.+}}], {{.*}} outs(%{{.+}} : tensor<?x2x2x3x3x6x6xf32>)
// CHECK: %[[GRZERO:.+]] = linalg.fill {{.*}} -> tensor<?x2x3x6x6xf32>
// CHECK: %[[GRS:.+]] = linalg.generic {indexing_maps = [#[[GRCOL]], #[[GRW]], #[[GRSUMS]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%[[GRPATCHES]], %{{.+}} : tensor<?x2x2x3x3x6x6xf32>, tensor<6x2x3x3xf32>) outs(%[[GRZERO]] : tensor<?x2x3x6x6xf32>) attrs = {{ *}}{kiln.conv = "gemm"}
// CHECK: linalg.generic {indexing_maps = [#[[GRBACK]], #{{.+}}, #{{.+}}], {{.*}} ins(%[[GRS]], %{{.+}} : tensor<?x2x3x6x6xf32>, tensor<6xf32>) outs(%{{.+}} : tensor<?x6x6x6xf32>)
// CHECK:   arith.addf
// CHECK: %[[GRS1:.+]] = linalg.generic {indexing_maps = [#[[GRIN1]], #[[GRW1:.+]], #[[GRSUMS]]], {{.*}} ins(%{{.+}}, %{{.+}} : tensor<?x1200x6x6xf32>, tensor<6x600x1x1xf32>) {{.*}} attrs = {{ *}}{kiln.conv = "gemm"}
// CHECK: linalg.generic {indexing_maps = [#[[GRBACK]], #{{.+}}], {{.*}} ins(%[[GRS1]] : tensor<?x2x3x6x6xf32>) outs(%{{.+}} : tensor<?x6x6x6xf32>)
// CHECK-NEXT: ^bb0(%[[GRIN:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:   linalg.yield %[[GRIN]]
func.func @conv_groups_gemm(%x: tensor<?x4x6x6xf32, #kiln.device<cpu>>, %w: tensor<6x2x3x3xf32, #kiln.device<cpu>>, %b: tensor<6xf32, #kiln.device<cpu>>, %x1: tensor<?x1200x6x6xf32, #kiln.device<cpu>>, %w1: tensor<6x600x1x1xf32, #kiln.device<cpu>>) -> (tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>) {
  %k:2 = kiln.kernel(%x, %w, %b, %x1, %w1 : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x3x3xf32, #kiln.device<cpu>>, tensor<6xf32, #kiln.device<cpu>>, tensor<?x1200x6x6xf32, #kiln.device<cpu>>, tensor<6x600x1x1xf32, #kiln.device<cpu>>) -> (tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4x6x6xf32, #kiln.device<cpu>>, %c: tensor<6x2x3x3xf32, #kiln.device<cpu>>, %d: tensor<6xf32, #kiln.device<cpu>>, %a1: tensor<?x1200x6x6xf32, #kiln.device<cpu>>, %e: tensor<6x600x1x1xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>, group = 2} : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x3x3xf32, #kiln.device<cpu>>, tensor<6xf32, #kiln.device<cpu>> -> tensor<?x6x6x6xf32, #kiln.device<cpu>>
    %z = kiln.conv %a1, %e {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2} : tensor<?x1200x6x6xf32, #kiln.device<cpu>>, tensor<6x600x1x1xf32, #kiln.device<cpu>> -> tensor<?x6x6x6xf32, #kiln.device<cpu>>
    kiln.yield %y, %z : tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>
  }
  return %k#0, %k#1 : tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>
}

// -----

// An f32 conv in groups of few taps (2 channels x 3x3 window, stride 1 or
// 2) on the CPU stays a direct window whose input channel is (m floordiv
// 3) * 2 + c, run by rows (kiln_conv_flat): no im2col, no sums per group;
// the bias comes after. So does a 1x1 window.
// CHECK-DAG: #[[GRR:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 3) * 2 + d2, d5 + d3, d6 + d4)>
// CHECK-DAG: #[[GRR2:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 3) * 2 + d2, d5 * 2 + d3, d6 * 2 + d4)>
// CHECK-LABEL: func.func @conv_groups_rows
// CHECK-NOT: tensor<?x2x2x3x3x6x6xf32>
// CHECK: linalg.generic {indexing_maps = [#[[GRR]], #{{.+}}, #{{.+}}], {{.*}} ins(%{{.+}}, %{{.+}} : tensor<?x4x8x8xf32>, tensor<6x2x3x3xf32>) outs(%{{.+}} : tensor<?x6x6x6xf32>) attrs = {{ *}}{kiln.conv = "rows"}
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[GRR2]], #{{.+}}, #{{.+}}], {{.*}} ins(%{{.+}}, %{{.+}} : tensor<?x4x8x8xf32>, tensor<6x2x3x3xf32>) outs(%{{.+}} : tensor<?x6x3x3xf32>) attrs = {{ *}}{kiln.conv = "rows"}
// CHECK: kiln.conv = "rows"
func.func @conv_groups_rows(%x: tensor<?x4x6x6xf32, #kiln.device<cpu>>, %w: tensor<6x2x3x3xf32, #kiln.device<cpu>>, %b: tensor<6xf32, #kiln.device<cpu>>, %w1: tensor<6x2x1x1xf32, #kiln.device<cpu>>) -> (tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x3x3xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>) {
  %k:3 = kiln.kernel(%x, %w, %b, %w1 : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x3x3xf32, #kiln.device<cpu>>, tensor<6xf32, #kiln.device<cpu>>, tensor<6x2x1x1xf32, #kiln.device<cpu>>) -> (tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x3x3xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4x6x6xf32, #kiln.device<cpu>>, %c: tensor<6x2x3x3xf32, #kiln.device<cpu>>, %d: tensor<6xf32, #kiln.device<cpu>>, %e: tensor<6x2x1x1xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2} : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x3x3xf32, #kiln.device<cpu>>, tensor<6xf32, #kiln.device<cpu>> -> tensor<?x6x6x6xf32, #kiln.device<cpu>>
    %s = kiln.conv %a, %c {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2} : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x3x3xf32, #kiln.device<cpu>> -> tensor<?x6x3x3xf32, #kiln.device<cpu>>
    %z = kiln.conv %a, %e {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2} : tensor<?x4x6x6xf32, #kiln.device<cpu>>, tensor<6x2x1x1xf32, #kiln.device<cpu>> -> tensor<?x6x6x6xf32, #kiln.device<cpu>>
    kiln.yield %y, %s, %z : tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x3x3xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>
  }
  return %k#0, %k#1, %k#2 : tensor<?x6x6x6xf32, #kiln.device<cpu>>, tensor<?x6x3x3xf32, #kiln.device<cpu>>, tensor<?x6x6x6xf32, #kiln.device<cpu>>
}

// -----

// A stem conv on the CPU (3 input channels, a 7x7 window, stride 2, output
// rows 16 wide) stays a direct window, its taps outside its output loops
// (codegen/Gemm.h's matchRowsConv): no im2col. The bias comes after the
// sums, with the relu. With 8 output columns (too narrow) or a 2x2 window
// (too few taps: a 3x3 one, mobilenet_v2's stem, is enough) it goes
// through im2col. On a cuda device every such conv stays a direct window
// in this form, for cuDNN (codegen/Gemm.h's matchLibraryConv); with groups
// its input channel is (m floordiv M/groups) * C/groups + c. kiln.conv names
// the choice ("rows", "library"), and kiln.conv_twin how the kernel's CPU
// twin runs a library conv: the stem by rows, the dilated grouped one by
// loops.
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d5 * 2 + d3, d6 * 2 + d4)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d4)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d5, d6)>
// CHECK-DAG: #[[GIN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 3) * 2 + d2, d5 + d3 * 2, d6 + d4 * 2)>
// CHECK-LABEL: func.func @conv_rows
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x3x37x37xf32>)
// CHECK-NOT: tensor<1x3x7x7x16x16xf32>
// CHECK: %[[ZERO:.+]] = linalg.fill
// CHECK: %[[SUMS:.+]] = linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%[[PAD]], %{{.+}} : tensor<1x3x37x37xf32>, tensor<8x3x7x7xf32>) outs(%[[ZERO]] : tensor<1x8x16x16xf32>) attrs = {{ *}}{kiln.conv = "rows"}
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %[[SUMS]] : tensor<8xf32>, tensor<1x8x16x16xf32>)
// CHECK:   arith.maximumf
// CHECK: kiln.yield
// CHECK-LABEL: func.func @conv_rows_narrow
// CHECK: outs(%{{.+}} : tensor<1x3x7x7x8x8xf32>)
// CHECK: outs(%{{.+}} : tensor<1x3x2x2x16x16xf32>)
// CHECK-LABEL: func.func @conv_rows_cuda
// CHECK-NOT: tensor<1x3x7x7x16x16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<1x3x37x37xf32>, tensor<8x3x7x7xf32>) {{.*}}attrs = {{ *}}{kiln.conv = "library", kiln.conv_twin = "rows"}
// CHECK-LABEL: func.func @conv_groups_cuda
// CHECK: linalg.generic {indexing_maps = [#[[GIN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<1x4x12x12xf32>, tensor<6x2x3x3xf32>) {{.*}}attrs = {{ *}}{kiln.conv = "library", kiln.conv_twin = "direct"}
func.func @conv_rows(%x: tensor<1x3x32x32xf32, #kiln.device<cpu>>, %w: tensor<8x3x7x7xf32, #kiln.device<cpu>>, %b: tensor<8xf32, #kiln.device<cpu>>) -> tensor<1x8x16x16xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w, %b : tensor<1x3x32x32xf32, #kiln.device<cpu>>, tensor<8x3x7x7xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>>) -> (tensor<1x8x16x16xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x3x32x32xf32, #kiln.device<cpu>>, %c: tensor<8x3x7x7xf32, #kiln.device<cpu>>, %d: tensor<8xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 2, 2>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x32x32xf32, #kiln.device<cpu>>, tensor<8x3x7x7xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>> -> tensor<1x8x16x16xf32, #kiln.device<cpu>>
    %r = kiln.relu %y : tensor<1x8x16x16xf32, #kiln.device<cpu>> -> tensor<1x8x16x16xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<1x8x16x16xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x8x16x16xf32, #kiln.device<cpu>>
}
func.func @conv_rows_narrow(%x: tensor<1x3x16x16xf32, #kiln.device<cpu>>, %w: tensor<8x3x7x7xf32, #kiln.device<cpu>>, %x3: tensor<1x3x32x32xf32, #kiln.device<cpu>>, %w3: tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> (tensor<1x8x8x8xf32, #kiln.device<cpu>>, tensor<1x8x16x16xf32, #kiln.device<cpu>>) {
  %k:2 = kiln.kernel(%x, %w, %x3, %w3 : tensor<1x3x16x16xf32, #kiln.device<cpu>>, tensor<8x3x7x7xf32, #kiln.device<cpu>>, tensor<1x3x32x32xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>>) -> (tensor<1x8x8x8xf32, #kiln.device<cpu>>, tensor<1x8x16x16xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x3x16x16xf32, #kiln.device<cpu>>, %c: tensor<8x3x7x7xf32, #kiln.device<cpu>>, %a3: tensor<1x3x32x32xf32, #kiln.device<cpu>>, %c3: tensor<8x3x2x2xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 2, 2>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x16x16xf32, #kiln.device<cpu>>, tensor<8x3x7x7xf32, #kiln.device<cpu>> -> tensor<1x8x8x8xf32, #kiln.device<cpu>>
    %z = kiln.conv %a3, %c3 {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x32x32xf32, #kiln.device<cpu>>, tensor<8x3x2x2xf32, #kiln.device<cpu>> -> tensor<1x8x16x16xf32, #kiln.device<cpu>>
    kiln.yield %y, %z : tensor<1x8x8x8xf32, #kiln.device<cpu>>, tensor<1x8x16x16xf32, #kiln.device<cpu>>
  }
  return %k#0, %k#1 : tensor<1x8x8x8xf32, #kiln.device<cpu>>, tensor<1x8x16x16xf32, #kiln.device<cpu>>
}
func.func @conv_rows_cuda(%x: tensor<1x3x32x32xf32, #kiln.device<cuda:0>>, %w: tensor<8x3x7x7xf32, #kiln.device<cuda:0>>) -> tensor<1x8x16x16xf32, #kiln.device<cuda:0>> {
  %k = kiln.kernel(%x, %w : tensor<1x3x32x32xf32, #kiln.device<cuda:0>>, tensor<8x3x7x7xf32, #kiln.device<cuda:0>>) -> (tensor<1x8x16x16xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a: tensor<1x3x32x32xf32, #kiln.device<cuda:0>>, %c: tensor<8x3x7x7xf32, #kiln.device<cuda:0>>):
    %y = kiln.conv %a, %c {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 2, 2>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x32x32xf32, #kiln.device<cuda:0>>, tensor<8x3x7x7xf32, #kiln.device<cuda:0>> -> tensor<1x8x16x16xf32, #kiln.device<cuda:0>>
    kiln.yield %y : tensor<1x8x16x16xf32, #kiln.device<cuda:0>>
  }
  return %k : tensor<1x8x16x16xf32, #kiln.device<cuda:0>>
}
func.func @conv_groups_cuda(%x: tensor<1x4x10x10xf32, #kiln.device<cuda:0>>, %w: tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> tensor<1x6x8x8xf32, #kiln.device<cuda:0>> {
  %k = kiln.kernel(%x, %w : tensor<1x4x10x10xf32, #kiln.device<cuda:0>>, tensor<6x2x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x6x8x8xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a: tensor<1x4x10x10xf32, #kiln.device<cuda:0>>, %c: tensor<6x2x3x3xf32, #kiln.device<cuda:0>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>, group = 2} : tensor<1x4x10x10xf32, #kiln.device<cuda:0>>, tensor<6x2x3x3xf32, #kiln.device<cuda:0>> -> tensor<1x6x8x8xf32, #kiln.device<cuda:0>>
    kiln.yield %y : tensor<1x6x8x8xf32, #kiln.device<cuda:0>>
  }
  return %k : tensor<1x6x8x8xf32, #kiln.device<cuda:0>>
}

// -----

// max_pool: -inf padding (including the extra end row a ceil_mode window
// needs), an unread window-shaped operand for the kernel dims, max into a
// -inf init.
// CHECK-LABEL: func.func @max_pool
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x1x6x6xf32>)
// CHECK: %[[WIN:.+]] = tensor.empty() : tensor<2x2xf32>
// CHECK: linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<1x1x3x3xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[PAD]], %[[WIN]] : tensor<1x1x6x6xf32>, tensor<2x2xf32>)
// CHECK: arith.maximumf
func.func @max_pool(%x: tensor<1x1x5x5xf32, #kiln.device<cpu>>) -> tensor<1x1x3x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<1x1x5x5xf32, #kiln.device<cpu>>) -> (tensor<1x1x3x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x1x5x5xf32, #kiln.device<cpu>>):
    %y = kiln.max_pool %a {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : tensor<1x1x5x5xf32, #kiln.device<cpu>> -> tensor<1x1x3x3xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x1x3x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x1x3x3xf32, #kiln.device<cpu>>
}

// -----

// A max pool whose output rows are at least kSplitPlaneWidth (24) wide and
// step by 2 loops its taps innermost, as small conv windows do (the C++
// emitter splits its plane so that they read contiguous rows); the narrow
// one above keeps them outside.
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @max_pool_wide
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.+}}, #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK: arith.maximumf
func.func @max_pool_wide(%x: tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> tensor<1x2x25x25xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<1x2x50x50xf32, #kiln.device<cpu>>) -> (tensor<1x2x25x25xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x2x50x50xf32, #kiln.device<cpu>>):
    %y = kiln.max_pool %a {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : tensor<1x2x50x50xf32, #kiln.device<cpu>> -> tensor<1x2x25x25xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x2x25x25xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x2x25x25xf32, #kiln.device<cpu>>
}

// -----

// A conv over spatial dims known only at run time sizes its window counts
// from the input's and the weight's dims; a depthwise conv (group 0) reads
// the input in the loop body, at channel (m / (M / C)) * 1 + c.
// CHECK-LABEL: func.func @dynamic_spatial
// CHECK: tensor.dim %{{.+}}, %{{.+}} : tensor<1x1x?x4xf32>
// CHECK: arith.subi
// CHECK: tensor.empty
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK-LABEL: func.func @depthwise
// CHECK: tensor.dim %{{.+}}, %{{.+}} : tensor<1x?x8xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK: linalg.index
// CHECK: tensor.extract
// CHECK: arith.mulf
func.func @dynamic_spatial(%x: tensor<1x1x?x4xf32, #kiln.device<cpu>>, %w: tensor<1x1x2x1xf32, #kiln.device<cpu>>) -> tensor<1x1x?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w : tensor<1x1x?x4xf32, #kiln.device<cpu>>, tensor<1x1x2x1xf32, #kiln.device<cpu>>) -> (tensor<1x1x?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x1x?x4xf32, #kiln.device<cpu>>, %b: tensor<1x1x2x1xf32, #kiln.device<cpu>>):
    %c = kiln.conv %a, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x1x?x4xf32, #kiln.device<cpu>>, tensor<1x1x2x1xf32, #kiln.device<cpu>> -> tensor<1x1x?x4xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<1x1x?x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x1x?x4xf32, #kiln.device<cpu>>
}
func.func @depthwise(%x: tensor<1x?x8xf32, #kiln.device<cpu>>, %w: tensor<?x1x3xf32, #kiln.device<cpu>>) -> tensor<1x?x6xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w : tensor<1x?x8xf32, #kiln.device<cpu>>, tensor<?x1x3xf32, #kiln.device<cpu>>) -> (tensor<1x?x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x?x8xf32, #kiln.device<cpu>>, %b: tensor<?x1x3xf32, #kiln.device<cpu>>):
    %c = kiln.conv %a, %b {dilations = array<i64: 1>, group = 0 : i64, pads = array<i64: 0, 0>, strides = array<i64: 1>} : tensor<1x?x8xf32, #kiln.device<cpu>>, tensor<?x1x3xf32, #kiln.device<cpu>> -> tensor<1x?x6xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<1x?x6xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x?x6xf32, #kiln.device<cpu>>
}

// -----

// A ceil_mode window count of a dynamic dim divides rounding toward -inf, so
// that a lone window overhanging the padded input (span in (-stride, 0))
// still counts once, and a window that cannot start counts none.
// CHECK-LABEL: func.func @ceil_window_count
// CHECK: arith.floordivsi
// CHECK: arith.maxsi
// CHECK: linalg.generic
func.func @ceil_window_count(%x: tensor<1x1x?x4xf32, #kiln.device<cpu>>) -> tensor<1x1x?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<1x1x?x4xf32, #kiln.device<cpu>>) -> (tensor<1x1x?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x1x?x4xf32, #kiln.device<cpu>>):
    %p = kiln.avg_pool %a {kernel_shape = array<i64: 4, 1>, strides = array<i64: 3, 1>, pads = array<i64: 1, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true, count_include_pad = true} : tensor<1x1x?x4xf32, #kiln.device<cpu>> -> tensor<1x1x?x4xf32, #kiln.device<cpu>>
    kiln.yield %p : tensor<1x1x?x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x1x?x4xf32, #kiln.device<cpu>>
}

// -----

// AveragePool without the pad in the count: the window sum of the padded
// input over the window sum of a padded tensor of ones (the count of real
// elements per window), divided elementwise.
// CHECK-DAG: #[[WIN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4 * 2 + d2, d5 * 2 + d3)>
// CHECK-LABEL: func.func @avg_pool
// CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: tensor.extract {{.+}} {kiln.guarded_read} : tensor<1x2x7x7xf32>
// CHECK: %[[SUM:.+]] = linalg.generic {indexing_maps = [#[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction", "reduction", "parallel", "parallel"]}
// CHECK: %[[ONES:.+]] = linalg.fill ins(%[[ONE]] : f32) outs(%{{.+}} : tensor<1x2x7x7xf32>)
// CHECK: tensor.extract %[[ONES]]{{.+}} {kiln.guarded_read}
// CHECK: %[[COUNT:.+]] = linalg.generic {indexing_maps = [#[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction", "reduction", "parallel", "parallel"]}
// CHECK: linalg.generic {{.+}} ins(%[[SUM]], %[[COUNT]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK: arith.divf
func.func @avg_pool(%x: tensor<1x2x7x7xf32, #kiln.device<cpu>>) -> tensor<1x2x4x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<1x2x7x7xf32, #kiln.device<cpu>>) -> (tensor<1x2x4x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x2x7x7xf32, #kiln.device<cpu>>):
    %y = kiln.avg_pool %a {ceil_mode = false, count_include_pad = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x2x7x7xf32, #kiln.device<cpu>> -> tensor<1x2x4x4xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x2x4x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x2x4x4xf32, #kiln.device<cpu>>
}
