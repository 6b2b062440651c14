// RUN: echo '{"rules": [{"op": "Gemm", "device": "sim:0"}, {"node": "/head/.*", "device": "sim:1"}, {"op": "kiln.relu", "node": "/act.*", "device": "cuda:0"}]}' > %t.json
// RUN: kiln-opt %s --kiln-place-pins=rules=%t.json --split-input-file --verify-diagnostics | FileCheck %s
// RUN: echo '{"rules": [{"op": "Gemm", "device": "tpu:0"}]}' > %t.bad-device.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-pins=rules=%t.bad-device.json 2>&1 | FileCheck %s --check-prefix=BAD-DEVICE
// RUN: echo '[{"node": "(", "device": "cpu"}]' > %t.bad-regex.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-pins=rules=%t.bad-regex.json 2>&1 | FileCheck %s --check-prefix=BAD-REGEX
// RUN: echo '{"rules": [{"device": "cpu", "colour": "red"}]}' > %t.bad-field.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-pins=rules=%t.bad-field.json 2>&1 | FileCheck %s --check-prefix=BAD-FIELD
// RUN: echo '{"rules": [' > %t.bad-json.json
// RUN: not kiln-opt %s --split-input-file --kiln-place-pins=rules=%t.bad-json.json 2>&1 | FileCheck %s --check-prefix=BAD-JSON
// RUN: not kiln-opt %s --split-input-file --kiln-place-pins=rules=%t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING

// BAD-DEVICE: rule #1: invalid device 'tpu:0' (expected cpu, cuda:N or sim:N)
// BAD-REGEX: rule #1: bad node pattern '('
// BAD-FIELD: rule #1: unknown field 'colour' (expected op, node, device)
// BAD-JSON: is not valid JSON
// MISSING: cannot read pins file

!x = tensor<4x8xf32, #kiln.device<cpu>>
!w = tensor<8x8xf32, #kiln.device<cpu>>

// The op type comes from the location (fused metadata), the node name from
// the NameLoc; the first matching rule wins; the node pattern must match the
// whole name; ops no rule matches keep no kiln.place.
// CHECK-LABEL: func.func @pins
// CHECK: kiln.gemm {{.*}} {kiln.place = #kiln.device<sim:0>}
// CHECK: kiln.relu {{.*}} {kiln.place = #kiln.device<cuda:0>}
// CHECK: kiln.relu
// CHECK-NOT: kiln.place
// CHECK-SAME: -> tensor<4x8xf32, #kiln.device<cpu>>
// CHECK: kiln.gemm {{.*}} {kiln.place = #kiln.device<sim:0>}
// CHECK: kiln.tanh {{.*}} {kiln.place = #kiln.device<sim:1>}
// CHECK: kiln.tanh
// CHECK-NOT: kiln.place
// CHECK: return
func.func @pins(%x: !x, %w: !w) -> !x {
  %0 = kiln.gemm %x, %w : !x, !w -> !x loc("/fc1/Gemm"(fused<"Gemm">["m.onnx":0:0]))
  %1 = kiln.relu %0 : !x -> !x loc("/act1"(fused<"Relu">["m.onnx":0:0]))
  %2 = kiln.relu %1 : !x -> !x loc("/fc1/act"(fused<"Relu">["m.onnx":0:0]))
  %3 = kiln.gemm %2, %w : !x, !w -> !x loc("/head/Gemm"(fused<"Gemm">["m.onnx":0:0]))
  %4 = kiln.tanh %3 : !x -> !x loc("/head/Tanh"(fused<"Tanh">["m.onnx":0:0]))
  %5 = kiln.tanh %4 : !x -> !x loc("/headless/Tanh"(fused<"Tanh">["m.onnx":0:0]))
  return %5 : !x
}

// -----

!x = tensor<4x8xf32, #kiln.device<cpu>>

// A rule that matches nothing is reported: usually a typo in the file.
// expected-warning @+2 {{pin rule #1 (op Gemm -> sim:0) matched no op}}
// expected-warning @+1 {{pin rule #2 (node /head/.* -> sim:1) matched no op}}
func.func @unmatched(%x: !x) -> !x {
  // expected-warning @-1 {{pin rule #3 (op kiln.relu, node /act.* -> cuda:0) matched no op}}
  %0 = kiln.exp %x : !x -> !x loc("/exp"(fused<"Exp">["m.onnx":0:0]))
  return %0 : !x
}
