// RUN: kiln-opt %s --kiln-place-data="devices=sim:0,sim:1" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-place-data="devices=sim:0,sim:1 output-device=cpu" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=OUT

!full = tensor<5x4xf32, #kiln.device<sim:0>>
!w = tensor<4x4xf32, #kiln.device<sim:0>>

// A batch of 5 over two devices splits like torch.chunk: 3 + 2. Both chunks
// are sliced first (the scatter), then each replica runs on its device, and
// the outputs are concatenated on the first device (or --output-device).
// The weight, equal in both specialisations, is kept once; the chunk
// functions are gone.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[S0:.+]] = kiln.slice %arg0 {sizes = array<i64: 3, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<5x4xf32, #kiln.device<sim:0>> -> tensor<3x4xf32, #kiln.device<sim:0>>
// CHECK-NEXT: %[[S1:.+]] = kiln.slice %arg0 {sizes = array<i64: 2, 4>, starts = array<i64: 3, 0>, steps = array<i64: 1, 1>}
// CHECK-NEXT: %[[W:.+]] = kiln.constant
// CHECK-NOT: kiln.constant
// CHECK: %[[G0:.+]] = kiln.gemm %[[S0]], %[[W]] {kiln.place = #kiln.device<sim:0>}
// CHECK: %[[R0:.+]] = kiln.relu %[[G0]] {kiln.place = #kiln.device<sim:0>}
// CHECK: %[[G1:.+]] = kiln.gemm %[[S1]], %[[W]] {kiln.place = #kiln.device<sim:1>}
// CHECK: %[[R1:.+]] = kiln.relu %[[G1]] {kiln.place = #kiln.device<sim:1>}
// CHECK: %[[C:.+]] = kiln.concat %[[R0]], %[[R1]] {axis = 0 : i64, kiln.place = #kiln.device<sim:0>}
// CHECK: return %[[C]]
// CHECK-NOT: main_chunk
// OUT: kiln.concat {{.*}}kiln.place = #kiln.device<cpu>
func.func @main(%x: !full {kiln.name = "x"}) -> !full {
  %w = kiln.constant dense<1.0> : tensor<4x4xf32> : !w
  %0 = kiln.gemm %x, %w : !full, !w -> !full
  %1 = kiln.relu %0 : !full -> !full
  return %1 : !full
}
func.func private @main_chunk_3(%x: tensor<3x4xf32, #kiln.device<sim:0>> {kiln.name = "x"}) -> tensor<3x4xf32, #kiln.device<sim:0>> {
  %w = kiln.constant dense<1.0> : tensor<4x4xf32> : !w
  %0 = kiln.gemm %x, %w : tensor<3x4xf32, #kiln.device<sim:0>>, !w -> tensor<3x4xf32, #kiln.device<sim:0>>
  %1 = kiln.relu %0 : tensor<3x4xf32, #kiln.device<sim:0>> -> tensor<3x4xf32, #kiln.device<sim:0>>
  return %1 : tensor<3x4xf32, #kiln.device<sim:0>>
}
func.func private @main_chunk_2(%x: tensor<2x4xf32, #kiln.device<sim:0>> {kiln.name = "x"}) -> tensor<2x4xf32, #kiln.device<sim:0>> {
  %w = kiln.constant dense<1.0> : tensor<4x4xf32> : !w
  %0 = kiln.gemm %x, %w : tensor<2x4xf32, #kiln.device<sim:0>>, !w -> tensor<2x4xf32, #kiln.device<sim:0>>
  %1 = kiln.relu %0 : tensor<2x4xf32, #kiln.device<sim:0>> -> tensor<2x4xf32, #kiln.device<sim:0>>
  return %1 : tensor<2x4xf32, #kiln.device<sim:0>>
}

// -----

!full = tensor<4x2xf32, #kiln.device<cpu>>

// The specialisation for a chunk size is missing.
// expected-error @+1 {{chunked placement needs @main_chunk_2, the model specialised for a batch of 2}}
func.func @main(%x: !full {kiln.name = "x"}) -> !full {
  return %x : !full
}

// -----

!full = tensor<4x2xf32, #kiln.device<cpu>>
!s = tensor<f32, #kiln.device<cpu>>

// An output without the batch dim cannot be gathered.
// expected-error @+1 {{output #0 of type 'tensor<f32, #kiln.device<cpu>>' has no batch dim 0 to gather the replicas along}}
func.func @main(%x: !full {kiln.name = "x"}) -> !s {
  %0 = kiln.reduce %x {axes = array<i64: 0, 1>, keepdims = false, kind = "sum"} : !full -> !s
  return %0 : !s
}
func.func private @main_chunk_2(%x: tensor<2x2xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> !s {
  %0 = kiln.reduce %x {axes = array<i64: 0, 1>, keepdims = false, kind = "sum"} : tensor<2x2xf32, #kiln.device<cpu>> -> !s
  return %0 : !s
}
