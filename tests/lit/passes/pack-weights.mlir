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

// Not packed: a static M above 16 (oneDNN runs it on B as it is), M of a
// dynamic batch times 32 rows, a K below 64 (B stays in cache), and a B
// that is no constant.
// CHECK-LABEL: func.func @unpacked
// CHECK-NOT: kiln.packed_b
// CHECK-NOT: tensor<{{[0-9]+}}x{{[0-9]+}}x16xf32
// CHECK: return
func.func @unpacked(%x: tensor<32x64xf32, #kiln.device<cpu>>, %y: tensor<?x8xf32, #kiln.device<cpu>>, %z: tensor<?x64xf32, #kiln.device<cpu>>, %v: tensor<64x80xf32, #kiln.device<cpu>>, %r: tensor<?x32x64xf32, #kiln.device<cpu>>) -> (tensor<32x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x32x80xf32, #kiln.device<cpu>>) {
  %w = kiln.constant dense<0.5> : tensor<64x80xf32> : tensor<64x80xf32, #kiln.device<cpu>>
  %s = kiln.constant dense<0.5> : tensor<8x80xf32> : tensor<8x80xf32, #kiln.device<cpu>>
  %k0 = kiln.kernel(%x, %w : tensor<32x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<32x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<32x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.gemm %a, %b : tensor<32x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<32x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<32x80xf32, #kiln.device<cpu>>
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
  %k3 = kiln.kernel(%r, %w : tensor<?x32x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>>) -> (tensor<?x32x80xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x32x64xf32, #kiln.device<cpu>>, %b: tensor<64x80xf32, #kiln.device<cpu>>):
    %g = kiln.matmul %a, %b : tensor<?x32x64xf32, #kiln.device<cpu>>, tensor<64x80xf32, #kiln.device<cpu>> -> tensor<?x32x80xf32, #kiln.device<cpu>>
    kiln.yield %g : tensor<?x32x80xf32, #kiln.device<cpu>>
  }
  return %k0, %k1, %k2, %k3 : tensor<32x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x80xf32, #kiln.device<cpu>>, tensor<?x32x80xf32, #kiln.device<cpu>>
}
