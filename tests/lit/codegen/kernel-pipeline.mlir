// RUN: kiln-opt %s --kiln-compile | FileCheck %s

// A `?` operand beside a static one keeps its `?` type in the kernel: it may
// be 1 at run time and broadcast (CEmitter::index reads element 0 then), so
// the canonicalizer must not cast it to the other operand's size, as linalg's
// InferStaticShapeOfOperands would.
// CHECK-LABEL: func.func @dynamic_one
// CHECK: ^bb0(%[[A:.+]]: tensor<?xf32>, %[[B:.+]]: tensor<12xf32>):
// CHECK-NOT: tensor.cast
// CHECK: linalg.generic {{.+}} ins(%[[A]], %[[B]] : tensor<?xf32>, tensor<12xf32>)
// CHECK-NOT: tensor.cast
// CHECK: kiln.yield
!dyn = tensor<?xf32, #kiln.device<cpu>>
!t = tensor<12xf32, #kiln.device<cpu>>
func.func @dynamic_one(%a: !dyn, %b: !t) -> !t {
  %s = kiln.add %a, %b : !dyn, !t -> !t
  %r = kiln.relu %s : !t -> !t
  return %r : !t
}

// An Expand of a `?` dim to a static 7 stays a copy in the kernel: the `?`
// may be 1 and broadcast, so linalg's EraseIdentityLinalgOp must not replace
// the copy by its input cast to 7.
// CHECK-LABEL: func.func @expand_dynamic
// CHECK-NOT: tensor.cast
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : tensor<?x17xi1>)
// CHECK-NOT: tensor.cast
// CHECK: kiln.yield
func.func @expand_dynamic(%a: tensor<?x17xi1, #kiln.device<cpu>>) -> tensor<7x17xi1, #kiln.device<cpu>> {
  %e = kiln.expand %a {shape = array<i64: 7, 1>} : tensor<?x17xi1, #kiln.device<cpu>> -> tensor<7x17xi1, #kiln.device<cpu>>
  return %e : tensor<7x17xi1, #kiln.device<cpu>>
}
