// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file | FileCheck %s

// A float16 sum accumulates in f32 and rounds once, after the reduction.
// CHECK-LABEL: func.func @sum_f16
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<4xf32>)
// CHECK: %[[SUM:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "reduction"]} ins(%{{.+}} : tensor<4x4096xf16>) outs(%[[INIT]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f16, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[X:.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: %[[NEXT:.+]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT: linalg.yield %[[NEXT]] : f32
// CHECK: linalg.generic {{.+}} ins(%[[SUM]] : tensor<4xf32>) outs(%{{.+}} : tensor<4xf16>)
// CHECK: arith.truncf %{{.+}} : f32 to f16
func.func @sum_f16(%a: tensor<4x4096xf16, #kiln.device<cpu>>) -> tensor<4xf16, #kiln.device<cpu>> {
  %k = kiln.kernel(%a : tensor<4x4096xf16, #kiln.device<cpu>>) -> (tensor<4xf16, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<4x4096xf16, #kiln.device<cpu>>):
    %y = kiln.reduce %x {kind = "sum", axes = array<i64: 1>, keepdims = false} : tensor<4x4096xf16, #kiln.device<cpu>> -> tensor<4xf16, #kiln.device<cpu>>
    kiln.yield %y : tensor<4xf16, #kiln.device<cpu>>
  }
  return %k : tensor<4xf16, #kiln.device<cpu>>
}

// -----

// A bfloat16 matmul multiplies and adds in f32, no rounding in between.
// CHECK-LABEL: func.func @matmul_bf16
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x64xbf16>, tensor<64x3xbf16>) outs(%{{.+}} : tensor<2x3xf32>)
// CHECK-NEXT: ^bb0(%[[A:.+]]: bf16, %[[B:.+]]: bf16, %[[ACC:.+]]: f32):
// CHECK-DAG: arith.extf %[[A]] : bf16 to f32
// CHECK-DAG: arith.extf %[[B]] : bf16 to f32
// CHECK: arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: arith.addf %{{.+}} : f32
// CHECK-NOT: truncf
// CHECK: linalg.yield %{{.+}} : f32
// CHECK: arith.truncf %{{.+}} : f32 to bf16
func.func @matmul_bf16(%a: tensor<2x64xbf16, #kiln.device<cpu>>, %b: tensor<64x3xbf16, #kiln.device<cpu>>) -> tensor<2x3xbf16, #kiln.device<cpu>> {
  %k = kiln.kernel(%a, %b : tensor<2x64xbf16, #kiln.device<cpu>>, tensor<64x3xbf16, #kiln.device<cpu>>) -> (tensor<2x3xbf16, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<2x64xbf16, #kiln.device<cpu>>, %y: tensor<64x3xbf16, #kiln.device<cpu>>):
    %m = kiln.matmul %x, %y : tensor<2x64xbf16, #kiln.device<cpu>>, tensor<64x3xbf16, #kiln.device<cpu>> -> tensor<2x3xbf16, #kiln.device<cpu>>
    kiln.yield %m : tensor<2x3xbf16, #kiln.device<cpu>>
  }
  return %k : tensor<2x3xbf16, #kiln.device<cpu>>
}

// -----

// A max is exact in any precision: it stays in float16.
// CHECK-LABEL: func.func @max_f16
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<4xf16>)
// CHECK-NOT: arith.extf
// CHECK: kiln.yield
func.func @max_f16(%a: tensor<4x8xf16, #kiln.device<cpu>>) -> tensor<4xf16, #kiln.device<cpu>> {
  %k = kiln.kernel(%a : tensor<4x8xf16, #kiln.device<cpu>>) -> (tensor<4xf16, #kiln.device<cpu>>) {
  ^bb0(%x: tensor<4x8xf16, #kiln.device<cpu>>):
    %y = kiln.reduce %x {kind = "max", axes = array<i64: 1>, keepdims = false} : tensor<4x8xf16, #kiln.device<cpu>> -> tensor<4xf16, #kiln.device<cpu>>
    kiln.yield %y : tensor<4xf16, #kiln.device<cpu>>
  }
  return %k : tensor<4xf16, #kiln.device<cpu>>
}
