// RUN: kiln-opt %s | FileCheck %s
// RUN: kiln-opt %s | kiln-opt | FileCheck %s

// Every op and the device attribute survive a print/parse round trip.

// CHECK-LABEL: func.func @graph
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32, #kiln.device<cpu>>
func.func @graph(%x: tensor<2x3xf32, #kiln.device<cpu>>) -> tensor<2x4xf32, #kiln.device<cpu>> {
  // CHECK: %[[W:.+]] = kiln.constant dense<5.000000e-01> : tensor<3x4xf32> : tensor<3x4xf32, #kiln.device<cpu>>
  %w = kiln.constant dense<0.5> : tensor<3x4xf32> : tensor<3x4xf32, #kiln.device<cpu>>
  // CHECK: %[[B:.+]] = kiln.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
  %b = kiln.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> : tensor<4xf32, #kiln.device<cpu>>
  // CHECK: kiln.gemm %[[X]], %[[W]], %[[B]] {alpha = 2.000000e+00 : f32}
  %g = kiln.gemm %x, %w, %b {alpha = 2.0 : f32} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<3x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.matmul %[[X]], %[[W]]
  %m = kiln.matmul %x, %w : tensor<2x3xf32, #kiln.device<cpu>>, tensor<3x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.add
  %a = kiln.add %g, %m : tensor<2x4xf32, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.sub
  %s = kiln.sub %a, %b : tensor<2x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.mul
  %mu = kiln.mul %s, %s : tensor<2x4xf32, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.div
  %d = kiln.div %mu, %a : tensor<2x4xf32, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.relu
  %r = kiln.relu %d : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.erf
  %e = kiln.erf %r : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.gelu %{{.+}} {approximate_tanh = true}
  %ge = kiln.gelu %e {approximate_tanh = true} : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.tanh
  %t = kiln.tanh %ge : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.sigmoid
  %sg = kiln.sigmoid %t : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.exp
  %ex = kiln.exp %sg : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.neg
  %n = kiln.neg %ex : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  // CHECK: kiln.sqrt
  %sq = kiln.sqrt %n : tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  return %sq : tensor<2x4xf32, #kiln.device<cpu>>
}

// CHECK-LABEL: func.func @vision
// CHECK: kiln.conv %arg0, %arg1, %arg2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: kiln.clip %{{.+}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64}
// CHECK: kiln.max_pool %{{.+}} {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: kiln.reduce %{{.+}} {axes = array<i64: 2, 3>, keepdims = true, kind = "mean"}
// CHECK: kiln.reshape %{{.+}} {shape = array<i64: -2, -1>} : tensor<1x8x1x1xf32, #kiln.device<cpu>> -> tensor<1x8xf32, #kiln.device<cpu>>
func.func @vision(%x: tensor<1x3x8x8xf32, #kiln.device<cpu>>, %w: tensor<8x3x3x3xf32, #kiln.device<cpu>>, %b: tensor<8xf32, #kiln.device<cpu>>) -> tensor<1x8xf32, #kiln.device<cpu>> {
  %c = kiln.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x8x8xf32, #kiln.device<cpu>>, tensor<8x3x3x3xf32, #kiln.device<cpu>>, tensor<8xf32, #kiln.device<cpu>> -> tensor<1x8x4x4xf32, #kiln.device<cpu>>
  %r = kiln.clip %c {min = 0.0 : f64, max = 6.0 : f64} : tensor<1x8x4x4xf32, #kiln.device<cpu>> -> tensor<1x8x4x4xf32, #kiln.device<cpu>>
  %p = kiln.max_pool %r {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : tensor<1x8x4x4xf32, #kiln.device<cpu>> -> tensor<1x8x2x2xf32, #kiln.device<cpu>>
  %m = kiln.reduce %p {kind = "mean", axes = array<i64: 2, 3>, keepdims = true} : tensor<1x8x2x2xf32, #kiln.device<cpu>> -> tensor<1x8x1x1xf32, #kiln.device<cpu>>
  %f = kiln.reshape %m {shape = array<i64: -2, -1>} : tensor<1x8x1x1xf32, #kiln.device<cpu>> -> tensor<1x8xf32, #kiln.device<cpu>>
  return %f : tensor<1x8xf32, #kiln.device<cpu>>
}

// CHECK-LABEL: func.func @sequence
// CHECK: kiln.gather %arg1, %arg0 {axis = 0 : i64} : tensor<100x8xf32, #kiln.device<cpu>>, tensor<2x5xi64, #kiln.device<cpu>> -> tensor<2x5x8xf32, #kiln.device<cpu>>
// CHECK: kiln.transpose %{{.+}} {perm = array<i64: 1, 0, 2>}
// CHECK: kiln.cast %{{.+}} {to = f64}
// CHECK: kiln.pow
func.func @sequence(%ids: tensor<2x5xi64, #kiln.device<cpu>>, %table: tensor<100x8xf32, #kiln.device<cpu>>) -> tensor<5x2x8xf64, #kiln.device<cpu>> {
  %e = kiln.gather %table, %ids {axis = 0 : i64} : tensor<100x8xf32, #kiln.device<cpu>>, tensor<2x5xi64, #kiln.device<cpu>> -> tensor<2x5x8xf32, #kiln.device<cpu>>
  %t = kiln.transpose %e {perm = array<i64: 1, 0, 2>} : tensor<2x5x8xf32, #kiln.device<cpu>> -> tensor<5x2x8xf32, #kiln.device<cpu>>
  %c = kiln.cast %t {to = f64} : tensor<5x2x8xf32, #kiln.device<cpu>> -> tensor<5x2x8xf64, #kiln.device<cpu>>
  %p = kiln.pow %c, %c : tensor<5x2x8xf64, #kiln.device<cpu>>, tensor<5x2x8xf64, #kiln.device<cpu>> -> tensor<5x2x8xf64, #kiln.device<cpu>>
  return %p : tensor<5x2x8xf64, #kiln.device<cpu>>
}

// CHECK-LABEL: func.func @shapes_and_logic
// CHECK: kiln.expand %arg0 {shape = array<i64: 3, 4>} : tensor<4xf32, #kiln.device<cpu>> -> tensor<3x4xf32, #kiln.device<cpu>>
// CHECK: kiln.slice %{{.+}} {sizes = array<i64: 2, 2>, starts = array<i64: 2, 3>, steps = array<i64: -1, -2>}
// CHECK: kiln.concat %{{.+}}, %{{.+}} {axis = 1 : i64}
// CHECK: kiln.less %{{.+}}, %{{.+}} : {{.*}} -> tensor<2x4xi1, #kiln.device<cpu>>
// CHECK: kiln.where
// CHECK: kiln.avg_pool
func.func @shapes_and_logic(%x: tensor<4xf32, #kiln.device<cpu>>, %img: tensor<1x1x4x4xf32, #kiln.device<cpu>>) -> (tensor<2x4xf32, #kiln.device<cpu>>, tensor<1x1x2x2xf32, #kiln.device<cpu>>) {
  %e = kiln.expand %x {shape = array<i64: 3, 4>} : tensor<4xf32, #kiln.device<cpu>> -> tensor<3x4xf32, #kiln.device<cpu>>
  %s = kiln.slice %e {starts = array<i64: 2, 3>, sizes = array<i64: 2, 2>, steps = array<i64: -1, -2>} : tensor<3x4xf32, #kiln.device<cpu>> -> tensor<2x2xf32, #kiln.device<cpu>>
  %c = kiln.concat %s, %s {axis = 1 : i64} : tensor<2x2xf32, #kiln.device<cpu>>, tensor<2x2xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  %z = kiln.constant dense<0.0> : tensor<f32> : tensor<f32, #kiln.device<cpu>>
  %l = kiln.less %c, %z : tensor<2x4xf32, #kiln.device<cpu>>, tensor<f32, #kiln.device<cpu>> -> tensor<2x4xi1, #kiln.device<cpu>>
  %w = kiln.where %l, %z, %c : tensor<2x4xi1, #kiln.device<cpu>>, tensor<f32, #kiln.device<cpu>>, tensor<2x4xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  %p = kiln.avg_pool %img {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false} : tensor<1x1x4x4xf32, #kiln.device<cpu>> -> tensor<1x1x2x2xf32, #kiln.device<cpu>>
  return %w, %p : tensor<2x4xf32, #kiln.device<cpu>>, tensor<1x1x2x2xf32, #kiln.device<cpu>>
}

// CHECK-LABEL: func.func @devices
// CHECK: kiln.copy %{{.+}} : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cuda:1>>
// CHECK: kiln.copy %{{.+}} : tensor<4xf32, #kiln.device<cuda:1>> -> tensor<4xf32, #kiln.device<sim:0>>
func.func @devices(%x: tensor<4xf32, #kiln.device<cpu>>) -> tensor<4xf32, #kiln.device<sim:0>> {
  %a = kiln.copy %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cuda:1>>
  %b = kiln.copy %a : tensor<4xf32, #kiln.device<cuda:1>> -> tensor<4xf32, #kiln.device<sim:0>>
  return %b : tensor<4xf32, #kiln.device<sim:0>>
}

// Weights are dense resource blobs, printed once in the resource section.
// CHECK-LABEL: func.func @weights
// CHECK: kiln.constant dense_resource<w_fc1> : tensor<2x2xf32>
func.func @weights() -> tensor<2x2xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense_resource<w_fc1> : tensor<2x2xf32> : tensor<2x2xf32, #kiln.device<cpu>>
  return %w : tensor<2x2xf32, #kiln.device<cpu>>
}

// CHECK-LABEL: func.func @kernel
// CHECK: kiln.kernel(%{{.+}} : tensor<4xf32, #kiln.device<cpu>>) -> (tensor<4xf32, #kiln.device<cpu>>) {
// CHECK: ^bb0(%{{.+}}: tensor<4xf32>):
// CHECK: kiln.yield %{{.+}} : tensor<4xf32>
func.func @kernel(%x: tensor<4xf32, #kiln.device<cpu>>) -> tensor<4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<4xf32, #kiln.device<cpu>>) -> (tensor<4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4xf32>):
    kiln.yield %a : tensor<4xf32>
  }
  return %k : tensor<4xf32, #kiln.device<cpu>>
}

{-#
  dialect_resources: {
    builtin: {
      w_fc1: "0x040000000000803F000000400000404000008040"
    }
  }
#-}

// In kiln.reshape's shape 0 is a size (-2 copies the input's dim), so an
// empty tensor can be viewed in any shape of 0 elements.
// CHECK-LABEL: func.func @reshape_empty
// CHECK: kiln.reshape %arg0 {shape = array<i64: 0, 1, 3>} : tensor<3x0xf32, #kiln.device<cpu>> -> tensor<0x1x3xf32, #kiln.device<cpu>>
func.func @reshape_empty(%x: tensor<3x0xf32, #kiln.device<cpu>>) -> tensor<0x1x3xf32, #kiln.device<cpu>> {
  %r = kiln.reshape %x {shape = array<i64: 0, 1, 3>} : tensor<3x0xf32, #kiln.device<cpu>> -> tensor<0x1x3xf32, #kiln.device<cpu>>
  return %r : tensor<0x1x3xf32, #kiln.device<cpu>>
}
