// RUN: kiln-opt %s --canonicalize --cse --split-input-file | FileCheck %s

// A copy to the device a value is already on disappears.
// CHECK-LABEL: func.func @same_device_copy
// CHECK-NEXT: return %arg0
func.func @same_device_copy(%x: tensor<4xf32, #kiln.device<cpu>>) -> tensor<4xf32, #kiln.device<cpu>> {
  %0 = kiln.copy %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  return %0 : tensor<4xf32, #kiln.device<cpu>>
}

// -----

// A round trip through another device disappears too.
// CHECK-LABEL: func.func @round_trip
// CHECK-NEXT: return %arg0
func.func @round_trip(%x: tensor<4xf32, #kiln.device<cpu>>) -> tensor<4xf32, #kiln.device<cpu>> {
  %0 = kiln.copy %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cuda:0>>
  %1 = kiln.copy %0 : tensor<4xf32, #kiln.device<cuda:0>> -> tensor<4xf32, #kiln.device<cpu>>
  return %1 : tensor<4xf32, #kiln.device<cpu>>
}

// -----

// A real move stays.
// CHECK-LABEL: func.func @real_copy
// CHECK: kiln.copy
func.func @real_copy(%x: tensor<4xf32, #kiln.device<cpu>>) -> tensor<4xf32, #kiln.device<cuda:0>> {
  %0 = kiln.copy %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cuda:0>>
  return %0 : tensor<4xf32, #kiln.device<cuda:0>>
}

// -----

// gemm with a constant B and trans_b: B is transposed once, at compile time.
// CHECK-LABEL: func.func @fold_trans_b
// CHECK: %[[BT:.+]] = kiln.constant dense<{{\[\[}}1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32> : tensor<2x3xf32, #kiln.device<cpu>>
// CHECK: kiln.gemm %arg0, %[[BT]] :
// CHECK-NOT: trans_b
func.func @fold_trans_b(%x: tensor<4x2xf32, #kiln.device<cpu>>) -> tensor<4x3xf32, #kiln.device<cpu>> {
  %b = kiln.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32> : tensor<3x2xf32, #kiln.device<cpu>>
  %0 = kiln.gemm %x, %b {trans_b = true} : tensor<4x2xf32, #kiln.device<cpu>>, tensor<3x2xf32, #kiln.device<cpu>> -> tensor<4x3xf32, #kiln.device<cpu>>
  return %0 : tensor<4x3xf32, #kiln.device<cpu>>
}

// -----

// CSE-able duplicates merge (the ops are Pure).
// CHECK-LABEL: func.func @duplicates
// CHECK-COUNT-1: kiln.relu
// CHECK-NOT: kiln.relu
func.func @duplicates(%x: tensor<4xf32, #kiln.device<cpu>>) -> (tensor<4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>) {
  %0 = kiln.relu %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  %1 = kiln.relu %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  return %0, %1 : tensor<4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cpu>>
}

// -----

// Reshape chains collapse; a reshape to the same shape disappears.
// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT: %[[R:.+]] = kiln.reshape %arg0 {shape = array<i64: 6>} : tensor<2x3xf32, #kiln.device<cpu>> -> tensor<6xf32, #kiln.device<cpu>>
// CHECK-NEXT: return %[[R]], %arg0
func.func @reshapes(%x: tensor<2x3xf32, #kiln.device<cpu>>) -> (tensor<6xf32, #kiln.device<cpu>>, tensor<2x3xf32, #kiln.device<cpu>>) {
  %0 = kiln.reshape %x {shape = array<i64: 3, 2>} : tensor<2x3xf32, #kiln.device<cpu>> -> tensor<3x2xf32, #kiln.device<cpu>>
  %1 = kiln.reshape %0 {shape = array<i64: -1>} : tensor<3x2xf32, #kiln.device<cpu>> -> tensor<6xf32, #kiln.device<cpu>>
  %2 = kiln.reshape %x {shape = array<i64: -2, 3>} : tensor<2x3xf32, #kiln.device<cpu>> -> tensor<2x3xf32, #kiln.device<cpu>>
  return %1, %2 : tensor<6xf32, #kiln.device<cpu>>, tensor<2x3xf32, #kiln.device<cpu>>
}
