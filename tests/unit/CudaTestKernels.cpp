//===- CudaTestKernels.cpp - CPU twins of the CUDA test kernels -----------===//
//
// The code section of the CUDA tests' artifacts (kernel ABI 1): what a cuda
// role runs when it is bound to a host device. Built as a shared library
// next to the test binaries.
//
//===----------------------------------------------------------------------===//

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
