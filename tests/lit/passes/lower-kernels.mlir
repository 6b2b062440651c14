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

// Code generation needs static shapes.
func.func @dynamic(%x: tensor<?x4xf32, #kiln.device<cpu>>) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x4xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4xf32, #kiln.device<cpu>>):
    // expected-error @+1 {{'kiln.relu' op needs static shapes for code generation, but has 'tensor<?x4xf32, #kiln.device<cpu>>'; bind symbolic input dims (kilnc --input-shape NAME=D0xD1...)}}
    %r = kiln.relu %a : tensor<?x4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<?x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x4xf32, #kiln.device<cpu>>
}
