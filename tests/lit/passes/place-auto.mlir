// RUN: kiln-opt %s --kiln-place-auto="devices=cpu,cuda:0" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-place-auto="devices=cpu,sim:0" --split-input-file | FileCheck %s --check-prefix=SIM
// RUN: echo '{"capacity_bytes": 1000000}' > %t.small.json
// RUN: kiln-opt %s --kiln-place-auto="devices=cpu,cuda:0 profiles=cuda:0=%t.small.json" --split-input-file | FileCheck %s --check-prefix=SMALL
// RUN: not kiln-opt %s --kiln-place-auto="devices=cpu,cuda:0 output-device=sim:3" --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD-OUT

// BAD-OUT: output device 'sim:3' is not among the devices in use

!x = tensor<512x1024xf32, #kiln.device<cpu>>
!w = tensor<1024x1024xf32, #kiln.device<cpu>>

// A large GEMM chain (2 GFLOP): on an H200 it takes microseconds where the
// cpu takes about 60 ms, so it moves there, and the relu between the two
// GEMMs follows rather than pay two transfers. On a sim device (computes like
// the host, plus transfers) nothing moves. A cuda device too small for the
// 8 MiB of weights gets nothing either.
// CHECK-LABEL: func.func @big
// CHECK: kiln.gemm {{.*}}kiln.place = #kiln.device<cuda:0>
// CHECK: kiln.relu {{.*}}kiln.place = #kiln.device<cuda:0>
// CHECK: kiln.gemm {{.*}}kiln.place = #kiln.device<cuda:0>
// SIM-LABEL: func.func @big
// SIM-NOT: kiln.device<sim:0>
// SIM: return
// SMALL-LABEL: func.func @big
// SMALL-NOT: kiln.device<cuda:0>
// SMALL: return
// expected-remark @+1 {{auto placement: estimated latency}}
func.func @big(%x: !x) -> !x {
  %w = kiln.constant dense<1.0> : tensor<1024x1024xf32> : !w
  %w2 = kiln.constant dense<2.0> : tensor<1024x1024xf32> : !w
  %0 = kiln.gemm %x, %w : !x, !w -> !x
  %1 = kiln.relu %0 : !x -> !x
  %2 = kiln.gemm %1, %w2 : !x, !w -> !x
  return %2 : !x
}

// -----

!s = tensor<16xf32, #kiln.device<cpu>>

// Tiny work: a launch and two transfers cost more than the cpu's few
// nanoseconds, so it stays; a pinned op stays where its pin says.
// CHECK-LABEL: func.func @tiny
// CHECK: kiln.add {{.*}}kiln.place = #kiln.device<cpu>
// CHECK: kiln.exp {{.*}}kiln.place = #kiln.device<sim:5>
// CHECK: kiln.mul {{.*}}kiln.place = #kiln.device<cpu>
// expected-remark @+1 {{auto placement: estimated latency}}
func.func @tiny(%x: !s) -> !s {
  %0 = kiln.add %x, %x : !s, !s -> !s
  %1 = kiln.exp %0 {kiln.place = #kiln.device<sim:5>} : !s -> !s
  %2 = kiln.mul %1, %1 : !s, !s -> !s
  return %2 : !s
}
