// RUN: kiln-opt %s --kiln-lower-kernels --kiln-pack-weights --split-input-file | FileCheck %s

// A cpu GEMM of a dynamic M with a constant B of 64x80 gets B packed as
// ceil(80/16) = 5 panels of [64][16], a new constant passed to the kernel as
// one more input, which the GEMM's kiln.packed_b names (input 2).
// CHECK-LABEL: func.func @linear
// CHECK: %[[W:.+]] = kiln.constant dense<5.000000e-01> : tensor<64x80xf32> : tensor<64x80xf32, #kiln.device<cpu>>
// CHECK-NEXT: %[[P:.+]] = kiln.constant {{.+}} : tensor<5x64x16xf32> : tensor<5x64x16xf32, #kiln.device<cpu>>
// CHECK: kiln.kernel(%arg0, %[[W]], %[[P]] : tensor<?x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>, tensor<5x64x16xf32, #kiln.device<cpu>>)
// CHECK: ^bb0(%{{.+}}: tensor<?x64xf32>, %{{.+}}: tensor<64x80xf32>, %{{.+}}: tensor<5x64x16xf32>):
// CHECK: linalg.generic {{.+}}iterator_types = ["parallel", "reduction", "parallel"]{{.+}}kiln.packed_b = 2 : i64
func.func @linear(%x: tensor<?x64xf32, #kiln.device<cpu>>) -> tensor<?x80xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<0.5> : tensor<64x80xf32> : tensor<64x80xf32, #kiln.device<cpu>>
  %k = kiln.kernel(%x, %w : tensor<?x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<?x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %a, %b : tensor<?x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<?x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x80xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x80xf32, #kiln.device<cpu>>
}

// -----

// Not packed: a static M above 256 (oneDNN runs it on B as it is), M of a
// dynamic batch times 300 rows, a K below 64 (B stays in cache), and a B
// that is no constant.
// CHECK-LABEL: func.func @unpacked
// CHECK-NOT: kiln.packed_b
// CHECK-NOT: tensor<{{[0-9]+}}x{{[0-9]+}}x16xf32
// CHECK: return
func.func @unpacked(%x: tensor<300x64xf32, #kiln.device<cpu>>, %y: tensor<?x8xf32, #kiln.device<cpu>>, %z: tensor<?x64xf32, #kiln.device<cpu>>, %v: tensor<64x80xf32, #kiln.device<cpu>>, %r: tensor<?x300x64xf32, #kiln.device<cpu>>) -> (tensor<300x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x300x80xf32, #kiln.device<cpu>>) {
  %w = kiln.constant dense<0.5> : tensor<64x80xf32> : tensor<64x80xf32, #kiln.device<cpu>>
  %s = kiln.constant dense<0.5> : tensor<8x80xf32> : tensor<8x80xf32, #kiln.device<cpu>>
  %k0 = kiln.kernel(%x, %w : tensor<300x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<300x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<300x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %a, %b : tensor<300x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<300x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<300x80xf32, #kiln.device<cpu>>
  }
  %k1 = kiln.kernel(%y, %s : tensor<?x8xf32, #kiln.device<cpu>>, tensor<8x80xf32, #kiln.device<cpu>>) -> (tensor<?x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x8xf32, #kiln.device<cpu>>, %b: tensor<8x80xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %a, %b : tensor<?x8xf32, #kiln.device<cpu>>, tensor<8x80xf32, #kiln.device<cpu>> -> tensor<?x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x80xf32, #kiln.device<cpu>>
  }
  %k2 = kiln.kernel(%z, %v : tensor<?x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<?x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %a, %b : tensor<?x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<?x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x80xf32, #kiln.device<cpu>>
  }
  %k3 = kiln.kernel(%r, %w : tensor<?x300x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<?x300x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x300x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.matmul %a, %b : tensor<?x300x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<?x300x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x300x80xf32, #kiln.device<cpu>>
  }
  return %k0, %k1, %k2, %k3 : tensor<300x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x300x80xf32, #kiln.device<cpu>>
}

// -----

// Packed: M of a dynamic batch times 128 rows (a sequence through a linear
// layer), whose static part is at most kPackedRows (256).
// CHECK-LABEL: func.func @sequence
// CHECK: kiln.constant {{.+}} : tensor<5x64x16xf32> : tensor<5x64x16xf32, #kiln.device<cpu>>
// CHECK: kiln.packed_b = 2 : i64
func.func @sequence(%r: tensor<?x128x64xf32, #kiln.device<cpu>>) -> tensor<?x128x80xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<0.5> : tensor<64x80xf32> : tensor<64x80xf32, #kiln.device<cpu>>
  %k = kiln.kernel(%r, %w : tensor<?x128x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<?x128x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x128x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.matmul %a, %b : tensor<?x128x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<?x128x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x128x80xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x128x80xf32, #kiln.device<cpu>>
}

// -----

// A 3x3 stride-1 cpu conv with a constant weight on planes at least 7 wide
// stays a direct window over its input padded to whole 2x2 output tiles
// (15 rows out: one more row of zeros, 18 = 15 + 2 + 1); its weight is
// transformed for Winograd as U[16][M][C], passed as input 3 and named by
// kiln.winograd_u. The bias is added after the sums.
// CHECK-LABEL: func.func @winograd
// CHECK: %[[W:.+]] = kiln.constant {{.+}} : tensor<24x16x3x3xf32, #kiln.device<cpu>>
// CHECK-NEXT: %[[U:.+]] = kiln.constant {{.+}} : tensor<16x24x16xf32> : tensor<16x24x16xf32, #kiln.device<cpu>>
// CHECK: kiln.kernel(%arg0, %[[W]], %{{.+}}, %[[U]] :
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<?x16x18x16xf32>)
// CHECK: linalg.fill
// CHECK: linalg.generic {{.+}}iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]{{.+}}kiln.conv = "winograd", kiln.winograd_u = 3 : i64
// CHECK: arith.addf
func.func @winograd(%x: tensor<?x16x15x14xf32, #kiln.device<cpu>>) -> tensor<?x24x15x14xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<0.5> : tensor<24x16x3x3xf32> : tensor<24x16x3x3xf32, #kiln.device<cpu>>
  %b = kiln.constant dense<0.25> : tensor<24xf32> : tensor<24xf32, #kiln.device<cpu>>
  %k = kiln.kernel(%x, %w, %b : tensor<?x16x15x14xf32, #kiln.device<cpu>>, tensor<24x16x3x3xf32, #kiln.device<cpu>>, tensor<24xf32, #kiln.device<cpu>>) -> (tensor<?x24x15x14xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x16x15x14xf32, #kiln.device<cpu>>, %c: tensor<24x16x3x3xf32, #kiln.device<cpu>>, %d: tensor<24xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<?x16x15x14xf32, #kiln.device<cpu>>, tensor<24x16x3x3xf32, #kiln.device<cpu>>, tensor<24xf32, #kiln.device<cpu>> -> tensor<?x24x15x14xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<?x24x15x14xf32, #kiln.device<cpu>>
  }
  return %k : tensor<?x24x15x14xf32, #kiln.device<cpu>>
}

// -----

// Planes whose sizes are known only at run time count as wide enough: the
// same Winograd conv, its input padded by the pads alone (the transform
// reads the last tile's rows and columns that exist), the bias after it.
// CHECK-LABEL: func.func @winograd_dynamic_planes
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<1x16x?x?xf32>)
// CHECK: linalg.fill
// CHECK: linalg.generic {{.+}}iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]{{.+}}kiln.conv = "winograd", kiln.winograd_u = 3 : i64
// CHECK: arith.addf
func.func @winograd_dynamic_planes(%x: tensor<1x16x?x?xf32, #kiln.device<cpu>>) -> tensor<1x24x?x?xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<0.5> : tensor<24x16x3x3xf32> : tensor<24x16x3x3xf32, #kiln.device<cpu>>
  %b = kiln.constant dense<0.25> : tensor<24xf32> : tensor<24xf32, #kiln.device<cpu>>
  %k = kiln.kernel(%x, %w, %b : tensor<1x16x?x?xf32, #kiln.device<cpu>>, tensor<24x16x3x3xf32, #kiln.device<cpu>>, tensor<24xf32, #kiln.device<cpu>>) -> (tensor<1x24x?x?xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x16x?x?xf32, #kiln.device<cpu>>, %c: tensor<24x16x3x3xf32, #kiln.device<cpu>>, %d: tensor<24xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c, %d {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x16x?x?xf32, #kiln.device<cpu>>, tensor<24x16x3x3xf32, #kiln.device<cpu>>, tensor<24xf32, #kiln.device<cpu>> -> tensor<1x24x?x?xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x24x?x?xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x24x?x?xf32, #kiln.device<cpu>>
}

// -----

// At run-time sizes a conv whose taps unroll (3 channels x 9 taps, at most
// kUnrolledTaps) stays loops ("direct"), its taps innermost.
// CHECK-LABEL: func.func @no_winograd_dynamic_planes
// CHECK-NOT: kiln.winograd_u
// CHECK: kiln.conv = "direct"
// CHECK-NOT: kiln.winograd_u
// CHECK: return
func.func @no_winograd_dynamic_planes(%x: tensor<1x3x?x?xf32, #kiln.device<cpu>>) -> tensor<1x24x?x?xf32, #kiln.device<cpu>> {
  %w = kiln.constant dense<0.5> : tensor<24x3x3x3xf32> : tensor<24x3x3x3xf32, #kiln.device<cpu>>
  %k = kiln.kernel(%x, %w : tensor<1x3x?x?xf32, #kiln.device<cpu>>, tensor<24x3x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x24x?x?xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x3x?x?xf32, #kiln.device<cpu>>, %c: tensor<24x3x3x3xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x3x?x?xf32, #kiln.device<cpu>>, tensor<24x3x3x3xf32, #kiln.device<cpu>> -> tensor<1x24x?x?xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x24x?x?xf32, #kiln.device<cpu>>
  }
  return %k : tensor<1x24x?x?xf32, #kiln.device<cpu>>
}

// -----

// Through im2col instead: a weight that is no constant, a stride of 2,
// planes of 6 (too few tiles), fewer than 16 input channels, and a conv on
// a cuda device (cuBLAS runs its GEMM).
// CHECK-LABEL: func.func @no_winograd
// CHECK-NOT: kiln.winograd_u
// CHECK: return
func.func @no_winograd(%x: tensor<1x16x14x14xf32, #kiln.device<cpu>>, %v: tensor<16x16x3x3xf32, #kiln.device<cpu>>, %s: tensor<1x16x6x6xf32, #kiln.device<cpu>>, %t: tensor<1x8x14x14xf32, #kiln.device<cpu>>, %g: tensor<1x16x14x14xf32, #kiln.device<cuda:0>>) -> (tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<1x16x7x7xf32, #kiln.device<cpu>>, tensor<1x16x6x6xf32, #kiln.device<cpu>>, tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<1x16x14x14xf32, #kiln.device<cuda:0>>) {
  %w = kiln.constant dense<0.5> : tensor<16x16x3x3xf32> : tensor<16x16x3x3xf32, #kiln.device<cpu>>
  %w8 = kiln.constant dense<0.5> : tensor<16x8x3x3xf32> : tensor<16x8x3x3xf32, #kiln.device<cpu>>
  %wg = kiln.constant dense<0.5> : tensor<16x16x3x3xf32> : tensor<16x16x3x3xf32, #kiln.device<cuda:0>>
  %k0 = kiln.kernel(%x, %v : tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x16x14x14xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x16x14x14xf32, #kiln.device<cpu>>, %c: tensor<16x16x3x3xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>> -> tensor<1x16x14x14xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x16x14x14xf32, #kiln.device<cpu>>
  }
  %k1 = kiln.kernel(%x, %w : tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x16x7x7xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x16x14x14xf32, #kiln.device<cpu>>, %c: tensor<16x16x3x3xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>> -> tensor<1x16x7x7xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x16x7x7xf32, #kiln.device<cpu>>
  }
  %k2 = kiln.kernel(%s, %w : tensor<1x16x6x6xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x16x6x6xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x16x6x6xf32, #kiln.device<cpu>>, %c: tensor<16x16x3x3xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x16x6x6xf32, #kiln.device<cpu>>, tensor<16x16x3x3xf32, #kiln.device<cpu>> -> tensor<1x16x6x6xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x16x6x6xf32, #kiln.device<cpu>>
  }
  %k3 = kiln.kernel(%t, %w8 : tensor<1x8x14x14xf32, #kiln.device<cpu>>, tensor<16x8x3x3xf32, #kiln.device<cpu>>) -> (tensor<1x16x14x14xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<1x8x14x14xf32, #kiln.device<cpu>>, %c: tensor<16x8x3x3xf32, #kiln.device<cpu>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x8x14x14xf32, #kiln.device<cpu>>, tensor<16x8x3x3xf32, #kiln.device<cpu>> -> tensor<1x16x14x14xf32, #kiln.device<cpu>>
    kiln.yield %y : tensor<1x16x14x14xf32, #kiln.device<cpu>>
  }
  %k4 = kiln.kernel(%g, %wg : tensor<1x16x14x14xf32, #kiln.device<cuda:0>>, tensor<16x16x3x3xf32, #kiln.device<cuda:0>>) -> (tensor<1x16x14x14xf32, #kiln.device<cuda:0>>) {
  ^bb0(%a: tensor<1x16x14x14xf32, #kiln.device<cuda:0>>, %c: tensor<16x16x3x3xf32, #kiln.device<cuda:0>>):
    %y = kiln.conv %a, %c {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1} : tensor<1x16x14x14xf32, #kiln.device<cuda:0>>, tensor<16x16x3x3xf32, #kiln.device<cuda:0>> -> tensor<1x16x14x14xf32, #kiln.device<cuda:0>>
    kiln.yield %y : tensor<1x16x14x14xf32, #kiln.device<cuda:0>>
  }
  return %k0, %k1, %k2, %k3, %k4 : tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<1x16x7x7xf32, #kiln.device<cpu>>, tensor<1x16x6x6xf32, #kiln.device<cpu>>, tensor<1x16x14x14xf32, #kiln.device<cpu>>, tensor<1x16x14x14xf32, #kiln.device<cuda:0>>
}
