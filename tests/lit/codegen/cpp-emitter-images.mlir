// RUN: kiln-translate --kiln-to-cpp %s | FileCheck %s

// A kernel of several passes, each working on every index of the leading
// dynamic dim (the batch) on its own, runs its body once per image when the
// batch's largest tensor is over 8 MiB: the body becomes SYMBOL_image, and
// SYMBOL calls it with that dim set to 1 in a copy of the dims array and
// each batched buffer advanced to the image (an input whose leading dim is
// 1 broadcasts: every image reads it whole).

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#chan = affine_map<(d0, d1, d2) -> (d1)>

// CHECK-LABEL: // kiln kernel kiln_k0
// CHECK: static void kiln_k0_image(void **buffers) {
// CHECK:   for (int64_t d0 = 0; d0 < dims[0]; ++d0)
// With as many images as threads or more, each thread runs whole images (at
// least one image each; the images left over run on all threads, in turn),
// even where the batch would fit the budget.
// CHECK: // Runs kiln_k0_image on each image (index of the leading dim) in turn, whole images a thread while the images go round the threads.
// CHECK-NEXT: extern "C" void kiln_k0(void **buffers) {
// CHECK-NEXT:   const int64_t *dims = static_cast<const int64_t *>(buffers[4]);
// CHECK-NEXT:   const int64_t images = dims[7];
// CHECK-NEXT:   const int64_t threads = omp_get_max_threads();
// CHECK-NEXT:   const int64_t shared = threads > 1 ? images / threads * threads : 0;
// CHECK-NEXT:   // Small batches stay in cache: one pass over all of them.
// CHECK-NEXT:   if (shared == 0 && images * 262144 <= 8388608)
// CHECK-NEXT:     return kiln_k0_image(buffers);
// CHECK-NEXT:   const auto run = [&](int64_t n) {
// CHECK-NEXT:     int64_t one[10];
// CHECK-NEXT:     std::memcpy(one, dims, sizeof(one));
// CHECK-NEXT:     one[0] = 1;
// CHECK-NEXT:     one[3] = 1;
// CHECK-NEXT:     one[7] = 1;
// CHECK-NEXT:     void *image[5];
// CHECK-NEXT:     image[4] = one;
// CHECK-NEXT:     image[0] = static_cast<char *>(buffers[0]) + (dims[0] == 1 ? 0 : n) * int64_t(sizeof(float)) * 16 * 4096;
// CHECK-NEXT:     image[1] = static_cast<char *>(buffers[1]) + (dims[3] == 1 ? 0 : n) * int64_t(sizeof(float)) * 16 * 4096;
// CHECK-NEXT:     image[2] = buffers[2];
// CHECK-NEXT:     image[3] = static_cast<char *>(buffers[3]) + (dims[7] == 1 ? 0 : n) * int64_t(sizeof(float)) * 16 * 4096;
// CHECK-NEXT:     kiln_k0_image(image);
// CHECK-NEXT:   };
// CHECK-NEXT:   if (shared > 0) {
// CHECK-NEXT: #pragma omp parallel for schedule(static)
// CHECK-NEXT:     for (int64_t n = 0; n < shared; ++n)
// CHECK-NEXT:       run(n);
// CHECK-NEXT:   }
// CHECK-NEXT:   for (int64_t n = shared; n < images; ++n)
// CHECK-NEXT:     run(n);
// CHECK-NEXT: }
// CHECK: extern "C" const char *kiln_k0_dims(int64_t *dims, void *const *inputs) {
func.func @two_passes(%x: tensor<?x16x4096xf32, #kiln.device<cpu>>, %y: tensor<?x16x4096xf32, #kiln.device<cpu>>, %b: tensor<16xf32, #kiln.device<cpu>>) -> tensor<?x16x4096xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %y, %b : tensor<?x16x4096xf32, #kiln.device<cpu>>, tensor<?x16x4096xf32, #kiln.device<cpu>>, tensor<16xf32, #kiln.device<cpu>>) -> (tensor<?x16x4096xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x16x4096xf32>, %c: tensor<?x16x4096xf32>, %bias: tensor<16xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %a, %c0 : tensor<?x16x4096xf32>
    %e = tensor.empty(%n) : tensor<?x16x4096xf32>
    %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %c : tensor<?x16x4096xf32>, tensor<?x16x4096xf32>) outs(%e : tensor<?x16x4096xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.addf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<?x16x4096xf32>
    %e2 = tensor.empty(%n) : tensor<?x16x4096xf32>
    %t = linalg.generic {indexing_maps = [#id, #chan, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<?x16x4096xf32>, tensor<16xf32>) outs(%e2 : tensor<?x16x4096xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.mulf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<?x16x4096xf32>
    kiln.yield %t : tensor<?x16x4096xf32>
  }
  return %k : tensor<?x16x4096xf32, #kiln.device<cpu>>
}

// A pass that computes with the image's index (here: adds it) does not
// run image by image: each image would see index 0.
// CHECK-LABEL: // kiln kernel kiln_k1
// CHECK-NOT: _image
// CHECK: extern "C" void kiln_k1(void **buffers) {
// CHECK-NOT: _image
// CHECK: extern "C" const char *kiln_k1_dims
func.func @index_of_image(%x: tensor<?x16x4096xf32, #kiln.device<cpu>>) -> tensor<?x16x4096xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x16x4096xf32, #kiln.device<cpu>>) -> (tensor<?x16x4096xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x16x4096xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %a, %c0 : tensor<?x16x4096xf32>
    %e = tensor.empty(%n) : tensor<?x16x4096xf32>
    %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<?x16x4096xf32>) outs(%e : tensor<?x16x4096xf32>) {
    ^bb0(%p: f32, %o: f32):
      %i = linalg.index 0 : index
      %ii = arith.index_cast %i : index to i64
      %f = arith.sitofp %ii : i64 to f32
      %r = arith.addf %p, %f : f32
      linalg.yield %r : f32
    } -> tensor<?x16x4096xf32>
    %e2 = tensor.empty(%n) : tensor<?x16x4096xf32>
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<?x16x4096xf32>) outs(%e2 : tensor<?x16x4096xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = arith.mulf %p, %p : f32
      linalg.yield %r : f32
    } -> tensor<?x16x4096xf32>
    kiln.yield %t : tensor<?x16x4096xf32>
  }
  return %k : tensor<?x16x4096xf32, #kiln.device<cpu>>
}

// Images too small to share out among threads (fewer than 32768 elements
// each) stay one pass over the batch.
// CHECK-LABEL: // kiln kernel kiln_k2
// CHECK-NOT: _image
// CHECK: extern "C" const char *kiln_k2_dims
func.func @small_images(%x: tensor<?x16x1024xf32, #kiln.device<cpu>>) -> tensor<?x16x1024xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x16x1024xf32, #kiln.device<cpu>>) -> (tensor<?x16x1024xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x16x1024xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %a, %c0 : tensor<?x16x1024xf32>
    %e = tensor.empty(%n) : tensor<?x16x1024xf32>
    %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<?x16x1024xf32>) outs(%e : tensor<?x16x1024xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = arith.addf %p, %p : f32
      linalg.yield %r : f32
    } -> tensor<?x16x1024xf32>
    %e2 = tensor.empty(%n) : tensor<?x16x1024xf32>
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<?x16x1024xf32>) outs(%e2 : tensor<?x16x1024xf32>) {
    ^bb0(%p: f32, %o: f32):
      %r = arith.mulf %p, %p : f32
      linalg.yield %r : f32
    } -> tensor<?x16x1024xf32>
    kiln.yield %t : tensor<?x16x1024xf32>
  }
  return %k : tensor<?x16x1024xf32, #kiln.device<cpu>>
}

// A pass over no image that reads a batched tensor (here image 0 of the
// input) keeps the kernel one pass over the batch: run per image it would
// read each image instead.
#plane = affine_map<(d0, d1) -> (d0, d1)>
#sub = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: // kiln kernel kiln_k3
// CHECK-NOT: _image
// CHECK: extern "C" const char *kiln_k3_dims
func.func @first_image(%x: tensor<?x16x4096xf32, #kiln.device<cpu>>) -> tensor<?x16x4096xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x : tensor<?x16x4096xf32, #kiln.device<cpu>>) -> (tensor<?x16x4096xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x16x4096xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %a, %c0 : tensor<?x16x4096xf32>
    %e = tensor.empty() : tensor<16x4096xf32>
    %f = linalg.generic {indexing_maps = [#plane], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<16x4096xf32>) {
    ^bb0(%o: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %v = tensor.extract %a[%c0, %i, %j] : tensor<?x16x4096xf32>
      linalg.yield %v : f32
    } -> tensor<16x4096xf32>
    %e2 = tensor.empty(%n) : tensor<?x16x4096xf32>
    %t = linalg.generic {indexing_maps = [#id, #sub, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %f : tensor<?x16x4096xf32>, tensor<16x4096xf32>) outs(%e2 : tensor<?x16x4096xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.subf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<?x16x4096xf32>
    kiln.yield %t : tensor<?x16x4096xf32>
  }
  return %k : tensor<?x16x4096xf32, #kiln.device<cpu>>
}

// A GEMM with the images in its rows (a MatMul on [batch, seq, k]
// activations by a weight) runs on groups of images, as many as keep its
// largest tensor (512 KiB an image) within the 8 MiB: 16 at a time, the
// last group what is left; a leading dim of 1 stays 1.
#a = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#b = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#c = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#row = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: // kiln kernel kiln_k4
// CHECK: static void kiln_k4_image(void **buffers) {
// CHECK: kiln_sgemm_tiles(
// CHECK: // Runs kiln_k4_image on groups of images (indices of the leading dim) in turn.
// CHECK-NEXT: extern "C" void kiln_k4(void **buffers) {
// CHECK-NEXT:   const int64_t *dims = static_cast<const int64_t *>(buffers[4]);
// CHECK-NEXT:   const int64_t images = dims[6];
// CHECK-NEXT:   // Small batches stay in cache: one pass over all of them.
// CHECK-NEXT:   if (images * 524288 <= 8388608)
// CHECK-NEXT:     return kiln_k4_image(buffers);
// CHECK-NEXT:   int64_t one[9];
// CHECK-NEXT:   std::memcpy(one, dims, sizeof(one));
// CHECK-NEXT:   void *image[5];
// CHECK-NEXT:   image[4] = one;
// CHECK-NEXT:   // 16 images at a time: within the same budget.
// CHECK-NEXT:   for (int64_t n = 0; n < images; n += 16) {
// CHECK-NEXT:     const int64_t group = std::min<int64_t>(16, images - n);
// CHECK-NEXT:     one[0] = dims[0] == 1 ? 1 : group;
// CHECK-NEXT:     one[6] = dims[6] == 1 ? 1 : group;
// CHECK-NEXT:     image[0] = static_cast<char *>(buffers[0]) + (dims[0] == 1 ? 0 : n) * int64_t(sizeof(float)) * 128 * 256;
// CHECK-NEXT:     image[1] = buffers[1];
// CHECK-NEXT:     image[2] = buffers[2];
// CHECK-NEXT:     image[3] = static_cast<char *>(buffers[3]) + (dims[6] == 1 ? 0 : n) * int64_t(sizeof(float)) * 128 * 1024;
// CHECK-NEXT:     kiln_k4_image(image);
// CHECK-NEXT:   }
// CHECK-NEXT: }
func.func @gemm_rows(%x: tensor<?x128x256xf32, #kiln.device<cpu>>, %w: tensor<256x1024xf32, #kiln.device<cpu>>, %bias: tensor<1024xf32, #kiln.device<cpu>>) -> tensor<?x128x1024xf32, #kiln.device<cpu>> {
  %k = kiln.kernel(%x, %w, %bias : tensor<?x128x256xf32, #kiln.device<cpu>>, tensor<256x1024xf32, #kiln.device<cpu>>, tensor<1024xf32, #kiln.device<cpu>>) -> (tensor<?x128x1024xf32, #kiln.device<cpu>>) {
  ^bb0(%a: tensor<?x128x256xf32>, %wt: tensor<256x1024xf32>, %bs: tensor<1024xf32>):
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %n = tensor.dim %a, %c0 : tensor<?x128x256xf32>
    %e = tensor.empty(%n) : tensor<?x128x1024xf32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x128x1024xf32>) -> tensor<?x128x1024xf32>
    %m = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%a, %wt : tensor<?x128x256xf32>, tensor<256x1024xf32>) outs(%z : tensor<?x128x1024xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.mulf %p, %q : f32
      %s = arith.addf %o, %r : f32
      linalg.yield %s : f32
    } -> tensor<?x128x1024xf32>
    %e2 = tensor.empty(%n) : tensor<?x128x1024xf32>
    %t = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%m, %bs : tensor<?x128x1024xf32>, tensor<1024xf32>) outs(%e2 : tensor<?x128x1024xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %r = arith.addf %p, %q : f32
      linalg.yield %r : f32
    } -> tensor<?x128x1024xf32>
    kiln.yield %t : tensor<?x128x1024xf32>
  }
  return %k : tensor<?x128x1024xf32, #kiln.device<cpu>>
}
