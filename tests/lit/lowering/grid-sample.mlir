// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on grid_sample (passes/lowering/GridSample.cpp).

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
