// RUN: kiln-translate --kiln-to-cpp %s | FileCheck %s

// A softmax's kernel runs row by row (codegen/CppRows.cpp): each row's
// max, exp pass, sum and division in turn, while the row is in cache. The
// reductions sum in a register under `omp simd reduction`; what the
// elementwise passes read that is the same along the row (the max, the sum)
// is read once before their loop, so that nothing in the loop reads memory
// the row's reduction has just written (GCC 12 then left the exp scalar).
// The intermediates (the max, the exps, the sum) are one row's, on the
// thread's stack; only where the guard on the dims fails are they whole
// tensors.
// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK:      // rows: 6 ops, each row's in turn
// CHECK:      for (int64_t d0 = 0; d0 < 4; ++d0) {
// CHECK-NEXT:   float [[RMAX:row[0-9]+]][1];
// CHECK-NEXT:   float [[REXP:row[0-9]+]][64];
// CHECK-NEXT:   float [[RSUM:row[0-9]+]][1];
// CHECK-NEXT:   float [[MAX:acc[0-9]+]] = v1;
// CHECK-NEXT: #pragma omp simd reduction(kiln_max : [[MAX]])
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 64; ++d1) {
// CHECK:        [[RMAX]][0] = [[MAX]];
// CHECK-NEXT:   const float [[M:r[0-9]+]] = [[RMAX]][0];
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 64; ++d1) {
// CHECK-NEXT:     const float [[X:a[0-9]+]] = in0[d0 * 64 + d1];
// CHECK-NEXT:     const float [[Y:a[0-9]+]] = [[M]];
// CHECK-NEXT:     const float [[D:v[0-9]+]] = [[X]] - [[Y]];
// CHECK-NEXT:     const float [[E:v[0-9]+]] = kiln_expf([[D]]);
// CHECK-NEXT:     [[REXP]][d1] = [[E]];
// CHECK-NEXT:   }
// CHECK:        [[RSUM]][0] = [[SUM:acc[0-9]+]];
// CHECK-NEXT:   const float [[S:r[0-9]+]] = [[RSUM]][0];
// CHECK-NEXT:   for (int64_t d1 = 0; d1 < 64; ++d1) {
// CHECK-NEXT:     const float [[N:a[0-9]+]] = [[REXP]][d1];
// CHECK-NEXT:     const float [[Z:a[0-9]+]] = [[S]];
// CHECK-NEXT:     const float [[Q:v[0-9]+]] = [[N]] / [[Z]];
// CHECK-NEXT:     out0[d0 * 64 + d1] = [[Q]];
// CHECK:      } else {
// CHECK-NOT:  {{row[0-9]+}}
// CHECK:        kiln_scratch [[TMAX:t[0-9]+]]_owner(sizeof(float) * 4);
// CHECK-NOT:  {{row[0-9]+}}
// CHECK:            [[TMAX]][d0 + 0] =
// CHECK-NOT:  {{row[0-9]+}}
// CHECK:        kiln_scratch [[TEXP:t[0-9]+]]_owner(sizeof(float) * 256);
// CHECK-NOT:  {{row[0-9]+}}
// CHECK:            [[TEXP]][d0 * 64 + d1] =
// CHECK-NOT:  {{row[0-9]+}}
// CHECK:            {{t[0-9]+}}[d0 + 0] =
// CHECK-NOT:  {{row[0-9]+}}

// An intermediate that is also a result of the kernel is written to its
// output buffer; the reductions' results stay one row's.
// CHECK:      // kiln kernel kiln_k1
// CHECK:      for (int64_t d0 = 0; d0 < 4; ++d0) {
// CHECK-NEXT:   float [[RMAX:row[0-9]+]][1];
// CHECK-NEXT:   float [[RSUM:row[0-9]+]][1];
// CHECK-NEXT:   float {{acc[0-9]+}} = v1;
// CHECK:          out1[d0 * 64 + d1] = {{v[0-9]+}};
// CHECK:          const float {{a[0-9]+}} = out1[d0 * 64 + d1];
// CHECK:          out0[d0 * 64 + d1] = {{v[0-9]+}};

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0, 0)>
module {
  func.func @main(%arg0: tensor<4x64xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> (tensor<4x64xf32, #kiln.device<cpu>> {kiln.name = "y"}) {
    %0 = kiln.kernel(%arg0 : tensor<4x64xf32, #kiln.device<cpu>>) -> (tensor<4x64xf32, #kiln.device<cpu>>) {
    ^bb0(%arg1: tensor<4x64xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %cst_0 = arith.constant 0xFF800000 : f32
      %1 = tensor.empty() : tensor<4x1xf32>
      %2 = linalg.fill ins(%cst_0 : f32) outs(%1 : tensor<4x1xf32>) -> tensor<4x1xf32>
      %3 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg1 : tensor<4x64xf32>) outs(%2 : tensor<4x1xf32>) {
      ^bb0(%in: f32, %out: f32):
        %11 = arith.maximumf %out, %in : f32
        linalg.yield %11 : f32
      } -> tensor<4x1xf32>
      %4 = tensor.empty() : tensor<4x64xf32>
      %5 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg1, %3 : tensor<4x64xf32>, tensor<4x1xf32>) outs(%4 : tensor<4x64xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %11 = arith.subf %in, %in_1 : f32
        %12 = math.exp %11 : f32
        linalg.yield %12 : f32
      } -> tensor<4x64xf32>
      %6 = tensor.empty() : tensor<4x1xf32>
      %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<4x1xf32>) -> tensor<4x1xf32>
      %8 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%5 : tensor<4x64xf32>) outs(%7 : tensor<4x1xf32>) {
      ^bb0(%in: f32, %out: f32):
        %11 = arith.addf %out, %in : f32
        linalg.yield %11 : f32
      } -> tensor<4x1xf32>
      %9 = tensor.empty() : tensor<4x64xf32>
      %10 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%5, %8 : tensor<4x64xf32>, tensor<4x1xf32>) outs(%9 : tensor<4x64xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %11 = arith.divf %in, %in_1 : f32
        linalg.yield %11 : f32
      } -> tensor<4x64xf32>
      kiln.yield %10 : tensor<4x64xf32>
    }
    return %0 : tensor<4x64xf32, #kiln.device<cpu>>
  }
  func.func @both(%arg0: tensor<4x64xf32, #kiln.device<cpu>> {kiln.name = "x"}) -> (tensor<4x64xf32, #kiln.device<cpu>> {kiln.name = "y"}, tensor<4x64xf32, #kiln.device<cpu>> {kiln.name = "e"}) {
    %0:2 = kiln.kernel(%arg0 : tensor<4x64xf32, #kiln.device<cpu>>) -> (tensor<4x64xf32, #kiln.device<cpu>>, tensor<4x64xf32, #kiln.device<cpu>>) {
    ^bb0(%arg1: tensor<4x64xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %cst_0 = arith.constant 0xFF800000 : f32
      %1 = tensor.empty() : tensor<4x1xf32>
      %2 = linalg.fill ins(%cst_0 : f32) outs(%1 : tensor<4x1xf32>) -> tensor<4x1xf32>
      %3 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg1 : tensor<4x64xf32>) outs(%2 : tensor<4x1xf32>) {
      ^bb0(%in: f32, %out: f32):
        %11 = arith.maximumf %out, %in : f32
        linalg.yield %11 : f32
      } -> tensor<4x1xf32>
      %4 = tensor.empty() : tensor<4x64xf32>
      %5 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg1, %3 : tensor<4x64xf32>, tensor<4x1xf32>) outs(%4 : tensor<4x64xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %11 = arith.subf %in, %in_1 : f32
        %12 = math.exp %11 : f32
        linalg.yield %12 : f32
      } -> tensor<4x64xf32>
      %6 = tensor.empty() : tensor<4x1xf32>
      %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<4x1xf32>) -> tensor<4x1xf32>
      %8 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%5 : tensor<4x64xf32>) outs(%7 : tensor<4x1xf32>) {
      ^bb0(%in: f32, %out: f32):
        %11 = arith.addf %out, %in : f32
        linalg.yield %11 : f32
      } -> tensor<4x1xf32>
      %9 = tensor.empty() : tensor<4x64xf32>
      %10 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%5, %8 : tensor<4x64xf32>, tensor<4x1xf32>) outs(%9 : tensor<4x64xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %11 = arith.divf %in, %in_1 : f32
        linalg.yield %11 : f32
      } -> tensor<4x64xf32>
      kiln.yield %10, %5 : tensor<4x64xf32>, tensor<4x64xf32>
    }
    return %0#0, %0#1 : tensor<4x64xf32, #kiln.device<cpu>>, tensor<4x64xf32, #kiln.device<cpu>>
  }
}
