// RUN: kiln-opt %s --kiln-fuse-elementwise --split-input-file | FileCheck %s

!t = tensor<8x4xf32, #kiln.device<cpu>>
!s = tensor<f32, #kiln.device<cpu>>

// An elementwise chain after a contraction of its shape is the gemm's
// epilogue: one kernel, with the splat constant cloned into it.
// CHECK-LABEL: func.func @chain
// CHECK: %[[G:.+]] = kiln.kernel(%arg0, %arg1 : {{.*}}) -> (tensor<8x4xf32, #kiln.device<cpu>>) {
// CHECK:   kiln.constant dense<2.000000e+00>
// CHECK:   kiln.gemm
// CHECK:   kiln.relu
// CHECK:   kiln.div
// CHECK:   kiln.erf
// CHECK:   kiln.yield
// CHECK-NOT: kiln.kernel
// CHECK: return %[[G]]
func.func @chain(%x: !t, %w: tensor<4x4xf32, #kiln.device<cpu>>) -> !t {
  %two = kiln.constant dense<2.0> : tensor<f32> : !s
  %g = kiln.gemm %x, %w : !t, tensor<4x4xf32, #kiln.device<cpu>> -> !t
  %r = kiln.relu %g : !t -> !t
  %d = kiln.div %r, %two : !t, !s -> !t
  %e = kiln.erf %d : !t -> !t
  return %e : !t
}

// -----

!t = tensor<8x4xf32, #kiln.device<cpu>>

// A diamond is one kernel.
// CHECK-LABEL: func.func @diamond
// CHECK-COUNT-1: kiln.kernel
// CHECK-NOT: kiln.kernel
func.func @diamond(%x: !t) -> !t {
  %r = kiln.relu %x : !t -> !t
  %a = kiln.exp %r : !t -> !t
  %b = kiln.tanh %r : !t -> !t
  %s = kiln.add %a, %b : !t, !t -> !t
  return %s : !t
}

// -----

!t = tensor<4x4xf32, #kiln.device<cpu>>

// A member used outside the group becomes an extra kernel result.
// CHECK-LABEL: func.func @escaping
// CHECK: %[[K:.+]]:2 = kiln.kernel(%arg0 : {{.*}}) -> (tensor<4x4xf32, #kiln.device<cpu>>, tensor<4x4xf32, #kiln.device<cpu>>)
// CHECK:   %[[R:.+]] = kiln.relu
// CHECK:   %[[N:.+]] = kiln.neg %[[R]]
// CHECK:   kiln.yield %[[R]], %[[N]]
// CHECK: kiln.kernel(%[[K]]#1, %[[K]]#0 :
// CHECK:   kiln.matmul
// CHECK: return
func.func @escaping(%x: !t) -> !t {
  %r = kiln.relu %x : !t -> !t
  %n = kiln.neg %r : !t -> !t
  %m = kiln.matmul %n, %r : !t, !t -> !t
  return %m : !t
}

// -----

!t = tensor<4x4xf32, #kiln.device<cpu>>

// relu's result feeds a matmul that the add also needs: fusing the add into
// relu's kernel would make the two kernels depend on each other, so it joins
// the matmul's kernel as its epilogue instead.
// CHECK-LABEL: func.func @no_cycle
// CHECK: %[[R:.+]] = kiln.kernel(%arg0
// CHECK:   kiln.relu
// CHECK: %[[M:.+]] = kiln.kernel(%[[R]], %arg1
// CHECK:   kiln.matmul
// CHECK:   kiln.add
// CHECK-NOT: kiln.kernel
// CHECK: return %[[M]]
func.func @no_cycle(%x: !t, %w: !t) -> !t {
  %r = kiln.relu %x : !t -> !t
  %m = kiln.matmul %r, %w : !t, !t -> !t
  %a = kiln.add %r, %m : !t, !t -> !t
  return %a : !t
}

// -----

!t = tensor<2x4xf32, #kiln.device<cpu>>
!f = tensor<8xf32, #kiln.device<cpu>>

// A reshape is a view, not a kernel: it splits the chain around it.
// CHECK-LABEL: func.func @reshape_view
// CHECK: %[[A:.+]] = kiln.kernel
// CHECK:   kiln.relu
// CHECK: %[[V:.+]] = kiln.reshape %[[A]]
// CHECK: kiln.kernel(%[[V]]
// CHECK:   kiln.neg
func.func @reshape_view(%x: !t) -> !f {
  %r = kiln.relu %x : !t -> !t
  %v = kiln.reshape %r {shape = array<i64: -1>} : !t -> !f
  %n = kiln.neg %v : !f -> !f
  return %n : !f
}

// -----

!t = tensor<4x4xf32, #kiln.device<cpu>>
!v = tensor<4xf32, #kiln.device<cpu>>

// At most one anchor per kernel: an add of two matmuls joins the first one's
// kernel only (placed after its last member, the mul). The mul joins
// through the add, but not the dot product's kernel: its result does not
// have the dot product's shape.
// CHECK-LABEL: func.func @anchors
// CHECK: %[[B:.+]] = kiln.kernel(%arg1, %arg0 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.matmul
// CHECK-NEXT:   kiln.yield
// CHECK: %[[V:.+]] = kiln.kernel(%arg2 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.matmul
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel(%arg0, %arg1, %[[B]], %[[V]] :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.matmul
// CHECK-NEXT:   kiln.add
// CHECK-NEXT:   kiln.mul
// CHECK-NEXT:   kiln.yield
func.func @anchors(%x: !t, %w: !t, %u: !v) -> !t {
  %a = kiln.matmul %x, %w : !t, !t -> !t
  %b = kiln.matmul %w, %x : !t, !t -> !t
  %s = kiln.add %a, %b : !t, !t -> !t
  %v = kiln.matmul %u, %u : !v, !v -> tensor<f32, #kiln.device<cpu>>
  %m = kiln.mul %v, %s : tensor<f32, #kiln.device<cpu>>, !t -> !t
  return %m : !t
}

// -----

!t = tensor<?x8x16xf32, #kiln.device<cpu>>
!r = tensor<?x8x1xf32, #kiln.device<cpu>>

// Softmax as the frontend spells it: reductions over the last axis
// (keepdims) and the elementwise ops around them are one kernel on a CPU,
// which the C++ emitter runs row by row.
// CHECK-LABEL: func.func @softmax_rows
// CHECK: %[[K:.+]] = kiln.kernel(%arg0 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.reduce {{.+}}kind = "max"
// CHECK-NEXT:   kiln.sub
// CHECK-NEXT:   kiln.exp
// CHECK-NEXT:   kiln.reduce {{.+}}kind = "sum"
// CHECK-NEXT:   kiln.div
// CHECK-NEXT:   kiln.yield
// CHECK-NOT: kiln.kernel
// CHECK: return %[[K]]
func.func @softmax_rows(%x: !t) -> !t {
  %m = kiln.reduce %x {kind = "max", axes = array<i64: 2>, keepdims = true} : !t -> !r
  %s = kiln.sub %x, %m : !t, !r -> !t
  %e = kiln.exp %s : !t -> !t
  %z = kiln.reduce %e {kind = "sum", axes = array<i64: 2>, keepdims = true} : !t -> !r
  %y = kiln.div %e, %z : !t, !r -> !t
  return %y : !t
}

// -----

!t = tensor<4x16xf32, #kiln.device<cpu>>

// No row fusion across other axes, without keepdims, on a GPU, or into a
// gemm's kernel (its epilogue stays as it was).
// CHECK-LABEL: func.func @not_rows
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.reduce {{.+}}axes = array<i64: 0>
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.sub
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.reduce {{.+}}keepdims = false
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.reduce {{.+}}kind = "max"
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.sub
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.gemm
// CHECK-NEXT:   kiln.relu
// CHECK-NEXT:   kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   kiln.reduce {{.+}}kind = "mean"
// CHECK-NEXT:   kiln.yield
func.func @not_rows(%x: !t, %g: tensor<4x16xf32, #kiln.device<cuda:0>>, %w: tensor<16x16xf32, #kiln.device<cpu>>) -> (!t, tensor<4xf32, #kiln.device<cpu>>, tensor<4x16xf32, #kiln.device<cuda:0>>, tensor<4x1xf32, #kiln.device<cpu>>) {
  %c = kiln.reduce %x {kind = "max", axes = array<i64: 0>, keepdims = true} : !t -> tensor<1x16xf32, #kiln.device<cpu>>
  %s = kiln.sub %x, %c : !t, tensor<1x16xf32, #kiln.device<cpu>> -> !t
  %n = kiln.reduce %s {kind = "sum", axes = array<i64: 1>, keepdims = false} : !t -> tensor<4xf32, #kiln.device<cpu>>
  %gm = kiln.reduce %g {kind = "max", axes = array<i64: 1>, keepdims = true} : tensor<4x16xf32, #kiln.device<cuda:0>> -> tensor<4x1xf32, #kiln.device<cuda:0>>
  %gs = kiln.sub %g, %gm : tensor<4x16xf32, #kiln.device<cuda:0>>, tensor<4x1xf32, #kiln.device<cuda:0>> -> tensor<4x16xf32, #kiln.device<cuda:0>>
  %p = kiln.gemm %x, %w : !t, tensor<16x16xf32, #kiln.device<cpu>> -> !t
  %r = kiln.relu %p : !t -> !t
  %mean = kiln.reduce %r {kind = "mean", axes = array<i64: 1>, keepdims = true} : !t -> tensor<4x1xf32, #kiln.device<cpu>>
  return %r, %n, %gs, %mean : !t, tensor<4xf32, #kiln.device<cpu>>, tensor<4x16xf32, #kiln.device<cuda:0>>, tensor<4x1xf32, #kiln.device<cpu>>
}
