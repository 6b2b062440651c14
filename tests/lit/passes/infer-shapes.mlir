// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-infer-shapes{input-shapes=x=8x4}))' --split-input-file --verify-diagnostics | FileCheck %s

// A symbolic batch is bound by name and propagated through every op to the
// function signature.
// CHECK-LABEL: func.func @bind_batch
// CHECK-SAME: (%[[X:.+]]: tensor<8x4xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> tensor<8x3xf32, #kiln.device<cpu>>
// CHECK: kiln.gemm %[[X]], %{{.+}} : {{.*}} -> tensor<8x3xf32, #kiln.device<cpu>>
// CHECK: kiln.relu %{{.+}} : tensor<8x3xf32, #kiln.device<cpu>> -> tensor<8x3xf32, #kiln.device<cpu>>
// CHECK: kiln.add %{{.+}}, %{{.+}} : {{.*}} -> tensor<8x3xf32, #kiln.device<cpu>>
// CHECK: return %{{.+}} : tensor<8x3xf32, #kiln.device<cpu>>
func.func @bind_batch(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> tensor<?x3xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<1.0> : tensor<4x3xf32> : tensor<4x3xf32, #kiln.device<cpu>>
  %b = kiln.constant dense<1.0> : tensor<3xf32> : tensor<3xf32, #kiln.device<cpu>>
  %h = kiln.gemm %x, %w : tensor<?x4xf32, #kiln.device<cpu>>, tensor<4x3xf32, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
  %r = kiln.relu %h : tensor<?x3xf32, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
  %a = kiln.add %r, %b : tensor<?x3xf32, #kiln.device<cpu>>, tensor<3xf32, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
  return %a : tensor<?x3xf32, #kiln.device<cpu>>
}

// -----

// Dynamic results whose operands are static are refined; copies keep their
// target device. (Every function here has an input x for the binding.)
// CHECK-LABEL: func.func @refine
// CHECK: kiln.matmul {{.*}} -> tensor<2x5xf32, #kiln.device<cpu>>
// CHECK: kiln.copy {{.*}} -> tensor<2x5xf32, #kiln.device<cuda:0>>
// CHECK: return {{.*}} : tensor<2x5xf32, #kiln.device<cuda:0>>
func.func @refine(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}, %a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<3x5xf32, #kiln.device<cpu>>) -> tensor<?x?xf32, #kiln.device<cuda:0>> {
  %m = kiln.matmul %a, %b : tensor<2x3xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>> -> tensor<?x?xf32, #kiln.device<cpu>>
  %c = kiln.copy %m : tensor<?x?xf32, #kiln.device<cpu>> -> tensor<?x?xf32, #kiln.device<cuda:0>>
  return %c : tensor<?x?xf32, #kiln.device<cuda:0>>
}

// -----

// Expand by 0 of a dim only the run knows is 0 (the dim can only be 1 or
// 0); the other dims broadcast as usual.
// CHECK-LABEL: func.func @expand_by_zero
// CHECK: kiln.expand {{.*}} -> tensor<8x3x0xf32, #kiln.device<cpu>>
func.func @expand_by_zero(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}, %y: tensor<?x1x?xf32, #kiln.device<cpu>>) -> tensor<?x?x?xf32, #kiln.device<cpu>> {
  %e = kiln.expand %y {shape = array<i64: 8, 3, 0>} : tensor<?x1x?xf32, #kiln.device<cpu>> -> tensor<?x?x?xf32, #kiln.device<cpu>>
  return %e : tensor<?x?x?xf32, #kiln.device<cpu>>
}

// -----

// A binding that contradicts a static dim is an error.
// expected-error @+1 {{'func.func' op input 'x' has static shape 'tensor<2x4xf32, #kiln.device<cpu>>' that the given shape 8x4 contradicts}}
func.func @contradiction(%x: tensor<2x4xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> tensor<2x4xf32, #kiln.device<cpu>> {
  return %x : tensor<2x4xf32, #kiln.device<cpu>>
}

// -----

// A binding for an input that does not exist is an error.
// expected-error @+1 {{'func.func' op no input named x}}
func.func @no_such_input(%y: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "y"}) -> tensor<?x4xf32, #kiln.device<cpu>> {
  return %y : tensor<?x4xf32, #kiln.device<cpu>>
}

// -----

// A binding of the wrong rank is an error.
// expected-error @+1 {{'func.func' op input 'x' has rank 3 but the shape given for it has rank 2}}
func.func @rank(%x: tensor<?x4x4xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> tensor<?x4x4xf32, #kiln.device<cpu>> {
  return %x : tensor<?x4x4xf32, #kiln.device<cpu>>
}

// -----

// Binding a shape whose propagation breaks an op reports the op.
func.func @propagated_error(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %c = kiln.constant dense<1.0> : tensor<3x4xf32> : tensor<3x4xf32, #kiln.device<cpu>>
  // expected-error @+1 {{operands of shapes [8,4] and [3,4] do not broadcast}}
  %a = kiln.add %x, %c : tensor<?x4xf32, #kiln.device<cpu>>, tensor<3x4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
  return %a : tensor<?x4xf32, #kiln.device<cpu>>
}

// -----

// Reshape specs (0 copies a dim, -1 is inferred) resolve once the batch is
// bound; so do conv and pooling windows.
// CHECK-LABEL: func.func @vision
// CHECK: kiln.conv {{.*}} -> tensor<2x4x3x3xf32, #kiln.device<cpu>>
// CHECK: kiln.max_pool {{.*}} -> tensor<2x4x2x2xf32, #kiln.device<cpu>>
// CHECK: kiln.reshape {{.*}} -> tensor<2x16xf32, #kiln.device<cpu>>
func.func @vision(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}, %img: tensor<2x3x5x5xf32, #kiln.device<cpu>>, %w: tensor<4x3x3x3xf32, #kiln.device<cpu>>) -> tensor<?x?xf32, #kiln.device<cpu>> {
  %c = kiln.conv %img, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : tensor<2x3x5x5xf32, #kiln.device<cpu>>, tensor<4x3x3x3xf32, #kiln.device<cpu>> -> tensor<?x4x?x?xf32, #kiln.device<cpu>>
  %p = kiln.max_pool %c {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : tensor<?x4x?x?xf32, #kiln.device<cpu>> -> tensor<?x4x?x?xf32, #kiln.device<cpu>>
  %f = kiln.reshape %p {shape = array<i64: -2, -1>} : tensor<?x4x?x?xf32, #kiln.device<cpu>> -> tensor<?x?xf32, #kiln.device<cpu>>
  return %f : tensor<?x?xf32, #kiln.device<cpu>>
}

// -----

// A conv whose weight is sized only at run time keeps its output channels
// and window counts symbolic; a depthwise conv (group 0, one group per
// input channel however many there are) takes its channels from the weight.
// CHECK-LABEL: func.func @symbolic_kernel
// CHECK: kiln.conv {{.*}} -> tensor<2x?x?x?xf32, #kiln.device<cpu>>
// CHECK: kiln.conv {{.*}}group = 0{{.*}} -> tensor<2x6x3xf32, #kiln.device<cpu>>
func.func @symbolic_kernel(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}, %img: tensor<2x3x5x5xf32, #kiln.device<cpu>>, %w: tensor<?x?x?x?xf32, #kiln.device<cpu>>, %seq: tensor<2x3x5xf32, #kiln.device<cpu>>, %dw: tensor<6x1x3xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>, tensor<?x?x?x?xf32, #kiln.device<cpu>>, tensor<?x?x?xf32, #kiln.device<cpu>>) {
  %c = kiln.conv %img, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : tensor<2x3x5x5xf32, #kiln.device<cpu>>, tensor<?x?x?x?xf32, #kiln.device<cpu>> -> tensor<?x?x?x?xf32, #kiln.device<cpu>>
  %d = kiln.conv %seq, %dw {strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, group = 0} : tensor<2x3x5xf32, #kiln.device<cpu>>, tensor<6x1x3xf32, #kiln.device<cpu>> -> tensor<?x?x?xf32, #kiln.device<cpu>>
  return %x, %c, %d : tensor<?x4xf32, #kiln.device<cpu>>, tensor<?x?x?x?xf32, #kiln.device<cpu>>, tensor<?x?x?xf32, #kiln.device<cpu>>
}

// -----

// Symbolic dims that a reshape copies cancel out of its inferred dim when
// they are all the input's: [5, n, 2, 3] to [-2, -2, -1] is [5, n, 6]
// whatever n (a bidirectional GRU's output merged by its exporter). One not
// copied keeps the inferred dim symbolic.
// CHECK-LABEL: func.func @reshape_cancels
// CHECK: kiln.reshape %{{.+}} {shape = array<i64: -2, -2, -1>} : tensor<5x?x2x3xf32, #kiln.device<cpu>> -> tensor<5x?x6xf32, #kiln.device<cpu>>
// CHECK: kiln.reshape %{{.+}} {shape = array<i64: -1, 2>} : tensor<5x?x2x3xf32, #kiln.device<cpu>> -> tensor<?x2xf32, #kiln.device<cpu>>
func.func @reshape_cancels(%x: tensor<?x4xf32, #kiln.device<cpu>> {kiln.name = "x"}, %y: tensor<5x?x2x3xf32, #kiln.device<cpu>>) -> (tensor<?x?x?xf32, #kiln.device<cpu>>, tensor<?x2xf32, #kiln.device<cpu>>) {
  %a = kiln.reshape %y {shape = array<i64: -2, -2, -1>} : tensor<5x?x2x3xf32, #kiln.device<cpu>> -> tensor<?x?x?xf32, #kiln.device<cpu>>
  %b = kiln.reshape %y {shape = array<i64: -1, 2>} : tensor<5x?x2x3xf32, #kiln.device<cpu>> -> tensor<?x2xf32, #kiln.device<cpu>>
  return %a, %b : tensor<?x?x?xf32, #kiln.device<cpu>>, tensor<?x2xf32, #kiln.device<cpu>>
}
