// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on resize (passes/lowering/Resize.cpp).

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
