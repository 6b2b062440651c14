// RUN: kiln-opt %s --kiln-place-pipeline="devices=sim:0,sim:1 microbatches=2" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: echo '{"capacity_bytes": 100}' > %t.tiny.json
// RUN: not kiln-opt %s --kiln-place-pipeline="devices=sim:0,sim:1 microbatches=2 profiles=sim:0=%t.tiny.json,sim:1=%t.tiny.json" --split-input-file 2>&1 | FileCheck %s --check-prefix=TINY

// TINY: error: no split into 2 pipeline stages fits the devices' capacities and op support

!full = tensor<4x64xf32, #kiln.device<sim:0>>
!c = tensor<2x64xf32, #kiln.device<sim:0>>
!w = tensor<64x64xf32, #kiln.device<sim:0>>

// Four equal GEMMs over two devices: two stages of two, the slowest stage
// as fast as it can be. Two micro-batches of 2 (torch.chunk of 4) flow
// through them: both slices first, then micro-batch 0 through both stages,
// then micro-batch 1; outputs are gathered on the first device.
// CHECK-LABEL: func.func @main
// CHECK: kiln.slice %arg0 {sizes = array<i64: 2, 64>, starts = array<i64: 0, 0>
// CHECK: kiln.slice %arg0 {sizes = array<i64: 2, 64>, starts = array<i64: 2, 0>
// CHECK-COUNT-2: kiln.gemm {{.*}}kiln.place = #kiln.device<sim:0>
// CHECK-COUNT-2: kiln.gemm {{.*}}kiln.place = #kiln.device<sim:1>
// CHECK-COUNT-2: kiln.gemm {{.*}}kiln.place = #kiln.device<sim:0>
// CHECK-COUNT-2: kiln.gemm {{.*}}kiln.place = #kiln.device<sim:1>
// CHECK: kiln.concat {{.*}}kiln.place = #kiln.device<sim:0>
// expected-remark @+1 {{pipeline stages for micro-batches of 2: sim:0: 2 ops from #0}}
func.func @main(%x: !full {kiln.name = "x"}) -> !full {
  return %x : !full
}
func.func private @main_chunk_2(%x: !c {kiln.name = "x"}) -> !c {
  %w = kiln.constant dense<1.0> : tensor<64x64xf32> : !w
  %0 = kiln.gemm %x, %w : !c, !w -> !c
  %1 = kiln.gemm %0, %w : !c, !w -> !c
  %2 = kiln.gemm %1, %w : !c, !w -> !c
  %3 = kiln.gemm %2, %w : !c, !w -> !c
  return %3 : !c
}
