//===- Cudnn.cpp - the fake cuDNN -----------------------------------------===//
//
// A fake cuDNN in the same library ($KILN_CUDNN points here too), the
// legacy convolution API kiln uses: handles belong to the context current
// at creation; a conv runs on the handle's stream, NCHW, every tensor and
// the workspace in live allocations of that context's device, with the
// descriptors' shapes checked as cuDNN checks them.
//
// Its heuristic offers, in order: 6 in tensor-op
// math and 5 in the default math (either may use TF32, which kiln must
// not take), 7, which is not supported, 1, which needs kFakeAlgo1Bytes of
// workspace (more than kiln gives), then 0 and 2, which need
// kFakeAlgo0Bytes. All that run compute the same thing here, except that
// the fused call refuses 0. Statuses are cuDNN 9's.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <cstring>
#include <string>
#include <vector>

namespace fake {
namespace {
enum {
  DnnSuccess = 0,
  DnnNotInitialized = 1001,
  DnnBadParam = 2000,
  DnnNotSupported = 3000,
  DnnFailed = 5000
};
constexpr size_t kFakeAlgo0Bytes = 256, kFakeAlgo1Bytes = size_t(1) << 40;
struct DnnHandle {
  Ctx *ctx;
  Stream *stream;
};
struct DnnDescriptor {
  int dims[4] = {0, 0, 0, 0};       // tensor, filter
  int conv[6] = {0, 0, 0, 0, 0, 0}; // pad h, w, stride h, w, dilation h, w
  int groups = 1, math = 0;
  bool set = false;
};
struct DnnAlgoPerf { // cudnnConvolutionFwdAlgoPerf_t
  int algo, status;
  float time;
  size_t memory;
  int determinism, mathType, reserved[3];
};
struct DnnActivation {
  int mode = -1, nan = -1;
  double coef = 0;
};
std::set<DnnHandle *> dnnHandles;
std::set<DnnDescriptor *> dnnDescriptors;
std::set<DnnActivation *> dnnActivations;
long convs = 0, convsNotFma = 0, convsFused = 0;

size_t elements(const DnnDescriptor *d) {
  return size_t(d->dims[0]) * d->dims[1] * d->dims[2] * d->dims[3];
}
} // namespace

long dnnCount(const std::string &what) {
  if (what == "dnn")
    return long(dnnHandles.size());
  if (what == "dnn_descriptors")
    return long(dnnDescriptors.size() + dnnActivations.size());
  if (what == "convs_fused")
    return convsFused;
  if (what == "convs")
    return convs;
  if (what == "convs_not_fma")
    return convsNotFma;
  return -1;
}
} // namespace fake

using namespace fake;

extern "C" {

int cudnnCreate(DnnHandle **h) {
  LOCK;
  if (!initialized || !current || current->retained <= 0)
    return DnnNotInitialized;
  *h = new DnnHandle{current, nullptr};
  dnnHandles.insert(*h);
  return DnnSuccess;
}

int cudnnDestroy(DnnHandle *h) {
  LOCK;
  if (!dnnHandles.erase(h))
    return DnnBadParam;
  delete h;
  return DnnSuccess;
}

int cudnnSetStream(DnnHandle *h, Stream *s) {
  LOCK;
  if (!dnnHandles.count(h) || !streams.count(s) || s->ctx != h->ctx)
    return DnnBadParam;
  h->stream = s;
  return DnnSuccess;
}

const char *cudnnGetErrorString(int status) {
  switch (status) {
  case DnnSuccess:
    return "CUDNN_STATUS_SUCCESS";
  case DnnNotInitialized:
    return "CUDNN_STATUS_NOT_INITIALIZED";
  case DnnBadParam:
    return "CUDNN_STATUS_BAD_PARAM";
  case DnnNotSupported:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  default:
    return "CUDNN_STATUS_EXECUTION_FAILED";
  }
}

static int createDescriptor(DnnDescriptor **d) {
  LOCK;
  *d = new DnnDescriptor;
  dnnDescriptors.insert(*d);
  return DnnSuccess;
}

static int destroyDescriptor(DnnDescriptor *d) {
  LOCK;
  if (!dnnDescriptors.erase(d))
    return DnnBadParam;
  delete d;
  return DnnSuccess;
}

static int setDims(DnnDescriptor *d, int n, int c, int h, int w) {
  LOCK;
  if (!dnnDescriptors.count(d) || n < 1 || c < 1 || h < 1 || w < 1)
    return DnnBadParam;
  *d = DnnDescriptor{{n, c, h, w}, {}, 1, 0, true};
  return DnnSuccess;
}

int cudnnCreateTensorDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyTensorDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}
int cudnnCreateFilterDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyFilterDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}
int cudnnCreateConvolutionDescriptor(DnnDescriptor **d) {
  return createDescriptor(d);
}
int cudnnDestroyConvolutionDescriptor(DnnDescriptor *d) {
  return destroyDescriptor(d);
}

// Format NCHW (0) and data type float (0) only.
int cudnnSetTensor4dDescriptor(DnnDescriptor *d, int format, int type, int n,
                               int c, int h, int w) {
  return format || type ? DnnBadParam : setDims(d, n, c, h, w);
}

int cudnnSetFilter4dDescriptor(DnnDescriptor *d, int type, int format, int k,
                               int c, int h, int w) {
  return format || type ? DnnBadParam : setDims(d, k, c, h, w);
}

// Cross-correlation (mode 1) in float (0) only.
int cudnnSetConvolution2dDescriptor(DnnDescriptor *d, int padH, int padW,
                                    int strideH, int strideW, int dilationH,
                                    int dilationW, int mode, int type) {
  LOCK;
  if (!dnnDescriptors.count(d) || padH < 0 || padW < 0 || strideH < 1 ||
      strideW < 1 || dilationH < 1 || dilationW < 1 || mode != 1 || type)
    return DnnBadParam;
  *d = DnnDescriptor{
      {}, {padH, padW, strideH, strideW, dilationH, dilationW}, 1, 0, true};
  return DnnSuccess;
}

int cudnnSetConvolutionGroupCount(DnnDescriptor *d, int groups) {
  LOCK;
  if (!dnnDescriptors.count(d) || !d->set || groups < 1)
    return DnnBadParam;
  d->groups = groups;
  return DnnSuccess;
}

int cudnnSetConvolutionMathType(DnnDescriptor *d, int math) {
  LOCK;
  if (!dnnDescriptors.count(d) || !d->set || math < 0 || math > 3)
    return DnnBadParam;
  d->math = math;
  return DnnSuccess;
}

/// The output dims of conv `c` of `x` by `w`, or false when they do not
/// make one.
static bool convOutput(const DnnDescriptor *x, const DnnDescriptor *w,
                       const DnnDescriptor *c, int out[4]) {
  if (!x->set || !w->set || !c->set || x->dims[1] != w->dims[1] * c->groups ||
      w->dims[0] % c->groups)
    return false;
  out[0] = x->dims[0];
  out[1] = w->dims[0];
  for (int i = 0; i < 2; ++i) {
    int window = c->conv[4 + i] * (w->dims[2 + i] - 1) + 1;
    int span = x->dims[2 + i] + 2 * c->conv[i] - window;
    if (span < 0)
      return false;
    out[2 + i] = span / c->conv[2 + i] + 1;
  }
  return true;
}

/// The workspace `algo` needs for a conv into `y`: 0 and 2 need
/// kFakeAlgo0Bytes, or 4 bytes per output when that is less (workspaces
/// scale with the problem: a tiny conv must not need more than kiln's
/// im2col-sized slot).
static size_t fakeWorkspace(int algo, const DnnDescriptor *y) {
  size_t scaled = std::min(kFakeAlgo0Bytes, 4 * elements(y));
  return algo == 1 ? kFakeAlgo1Bytes : algo == 0 || algo == 2 ? scaled : 0;
}

int cudnnGetConvolutionForwardAlgorithm_v7(DnnHandle *h, DnnDescriptor *x,
                                           DnnDescriptor *w, DnnDescriptor *c,
                                           DnnDescriptor *y, int requested,
                                           int *returned, DnnAlgoPerf *perf) {
  LOCK;
  int out[4];
  if (!dnnHandles.count(h) || current != h->ctx)
    return DnnNotInitialized;
  if (!dnnDescriptors.count(x) || !dnnDescriptors.count(w) ||
      !dnnDescriptors.count(c) || !dnnDescriptors.count(y) || requested < 1 ||
      !convOutput(x, w, c, out) || std::memcmp(out, y->dims, sizeof out))
    return DnnBadParam;
  DnnAlgoPerf offered[6] = {
      {6, DnnSuccess, 0.1f, 0, 1, 1, {}},
      {5, DnnSuccess, 0.2f, 0, 1, 0, {}},
      {7, DnnNotSupported, -1.0f, 0, 1, c->math, {}},
      {1, DnnSuccess, 0.5f, kFakeAlgo1Bytes, 1, c->math, {}},
      {0, DnnSuccess, 1.0f, fakeWorkspace(0, y), 1, c->math, {}},
      {2, DnnSuccess, 2.0f, fakeWorkspace(2, y), 1, c->math, {}}};
  *returned = requested < 6 ? requested : 6;
  std::memcpy(perf, offered, sizeof(DnnAlgoPerf) * size_t(*returned));
  return DnnSuccess;
}

int cudnnGetConvolutionForwardWorkspaceSize(DnnHandle *h, DnnDescriptor *x,
                                            DnnDescriptor *w, DnnDescriptor *c,
                                            DnnDescriptor *y, int algo,
                                            size_t *bytes) {
  LOCK;
  if (!dnnHandles.count(h) || current != h->ctx)
    return DnnNotInitialized;
  if (!dnnDescriptors.count(x) || !dnnDescriptors.count(w) ||
      !dnnDescriptors.count(c) || !dnnDescriptors.count(y))
    return DnnBadParam;
  if (algo == 7)
    return DnnNotSupported;
  *bytes = fakeWorkspace(algo, y);
  return DnnSuccess;
}

/// Checks a conv call's handle, descriptors, algorithm, workspace and
/// tensors (each a live allocation of the handle's device), then computes
/// the conv into `sums` (y's elements); a cuDNN status.
static int convolve(DnnHandle *h, DnnDescriptor *xd, const float *x,
                    DnnDescriptor *wd, const float *w, DnnDescriptor *cd,
                    int algo, void *workspace, size_t workspaceBytes,
                    DnnDescriptor *yd, float *y, std::vector<float> &sums) {
  if (!dnnHandles.count(h) || !h->stream || current != h->ctx)
    return DnnNotInitialized;
  int out[4];
  if (!dnnDescriptors.count(xd) || !dnnDescriptors.count(wd) ||
      !dnnDescriptors.count(cd) || !dnnDescriptors.count(yd) ||
      !convOutput(xd, wd, cd, out) || std::memcmp(out, yd->dims, sizeof out) ||
      algo < 0 || algo > 7)
    return DnnBadParam;
  if (algo == 7)
    return DnnNotSupported;
  size_t need = fakeWorkspace(algo, yd);
  int device = h->ctx->device;
  if (workspaceBytes < need || deviceOf(uintptr_t(workspace), need) != device ||
      deviceOf(uintptr_t(x), elements(xd) * 4) != device ||
      deviceOf(uintptr_t(w), elements(wd) * 4) != device ||
      deviceOf(uintptr_t(y), elements(yd) * 4) != device)
    return DnnFailed;
  const int *X = xd->dims, *W = wd->dims, *c = cd->conv;
  int groups = cd->groups, mg = W[0] / groups;
  sums.assign(elements(yd), 0.0f);
  for (int n = 0; n < out[0]; ++n)
    for (int m = 0; m < out[1]; ++m)
      for (int oh = 0; oh < out[2]; ++oh)
        for (int ow = 0; ow < out[3]; ++ow) {
          float sum = 0;
          for (int k = 0; k < W[1]; ++k)
            for (int i = 0; i < W[2]; ++i)
              for (int j = 0; j < W[3]; ++j) {
                int ih = oh * c[2] + i * c[4] - c[0],
                    iw = ow * c[3] + j * c[5] - c[1];
                if (ih < 0 || iw < 0 || ih >= X[2] || iw >= X[3])
                  continue;
                int ch = m / mg * W[1] + k;
                sum += x[((size_t(n) * X[1] + ch) * X[2] + ih) * X[3] + iw] *
                       w[((size_t(m) * W[1] + k) * W[2] + i) * W[3] + j];
              }
          sums[((size_t(n) * out[1] + m) * out[2] + oh) * out[3] + ow] = sum;
        }
  ++convs;
  if (cd->math != 3 || algo == 5 || algo == 6) // CUDNN_FMA_MATH: no TF32
    ++convsNotFma;
  return DnnSuccess;
}

int cudnnConvolutionForward(DnnHandle *h, const float *alpha, DnnDescriptor *xd,
                            const float *x, DnnDescriptor *wd, const float *w,
                            DnnDescriptor *cd, int algo, void *workspace,
                            size_t workspaceBytes, const float *beta,
                            DnnDescriptor *yd, float *y) {
  LOCK;
  std::vector<float> sums;
  if (int status = convolve(h, xd, x, wd, w, cd, algo, workspace,
                            workspaceBytes, yd, y, sums))
    return status;
  for (size_t i = 0; i < sums.size(); ++i)
    y[i] = *alpha * sums[i] + (*beta == 0 ? 0.0f : *beta * y[i]);
  return DnnSuccess;
}

int cudnnCreateActivationDescriptor(DnnActivation **a) {
  LOCK;
  *a = new DnnActivation;
  dnnActivations.insert(*a);
  return DnnSuccess;
}

int cudnnDestroyActivationDescriptor(DnnActivation *a) {
  LOCK;
  if (!dnnActivations.erase(a))
    return DnnBadParam;
  delete a;
  return DnnSuccess;
}

// Modes sigmoid (0) to swish (6); NaN propagation 0 or 1.
int cudnnSetActivationDescriptor(DnnActivation *a, int mode, int nan,
                                 double coef) {
  LOCK;
  if (!dnnActivations.count(a) || mode < 0 || mode > 6 || nan < 0 || nan > 1)
    return DnnBadParam;
  *a = {mode, nan, coef};
  return DnnSuccess;
}

// y = act(alpha1 conv(x) + alpha2 z + bias), ReLU only here. It refuses
// algorithm 0 as not supported (the real one may refuse some algorithms for
// the fused call), and z (when alpha2 is not 0) and the [1, C, 1, 1] bias
// must be live allocations of the device.
int cudnnConvolutionBiasActivationForward(
    DnnHandle *h, const float *alpha1, DnnDescriptor *xd, const float *x,
    DnnDescriptor *wd, const float *w, DnnDescriptor *cd, int algo,
    void *workspace, size_t workspaceBytes, const float *alpha2,
    DnnDescriptor *zd, const float *z, DnnDescriptor *bd, const float *bias,
    DnnActivation *ad, DnnDescriptor *yd, float *y) {
  LOCK;
  if (!dnnActivations.count(ad) || ad->mode != 1 || !dnnDescriptors.count(zd) ||
      !dnnDescriptors.count(bd) || !dnnDescriptors.count(yd) ||
      std::memcmp(zd->dims, yd->dims, sizeof zd->dims) || bd->dims[0] != 1 ||
      bd->dims[1] != yd->dims[1] || bd->dims[2] != 1 || bd->dims[3] != 1)
    return DnnBadParam;
  if (algo == 0)
    return DnnNotSupported;
  int device = h && dnnHandles.count(h) ? h->ctx->device : -1;
  if (deviceOf(uintptr_t(bias), elements(bd) * 4) != device ||
      (*alpha2 != 0 && deviceOf(uintptr_t(z), elements(zd) * 4) != device))
    return DnnFailed;
  std::vector<float> sums;
  if (int status = convolve(h, xd, x, wd, w, cd, algo, workspace,
                            workspaceBytes, yd, y, sums))
    return status;
  size_t plane = size_t(yd->dims[2]) * yd->dims[3];
  for (size_t i = 0; i < sums.size(); ++i) {
    float v = *alpha1 * sums[i] + bias[i / plane % yd->dims[1]];
    if (*alpha2 != 0)
      v += *alpha2 * z[i];
    y[i] = v != v || v > 0 ? v : 0.0f;
  }
  ++convsFused;
  return DnnSuccess;
}

} // extern "C"
