// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on ops whose shapes come from data: expand_to, reshape_to,
// reduce_by, pad, slice_by, range (passes/lowering/DataShapes.cpp).

// A reshape inside a kernel needs static shapes (the importer turns reshapes
// of dims known only at run time into kiln.reshape_to).
func.func @dynamic_reshape(%x: tensor<?x1xf32, #kiln.device<cpu>>) -> tensor<?x1xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x1xf32, #kiln.device<cpu>>) -> (tensor<?x1xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x1xf32, #kiln.device<cpu>>):
    // expected-error @+1 {{'kiln.reshape' op has a dynamic shape, which its lowering cannot handle yet; bind the symbolic input dims at compile time (kilnc --input-shape NAME=D0xD1...)}}
    %c = kiln.reshape %a {shape = array<i64: -2, 1>} : tensor<?x1xf32, #kiln.device<cpu>> -> tensor<?x1xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<?x1xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x1xf32, #kiln.device<cpu>>
}

// -----

// A shape given as data: the result's sizes are read from it in the kernel
// (tensor.extract), broadcast with the input's dims (the entry, or the
// input's dim where the entry is 1: here the input's 1 folds away); the
// entries the input's dims must broadcast with are asserted; the input is
// read through computed indices (0 along its size-1 dims).
// CHECK-LABEL: func.func @expand_to
// CHECK: ^bb0(%[[X:.+]]: tensor<1x3xf32>, %[[S:.+]]: tensor<2xi64>):
// CHECK: %[[E:.+]] = tensor.extract %[[S]][%{{.+}}] : tensor<2xi64>
// CHECK: %[[N:.+]] = arith.index_cast %[[E]] : i64 to index
// CHECK: %[[OUT:.+]] = tensor.empty(%[[N]]) : tensor<?x3xf32>
// CHECK: cf.assert %{{.+}}, "expand: input dim 1 and shape entry 1 do not broadcast"
// CHECK: linalg.generic {{.*}} outs(%[[OUT]] : tensor<?x3xf32>)
// CHECK: tensor.extract %[[X]][%{{.+}}, %{{.+}}] : tensor<1x3xf32>
func.func @expand_to(%x: tensor<1x3xf32, #kiln.device<cpu>>, %s: tensor<2xi64, #kiln.device<cpu>>) -> tensor<?x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %s : tensor<1x3xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>>) -> (tensor<?x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x3xf32, #kiln.device<cpu>>, %b: tensor<2xi64, #kiln.device<cpu>>):
    %e = kiln.expand_to %a, %b : tensor<1x3xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
    kiln.yield %e : tensor<?x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x3xf32, #kiln.device<cpu>>
}

// -----

// Axes given as data: one generic per dim folds it to size 1 when it is an
// axis (a reduction loop sized by a window operand, the input read at
// d_i + k), then without keepdims a copy drops the folded dims.
// CHECK-DAG: #[[IN0:.+]] = affine_map<(d0, d1, d2) -> (d0 + d2, d1)>
// CHECK-DAG: #[[IN1:.+]] = affine_map<(d0, d1, d2) -> (d0, d1 + d2)>
// CHECK-DAG: #[[WIN:.+]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @reduce_by
// CHECK: linalg.generic {indexing_maps = [#[[IN0]], #[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[IN1]], #[[WIN]], {{.+}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: linalg.generic
// CHECK: tensor.extract
// CHECK: kiln.yield %{{.+}} : tensor<?xf32>
func.func @reduce_by(%x: tensor<2x3xf32, #kiln.device<cpu>>, %axes: tensor<1xi64, #kiln.device<cpu>>) -> tensor<?xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %axes : tensor<2x3xf32, #kiln.device<cpu>>, tensor<1xi64, #kiln.device<cpu>>) -> (tensor<?xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<1xi64, #kiln.device<cpu>>):
    %r = kiln.reduce_by %a, %b {kind = "sum", keepdims = false} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<1xi64, #kiln.device<cpu>> -> tensor<?xf32, #kiln.device<cpu>>
    kiln.yield %r : tensor<?xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?xf32, #kiln.device<cpu>>
}

// -----

// A constant pad: one generic over the output; each element reads the input
// at its index less the leading pad (clamped, so the read stays inside)
// and selects the pad value where that index falls outside the input.
// CHECK-LABEL: func.func @pad_constant
// CHECK: %[[VALUE:.+]] = tensor.extract %{{.+}}[] : tensor<f32>
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<3x6xf32>)
// CHECK: arith.subi
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: %[[IN:.+]] = tensor.extract %{{.+}} : tensor<2x3xf32>
// CHECK: arith.select %{{.+}}, %[[IN]], %[[VALUE]] : f32
func.func @pad_constant(%x: tensor<2x3xf32, #kiln.device<cpu>>, %p: tensor<4xi64, #kiln.device<cpu>>, %v: tensor<f32, #kiln.device<cpu>>) -> tensor<3x6xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %p, %v : tensor<2x3xf32, #kiln.device<cpu>>, tensor<4xi64, #kiln.device<cpu>>, tensor<f32, #kiln.device<cpu>>) -> (tensor<3x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<4xi64, #kiln.device<cpu>>, %c: tensor<f32, #kiln.device<cpu>>):
    %y = kiln.pad %a, %b value %c {mode = "constant"} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<4xi64, #kiln.device<cpu>>, tensor<f32, #kiln.device<cpu>> -> tensor<3x6xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<3x6xf32, #kiln.device<cpu>>
  }
  return %k : tensor<3x6xf32, #kiln.device<cpu>>
}

// -----

// A reflect pad mirrors an index outside the input back inside it (2 - i
// past the end of a dim of 2, -i before its start): selects, no pad value.
// CHECK-LABEL: func.func @pad_reflect
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<2x6xf32>)
// CHECK: arith.cmpi sgt
// CHECK: arith.select
// CHECK: arith.cmpi slt
// CHECK: arith.select
// CHECK: %[[IN:.+]] = tensor.extract %{{.+}} : tensor<2x4xf32>
// CHECK-NEXT: linalg.yield %[[IN]] : f32
func.func @pad_reflect(%x: tensor<2x4xf32, #kiln.device<cpu>>, %p: tensor<4xi64, #kiln.device<cpu>>) -> tensor<2x6xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %p : tensor<2x4xf32, #kiln.device<cpu>>, tensor<4xi64, #kiln.device<cpu>>) -> (tensor<2x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x4xf32, #kiln.device<cpu>>, %b: tensor<4xi64, #kiln.device<cpu>>):
    %y = kiln.pad %a, %b {mode = "reflect"} : tensor<2x4xf32, #kiln.device<cpu>>, tensor<4xi64, #kiln.device<cpu>> -> tensor<2x6xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<2x6xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x6xf32, #kiln.device<cpu>>
}

// -----

// Range's length, ceil((limit - start) / delta) at least 0, is computed in
// the kernel and sizes its result; element i is start + i * delta.
// CHECK-LABEL: func.func @range
// CHECK: %[[START:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK: %[[LIMIT:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK: %[[DELTA:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK: arith.subi %[[LIMIT]], %[[START]] : i64
// CHECK: arith.divsi
// CHECK: %[[N:.+]] = arith.maxsi
// CHECK: tensor.empty(%[[N]]) : tensor<?xi64>
// CHECK: linalg.index 0
// CHECK: %[[STEP:.+]] = arith.muli %{{.+}}, %[[DELTA]] : i64
// CHECK: arith.addi %[[START]], %[[STEP]] : i64
func.func @range(%s: tensor<i64, #kiln.device<cpu>>, %l: tensor<i64, #kiln.device<cpu>>, %d: tensor<i64, #kiln.device<cpu>>) -> tensor<?xi64, #kiln.device<cpu>> {
  %k = kiln.kernel(%s, %l, %d : tensor<i64, #kiln.device<cpu>>, tensor<i64, #kiln.device<cpu>>, tensor<i64, #kiln.device<cpu>>) -> (tensor<?xi64, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<i64, #kiln.device<cpu>>, %b: tensor<i64, #kiln.device<cpu>>, %c: tensor<i64, #kiln.device<cpu>>):
    %y = kiln.range %a, %b, %c : tensor<i64, #kiln.device<cpu>>, tensor<i64, #kiln.device<cpu>>, tensor<i64, #kiln.device<cpu>> -> tensor<?xi64, #kiln.device<cpu>>
    kiln.yield %y : tensor<?xi64, #kiln.device<cpu>>
  }
  return %k : tensor<?xi64, #kiln.device<cpu>>
}
