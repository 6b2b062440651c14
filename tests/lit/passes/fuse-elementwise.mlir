// RUN: kiln-opt %s --kiln-fuse-elementwise --split-input-file | FileCheck %s

!t = tensor<8x4xf32, #kiln.device<cpu>>
!s = tensor<f32, #kiln.device<cpu>>

// An elementwise chain after a contraction: the gemm gets a kernel of its
// own, the chain one kernel, and the splat constant is cloned into it.
// CHECK-LABEL: func.func @chain
// CHECK: %[[G:.+]] = kiln.kernel(%arg0, %{{.+}} : {{.*}}) -> (tensor<8x4xf32, #kiln.device<cpu>>) {
// CHECK:   kiln.gemm
// CHECK:   kiln.yield
// CHECK: %[[E:.+]] = kiln.kernel(%[[G]] : tensor<8x4xf32, #kiln.device<cpu>>) -> (tensor<8x4xf32, #kiln.device<cpu>>) {
// CHECK:   kiln.constant dense<2.000000e+00>
// CHECK:   kiln.relu
// CHECK:   kiln.div
// CHECK:   kiln.erf
// CHECK:   kiln.yield
// CHECK: return %[[E]]
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
// relu's kernel would make the two kernels depend on each other, so it gets
// a kernel of its own.
// CHECK-LABEL: func.func @no_cycle
// CHECK: %[[R:.+]] = kiln.kernel(%arg0
// CHECK:   kiln.relu
// CHECK: %[[M:.+]] = kiln.kernel(%[[R]], %arg1
// CHECK:   kiln.matmul
// CHECK: %[[A:.+]] = kiln.kernel(%[[R]], %[[M]]
// CHECK:   kiln.add
// CHECK: return %[[A]]
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
