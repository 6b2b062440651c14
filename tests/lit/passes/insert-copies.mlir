// RUN: kiln-opt %s --kiln-insert-copies --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-insert-copies=output-device=sim:1 --split-input-file | FileCheck %s --check-prefix=OUT
// RUN: not kiln-opt %s --kiln-insert-copies=output-device=gpu --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: invalid device 'gpu' (expected cpu, cuda:N or sim:N)

!c = tensor<4x8xf32, #kiln.device<cpu>>
!w = tensor<8x8xf32, #kiln.device<cpu>>

// Two users on sim:0 share one copy of %x, made right at the top (its
// producer is an argument); the weight is not copied but cloned onto sim:0,
// and the cpu original, left unused, is gone. The gemm's result goes back
// to the cpu once, right after the gemm, for the return.
// CHECK-LABEL: func.func @copies
// CHECK-SAME: -> tensor<4x8xf32, #kiln.device<cpu>>
// CHECK-NEXT: %[[X:.+]] = kiln.copy %arg0 : tensor<4x8xf32, #kiln.device<cpu>> -> tensor<4x8xf32, #kiln.device<sim:0>>
// CHECK-NEXT: %[[W:.+]] = kiln.constant dense<1.000000e+00> : tensor<8x8xf32> : tensor<8x8xf32, #kiln.device<sim:0>>
// CHECK-NEXT: %[[G:.+]] = kiln.gemm %[[X]], %[[W]] : {{.*}} -> tensor<4x8xf32, #kiln.device<sim:0>>
// CHECK-NEXT: %[[B:.+]] = kiln.copy %[[G]] : tensor<4x8xf32, #kiln.device<sim:0>> -> tensor<4x8xf32, #kiln.device<cpu>>
// CHECK-NEXT: %[[R:.+]] = kiln.relu %[[X]] : {{.*}} -> tensor<4x8xf32, #kiln.device<sim:0>>
// CHECK-NEXT: %[[S:.+]] = kiln.copy %[[R]] : {{.*}}#kiln.device<sim:0>> -> tensor<4x8xf32, #kiln.device<cpu>>
// CHECK-NEXT: %[[A:.+]] = kiln.add %[[B]], %[[S]] : {{.*}} -> tensor<4x8xf32, #kiln.device<cpu>>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: kiln.place
// OUT-LABEL: func.func @copies
// OUT-SAME: -> tensor<4x8xf32, #kiln.device<sim:1>>
// OUT: %[[A:.+]] = kiln.add
// OUT-NEXT: %[[C:.+]] = kiln.copy %[[A]] : {{.*}} -> tensor<4x8xf32, #kiln.device<sim:1>>
// OUT-NEXT: return %[[C]]
func.func @copies(%x: !c) -> !c {
  %w = kiln.constant dense<1.0> : tensor<8x8xf32> : !w
  %g = kiln.gemm %x, %w {kiln.place = #kiln.device<sim:0>} : !c, !w -> !c
  %r = kiln.relu %x {kiln.place = #kiln.device<sim:0>} : !c -> !c
  %a = kiln.add %g, %r : !c, !c -> !c
  return %a : !c
}

// -----

!c = tensor<4xf32, #kiln.device<cpu>>

// A weight used on two devices is on both ahead of time; values already on
// the op's device are not copied.
// CHECK-LABEL: func.func @shared_weight
// CHECK-DAG: kiln.constant dense<2.000000e+00> : tensor<4xf32> : tensor<4xf32, #kiln.device<cpu>>
// CHECK-DAG: kiln.constant dense<2.000000e+00> : tensor<4xf32> : tensor<4xf32, #kiln.device<sim:1>>
// CHECK: kiln.mul {{.*}} -> tensor<4xf32, #kiln.device<cpu>>
// CHECK: kiln.copy
// CHECK-NEXT: kiln.mul {{.*}} -> tensor<4xf32, #kiln.device<sim:1>>
// CHECK: kiln.copy
// CHECK-NOT: kiln.copy
// CHECK: return
func.func @shared_weight(%x: !c) -> !c {
  %w = kiln.constant dense<2.0> : tensor<4xf32> : !c
  %a = kiln.mul %x, %w : !c, !c -> !c
  %b = kiln.mul %a, %w {kiln.place = #kiln.device<sim:1>} : !c, !c -> !c
  return %b : !c
}
