// RUN: echo '{"unsupported_ops": ["conv", "kiln.gather"]}' > %t.sim.json
// RUN: kiln-opt %s --kiln-place-fallback="devices=cpu,sim:0 profiles=sim:0=%t.sim.json" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: echo '{"ops": ["relu"]}' > %t.only-relu.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-fallback="devices=sim:0 profiles=sim:0=%t.only-relu.json" 2>&1 | FileCheck %s --check-prefix=NOWHERE
// RUN: echo '{"peak_gflops": "fast"}' > %t.bad.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-fallback="devices=cpu,sim:0 profiles=sim:0=%t.bad.json" 2>&1 | FileCheck %s --check-prefix=BAD-PROFILE
// RUN: echo '{"capacity_bytes": 1e300}' > %t.huge.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-fallback="devices=cpu,sim:0 profiles=sim:0=%t.huge.json" 2>&1 | FileCheck %s --check-prefix=HUGE-CAPACITY
// RUN: echo '{"launch_us": 1e999}' > %t.inf.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-fallback="devices=cpu,sim:0 profiles=sim:0=%t.inf.json" 2>&1 | FileCheck %s --check-prefix=INFINITE

// RUN: kiln-opt %s --split-input-file --kiln-place-fallback="devices=cuda:0,cpu" 2>&1 | FileCheck %s --check-prefix=CUDA-CPU
// RUN: not kiln-opt %s --split-input-file --kiln-place-fallback="devices=cuda:0" 2>&1 | FileCheck %s --check-prefix=CUDA-ONLY

// NOWHERE: error: 'kiln.conv' op cannot run on sim:0, nor on any other device in use (sim:0)
// BAD-PROFILE: error: device profile '{{.*}}': 'peak_gflops' must be a non-negative finite number
// HUGE-CAPACITY: error: device profile '{{.*}}': 'capacity_bytes' is more than 2^64
// INFINITE: error: device profile '{{.*}}' is not valid JSON (or holds a number out of double's range)

!in = tensor<1x3x8x8xf32, #kiln.device<sim:0>>
!w = tensor<4x3x3x3xf32, #kiln.device<sim:0>>
!out = tensor<1x4x6x6xf32, #kiln.device<sim:0>>

// sim:0 cannot run conv (its profile says so): it falls back to the first
// device that can, and the move is reported. The relu stays.
// CHECK-LABEL: func.func @unsupported
// CHECK: kiln.conv {{.*}}kiln.place = #kiln.device<cpu>
// CHECK: kiln.relu
// CHECK-NOT: kiln.place
// CHECK-SAME: -> tensor<1x4x6x6xf32, #kiln.device<sim:0>>
func.func @unsupported(%x: !in, %w: !w) -> !out {
  // expected-remark @+1 {{sim:0 cannot run kiln.conv: placed on cpu}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : !in, !w -> !out
  %1 = kiln.relu %0 : !out -> !out
  return %1 : !out
}

// -----

!i = tensor<2xi64, #kiln.device<sim:0>>
!f = tensor<2xf32, #kiln.device<sim:0>>

// Small integer-only computations are shape arithmetic and go to the host;
// float work of the same size stays. A kiln.place from a pin counts as the
// op's device.
// CHECK-LABEL: func.func @shape_arithmetic
// CHECK: kiln.add %arg0, %arg0 {kiln.place = #kiln.device<cpu>}
// CHECK: kiln.mul %arg0, %arg0 {kiln.place = #kiln.device<cpu>}
// CHECK: kiln.add %arg1, %arg1 :
func.func @shape_arithmetic(%i: !i, %f: !f) -> (!i, !i, !f) {
  // expected-remark @+1 {{shape arithmetic stays on the host: placed on cpu instead of sim:0}}
  %0 = kiln.add %i, %i : !i, !i -> !i
  // expected-remark @+1 {{shape arithmetic stays on the host: placed on cpu instead of sim:0}}
  %1 = kiln.mul %i, %i {kiln.place = #kiln.device<sim:0>} : !i, !i -> !i
  %2 = kiln.add %f, %f : !f, !f -> !f
  return %0, %1, %2 : !i, !i, !f
}

// -----

// CUDA kernels are generated for static shapes: an op with a dynamic dim
// placed on a cuda device falls back to the cpu when the cpu is in use, and
// is an error saying what to do when it is not.
// CUDA-CPU-LABEL: func.func @dynamic_on_cuda
// CUDA-CPU: kiln.relu {{.*}}kiln.place = #kiln.device<cpu>
// CUDA-CPU: kiln.relu
// CUDA-CPU-NOT: kiln.place
// CUDA-ONLY: error: 'kiln.relu' op has dynamic shapes, which cuda:0 cannot run yet; add the cpu to the devices (--devices cuda:0,cpu) for it to run there, or bind the symbolic input dims (kilnc --input-shape NAME=D0xD1...)
func.func @dynamic_on_cuda(%x: tensor<?x4xf32, #kiln.device<cuda:0>>, %y: tensor<2x4xf32, #kiln.device<cuda:0>>) -> (tensor<?x4xf32, #kiln.device<cuda:0>>, tensor<2x4xf32, #kiln.device<cuda:0>>) {
  // expected-remark @+1 {{cuda:0 cannot run kiln.relu with dynamic shapes: placed on cpu}}
  %0 = kiln.relu %x : tensor<?x4xf32, #kiln.device<cuda:0>> -> tensor<?x4xf32, #kiln.device<cuda:0>>
  %1 = kiln.relu %y : tensor<2x4xf32, #kiln.device<cuda:0>> -> tensor<2x4xf32, #kiln.device<cuda:0>>
  return %0, %1 : tensor<?x4xf32, #kiln.device<cuda:0>>, tensor<2x4xf32, #kiln.device<cuda:0>>
}
