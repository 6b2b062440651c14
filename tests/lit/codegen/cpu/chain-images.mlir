// RUN: kiln-opt %s --kiln-fuse-elementwise --kiln-lower-kernels --kiln-chain-images --canonicalize --split-input-file | FileCheck %s

!x = tensor<?x16x64x64xf32, #kiln.device<cpu>>
!y = tensor<?x96x64x64xf32, #kiln.device<cpu>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cpu>>
!w2 = tensor<96x1x3x3xf32, #kiln.device<cpu>>

// A 1x1 conv with its relu, then a depthwise conv that alone reads it, both
// working on each image on its own: one kernel, the first's body then the
// second's, its result now a local whose dims fold to those of the
// kernel's input.
// CHECK-LABEL: func.func @chain
// CHECK:      %[[K:.+]] = kiln.kernel(%arg0, %arg1, %arg2 : {{.*}}) -> (tensor<?x96x64x64xf32, #kiln.device<cpu>>) {
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<?x16x64x64xf32>, %{{.+}}: tensor<96x16x1x1xf32>, %{{.+}}: tensor<96x1x3x3xf32>):
// CHECK:        %[[N:.+]] = tensor.dim %[[X]], %c0
// CHECK-NOT:    tensor.dim
// CHECK:        %[[GEMM:.+]] = linalg.generic {{.+}}iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]
// CHECK:        %[[RELU:.+]] = linalg.generic {{.+}} ins(%[[GEMM]] :
// CHECK:        tensor.empty(%[[N]]) : tensor<?x96x66x66xf32>
// CHECK:        tensor.extract %[[RELU]]
// CHECK:        %[[DW:.+]] = linalg.generic {{.+}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// CHECK:        kiln.yield %[[DW]]
// CHECK-NOT:  kiln.kernel
// CHECK:      return %[[K]]
func.func @chain(%x: !x, %w1: !w1, %w2: !w2) -> !y {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %r = kiln.relu %a : !y -> !y
  %b = kiln.conv %r, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 96} : !y, !w2 -> !y
  return %b : !y
}

// -----

!x = tensor<?x16x64x64xf32, #kiln.device<cpu>>
!y = tensor<?x96x64x64xf32, #kiln.device<cpu>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cpu>>
!w2 = tensor<96x1x3x3xf32, #kiln.device<cpu>>

// The first kernel's result is also returned: not a local, no chain.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK-COUNT-2: kiln.kernel
func.func @read_elsewhere(%x: !x, %w1: !w1, %w2: !w2) -> (!y, !y) {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %r = kiln.relu %a : !y -> !y
  %b = kiln.conv %r, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 96} : !y, !w2 -> !y
  return %b, %r : !y, !y
}

// -----

!x = tensor<?x16x32x32xf32, #kiln.device<cpu>>
!y = tensor<?x96x32x32xf32, #kiln.device<cpu>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cpu>>
!w2 = tensor<96x1x3x3xf32, #kiln.device<cpu>>

// 384 KB an image: one kernel all the same (the batch decides at run time
// whether it runs image by image).
// CHECK-LABEL: func.func @small_images
// CHECK-COUNT-1: kiln.kernel
// CHECK-NOT: kiln.kernel
func.func @small_images(%x: !x, %w1: !w1, %w2: !w2) -> !y {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %r = kiln.relu %a : !y -> !y
  %b = kiln.conv %r, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 96} : !y, !w2 -> !y
  return %b : !y
}

// -----

!x = tensor<8x16x64x64xf32, #kiln.device<cpu>>
!y = tensor<8x96x64x64xf32, #kiln.device<cpu>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cpu>>
!w2 = tensor<96x1x3x3xf32, #kiln.device<cpu>>

// A static batch runs no image loop: no chain.
// CHECK-LABEL: func.func @static_batch
// CHECK-COUNT-2: kiln.kernel
func.func @static_batch(%x: !x, %w1: !w1, %w2: !w2) -> !y {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %r = kiln.relu %a : !y -> !y
  %b = kiln.conv %r, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 96} : !y, !w2 -> !y
  return %b : !y
}

// -----

!x = tensor<?x16x64x64xf32, #kiln.device<cuda:0>>
!y = tensor<?x96x64x64xf32, #kiln.device<cuda:0>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cuda:0>>
!w2 = tensor<96x1x3x3xf32, #kiln.device<cuda:0>>

// CUDA kernels are not chained.
// CHECK-LABEL: func.func @cuda
// CHECK-COUNT-2: kiln.kernel
func.func @cuda(%x: !x, %w1: !w1, %w2: !w2) -> !y {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %r = kiln.relu %a : !y -> !y
  %b = kiln.conv %r, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 96} : !y, !w2 -> !y
  return %b : !y
}

// -----

!x = tensor<?x16x64x64xf32, #kiln.device<cpu>>
!y = tensor<?x96x64x64xf32, #kiln.device<cpu>>
!r = tensor<?x96x64x1xf32, #kiln.device<cpu>>
!w1 = tensor<96x16x1x1xf32, #kiln.device<cpu>>

// A softmax over the last axis runs row by row on its own: it joins no
// chain (merged, it would run op by op).
// CHECK-LABEL: func.func @rows
// CHECK-COUNT-2: kiln.kernel
func.func @rows(%x: !x, %w1: !w1) -> !y {
  %a = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : !x, !w1 -> !y
  %m = kiln.reduce %a {kind = "max", axes = array<i64: 3>, keepdims = true} : !y -> !r
  %s = kiln.sub %a, %m : !y, !r -> !y
  %e = kiln.exp %s : !y -> !y
  %z = kiln.reduce %e {kind = "sum", axes = array<i64: 3>, keepdims = true} : !y -> !r
  %p = kiln.div %e, %z : !y, !r -> !y
  return %p : !y
}
