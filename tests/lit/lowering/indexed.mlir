// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on scatter and gather_nd (passes/lowering/Indexed.cpp).

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
