// RUN: kiln-opt %s --split-input-file --verify-diagnostics

// The compile-time form of "Expected all tensors to be on the same device".
func.func @device_mismatch(%x: tensor<4xf32, #kiln.device<cpu>>, %y: tensor<4xf32, #kiln.device<cuda:0>>) {
  // expected-error @+1 {{'kiln.add' op expects all tensors on one device, but operand #0 is on cpu and operand #1 is on cuda:0; only kiln.copy moves data between devices}}
  %0 = kiln.add %x, %y : tensor<4xf32, #kiln.device<cpu>>, tensor<4xf32, #kiln.device<cuda:0>> -> tensor<4xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @result_on_other_device(%x: tensor<4xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{'kiln.relu' op expects all tensors on one device, but operand #0 is on cpu and result #0 is on cuda:1}}
  %0 = kiln.relu %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cuda:1>>
  return
}

// -----

func.func @no_device(%x: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.relu' op operand #0 has no #kiln.device encoding}}
  %0 = kiln.relu %x : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @broadcast(%x: tensor<4xf32, #kiln.device<cpu>>, %y: tensor<3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{operands of shapes [4] and [3] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %x, %y : tensor<4xf32, #kiln.device<cpu>>, tensor<3xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @matmul_k(%x: tensor<2x3xf32, #kiln.device<cpu>>, %y: tensor<4x5xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{matmul contraction sizes differ: [2,3] x [4,5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %x, %y : tensor<2x3xf32, #kiln.device<cpu>>, tensor<4x5xf32, #kiln.device<cpu>> -> tensor<2x5xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @wrong_result_shape(%x: tensor<2x3xf32, #kiln.device<cpu>>, %y: tensor<3x5xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{'kiln.matmul' op inferred type(s) 'tensor<2x5xf32, #kiln.device<cpu>>' are incompatible with return type(s) of operation 'tensor<2x6xf32, #kiln.device<cpu>>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %x, %y : tensor<2x3xf32, #kiln.device<cpu>>, tensor<3x5xf32, #kiln.device<cpu>> -> tensor<2x6xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @gemm_c(%a: tensor<2x3xf32, #kiln.device<cpu>>, %b: tensor<3x4xf32, #kiln.device<cpu>>, %c: tensor<3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{gemm C of shape [3] does not broadcast to [2,4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gemm %a, %b, %c : tensor<2x3xf32, #kiln.device<cpu>>, tensor<3x4xf32, #kiln.device<cpu>>, tensor<3xf32, #kiln.device<cpu>> -> tensor<2x4xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @copy_shape(%x: tensor<4xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{'kiln.copy' op changes only the device}}
  %0 = kiln.copy %x : tensor<4xf32, #kiln.device<cpu>> -> tensor<5xf32, #kiln.device<cuda:0>>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{'kiln.constant' op value of type 'tensor<2xf32>' does not match result type 'tensor<3xf32, #kiln.device<cpu>>'}}
  %0 = kiln.constant dense<1.0> : tensor<2xf32> : tensor<3xf32, #kiln.device<cpu>>
  return
}

// -----

// expected-error @+1 {{device 'cpu' takes no ordinal}}
func.func @cpu_ordinal(%x: tensor<4xf32, #kiln.device<cpu:0>>) {
  return
}

// -----

// expected-error @+1 {{device 'cuda' needs an ordinal, e.g. cuda:0}}
func.func @cuda_no_ordinal(%x: tensor<4xf32, #kiln.device<cuda>>) {
  return
}

// -----

// expected-error @+1 {{unknown device kind 'tpu' (expected cpu, cuda:N or sim:N)}}
func.func @unknown_kind(%x: tensor<4xf32, #kiln.device<tpu:0>>) {
  return
}

// -----

func.func @kernel_yield(%x: tensor<4xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{'kiln.kernel' op yielded value #0 of type 'tensor<5xf32>' does not match result type 'tensor<4xf32, #kiln.device<cpu>>'}}
  %k = kiln.kernel(%x : tensor<4xf32, #kiln.device<cpu>>) -> (tensor<4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<4xf32>):
    %e = tensor.empty() : tensor<5xf32>
    kiln.yield %e : tensor<5xf32>
  }
  return
}

// -----

func.func @kernel_devices(%x: tensor<4xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{'kiln.kernel' op expects all tensors on one device, but operand #0 is on cpu and result #0 is on cuda:0}}
  %k = kiln.kernel(%x : tensor<4xf32, #kiln.device<cpu>>) -> (tensor<4xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a: tensor<4xf32>):
    kiln.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @reduce_kind(%x: tensor<4x4xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{'kiln.reduce' op kind 'median' is not one of sum, mean, max, min, prod}}
  %0 = kiln.reduce %x {kind = "median", axes = array<i64: 1>, keepdims = false} : tensor<4x4xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x4x8x8xf32, #kiln.device<cpu>>, %w: tensor<8x3x3x3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{conv input has 4 channels but weight [8,3,3,3] with group 1 needs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x4x8x8xf32, #kiln.device<cpu>>, tensor<8x3x3x3xf32, #kiln.device<cpu>> -> tensor<1x8x6x6xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @depthwise_weight(%x: tensor<1x3x8xf32, #kiln.device<cpu>>, %w: tensor<6x2x3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{depthwise conv weight [6,2,3] must be [M, 1, ...] with M a multiple of the input's 3 channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, group = 0} : tensor<1x3x8xf32, #kiln.device<cpu>>, tensor<6x2x3xf32, #kiln.device<cpu>> -> tensor<1x6x6xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @reshape_to_mode(%x: tensor<2x3xf32, #kiln.device<cpu>>, %s: tensor<2xi64, #kiln.device<cpu>>) {
  // expected-error @+1 {{mode 'reshape_keepzero' is not one of reshape, reshape_allowzero, unsqueeze, squeeze, flatten}}
  %0 = kiln.reshape_to %x, %s {mode = "reshape_keepzero"} : tensor<2x3xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>> -> tensor<?x?xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{cannot reshape [2,3] (6 elements) to [4,2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x {shape = array<i64: 4, 2>} : tensor<2x3xf32, #kiln.device<cpu>> -> tensor<4x2xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @slice_outside(%x: tensor<4xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{slice dim 0 reads outside [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.slice %x {starts = array<i64: 2>, sizes = array<i64: 3>, steps = array<i64: 1>} : tensor<4xf32, #kiln.device<cpu>> -> tensor<3xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @scatter_reduction(%d: tensor<4xf32, #kiln.device<cpu>>, %i: tensor<2xi64, #kiln.device<cpu>>, %u: tensor<2xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{reduction 'sub' is not one of none, add, mul, max, min}}
  %0 = kiln.scatter %d, %i, %u {mode = "elements", axis = 0 : i64, reduction = "sub"} : tensor<4xf32, #kiln.device<cpu>>, tensor<2xi64, #kiln.device<cpu>>, tensor<2xf32, #kiln.device<cpu>> -> tensor<4xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @scatter_nd_ranks(%d: tensor<4x2xf32, #kiln.device<cpu>>, %i: tensor<3x1xi64, #kiln.device<cpu>>, %u: tensor<3xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{needs index tuples of length K with updates of rank (indices rank - 1 + data rank - K)}}
  %0 = kiln.scatter %d, %i, %u {mode = "nd", axis = 0 : i64, reduction = "none"} : tensor<4x2xf32, #kiln.device<cpu>>, tensor<3x1xi64, #kiln.device<cpu>>, tensor<3xf32, #kiln.device<cpu>> -> tensor<4x2xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @gather_nd_tuple(%d: tensor<4x2xf32, #kiln.device<cpu>>, %i: tensor<3x3xi64, #kiln.device<cpu>>) {
  // expected-error @+2 {{gather_nd index tuples of length 3 after 0 batch dims do not fit [4,2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather_nd %d, %i {batch_dims = 0 : i64, tuple_length = 3 : i64} : tensor<4x2xf32, #kiln.device<cpu>>, tensor<3x3xi64, #kiln.device<cpu>> -> tensor<3xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @grid_sample_mode(%x: tensor<1x1x4x4xf32, #kiln.device<cpu>>, %g: tensor<1x2x2x2xf32, #kiln.device<cpu>>) {
  // expected-error @+1 {{mode 'area' is not one of nearest, linear, cubic}}
  %0 = kiln.grid_sample %x, %g {mode = "area", padding_mode = "zeros", align_corners = false} : tensor<1x1x4x4xf32, #kiln.device<cpu>>, tensor<1x2x2x2xf32, #kiln.device<cpu>> -> tensor<1x1x2x2xf32, #kiln.device<cpu>>
  return
}

// -----

func.func @reshape_copy_past_rank(%x: tensor<2x3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{reshape copies dim 2 of [2,3], which has no such dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x {shape = array<i64: 1, 6, -2>} : tensor<2x3xf32, #kiln.device<cpu>> -> tensor<1x6x1xf32, #kiln.device<cpu>>
  return
}

// -----

// The symbolic dim copied cancels out, so the static rest must divide.
func.func @reshape_cancelled_count(%x: tensor<?x2x3xf32, #kiln.device<cpu>>) {
  // expected-error @+2 {{cannot reshape [?,2,3] to [-2,4,-1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x {shape = array<i64: -2, 4, -1>} : tensor<?x2x3xf32, #kiln.device<cpu>> -> tensor<?x4x?xf32, #kiln.device<cpu>>
  return
}
