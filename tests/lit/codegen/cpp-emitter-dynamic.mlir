// RUN: kiln-translate --kiln-to-cpp %s | FileCheck %s

// Dynamic dims: a kernel input's come from the dims array after the
// buffers, a local tensor's from the size its tensor.empty was given, and
// SYMBOL_dims() computes the outputs' dims and checks that the sizes one
// loop reads agree (or are 1 along a parallel loop: an input's dynamic dim
// of size 1 reads index 0, numpy broadcasting decided at run time). Its
// messages name nodes as {node:K}, which the runtime fills in from the
// step's dims_nodes, so kernels of the same code share one dims function.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK: extern "C" void kiln_k0(void **buffers) {
// CHECK:   const int64_t *dims = static_cast<const int64_t *>(buffers[3]);
// CHECK:   for (int64_t d0 = 0; d0 < dims[0]; ++d0)
// CHECK:     for (int64_t d1 = 0; d1 < 4; ++d1) {
// CHECK:       const float [[A:a[0-9]+]] = in0[(dims[0] == 1 ? 0 : d0) * 4 + d1];
// CHECK:       const float [[B:a[0-9]+]] = in1[(dims[2] == 1 ? 0 : d0) * 4 + d1];
// CHECK:       out0[d0 * 4 + d1] =
// CHECK: extern "C" const char *kiln_k0_dims(int64_t *dims, void *const *inputs) {
// CHECK:   if (dims[2] != dims[0] && dims[2] != 1)
// CHECK:     return "{node:0}: argument dims dims[2] and dims[0] do not broadcast";
// CHECK:   dims[4] = dims[0];
// CHECK:   return nullptr;
func.func @add(%x: tensor<?x4xf32, #kiln.device<cpu>>, %y: tensor<?x4xf32, #kiln.device<cpu>>) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y : tensor<?x4xf32, #kiln.device<cpu>>, tensor<?x4xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %a, %c0 : tensor<?x4xf32>
    %e = tensor.empty(%n) : tensor<?x4xf32>
    %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.addf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<?x4xf32> loc("add")
    kiln.yield %s : tensor<?x4xf32>
  }
  return %k : tensor<?x4xf32, #kiln.device<cpu>>
}

// A local tensor sized at run time: a scratch block (from the thread's
// cache) of its element count, at least 1; its dim is the scalar computed
// from the input's dims.
// CHECK-LABEL: // kiln kernel kiln_k1
// CHECK:   const int64_t [[N:v[0-9]+]] = dims[0] * INT64_C(2);
// CHECK:   kiln_scratch [[T:t[0-9]+]]_owner(sizeof(float) * std::max<int64_t>(([[N]] * 4), 1));
// CHECK:   float *__restrict [[T]] = static_cast<float *>([[T]]_owner.data);
// CHECK:   for (int64_t i = 0; i < ([[N]] * 4); ++i)
// CHECK: extern "C" const char *kiln_k1_dims(int64_t *dims, void *const *inputs) {
// CHECK:   dims[2] = dims[0];
func.func @local(%x: tensor<?x4xf32, #kiln.device<cpu>>) -> tensor<?x4xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x4xf32, #kiln.device<cpu>>) -> (tensor<?x4xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x4xf32>):
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %n = tensor.dim %a, %c0 : tensor<?x4xf32>
    %m = arith.muli %n, %c2 : index
    %e = tensor.empty(%m) : tensor<?x4xf32>
    %f = arith.constant 1.0 : f32
    %t = linalg.fill ins(%f : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
    %o = tensor.empty(%n) : tensor<?x4xf32>
    %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<?x4xf32>) outs(%o : tensor<?x4xf32>) {
    ^bb0(%p: f32, %q: f32):
      linalg.yield %p : f32
    } -> tensor<?x4xf32>
    kiln.yield %s : tensor<?x4xf32>
  }
  return %k : tensor<?x4xf32, #kiln.device<cpu>>
}
