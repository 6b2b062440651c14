// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on MatMul and Gemm (passes/lowering/Contraction.cpp).

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
