// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

!t = tensor<8x4xf32, #kiln.device<cpu>>

// An elementwise kernel becomes one linalg.generic on plain tensors, with the
// broadcast done by its indexing map and the splat folded into the body.
// CHECK-DAG: #[[ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @elementwise
// CHECK: kiln.kernel(%arg0, %arg1 : tensor<8x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>)
// CHECK: ^bb0(%[[X:.+]]: tensor<8x4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK-COUNT-1: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[B]] : tensor<8x4xf32>, tensor<4xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield %{{.+}} : tensor<8x4xf32>
func.func @elementwise(%x: !t, %b: tensor<4xf32, #kiln.device<cpu>>) -> !t {
  %k = kiln.kernel(%x, %b : !t, tensor<4xf32, #kiln.device<cpu>>) -> (!t) {
  ^bb0(%a: !t, %c: tensor<4xf32, #kiln.device<cpu>>):
    %half = kiln.constant dense<0.5> : tensor<f32> : tensor<f32, #kiln.device<cpu>>
    %s = kiln.add %a, %c : !t, tensor<4xf32, #kiln.device<cpu>> -> !t
    %r = kiln.relu %s : !t -> !t
    %m = kiln.mul %r, %half : !t, tensor<f32, #kiln.device<cpu>> -> !t
    kiln.yield %m : !t
  }
  return %k : !t
}

// -----

// gemm: beta * C broadcast into the init, then one generic with a reduction
// over k; trans_a is a permuted indexing map.
// CHECK-DAG: #[[A:.+]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-DAG: #[[B:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[C:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @gemm
// CHECK: %[[INIT:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<5xf32>) outs(%{{.+}} : tensor<2x5xf32>)
// CHECK: arith.mulf
// CHECK: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "reduction", "parallel"]} {{.*}} outs(%[[INIT]] : tensor<2x5xf32>)
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @gemm(%a: tensor<3x2xf32, #kiln.device<cpu>>, %b: tensor<3x5xf32, #kiln.device<cpu>>, %c: tensor<5xf32, #kiln.device<cpu>>) -> tensor<2x5xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%a, %b, %c : tensor<3x2xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>>, tensor<5xf32, #kiln.device<cpu>>) -> (tensor<2x5xf32, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<3x2xf32, #kiln.device<cpu>>, %y: tensor<3x5xf32, #kiln.device<cpu>>, %z: tensor<5xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %x, %y, %z {trans_a = true, alpha = 2.0 : f32, beta = 3.0 : f32} : tensor<3x2xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>>, tensor<5xf32, #kiln.device<cpu>> -> tensor<2x5xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<2x5xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x5xf32, #kiln.device<cpu>>
}

// -----

// Batched matmul with a broadcast batch dim: zeros from linalg.fill, the
// size-1 batch of the rhs read at index 0, k innermost but one.
// CHECK-DAG: #[[L:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[R:.+]] = affine_map<(d0, d1, d2, d3) -> (0, d2, d3)>
// CHECK-DAG: #[[O:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @batch_matmul
// CHECK: %[[Z:.+]] = linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[L]], #[[R]], #[[O]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} {{.*}} outs(%[[Z]] : tensor<3x2x5xf32>)
func.func @batch_matmul(%a: tensor<3x2x4xf32, #kiln.device<cpu>>, %b: tensor<1x4x5xf32, #kiln.device<cpu>>) -> tensor<3x2x5xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%a, %b : tensor<3x2x4xf32, #kiln.device<cpu>>, tensor<1x4x5xf32, #kiln.device<cpu>>) -> (tensor<3x2x5xf32, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<3x2x4xf32, #kiln.device<cpu>>, %y: tensor<1x4x5xf32, #kiln.device<cpu>>):
    %m = kiln.matmul %x, %y : tensor<3x2x4xf32, #kiln.device<cpu>>, tensor<1x4x5xf32, #kiln.device<cpu>> -> tensor<3x2x5xf32, #kiln.device<cpu>>
    kiln.yield %m : tensor<3x2x5xf32, #kiln.device<cpu>>
  }
  return %k : tensor<3x2x5xf32, #kiln.device<cpu>>
}

// -----

// conv: input padded by a generic whose read of the input is guarded (made
// only inside it, so its indices are unclamped: d2 - 1, d3 - 1; the
// unpadded n and c read their dims as they are), bias broadcast into the
// init, then one generic with strided, dilated input reads and grouped
// channels. Its 2 x 3 x 3 = 18 taps loop innermost: [n, m, oh, ow, c, kh, kw].
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 2) * 2 + d4, d2 * 2 + d5, d3 * 2 + d6 * 2)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x4x8x8xf32>)
// CHECK:   %[[I0:.+]] = linalg.index 0
// CHECK:   %[[I1:.+]] = linalg.index 1
// CHECK:   %[[I2:.+]] = linalg.index 2
// CHECK:   %[[H:.+]] = arith.subi %[[I2]]
// CHECK:   %[[I3:.+]] = linalg.index 3
// CHECK:   %[[V:.+]] = arith.subi %[[I3]]
// CHECK-NOT: arith.minsi
// CHECK:   %[[READ:.+]] = tensor.extract %{{.+}}[%[[I0]], %[[I1]], %[[H]], %[[V]]] {kiln.guarded_read}
// CHECK:   arith.select %{{.+}}, %[[READ]]
// CHECK: %[[BIAS:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<4xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[PAD]], %{{.+}} : tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>) outs(%[[BIAS]] : tensor<1x4x3x2xf32>)
func.func @conv(%x: tensor<1x4x6x6xf32, #kiln.device<cpu>>, %w: tensor<4x2x3x3xf32, #kiln.device<cpu>>, %b: tensor<4xf32, #kiln.device<cpu>>) -> tensor<1x4x3x2xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w, %b : tensor<1x4x6x6xf32, #kiln.device<cpu>>, tensor<4x2x3x3xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>) -> (tensor<1x4x3x2xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x4x6x6xf32, #kiln.device<cpu>>, %c: tensor<4x2x3x3xf32, #kiln.device<cpu>>, %d: tensor<4xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>, group = 2} : tensor<1x4x6x6xf32, #kiln.device<cpu>>, tensor<4x2x3x3xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<1x4x3x2xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x4x3x2xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x4x3x2xf32, #kiln.device<cpu>>
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
// CHECK: %[[SUMS:.+]] = linalg.generic {indexing_maps = [#[[COL]], #[[W]], #[[OUT]]], {{.*}} ins(%[[PATCHES]], %{{.+}} : tensor<2x3x3x3x3x3xf32>, tensor<4x3x3x3xf32>) outs(%[[ZERO]] : tensor<2x4x3x3xf32>)
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

// A stem conv on the CPU (3 input channels, a 7x7 window, stride 2, output
// rows 16 wide) stays a direct window, its taps outside its output loops
// (codegen/Gemm.h's matchRowsConv): no im2col. The bias comes after the
// sums, with the relu. With 8 output columns (too narrow) or a 2x2 window
// (too few taps: a 3x3 one, mobilenet_v2's stem, is enough) it goes
// through im2col. On a cuda device every such conv stays a direct window
// in this form, for cuDNN (codegen/Gemm.h's matchLibraryConv); with groups
// its input channel is (m floordiv M/groups) * C/groups + c.
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d5 * 2 + d3, d6 * 2 + d4)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d4)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d5, d6)>
// CHECK-DAG: #[[GIN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 3) * 2 + d2, d5 + d3 * 2, d6 + d4 * 2)>
// CHECK-LABEL: func.func @conv_rows
// CHECK: %[[PAD:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x3x37x37xf32>)
// CHECK-NOT: tensor<1x3x7x7x16x16xf32>
// CHECK: %[[ZERO:.+]] = linalg.fill
// CHECK: %[[SUMS:.+]] = linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%[[PAD]], %{{.+}} : tensor<1x3x37x37xf32>, tensor<8x3x7x7xf32>) outs(%[[ZERO]] : tensor<1x8x16x16xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %[[SUMS]] : tensor<8xf32>, tensor<1x8x16x16xf32>)
// CHECK:   arith.maximumf
// CHECK: kiln.yield
// CHECK-LABEL: func.func @conv_rows_narrow
// CHECK: outs(%{{.+}} : tensor<1x3x7x7x8x8xf32>)
// CHECK: outs(%{{.+}} : tensor<1x3x2x2x16x16xf32>)
// CHECK-LABEL: func.func @conv_rows_cuda
// CHECK-NOT: tensor<1x3x7x7x16x16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<1x3x37x37xf32>, tensor<8x3x7x7xf32>)
// CHECK-LABEL: func.func @conv_groups_cuda
// CHECK: linalg.generic {indexing_maps = [#[[GIN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<1x4x12x12xf32>, tensor<6x2x3x3xf32>)
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

// reduce mean: a sum over the reduced dims into zeros, then a division by
// the element count. f32 sums in f64 and rounds once, so that the mean of
// equal values is exact (the norms subtract it).
// CHECK-DAG: #[[KEEP:.+]] = affine_map<(d0, d1, d2) -> (d0, 0, 0)>
// CHECK-LABEL: func.func @reduce_mean
// CHECK: %[[SUM:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #[[KEEP]]], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK: arith.extf %{{.+}} : f32 to f64
// CHECK: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x1x1xf64>)
// CHECK: arith.divf %{{.+}}, %{{.+}} : f64
// CHECK: arith.truncf %{{.+}} : f64 to f32
func.func @reduce_mean(%x: tensor<2x3x4xf32, #kiln.device<cpu>>) -> tensor<2x1x1xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<2x3x4xf32, #kiln.device<cpu>>) -> (tensor<2x1x1xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3x4xf32, #kiln.device<cpu>>):
    %y = kiln.reduce %a {kind = "mean", axes = array<i64: 1, 2>, keepdims = true} : tensor<2x3x4xf32, #kiln.device<cpu>> -> tensor<2x1x1xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<2x1x1xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x1x1xf32, #kiln.device<cpu>>
}

// -----

// gather reads the indices through a map and the data through tensor.extract
// at the wrapped, clamped index; the transpose after it fuses in, becoming a
// permuted map on the indices: one generic.
// CHECK-DAG: #[[IDX:.+]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-LABEL: func.func @movement
// CHECK: linalg.generic {indexing_maps = [#[[IDX]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<2x5xi64>) outs(%{{.+}} : tensor<5x2x8xf32>)
// CHECK:   arith.index_cast
// CHECK:   arith.select
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<100x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield
func.func @movement(%ids: tensor<2x5xi64, #kiln.device<cpu>>, %table: tensor<100x8xf32, #kiln.device<cpu>>) -> tensor<5x2x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%ids, %table : tensor<2x5xi64, #kiln.device<cpu>>, tensor<100x8xf32, #kiln.device<cpu>>) -> (tensor<5x2x8xf32, #kiln.device<cpu>>) {
  ^bb0(%i: tensor<2x5xi64, #kiln.device<cpu>>, %t: tensor<100x8xf32, #kiln.device<cpu>>):
    %e = kiln.gather %t, %i {axis = 0 : i64} : tensor<100x8xf32, #kiln.device<cpu>>, tensor<2x5xi64, #kiln.device<cpu>> -> tensor<2x5x8xf32, #kiln.device<cpu>>
    %p = kiln.transpose %e {perm = array<i64: 1, 0, 2>} : tensor<2x5x8xf32, #kiln.device<cpu>> -> tensor<5x2x8xf32, #kiln.device<cpu>>
    kiln.yield %p : tensor<5x2x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<5x2x8xf32, #kiln.device<cpu>>
}

// -----

// A dynamic dim is sized at run time from the kernel's inputs: the empty
// result takes `tensor.dim` of the operand dynamic there.
// CHECK-LABEL: func.func @dynamic
// CHECK: ^bb0(%[[A:.+]]: tensor<?x4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK: %[[N:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<?x4xf32>
// CHECK: tensor.empty(%[[N]]) : tensor<?x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x4xf32>, tensor<4xf32>)
// CHECK: kiln.yield %{{.+}} : tensor<?x4xf32>
func.func @dynamic(%x: tensor<?x4xf32, #kiln.device<cpu>>, %y: tensor<4xf32, #kiln.device<cpu>>) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y : tensor<?x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4xf32, #kiln.device<cpu>>, %b: tensor<4xf32, #kiln.device<cpu>>):
    %s = kiln.add %a, %b : tensor<?x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
    %r = kiln.relu %s : tensor<?x4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<?x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x4xf32, #kiln.device<cpu>>
}

// -----

// gemm with a dynamic m: the result's m is A's dim 1 under trans_a.
// CHECK-LABEL: func.func @dynamic_gemm
// CHECK: ^bb0(%[[A:.+]]: tensor<3x?xf32>, %{{.+}}: tensor<3x5xf32>):
// CHECK: %[[M:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<3x?xf32>
// CHECK: tensor.empty(%[[M]]) : tensor<?x5xf32>
func.func @dynamic_gemm(%a: tensor<3x?xf32, #kiln.device<cpu>>, %b: tensor<3x5xf32, #kiln.device<cpu>>) -> tensor<?x5xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%a, %b : tensor<3x?xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>>) -> (tensor<?x5xf32, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<3x?xf32, #kiln.device<cpu>>, %y: tensor<3x5xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %x, %y {alpha = 1.0 : f32, beta = 0.0 : f32, trans_a = true, trans_b = false} : tensor<3x?xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>> -> tensor<?x5xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x5xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x5xf32, #kiln.device<cpu>>
}

// -----

// A reshape inside a kernel needs static shapes (the importer turns reshapes
// of dims known only at run time into kiln.reshape_to).
func.func @dynamic_reshape(%x: tensor<?x1xf32, #kiln.device<cpu>>) -> tensor<?x1xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x1xf32, #kiln.device<cpu>>) -> (tensor<?x1xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x1xf32, #kiln.device<cpu>>):
    // expected-error @+1 {{'kiln.reshape' op has a dynamic shape, which its lowering cannot handle yet; bind the symbolic input dims at compile time (kilnc --input-shape NAME=D0xD1...)}}
    %c = kiln.reshape %a {shape = array<i64: -2, 1>} : tensor<?x1xf32, #kiln.device<cpu>> -> tensor<?x1xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<?x1xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x1xf32, #kiln.device<cpu>>
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

// Unsigned integers: the body picks the unsigned arith ops (divui, cmpi ult,
// shrui with a saturating select), then the kernel level is signless.
// CHECK-LABEL: func.func @unsigned
// CHECK: ^bb0(%{{.+}}: tensor<4xi8>, %{{.+}}: tensor<4xi8>):
// CHECK: arith.divui
// CHECK: arith.cmpi uge
// CHECK: arith.shrui
// CHECK: arith.select
// CHECK: arith.cmpi ult
// CHECK: kiln.yield %{{.+}}, %{{.+}} : tensor<4xi8>, tensor<4xi1>
func.func @unsigned(%x: tensor<4xui8, #kiln.device<cpu>>, %y: tensor<4xui8, #kiln.device<cpu>>) -> (tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>) {
  %k:2 = kiln.kernel(%x, %y : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>>) -> (tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4xui8, #kiln.device<cpu>>, %b: tensor<4xui8, #kiln.device<cpu>>):
    %d = kiln.div %a, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xui8, #kiln.device<cpu>>
    %s = kiln.shift_right %d, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xui8, #kiln.device<cpu>>
    %l = kiln.less %a, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xi1, #kiln.device<cpu>>
    kiln.yield %s, %l : tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>
  }
  return %k#0, %k#1 : tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>
}

// -----

// A shape given as data: the result's sizes are read from it in the kernel
// (tensor.extract), broadcast with the input's dims (the entry, or the
// input's dim where the entry is 1: here the input's 1 folds away); the
// entries the input's dims must broadcast with are asserted; the input is
// read through computed indices (0 along its size-1 dims).
// CHECK-LABEL: func.func @expand_to
// CHECK: ^bb0(%[[X:.+]]: tensor<1x3xf32>, %[[S:.+]]: tensor<2xi64>):
// CHECK: %[[E:.+]] = tensor.extract %[[S]][%{{.+}}] : tensor<2xi64>
// CHECK: %[[N:.+]] = arith.index_cast %[[E]] : i64 to index
// CHECK: %[[OUT:.+]] = tensor.empty(%[[N]]) : tensor<?x3xf32>
// CHECK: cf.assert %{{.+}}, "expand: input dim 1 and shape entry 1 do not broadcast"
// CHECK: linalg.generic {{.*}} outs(%[[OUT]] : tensor<?x3xf32>)
// CHECK: tensor.extract %[[X]][%{{.+}}, %{{.+}}] : tensor<1x3xf32>
func.func @expand_to(%x: tensor<1x3xf32, #kiln.device<cpu>>, %s: tensor<2xi64, #kiln.device<cpu>>) -> tensor<?x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %s : tensor<1x3xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>>) -> (tensor<?x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x3xf32, #kiln.device<cpu>>, %b: tensor<2xi64, #kiln.device<cpu>>):
    %e = kiln.expand_to %a, %b : tensor<1x3xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
    kiln.yield %e : tensor<?x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x3xf32, #kiln.device<cpu>>
}

// -----

// Axes given as data: one generic per dim folds it to size 1 when it is an
// axis (a reduction loop sized by a window operand, the input read at
// d_i + k), then without keepdims a copy drops the folded dims.
// CHECK-DAG: #[[IN0:.+]] = affine_map<(d0, d1, d2) -> (d0 + d2, d1)>
// CHECK-DAG: #[[IN1:.+]] = affine_map<(d0, d1, d2) -> (d0, d1 + d2)>
// CHECK-DAG: #[[WIN:.+]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @reduce_by
// CHECK: linalg.generic {indexing_maps = [#[[IN0]], #[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[IN1]], #[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: linalg.generic
// CHECK: tensor.extract
// CHECK: kiln.yield %{{.+}} : tensor<?xf32>
func.func @reduce_by(%x: tensor<2x3xf32, #kiln.device<cpu>>, %axes: tensor<1xi64, #kiln.device<cpu>>) -> tensor<?xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %axes : tensor<2x3xf32, #kiln.device<cpu>>, tensor<1xi64, #kiln.device<cpu>>) -> (tensor<?xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<1xi64, #kiln.device<cpu>>):
    %r = kiln.reduce_by %a, %b {kind = "sum", keepdims = false} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<1xi64, #kiln.device<cpu>> -> tensor<?xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<?xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?xf32, #kiln.device<cpu>>
}

// -----

// Arithmetic on bfloat16 is done in f32, between the loads and the store.
// CHECK-LABEL: func.func @bf16_add
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.+]]: bf16, %[[B:.+]]: bf16, %{{.+}}: bf16):
// CHECK-DAG: %[[WA:.+]] = arith.extf %[[A]] : bf16 to f32
// CHECK-DAG: %[[WB:.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK: %[[S:.+]] = arith.addf %[[WA]], %[[WB]] : f32
// CHECK: %[[N:.+]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: linalg.yield %[[N]] : bf16
!b = tensor<8xbf16, #kiln.device<cpu>>
func.func @bf16_add(%x: !b, %y: !b) -> !b {
  %k = kiln.kernel(%x, %y : !b, !b) -> (!b) {
  ^bb0(%a: !b, %c: !b):
    %s = kiln.add %a, %c : !b, !b -> !b
    kiln.yield %s : !b
  }
  return %k : !b
}

// -----

// A cast to float8 without saturation marks its truncf; bfloat16 to float16
// (both 16 bits) goes through f32.
// CHECK-LABEL: func.func @narrow_casts
// CHECK: arith.truncf %{{.+}} {kiln.no_saturate} : f32 to f8E4M3FN
// CHECK: %[[W:.+]] = arith.extf %{{.+}} : bf16 to f32
// CHECK: arith.truncf %[[W]] : f32 to f16
!f = tensor<8xf32, #kiln.device<cpu>>
!b = tensor<8xbf16, #kiln.device<cpu>>
!e = tensor<8xf8E4M3FN, #kiln.device<cpu>>
!h = tensor<8xf16, #kiln.device<cpu>>
func.func @narrow_casts(%x: !f, %y: !b) -> (!e, !h) {
  %k:2 = kiln.kernel(%x, %y : !f, !b) -> (!e, !h) {
  ^bb0(%a: !f, %c: !b):
    %e = kiln.cast %a {to = f8E4M3FN, saturate = false} : !f -> !e
    %h = kiln.cast %c {to = f16} : !b -> !h
    kiln.yield %e, %h : !e, !h
  }
  return %k#0, %k#1 : !e, !h
}

// -----

// Sub-byte integers are held a value a byte (i8): a cast to uint4 wraps
// through i32 with a mask, one to int4 with a sign-extending shift pair.
// CHECK-LABEL: func.func @sub_byte_casts
// CHECK: ^bb0(%{{.+}}: tensor<8xi32>, %{{.+}}: tensor<8xi32>):
// CHECK-DAG: %[[M:.+]] = arith.constant 15 : i32
// CHECK-DAG: %[[SH:.+]] = arith.constant 28 : i32
// CHECK: arith.andi %{{.+}}, %[[M]] : i32
// CHECK: arith.trunci %{{.+}} : i32 to i8
// CHECK: %[[L:.+]] = arith.shli %{{.+}}, %[[SH]] : i32
// CHECK: arith.shrsi %[[L]], %[[SH]] : i32
// CHECK: kiln.yield %{{.+}}, %{{.+}} : tensor<8xi8>, tensor<8xi8>
!i = tensor<8xi32, #kiln.device<cpu>>
!u4 = tensor<8xui4, #kiln.device<cpu>>
!s4 = tensor<8xi4, #kiln.device<cpu>>
func.func @sub_byte_casts(%x: !i, %y: !i) -> (!u4, !s4) {
  %k:2 = kiln.kernel(%x, %y : !i, !i) -> (!u4, !s4) {
  ^bb0(%a: !i, %c: !i):
    %u = kiln.cast %a {to = ui4} : !i -> !u4
    %s = kiln.cast %c {to = i4} : !i -> !s4
    kiln.yield %u, %s : !u4, !s4
  }
  return %k#0, %k#1 : !u4, !s4
}

// -----

// A resize reads its scales in the kernel and runs one pass per axis: a
// generic over the output whose taps are a reduction loop, reading its
// input through computed (clamped) indices, in f64; then a cast back.
// CHECK-LABEL: func.func @resize
// CHECK: ^bb0(%[[X:.+]]: tensor<1x1x2x3xf32>, %[[S:.+]]: tensor<2xf32>):
// CHECK: tensor.extract %[[S]][%{{.+}}] : tensor<2xf32>
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: math.floor %{{.+}} : f64
// CHECK: tensor.extract %[[X]][%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : tensor<1x1x2x3xf32>
// CHECK: -> tensor<1x1x4x3xf64>
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: -> tensor<1x1x4x6xf64>
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: kiln.yield %{{.+}} : tensor<1x1x4x6xf32>
!x = tensor<1x1x2x3xf32, #kiln.device<cpu>>
!s = tensor<2xf32, #kiln.device<cpu>>
!y = tensor<1x1x4x6xf32, #kiln.device<cpu>>
func.func @resize(%x: !x, %s: !s) -> !y {
  %k = kiln.kernel(%x, %s : !x, !s) -> (!y) {
  ^bb0(%a: !x, %b: !s):
    %r = kiln.resize %a, %b {axes = array<i64: 2, 3>, sizes = false, mode = "linear", coordinate_mode = "half_pixel", nearest_mode = "round_prefer_floor", cubic_coeff_a = -7.500000e-01 : f64, exclude_outside = false, extrapolation_value = 0.000000e+00 : f64, antialias = false, aspect_policy = "stretch", shape = array<i64: 1, 1, 4, 6>} : !x, !s -> !y
    kiln.yield %r : !y
  }
  return %k : !y
}

// -----

// scatter (elements, add) is one generic whose init is the data: parallel
// over the result, a reduction over the updates along the axis; each step
// reads the index at (j, q1), compares it with q0 and adds where it matches.
// CHECK-LABEL: func.func @scatter_elements
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<?xi8>) outs(%[[DATA:.+]] : tensor<3x4xf32>)
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x4xi64>
// CHECK:   arith.cmpi eq
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x4xf32>
// CHECK:   arith.addf
// CHECK:   arith.select
// CHECK: kiln.yield
func.func @scatter_elements(%d: tensor<3x4xf32, #kiln.device<cpu>>, %i: tensor<2x4xi64, #kiln.device<cpu>>, %u: tensor<2x4xf32, #kiln.device<cpu>>) -> tensor<3x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%d, %i, %u : tensor<3x4xf32, #kiln.device<cpu>>, tensor<2x4xi64, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>>) -> (tensor<3x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<3x4xf32, #kiln.device<cpu>>, %b: tensor<2x4xi64, #kiln.device<cpu>>, %c: tensor<2x4xf32, #kiln.device<cpu>>):
    %s = kiln.scatter %a, %b, %c {mode = "elements", axis = 0 : i64, reduction = "add"} : tensor<3x4xf32, #kiln.device<cpu>>, tensor<2x4xi64, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>> -> tensor<3x4xf32, #kiln.device<cpu>>
    kiln.yield %s : tensor<3x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<3x4xf32, #kiln.device<cpu>>
}

// -----

// scatter (nd, none): one reduction dim per index dim; K = 1 coordinate is
// compared, and the last matching update wins (no combine).
// CHECK-LABEL: func.func @scatter_nd
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<?xi8>) outs(%{{.+}} : tensor<4x2xf32>)
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<3x1xi64>
// CHECK-NOT: arith.addf
// CHECK:   arith.select
// CHECK: kiln.yield
func.func @scatter_nd(%d: tensor<4x2xf32, #kiln.device<cpu>>, %i: tensor<3x1xi64, #kiln.device<cpu>>, %u: tensor<3x2xf32, #kiln.device<cpu>>) -> tensor<4x2xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%d, %i, %u : tensor<4x2xf32, #kiln.device<cpu>>, tensor<3x1xi64, #kiln.device<cpu>>, tensor<3x2xf32, #kiln.device<cpu>>) -> (tensor<4x2xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4x2xf32, #kiln.device<cpu>>, %b: tensor<3x1xi64, #kiln.device<cpu>>, %c: tensor<3x2xf32, #kiln.device<cpu>>):
    %s = kiln.scatter %a, %b, %c {mode = "nd", axis = 0 : i64, reduction = "none"} : tensor<4x2xf32, #kiln.device<cpu>>, tensor<3x1xi64, #kiln.device<cpu>>, tensor<3x2xf32, #kiln.device<cpu>> -> tensor<4x2xf32, #kiln.device<cpu>>
    kiln.yield %s : tensor<4x2xf32, #kiln.device<cpu>>
  }
  return %k : tensor<4x2xf32, #kiln.device<cpu>>
}

// -----

// gather_nd: an all-parallel generic over the result with no inputs; it
// reads the tuple's coordinates (wrapped, clamped) and then the data.
// CHECK-LABEL: func.func @gather_nd
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} outs(%{{.+}} : tensor<2x3xf32>)
// CHECK-COUNT-2: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x2xi64>
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : tensor<4x5x3xf32>
// CHECK: kiln.yield
func.func @gather_nd(%d: tensor<4x5x3xf32, #kiln.device<cpu>>, %i: tensor<2x2xi64, #kiln.device<cpu>>) -> tensor<2x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%d, %i : tensor<4x5x3xf32, #kiln.device<cpu>>, tensor<2x2xi64, #kiln.device<cpu>>) -> (tensor<2x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4x5x3xf32, #kiln.device<cpu>>, %b: tensor<2x2xi64, #kiln.device<cpu>>):
    %g = kiln.gather_nd %a, %b {batch_dims = 0 : i64, tuple_length = 2 : i64} : tensor<4x5x3xf32, #kiln.device<cpu>>, tensor<2x2xi64, #kiln.device<cpu>> -> tensor<2x3xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<2x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x3xf32, #kiln.device<cpu>>
}

// -----

// grid_sample (linear, zeros): one generic with a reduction over the 2^2
// tap pairs, summing weight * input in f64 (reads masked outside), then a
// rounding generic back to f32.
// CHECK-LABEL: func.func @grid_sample
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<?xi8>) outs(%{{.+}} : tensor<1x2x3x5xf64>)
// CHECK-COUNT-2: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : tensor<1x3x5x2xf32>
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : tensor<1x2x4x4xf32>
// CHECK:   arith.select
// CHECK: linalg.generic
// CHECK:   arith.truncf
// CHECK: kiln.yield
func.func @grid_sample(%x: tensor<1x2x4x4xf32, #kiln.device<cpu>>, %g: tensor<1x3x5x2xf32, #kiln.device<cpu>>) -> tensor<1x2x3x5xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %g : tensor<1x2x4x4xf32, #kiln.device<cpu>>, tensor<1x3x5x2xf32, #kiln.device<cpu>>) -> (tensor<1x2x3x5xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x2x4x4xf32, #kiln.device<cpu>>, %b: tensor<1x3x5x2xf32, #kiln.device<cpu>>):
    %s = kiln.grid_sample %a, %b {mode = "linear", padding_mode = "zeros", align_corners = false} : tensor<1x2x4x4xf32, #kiln.device<cpu>>, tensor<1x3x5x2xf32, #kiln.device<cpu>> -> tensor<1x2x3x5xf32, #kiln.device<cpu>>
    kiln.yield %s : tensor<1x2x3x5xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x2x3x5xf32, #kiln.device<cpu>>
}

// -----

// A reduction over no axes (a rank-0 input) is a copy: no generic without
// loops for fusion to turn into an op of several results.
// CHECK-LABEL: func.func @reduce_rank0
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = []} ins(%{{.+}} : tensor<f16>) outs(%{{.+}} : tensor<f16>)
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f16, %{{.+}}: f16):
// CHECK-NEXT: linalg.yield %[[IN]] : f16
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield
func.func @reduce_rank0(%a: tensor<f16, #kiln.device<cpu>>) -> tensor<f16, #kiln.device<cpu>> {
  %k = kiln.kernel(%a : tensor<f16, #kiln.device<cpu>>) -> (tensor<f16, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<f16, #kiln.device<cpu>>):
    %y = kiln.reduce %x {kind = "mean", axes = array<i64>, keepdims = false} : tensor<f16, #kiln.device<cpu>> -> tensor<f16, #kiln.device<cpu>>
    kiln.yield %y : tensor<f16, #kiln.device<cpu>>
  }
  return %k : tensor<f16, #kiln.device<cpu>>
}

// -----

// A cast to bool is "not zero", never the low bit: 2 and 0.5 are true.
// CHECK-LABEL: func.func @bool_casts
// CHECK: arith.cmpi ne, %{{.+}}, %{{.+}} : i64
// CHECK: arith.cmpf une, %{{.+}}, %{{.+}} : f32
// CHECK-NOT: arith.trunci
// CHECK-NOT: arith.fptoui
// CHECK: kiln.yield
!l = tensor<4xi64, #kiln.device<cpu>>
!g = tensor<4xf32, #kiln.device<cpu>>
!z = tensor<4xi1, #kiln.device<cpu>>
func.func @bool_casts(%x: !l, %y: !g) -> (!z, !z) {
  %k:2 = kiln.kernel(%x, %y : !l, !g) -> (!z, !z) {
  ^bb0(%a: !l, %c: !g):
    %p = kiln.cast %a {to = i1} : !l -> !z
    %q = kiln.cast %c {to = i1} : !g -> !z
    kiln.yield %p, %q : !z, !z
  }
  return %k#0, %k#1 : !z, !z
}

// -----

// Two dynamic dims broadcast as `a == 1 ? b : a`, not as the larger (0
// against 1 is 0); a static size other than 1 is the size.
// CHECK-LABEL: func.func @broadcast_sizes
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[A:.+]] = tensor.dim %{{.+}}, %c0 : tensor<?x3xf32>
// CHECK-DAG: %[[B:.+]] = tensor.dim %{{.+}}, %c0 : tensor<?x1xf32>
// CHECK: %[[ONE:.+]] = arith.cmpi eq, %[[A]], %[[C1]] : index
// CHECK: %[[N:.+]] = arith.select %[[ONE]], %[[B]], %[[A]] : index
// CHECK-NOT: arith.maxsi
// CHECK: tensor.empty(%[[N]]) : tensor<?x3xf32>
!d3 = tensor<?x3xf32, #kiln.device<cpu>>
!d1 = tensor<?x1xf32, #kiln.device<cpu>>
func.func @broadcast_sizes(%x: !d3, %y: !d1) -> !d3 {
  %k = kiln.kernel(%x, %y : !d3, !d1) -> (!d3) {
  ^bb0(%a: !d3, %c: !d1):
    %s = kiln.add %a, %c : !d3, !d1 -> !d3
    kiln.yield %s : !d3
  }
  return %k : !d3
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

// An integer mean sums in the type and divides truncating toward 0.
// CHECK-LABEL: func.func @integer_mean
// CHECK: %[[N:.+]] = arith.constant 4 : i32
// CHECK: arith.addi
// CHECK: arith.divsi %{{.+}}, %[[N]] : i32
!im = tensor<3x4xi32, #kiln.device<cpu>>
!om = tensor<3xi32, #kiln.device<cpu>>
func.func @integer_mean(%x: !im) -> !om {
  %k = kiln.kernel(%x : !im) -> (!om) {
  ^bb0(%a: !im):
    %m = kiln.reduce %a {kind = "mean", axes = array<i64: 1>, keepdims = false} : !im -> !om
    kiln.yield %m : !om
  }
  return %k : !om
}

// -----

// concat with dims known only at run time: each non-axis dim an input does
// not share statically with the first gets a cf.assert, which the kernel's
// dims function checks before the reads (indexed with the first input's
// sizes) can leave a smaller input.
// CHECK-LABEL: func.func @concat_dynamic
// CHECK: %[[D1:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<2x?xf32>
// CHECK: %[[SAME:.+]] = arith.cmpi eq, %[[D1]], %{{.+}} : index
// CHECK: cf.assert %[[SAME]], "concat inputs 0 and 1 differ in dim 1 (only the axis, 0, may differ)"
// CHECK-NOT: cf.assert
// CHECK: linalg.generic
func.func @concat_dynamic(%x: tensor<?x3xf32, #kiln.device<cpu>>, %y: tensor<2x?xf32, #kiln.device<cpu>>) -> tensor<?x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y : tensor<?x3xf32, #kiln.device<cpu>>, tensor<2x?xf32, #kiln.device<cpu>>) -> (tensor<?x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x3xf32, #kiln.device<cpu>>, %b: tensor<2x?xf32, #kiln.device<cpu>>):
    %c = kiln.concat %a, %b {axis = 0 : i64} : tensor<?x3xf32, #kiln.device<cpu>>, tensor<2x?xf32, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<?x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x3xf32, #kiln.device<cpu>>
}

// -----

// gather along an axis that may be empty at run time: no index is in range
// there and the clamped read would leave the tensor, so the kernel asserts
// that the axis has elements or the result has none.
// CHECK-LABEL: func.func @gather_dynamic_axis
// CHECK: %[[N:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<?x8xf32>
// CHECK: %[[HAS:.+]] = arith.cmpi ne, %[[N]], %{{.+}} : index
// CHECK: %[[OK:.+]] = arith.ori %[[HAS]], %{{.+}} : i1
// CHECK: cf.assert %[[OK]], "gathers along axis 0, which is empty, at indices it cannot have"
// CHECK: linalg.generic
func.func @gather_dynamic_axis(%t: tensor<?x8xf32, #kiln.device<cpu>>, %ids: tensor<?xi64, #kiln.device<cpu>>) -> tensor<?x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%t, %ids : tensor<?x8xf32, #kiln.device<cpu>>, tensor<?xi64, #kiln.device<cpu>>) -> (tensor<?x8xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x8xf32, #kiln.device<cpu>>, %i: tensor<?xi64, #kiln.device<cpu>>):
    %g = kiln.gather %a, %i {axis = 0 : i64} : tensor<?x8xf32, #kiln.device<cpu>>, tensor<?xi64, #kiln.device<cpu>> -> tensor<?x8xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x8xf32, #kiln.device<cpu>>
}
