// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on elementwise ops, casts and broadcasting
// (passes/lowering/Elementwise.cpp).

!t = tensor<8x4xf32, #kiln.device<cpu>>

// An elementwise kernel becomes one linalg.generic on plain tensors, with the
// broadcast done by its indexing map and the splat folded into the body.
// CHECK-DAG: #[[ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @elementwise
// CHECK: kiln.kernel(%arg0, %arg1 : tensor<8x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>)
// CHECK: ^bb0(%[[X:.+]]: tensor<8x4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK-COUNT-1: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[B]] : tensor<8x4xf32>, tensor<4xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield %{{.+}} : tensor<8x4xf32>
func.func @elementwise(%x: !t, %b: tensor<4xf32, #kiln.device<cpu>>) -> !t {
  %k = kiln.kernel(%x, %b : !t, tensor<4xf32, #kiln.device<cpu>>) -> (!t) {
  ^bb0(%a: !t, %c: tensor<4xf32, #kiln.device<cpu>>):
    %half = kiln.constant dense<0.5> : tensor<f32> : tensor<f32, #kiln.device<cpu>>
    %s = kiln.add %a, %c : !t, tensor<4xf32, #kiln.device<cpu>> -> !t
    %r = kiln.relu %s : !t -> !t
    %m = kiln.mul %r, %half : !t, tensor<f32, #kiln.device<cpu>> -> !t
    kiln.yield %m : !t
  }
  return %k : !t
}

// -----

// A dynamic dim is sized at run time from the kernel's inputs: the empty
// result takes `tensor.dim` of the operand dynamic there.
// CHECK-LABEL: func.func @dynamic
// CHECK: ^bb0(%[[A:.+]]: tensor<?x4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK: %[[N:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<?x4xf32>
// CHECK: tensor.empty(%[[N]]) : tensor<?x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x4xf32>, tensor<4xf32>)
// CHECK: kiln.yield %{{.+}} : tensor<?x4xf32>
func.func @dynamic(%x: tensor<?x4xf32, #kiln.device<cpu>>, %y: tensor<4xf32, #kiln.device<cpu>>) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y : tensor<?x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4xf32, #kiln.device<cpu>>, %b: tensor<4xf32, #kiln.device<cpu>>):
    %s = kiln.add %a, %b : tensor<?x4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
    %r = kiln.relu %s : tensor<?x4xf32, #kiln.device<cpu>> -> tensor<?x4xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<?x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x4xf32, #kiln.device<cpu>>
}

// -----

// Unsigned integers: the body picks the unsigned arith ops (divui, cmpi ult,
// shrui with a saturating select), then the kernel level is signless.
// CHECK-LABEL: func.func @unsigned
// CHECK: ^bb0(%{{.+}}: tensor<4xi8>, %{{.+}}: tensor<4xi8>):
// CHECK: arith.divui
// CHECK: arith.cmpi uge
// CHECK: arith.shrui
// CHECK: arith.select
// CHECK: arith.cmpi ult
// CHECK: kiln.yield %{{.+}}, %{{.+}} : tensor<4xi8>, tensor<4xi1>
func.func @unsigned(%x: tensor<4xui8, #kiln.device<cpu>>, %y: tensor<4xui8, #kiln.device<cpu>>) -> (tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>) {
  %k:2 = kiln.kernel(%x, %y : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>>) -> (tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4xui8, #kiln.device<cpu>>, %b: tensor<4xui8, #kiln.device<cpu>>):
    %d = kiln.div %a, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xui8, #kiln.device<cpu>>
    %s = kiln.shift_right %d, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xui8, #kiln.device<cpu>>
    %l = kiln.less %a, %b : tensor<4xui8, #kiln.device<cpu>>, tensor<4xui8, #kiln.device<cpu>> -> tensor<4xi1, #kiln.device<cpu>>
    kiln.yield %s, %l : tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>
  }
  return %k#0, %k#1 : tensor<4xui8, #kiln.device<cpu>>, tensor<4xi1, #kiln.device<cpu>>
}

// -----

// Arithmetic on bfloat16 is done in f32, between the loads and the store.
// CHECK-LABEL: func.func @bf16_add
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.+]]: bf16, %[[B:.+]]: bf16, %{{.+}}: bf16):
// CHECK-DAG: %[[WA:.+]] = arith.extf %[[A]] : bf16 to f32
// CHECK-DAG: %[[WB:.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK: %[[S:.+]] = arith.addf %[[WA]], %[[WB]] : f32
// CHECK: %[[N:.+]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: linalg.yield %[[N]] : bf16
!b = tensor<8xbf16, #kiln.device<cpu>>
func.func @bf16_add(%x: !b, %y: !b) -> !b {
  %k = kiln.kernel(%x, %y : !b, !b) -> (!b) {
  ^bb0(%a: !b, %c: !b):
    %s = kiln.add %a, %c : !b, !b -> !b
    kiln.yield %s : !b
  }
  return %k : !b
}

// -----

// A cast to float8 without saturation marks its truncf; bfloat16 to float16
// (both 16 bits) goes through f32.
// CHECK-LABEL: func.func @narrow_casts
// CHECK: arith.truncf %{{.+}} {kiln.no_saturate} : f32 to f8E4M3FN
// CHECK: %[[W:.+]] = arith.extf %{{.+}} : bf16 to f32
// CHECK: arith.truncf %[[W]] : f32 to f16
!f = tensor<8xf32, #kiln.device<cpu>>
!b = tensor<8xbf16, #kiln.device<cpu>>
!e = tensor<8xf8E4M3FN, #kiln.device<cpu>>
!h = tensor<8xf16, #kiln.device<cpu>>
func.func @narrow_casts(%x: !f, %y: !b) -> (!e, !h) {
  %k:2 = kiln.kernel(%x, %y : !f, !b) -> (!e, !h) {
  ^bb0(%a: !f, %c: !b):
    %e = kiln.cast %a {to = f8E4M3FN, saturate = false} : !f -> !e
    %h = kiln.cast %c {to = f16} : !b -> !h
    kiln.yield %e, %h : !e, !h
  }
  return %k#0, %k#1 : !e, !h
}

// -----

// Sub-byte integers are held a value a byte (i8): a cast to uint4 wraps
// through i32 with a mask, one to int4 with a sign-extending shift pair.
// CHECK-LABEL: func.func @sub_byte_casts
// CHECK: ^bb0(%{{.+}}: tensor<8xi32>, %{{.+}}: tensor<8xi32>):
// CHECK-DAG: %[[M:.+]] = arith.constant 15 : i32
// CHECK-DAG: %[[SH:.+]] = arith.constant 28 : i32
// CHECK: arith.andi %{{.+}}, %[[M]] : i32
// CHECK: arith.trunci %{{.+}} : i32 to i8
// CHECK: %[[L:.+]] = arith.shli %{{.+}}, %[[SH]] : i32
// CHECK: arith.shrsi %[[L]], %[[SH]] : i32
// CHECK: kiln.yield %{{.+}}, %{{.+}} : tensor<8xi8>, tensor<8xi8>
!i = tensor<8xi32, #kiln.device<cpu>>
!u4 = tensor<8xui4, #kiln.device<cpu>>
!s4 = tensor<8xi4, #kiln.device<cpu>>
func.func @sub_byte_casts(%x: !i, %y: !i) -> (!u4, !s4) {
  %k:2 = kiln.kernel(%x, %y : !i, !i) -> (!u4, !s4) {
  ^bb0(%a: !i, %c: !i):
    %u = kiln.cast %a {to = ui4} : !i -> !u4
    %s = kiln.cast %c {to = i4} : !i -> !s4
    kiln.yield %u, %s : !u4, !s4
  }
  return %k#0, %k#1 : !u4, !s4
}

// -----

// A cast to bool is "not zero", never the low bit: 2 and 0.5 are true.
// CHECK-LABEL: func.func @bool_casts
// CHECK: arith.cmpi ne, %{{.+}}, %{{.+}} : i64
// CHECK: arith.cmpf une, %{{.+}}, %{{.+}} : f32
// CHECK-NOT: arith.trunci
// CHECK-NOT: arith.fptoui
// CHECK: kiln.yield
!l = tensor<4xi64, #kiln.device<cpu>>
!g = tensor<4xf32, #kiln.device<cpu>>
!z = tensor<4xi1, #kiln.device<cpu>>
func.func @bool_casts(%x: !l, %y: !g) -> (!z, !z) {
  %k:2 = kiln.kernel(%x, %y : !l, !g) -> (!z, !z) {
  ^bb0(%a: !l, %c: !g):
    %p = kiln.cast %a {to = i1} : !l -> !z
    %q = kiln.cast %c {to = i1} : !g -> !z
    kiln.yield %p, %q : !z, !z
  }
  return %k#0, %k#1 : !z, !z
}

// -----

// Two dynamic dims broadcast as `a == 1 ? b : a`, not as the larger (0
// against 1 is 0); a static size other than 1 is the size.
// CHECK-LABEL: func.func @broadcast_sizes
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[A:.+]] = tensor.dim %{{.+}}, %c0 : tensor<?x3xf32>
// CHECK-DAG: %[[B:.+]] = tensor.dim %{{.+}}, %c0 : tensor<?x1xf32>
// CHECK: %[[ONE:.+]] = arith.cmpi eq, %[[A]], %[[C1]] : index
// CHECK: %[[N:.+]] = arith.select %[[ONE]], %[[B]], %[[A]] : index
// CHECK-NOT: arith.maxsi
// CHECK: tensor.empty(%[[N]]) : tensor<?x3xf32>
!d3 = tensor<?x3xf32, #kiln.device<cpu>>
!d1 = tensor<?x1xf32, #kiln.device<cpu>>
func.func @broadcast_sizes(%x: !d3, %y: !d1) -> !d3 {
  %k = kiln.kernel(%x, %y : !d3, !d1) -> (!d3) {
  ^bb0(%a: !d3, %c: !d1):
    %s = kiln.add %a, %c : !d3, !d1 -> !d3
    kiln.yield %s : !d3
  }
  return %k : !d3
}
