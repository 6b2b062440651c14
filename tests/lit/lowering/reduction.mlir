// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on reductions (passes/lowering/Reduction.cpp).

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
