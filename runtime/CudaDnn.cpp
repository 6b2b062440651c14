//===- CudaDnn.cpp - conv launches through a dlopen'ed cuDNN --------------===//
//
// A conv launch is one cudnnConvolutionForward: NCHW f32 tensors, zero
// padding the same before and after (else the kernel pads the input in a
// phase before), cross-correlation as ONNX and
// PyTorch define a conv, groups through the group count. The math type is
// CUDNN_FMA_MATH: no TF32 tensor-core math on f32, as PyTorch eager with
// TF32 off, so results match the CPU path. The algorithm is cuDNN's own
// heuristic order (cudnnGetConvolutionForwardAlgorithm_v7, what PyTorch
// uses without benchmark mode): the first that succeeds in FMA math (as
// PyTorch with TF32 off) whose workspace, as the heuristic and
// cudnnGetConvolutionForwardWorkspaceSize both report it, fits the scratch
// slot codegen sized for it.
// A fused launch (a bias, maybe a residual z, then ReLU) is one
// cudnnConvolutionBiasActivationForward instead: y = relu(conv(x) + z +
// bias). cuDNN may refuse that call for an algorithm its plain conv takes;
// the next that fits is then tried, and the choice kept.
// Descriptors and the choice are made once per conv shape and context, under
// the same lock as the handle's stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"
#include "runtime/CudaLibrary.h"

#include "kiln/runtime.h"

namespace kiln::cuda {

namespace {
// cuDNN's enums (cudnn_graph.h, cudnn_cnn.h of cuDNN 9; the same in 8).
constexpr int kStatusSuccess = 0, kTensorNchw = 0, kDataFloat = 0,
              kCrossCorrelation = 1, kFmaMath = 3, kMaxAlgorithms = 8,
              kActivationRelu = 1, kPropagateNan = 1;
/// CUDNN_STATUS_NOT_SUPPORTED and its cuDNN 9 refinements (3000-3999), or
/// cuDNN 8's (9).
bool notSupported(int status) {
  return (status >= 3000 && status < 4000) || status == 9;
}
} // namespace

std::string Dnn::describe(int status) const {
  const char *text = errorString ? errorString(status) : nullptr;
  return text ? std::string(text) : "cuDNN status " + std::to_string(status);
}

const Dnn &loadDnn() {
  return loadLibraryOnce<Dnn>(
      "KILN_CUDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, "cuDNN",
      "conv launches",
      "set KILN_CUDNN or KILN_CUDA_HOME, or compile with kilnc "
      "--cuda-cudnn=false",
      [](Dnn &d, Symbols &sym) {
        sym(d.create, "cudnnCreate");
        sym(d.destroy, "cudnnDestroy");
        sym(d.setStream, "cudnnSetStream");
        sym(d.createTensor, "cudnnCreateTensorDescriptor");
        sym(d.destroyTensor, "cudnnDestroyTensorDescriptor");
        sym(d.setTensor4d, "cudnnSetTensor4dDescriptor");
        sym(d.createFilter, "cudnnCreateFilterDescriptor");
        sym(d.destroyFilter, "cudnnDestroyFilterDescriptor");
        sym(d.setFilter4d, "cudnnSetFilter4dDescriptor");
        sym(d.createConv, "cudnnCreateConvolutionDescriptor");
        sym(d.destroyConv, "cudnnDestroyConvolutionDescriptor");
        sym(d.setConv2d, "cudnnSetConvolution2dDescriptor");
        sym(d.setGroupCount, "cudnnSetConvolutionGroupCount");
        sym(d.setMathType, "cudnnSetConvolutionMathType");
        sym(d.getAlgorithms, "cudnnGetConvolutionForwardAlgorithm_v7");
        sym(d.workspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
        sym(d.forward, "cudnnConvolutionForward");
        sym(d.createActivation, "cudnnCreateActivationDescriptor");
        sym(d.destroyActivation, "cudnnDestroyActivationDescriptor");
        sym(d.setActivation, "cudnnSetActivationDescriptor");
        sym(d.biasActivationForward, "cudnnConvolutionBiasActivationForward");
        sym(d.errorString, "cudnnGetErrorString", /*required=*/false);
        sym(d.lastError, "cudnnGetLastErrorString", /*required=*/false);
      });
}

namespace {
/// Destroys the descriptors `s` holds.
void destroy(const Dnn &dnn, const Context::ConvSetup &s) {
  if (s.x)
    dnn.destroyTensor(s.x);
  if (s.y)
    dnn.destroyTensor(s.y);
  if (s.bias)
    dnn.destroyTensor(s.bias);
  if (s.relu)
    dnn.destroyActivation(s.relu);
  if (s.w)
    dnn.destroyFilter(s.w);
  if (s.conv)
    dnn.destroyConv(s.conv);
}
} // namespace

void Context::releaseDnn() {
  if (!dnnLibrary_)
    return;
  const Dnn &dnn = *dnnLibrary_;
  for (auto &[shape, setup] : convs_)
    destroy(dnn, setup);
  convs_.clear();
  if (dnn_)
    dnn.destroy(dnn_);
  dnn_ = nullptr;
}

void Context::conv(const plan::CudaKernel::Conv &c,
                   const std::vector<CUdeviceptr> &slots, CUstream stream,
                   const std::string &what) {
  std::lock_guard<std::mutex> lock(dnnMutex_);
  if (!dnnLibrary_)
    dnnLibrary_ = &loadDnn();
  const Dnn &dnn = *dnnLibrary_;
  makeCurrent();
  auto check = [&](int status, const char *call) {
    if (status == kStatusSuccess)
      return;
    std::string detail;
    if (dnn.lastError) {
      char text[512] = "";
      dnn.lastError(text, sizeof text);
      if (*text)
        detail = std::string(" (") + text + ")";
    }
    throw Error(name_ + ": " + what + ": " + call +
                " failed: " + dnn.describe(status) + detail);
  };
  if (!dnn_)
    check(dnn.create(&dnn_), "cudnnCreate");
  check(dnn.setStream(dnn_, stream), "cudnnSetStream");

  std::vector<int64_t> key(c.x, c.x + 4);
  key.insert(key.end(), c.w, c.w + 4);
  key.insert(key.end(),
             {c.pads[0], c.pads[1], c.strides[0], c.strides[1], c.dilations[0],
              c.dilations[1], c.groups, int64_t(c.workspaceBytes),
              int64_t(c.biasSlot.has_value())});
  auto found = convs_.find(key);
  if (found == convs_.end()) {
    // Kept only once complete: a failure leaves nothing half made.
    ConvSetup s;
    try {
      auto dim = [](int64_t v) { return int(v); };
      // An NCHW f32 tensor descriptor of `shape` into `t`.
      auto tensor = [&](Dnn::Tensor &t, const int64_t *shape) {
        check(dnn.createTensor(&t), "cudnnCreateTensorDescriptor");
        check(dnn.setTensor4d(t, kTensorNchw, kDataFloat, dim(shape[0]),
                              dim(shape[1]), dim(shape[2]), dim(shape[3])),
              "cudnnSetTensor4dDescriptor");
      };
      tensor(s.x, c.x);
      tensor(s.y, c.y);
      check(dnn.createFilter(&s.w), "cudnnCreateFilterDescriptor");
      check(dnn.setFilter4d(s.w, kDataFloat, kTensorNchw, dim(c.w[0]),
                            dim(c.w[1]), dim(c.w[2]), dim(c.w[3])),
            "cudnnSetFilter4dDescriptor");
      check(dnn.createConv(&s.conv), "cudnnCreateConvolutionDescriptor");
      check(dnn.setConv2d(s.conv, dim(c.pads[0]), dim(c.pads[1]),
                          dim(c.strides[0]), dim(c.strides[1]),
                          dim(c.dilations[0]), dim(c.dilations[1]),
                          kCrossCorrelation, kDataFloat),
            "cudnnSetConvolution2dDescriptor");
      check(dnn.setGroupCount(s.conv, dim(c.groups)),
            "cudnnSetConvolutionGroupCount");
      check(dnn.setMathType(s.conv, kFmaMath), "cudnnSetConvolutionMathType");
      if (c.biasSlot) {
        const int64_t channels[4] = {1, c.y[1], 1, 1};
        tensor(s.bias, channels);
        check(dnn.createActivation(&s.relu), "cudnnCreateActivationDescriptor");
        check(dnn.setActivation(s.relu, kActivationRelu, kPropagateNan, 0.0),
              "cudnnSetActivationDescriptor");
      }
      Dnn::AlgoPerf perf[kMaxAlgorithms] = {};
      int count = 0;
      check(dnn.getAlgorithms(dnn_, s.x, s.w, s.conv, s.y, kMaxAlgorithms,
                              &count, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7");
      // Those that run in FMA math (any other may round f32 through TF32)
      // with a workspace that fits, as the descriptor reports it too.
      std::string seen;
      for (int i = 0; i < count && i < kMaxAlgorithms; ++i) {
        const Dnn::AlgoPerf &p = perf[i];
        seen += (seen.empty() ? "" : ", ") + std::to_string(p.algo) + " (";
        if (p.status != kStatusSuccess) {
          seen += dnn.describe(p.status) + ")";
          continue;
        }
        if (p.mathType != kFmaMath) {
          seen += "math type " + std::to_string(p.mathType) + ")";
          continue;
        }
        size_t bytes = p.memory;
        if (bytes <= c.workspaceBytes &&
            dnn.workspaceSize(dnn_, s.x, s.w, s.conv, s.y, p.algo, &bytes) !=
                kStatusSuccess)
          bytes = ~size_t(0);
        seen += bytes == ~size_t(0) ? std::string("no workspace size")
                                    : std::to_string(bytes) + " bytes";
        seen += ")";
        if (bytes <= c.workspaceBytes)
          s.algos.push_back(p.algo);
      }
      if (s.algos.empty())
        throw Error(name_ + ": " + what +
                    ": cuDNN offers no conv algorithm in FMA math whose "
                    "workspace fits " +
                    std::to_string(c.workspaceBytes) +
                    " bytes (offered: " + (seen.empty() ? "none" : seen) + ")");
    } catch (...) {
      destroy(dnn, s);
      throw;
    }
    found = convs_.emplace(key, s).first;
  }
  ConvSetup &s = found->second;
  auto at = [&](size_t slot) { return reinterpret_cast<void *>(slots[slot]); };
  float one = 1, beta = float(c.beta);
  if (!c.biasSlot) {
    check(dnn.forward(dnn_, &one, s.x, at(c.xSlot), s.w, at(c.wSlot), s.conv,
                      s.algos.front(), at(c.workspace), c.workspaceBytes, &beta,
                      s.y, at(c.ySlot)),
          "cudnnConvolutionForward");
    return;
  }
  // Without a residual, z is y scaled by 0.
  float zScale = c.zSlot ? 1.0f : 0.0f;
  void *z = at(c.zSlot.value_or(c.ySlot));
  for (;;) {
    int status = dnn.biasActivationForward(
        dnn_, &one, s.x, at(c.xSlot), s.w, at(c.wSlot), s.conv, s.algos.front(),
        at(c.workspace), c.workspaceBytes, &zScale, s.y, z, s.bias,
        at(*c.biasSlot), s.relu, s.y, at(c.ySlot));
    if (!notSupported(status) || s.algos.size() == 1) {
      check(status, "cudnnConvolutionBiasActivationForward");
      return;
    }
    s.algos.erase(s.algos.begin());
  }
}

} // namespace kiln::cuda
