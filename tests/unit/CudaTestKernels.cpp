//===- CudaTestKernels.cpp - CPU twins of the CUDA test kernels -----------===//
//
// The code section of the CUDA tests' artifacts (kernel ABI 1): what a cuda
// role runs when it is bound to a host device. Built as a shared library
// next to the test binaries.
//
//===----------------------------------------------------------------------===//

#include <algorithm>

#define N 1000

extern "C" int kiln_abi_version(void) { return 1; }

extern "C" void k_add_one(void **b) {
  const float *x = (const float *)b[0];
  float *y = (float *)b[1];
  for (int i = 0; i < N; ++i)
    y[i] = x[i] + 1.0f;
}

extern "C" void k_add(void **b) {
  const float *x = (const float *)b[0], *y = (const float *)b[1];
  float *z = (float *)b[2];
  for (int i = 0; i < N; ++i)
    z[i] = x[i] + y[i];
}

extern "C" void k_twice_plus_one(void **b) {
  const float *x = (const float *)b[0];
  float *y = (float *)b[1];
  for (int i = 0; i < N; ++i)
    y[i] = (x[i] + x[i]) + 1.0f;
}

extern "C" void k_fault(void **) {}

// k_conv {x, w, y}: a conv with 2 groups, pads (1, 0), strides (2, 1) and
// dilations (1, 2) of x[2x4x10x10] by w[6x2x3x3] into y[2x6x5x6]; the rest
// of y is zero.
extern "C" void k_conv(void **b) {
  const float *x = static_cast<const float *>(b[0]);
  const float *w = static_cast<const float *>(b[1]);
  float *y = static_cast<float *>(b[2]);
  for (int i = 0; i < 1000; ++i)
    y[i] = 0;
  for (int n = 0; n < 2; ++n)
    for (int m = 0; m < 6; ++m)
      for (int oh = 0; oh < 5; ++oh)
        for (int ow = 0; ow < 6; ++ow) {
          float sum = 0;
          for (int c = 0; c < 2; ++c)
            for (int i = 0; i < 3; ++i) {
              int h = oh * 2 + i - 1; // the pad row above and below
              if (h < 0 || h >= 10)
                continue;
              for (int j = 0; j < 3; ++j)
                sum += x[((n * 4 + m / 3 * 2 + c) * 10 + h) * 10 + ow + j * 2] *
                       w[((m * 2 + c) * 3 + i) * 3 + j];
            }
          y[((n * 6 + m) * 5 + oh) * 6 + ow] = sum;
        }
}

// k_conv_fused {x, w, y}: k_conv, then y = max(y + w[m] + x[i], 0) for
// each of its outputs i in channel m (cuDNN's fused conv with the bias in w
// and the residual in x).
extern "C" void k_conv_fused(void **b) {
  k_conv(b);
  const float *x = static_cast<const float *>(b[0]);
  const float *w = static_cast<const float *>(b[1]);
  float *y = static_cast<float *>(b[2]);
  for (int i = 0; i < 360; ++i)
    y[i] = std::max(y[i] + w[i / 30 % 6] + x[i], 0.0f);
}

// k_gemm {x, w, y}: two batches of x[10x20] times w[25x20] transposed (one
// shared), into y[2x10x25]; the rest of y is zero.
extern "C" void k_gemm(void **b) {
  const float *x = static_cast<const float *>(b[0]);
  const float *w = static_cast<const float *>(b[1]);
  float *y = static_cast<float *>(b[2]);
  for (int i = 0; i < 1000; ++i)
    y[i] = 0;
  for (int batch = 0; batch < 2; ++batch)
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 25; ++j) {
        float sum = 0;
        for (int l = 0; l < 20; ++l)
          sum += x[batch * 200 + i * 20 + l] * w[j * 20 + l];
        y[batch * 250 + i * 25 + j] = sum;
      }
}
