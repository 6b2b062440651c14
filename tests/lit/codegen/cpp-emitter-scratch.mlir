// RUN: kiln-translate --kiln-to-cpp %s --split-input-file | FileCheck %s

// A kernel's local tensors go back to the scratch cache after their last
// reader, for the next local of about their size to reuse while in cache.
// A reduction's result lives in its fill's buffer: that buffer goes back
// after the result's last reader, not after the fill's (the reduction).

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK:       kiln_scratch [[S:t[0-9]+]]_owner(sizeof(float) * 16384);
// CHECK:       kiln_scratch [[M:t[0-9]+]]_owner(sizeof(float) * 256);
// CHECK:       // linalg.generic: reduction, parallel
// CHECK-NOT:   release
// CHECK:       // linalg.generic: parallel, parallel
// CHECK:       out0[d0 * 256 + d1] =
// CHECK:       }
// CHECK-NEXT:  [[S]]_owner.release();
// CHECK-NEXT:  [[M]]_owner.release();
// CHECK-NOT:   release
// CHECK:       out0[d0 * 256 + d1] =
func.func @release(%x: tensor<64x256xf32, #kiln.device<cpu>>) -> tensor<64x256xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<64x256xf32, #kiln.device<cpu>>) -> (tensor<64x256xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<64x256xf32>):
    %ninf = arith.constant 0xFF800000 : f32
    %e = tensor.empty() : tensor<64x256xf32>
    %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = math.exp %p : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    %e2 = tensor.empty() : tensor<256xf32>
    %f = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<256xf32>) -> tensor<256xf32>
    %m = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%s : tensor<64x256xf32>) outs(%f : tensor<256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = arith.maximumf %p, %o : f32
      linalg.yield %r : f32
    } -> tensor<256xf32>
    %e3 = tensor.empty() : tensor<64x256xf32>
    %t = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%s, %m : tensor<64x256xf32>, tensor<256xf32>) outs(%e3 : tensor<64x256xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.subf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    %e4 = tensor.empty() : tensor<64x256xf32>
    %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<64x256xf32>) outs(%e4 : tensor<64x256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = math.tanh %p : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    %e5 = tensor.empty() : tensor<64x256xf32>
    %v = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%u, %a : tensor<64x256xf32>, tensor<64x256xf32>) outs(%e5 : tensor<64x256xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.mulf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    kiln.yield %v : tensor<64x256xf32>
  }
  return %k : tensor<64x256xf32, #kiln.device<cpu>>
}

// -----

// An elementwise op overwrites a local it alone reads, of its own type: the
// exp and the tanh share one buffer, read last by the reduction.

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK:       kiln_scratch [[T:t[0-9]+]]_owner(sizeof(float) * 16384);
// CHECK-NOT:   kiln_scratch
// CHECK:       [[T]][d0 * 256 + d1] = v{{[0-9]+}};
// CHECK:       [[T]][d0 * 256 + d1] = v{{[0-9]+}};
// CHECK:       // linalg.generic: reduction, parallel
// CHECK:       out0[d1] =
// CHECK:       }
// CHECK-NEXT:  [[T]]_owner.release();
// CHECK-NEXT:  }
func.func @in_place(%x: tensor<64x256xf32, #kiln.device<cpu>>) -> tensor<256xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<64x256xf32, #kiln.device<cpu>>) -> (tensor<256xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<64x256xf32>):
    %ninf = arith.constant 0xFF800000 : f32
    %e = tensor.empty() : tensor<64x256xf32>
    %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = math.exp %p : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    %e4 = tensor.empty() : tensor<64x256xf32>
    %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<64x256xf32>) outs(%e4 : tensor<64x256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = math.tanh %p : f32
      linalg.yield %r : f32
    } -> tensor<64x256xf32>
    %e2 = tensor.empty() : tensor<256xf32>
    %f = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<256xf32>) -> tensor<256xf32>
    %m = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%u : tensor<64x256xf32>) outs(%f : tensor<256xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = arith.maximumf %p, %o : f32
      linalg.yield %r : f32
    } -> tensor<256xf32>
    kiln.yield %m : tensor<256xf32>
  }
  return %k : tensor<256xf32, #kiln.device<cpu>>
}
