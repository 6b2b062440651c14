// RUN: kiln-opt %s --kiln-lower-kernels --split-input-file --verify-diagnostics | FileCheck %s

// kiln-lower-kernels on transpose, gather, gather_elements, slice, concat
// (passes/lowering/Movement.cpp).

// gather reads the indices through a map and the data through tensor.extract
// at the wrapped, clamped index; the transpose after it fuses in, becoming a
// permuted map on the indices: one generic.
// CHECK-DAG: #[[IDX:.+]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-LABEL: func.func @movement
// CHECK: linalg.generic {indexing_maps = [#[[IDX]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<2x5xi64>) outs(%{{.+}} : tensor<5x2x8xf32>)
// CHECK:   arith.index_cast
// CHECK:   arith.select
// CHECK:   tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<100x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield
func.func @movement(%ids: tensor<2x5xi64, #kiln.device<cpu>>, %table: tensor<100x8xf32, #kiln.device<cpu>>) -> tensor<5x2x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%ids, %table : tensor<2x5xi64, #kiln.device<cpu>>, tensor<100x8xf32, #kiln.device<cpu>>) -> (tensor<5x2x8xf32, #kiln.device<cpu>>) {
  ^bb0(%i: tensor<2x5xi64, #kiln.device<cpu>>, %t: tensor<100x8xf32, #kiln.device<cpu>>):
    %e = kiln.gather %t, %i {axis = 0 : i64} : tensor<100x8xf32, #kiln.device<cpu>>, tensor<2x5xi64, #kiln.device<cpu>> -> tensor<2x5x8xf32, #kiln.device<cpu>>
    %p = kiln.transpose %e {perm = array<i64: 1, 0, 2>} : tensor<2x5x8xf32, #kiln.device<cpu>> -> tensor<5x2x8xf32, #kiln.device<cpu>>
    kiln.yield %p : tensor<5x2x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<5x2x8xf32, #kiln.device<cpu>>
}

// -----

// concat with dims known only at run time: each non-axis dim an input does
// not share statically with the first gets a cf.assert, which the kernel's
// dims function checks before the reads (indexed with the first input's
// sizes) can leave a smaller input.
// CHECK-LABEL: func.func @concat_dynamic
// CHECK: %[[D1:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<2x?xf32>
// CHECK: %[[SAME:.+]] = arith.cmpi eq, %[[D1]], %{{.+}} : index
// CHECK: cf.assert %[[SAME]], "concat inputs 0 and 1 differ in dim 1 (only the axis, 0, may differ)"
// CHECK-NOT: cf.assert
// CHECK: linalg.generic
func.func @concat_dynamic(%x: tensor<?x3xf32, #kiln.device<cpu>>, %y: tensor<2x?xf32, #kiln.device<cpu>>) -> tensor<?x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y : tensor<?x3xf32, #kiln.device<cpu>>, tensor<2x?xf32, #kiln.device<cpu>>) -> (tensor<?x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x3xf32, #kiln.device<cpu>>, %b: tensor<2x?xf32, #kiln.device<cpu>>):
    %c = kiln.concat %a, %b {axis = 0 : i64} : tensor<?x3xf32, #kiln.device<cpu>>, tensor<2x?xf32, #kiln.device<cpu>> -> tensor<?x3xf32, #kiln.device<cpu>>
    kiln.yield %c : tensor<?x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x3xf32, #kiln.device<cpu>>
}

// -----

// gather along an axis that may be empty at run time: no index is in range
// there and the clamped read would leave the tensor, so the kernel asserts
// that the axis has elements or the result has none.
// CHECK-LABEL: func.func @gather_dynamic_axis
// CHECK: %[[N:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<?x8xf32>
// CHECK: %[[HAS:.+]] = arith.cmpi ne, %[[N]], %{{.+}} : index
// CHECK: %[[OK:.+]] = arith.ori %[[HAS]], %{{.+}} : i1
// CHECK: cf.assert %[[OK]], "gathers along axis 0, which is empty, at indices it cannot have"
// CHECK: linalg.generic
func.func @gather_dynamic_axis(%t: tensor<?x8xf32, #kiln.device<cpu>>, %ids: tensor<?xi64, #kiln.device<cpu>>) -> tensor<?x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%t, %ids : tensor<?x8xf32, #kiln.device<cpu>>, tensor<?xi64, #kiln.device<cpu>>) -> (tensor<?x8xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x8xf32, #kiln.device<cpu>>, %i: tensor<?xi64, #kiln.device<cpu>>):
    %g = kiln.gather %a, %i {axis = 0 : i64} : tensor<?x8xf32, #kiln.device<cpu>>, tensor<?xi64, #kiln.device<cpu>> -> tensor<?x8xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x8xf32, #kiln.device<cpu>>
}

// -----

// A strided slice reads input column 3 j + 1 for output column j.
// CHECK-LABEL: func.func @slice_strided
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<4x3xf32>)
// CHECK: %[[ROW:.+]] = linalg.index 0
// CHECK: %[[COL:.+]] = linalg.index 1
// CHECK: %[[SCALED:.+]] = arith.muli %[[COL]], %c3
// CHECK: %[[AT:.+]] = arith.addi %[[SCALED]], %c1
// CHECK: tensor.extract %{{.+}}[%[[ROW]], %[[AT]]] : tensor<4x10xf32>
func.func @slice_strided(%x: tensor<4x10xf32, #kiln.device<cpu>>) -> tensor<4x3xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<4x10xf32, #kiln.device<cpu>>) -> (tensor<4x3xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4x10xf32, #kiln.device<cpu>>):
    %y = kiln.slice %a {sizes = array<i64: 4, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 3>} : tensor<4x10xf32, #kiln.device<cpu>> -> tensor<4x3xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<4x3xf32, #kiln.device<cpu>>
  }
  return %k : tensor<4x3xf32, #kiln.device<cpu>>
}

// -----

// Concat along axis 1 of known lengths: each input is inserted into its
// slice of the result (columns 0-2, then 3-7), with no generic.
// CHECK-LABEL: func.func @concat
// CHECK: %[[EMPTY:.+]] = tensor.empty() : tensor<2x8xf32>
// CHECK: %[[FIRST:.+]] = tensor.insert_slice %{{.+}} into %[[EMPTY]][0, 0] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x8xf32>
// CHECK: %[[BOTH:.+]] = tensor.insert_slice %{{.+}} into %[[FIRST]][0, 3] [2, 5] [1, 1] : tensor<2x5xf32> into tensor<2x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: kiln.yield %[[BOTH]]
func.func @concat(%x: tensor<2x3xf32, #kiln.device<cpu>>, %z: tensor<2x5xf32, #kiln.device<cpu>>) -> tensor<2x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %z : tensor<2x3xf32, #kiln.device<cpu>>, tensor<2x5xf32, #kiln.device<cpu>>) -> (tensor<2x8xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<2x5xf32, #kiln.device<cpu>>):
    %y = kiln.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<2x5xf32, #kiln.device<cpu>> -> tensor<2x8xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<2x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<2x8xf32, #kiln.device<cpu>>
}

// -----

// With a symbolic batch the inserts take its size from the input; an
// input empty along the axis is left out.
// CHECK-LABEL: func.func @concat_batch
// CHECK: tensor.empty
// CHECK: %[[N:.+]] = tensor.dim %[[A:.+]], %c0 : tensor<?x3xf32>
// CHECK-NEXT: %[[FIRST:.+]] = tensor.insert_slice %[[A]] into %{{.+}}[0, 0] [%[[N]], 3] [1, 1] : tensor<?x3xf32> into tensor<?x8xf32>
// CHECK-NOT: tensor<?x0xf32> into
// CHECK: tensor.insert_slice %{{.+}} into %[[FIRST]][0, 3] [%{{.+}}, 5] [1, 1] : tensor<?x5xf32> into tensor<?x8xf32>
// CHECK-NOT: linalg.generic
func.func @concat_batch(%x: tensor<?x3xf32, #kiln.device<cpu>>, %e: tensor<?x0xf32, #kiln.device<cpu>>, %z: tensor<?x5xf32, #kiln.device<cpu>>) -> tensor<?x8xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %e, %z : tensor<?x3xf32, #kiln.device<cpu>>, tensor<?x0xf32, #kiln.device<cpu>>, tensor<?x5xf32, #kiln.device<cpu>>) -> (tensor<?x8xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x3xf32, #kiln.device<cpu>>, %n: tensor<?x0xf32, #kiln.device<cpu>>, %b: tensor<?x5xf32, #kiln.device<cpu>>):
    %y = kiln.concat %a, %n, %b {axis = 1 : i64} : tensor<?x3xf32, #kiln.device<cpu>>, tensor<?x0xf32, #kiln.device<cpu>>, tensor<?x5xf32, #kiln.device<cpu>> -> tensor<?x8xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<?x8xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x8xf32, #kiln.device<cpu>>
}

// -----

// GatherElements on axis 1: a generic over the indices; a negative index
// counts from the end (+ 4), then is clamped into the axis.
// CHECK-LABEL: func.func @gather_elements
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : tensor<3x2xi64>) outs(%{{.+}} : tensor<3x2xf32>)
// CHECK: ^bb0(%[[I:.+]]: i64, %{{.+}}: f32):
// CHECK: %[[IDX:.+]] = arith.index_cast %[[I]] : i64 to index
// CHECK: arith.cmpi slt, %[[IDX]], %c0
// CHECK: arith.addi %[[IDX]], %c4
// CHECK: %[[ROW:.+]] = linalg.index 0
// CHECK: tensor.extract %{{.+}}[%[[ROW]], %{{.+}}] : tensor<3x4xf32>
func.func @gather_elements(%x: tensor<3x4xf32, #kiln.device<cpu>>, %i: tensor<3x2xi64, #kiln.device<cpu>>) -> tensor<3x2xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %i : tensor<3x4xf32, #kiln.device<cpu>>, tensor<3x2xi64, #kiln.device<cpu>>) -> (tensor<3x2xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<3x4xf32, #kiln.device<cpu>>, %b: tensor<3x2xi64, #kiln.device<cpu>>):
    %y = kiln.gather_elements %a, %b {axis = 1 : i64} : tensor<3x4xf32, #kiln.device<cpu>>, tensor<3x2xi64, #kiln.device<cpu>> -> tensor<3x2xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<3x2xf32, #kiln.device<cpu>>
  }
  return %k : tensor<3x2xf32, #kiln.device<cpu>>
}

// -----

// Transpose is a copy through a permuted indexing map.
// CHECK-DAG: #[[PERM:.+]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-LABEL: func.func @transpose
// CHECK: linalg.generic {indexing_maps = [#[[PERM]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<2x3x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
func.func @transpose(%x: tensor<2x3x4xf32, #kiln.device<cpu>>) -> tensor<3x2x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<2x3x4xf32, #kiln.device<cpu>>) -> (tensor<3x2x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<2x3x4xf32, #kiln.device<cpu>>):
    %y = kiln.transpose %a {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32, #kiln.device<cpu>> -> tensor<3x2x4xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<3x2x4xf32, #kiln.device<cpu>>
  }
  return %k : tensor<3x2x4xf32, #kiln.device<cpu>>
}
