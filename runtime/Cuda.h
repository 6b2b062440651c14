//===- Cuda.h - the CUDA driver API, loaded lazily with dlopen ----*- C++
//-*-===//
//
// The CUDA backend of the runtime (docs/devices.md). No CUDA header and no
// CUDA library at build time: the few driver API types and entry points
// kiln needs are declared here, with the signatures and values of cuda.h,
// and resolved with dlsym from libcuda.so.1 (or $KILN_CUDA_DRIVER) the first
// time a role is bound to a cuda device. Where cuda.h #defines a name to a
// versioned symbol (cuMemAlloc -> cuMemAlloc_v2), the versioned one is used.
//
//   Driver   the loaded library: function pointers, cuInit done, the number
//            of devices, and CUresult -> "CUDA_ERROR_X (text)".
//   Context  one bound cuda device of a loaded module: its retained primary
//            context, a pool of non-blocking streams, a caching allocator,
//            the module's PTX loaded once and its entry points.
//
// Every Context method makes its context current on the calling thread
// first, so any thread may call it. Every CUresult is checked; failures are
// kiln::Error naming the device, what was being done, and the CUDA error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_H
#define KILN_RUNTIME_CUDA_H

#include "runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cuda {

// Types of cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUstream = struct CUstream_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUevent = struct CUevent_st *;

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotFound = 500;

/// The launch geometry of docs/devices.md: blocks of 256 threads, a grid of
/// ceil(threads / 256) blocks, at least 1 and at most 1 << 20 (the kernels
/// use grid-stride loops).
inline constexpr unsigned kBlockSize = 256;
unsigned gridSize(uint64_t threads);

struct Driver {
  std::string path; // what was dlopen'ed
  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
  int deviceCount = 0;

  CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int *) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t *, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuMemGetInfo)(size_t *, size_t *) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void *) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
                                CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t,
                                CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t,
                                CUstream) = nullptr;
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext,
                                size_t, CUstream) = nullptr;
  CUresult (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent *, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                                 void **) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule,
                                  const char *) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **) = nullptr;

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult result) const;
  /// Throws kiln::Error "WHAT: CALL failed: CUDA_ERROR_X (text)" unless
  /// `result` is CUDA_SUCCESS.
  void check(CUresult result, const char *call, const std::string &what) const;
};

/// The driver of this process: the library $KILN_CUDA_DRIVER names, else
/// libcuda.so.1, loaded and cuInit'ed on the first call (per library path;
/// later calls return the same answer). nullptr when CUDA is unavailable,
/// with `reason` set: no driver library, not a CUDA driver, cuInit failed,
/// or no device.
const Driver *load(std::string &reason);

/// The ordinal of the device with the most free memory, ties to the lowest.
int deviceWithMostFreeMemory(const Driver &driver);

/// "NVIDIA H200, 139.8 GiB, 139.2 GiB free": for listings.
std::string describeDevice(const Driver &driver, int ordinal);

/// dlopens `override` if not empty, else the first of `names` that loads
/// from $KILN_CUDA_HOME/lib64 (default /usr/local/cuda), else from the
/// library path. Sets `path` to the one loaded, or to the list tried when
/// none loads (then returns nullptr).
void *openToolkitLibrary(const std::string &override,
                         const std::vector<std::string> &names,
                         std::string &path);

/// cuBLAS, dlopen'ed on the first GEMM: $KILN_CUBLAS, else libcublas from
/// $KILN_CUDA_HOME/lib64 (default /usr/local/cuda), else the library path.
struct Blas {
  using Handle = struct cublasContext *;
  std::string path;
  int (*create)(Handle *) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*setStream)(Handle, CUstream) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float *, const float *,
               int, long long, const float *, int, long long, const float *,
               float *, int, long long, int) = nullptr;
  int (*dgemm)(Handle, int, int, int, int, int, const double *, const double *,
               int, long long, const double *, int, long long, const double *,
               double *, int, long long, int) = nullptr;
  const char *(*statusString)(int) = nullptr; // optional
  /// "CUBLAS_STATUS_X" or the number.
  std::string describe(int status) const;
};

/// The cuBLAS of this process, loaded on the first call; throws kiln::Error
/// saying why when it cannot be loaded.
const Blas &loadBlas();

/// cuDNN, dlopen'ed on the first conv: $KILN_CUDNN, else libcudnn from
/// $KILN_CUDA_HOME/lib64 (default /usr/local/cuda), else the library path.
/// Only the legacy convolution API (cuDNN 8 and 9) is used; enums are ints.
struct Dnn {
  using Handle = struct cudnnContext *;
  using Tensor = struct cudnnTensorStruct *;
  using Filter = struct cudnnFilterStruct *;
  using Conv = struct cudnnConvolutionStruct *;
  using Activation = struct cudnnActivationStruct *;
  /// cudnnConvolutionFwdAlgoPerf_t.
  struct AlgoPerf {
    int algo, status;
    float time;
    size_t memory;
    int determinism, mathType, reserved[3];
  };
  std::string path;
  int (*create)(Handle *) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*setStream)(Handle, CUstream) = nullptr;
  int (*createTensor)(Tensor *) = nullptr;
  int (*destroyTensor)(Tensor) = nullptr;
  int (*setTensor4d)(Tensor, int format, int dtype, int, int, int,
                     int) = nullptr;
  int (*createFilter)(Filter *) = nullptr;
  int (*destroyFilter)(Filter) = nullptr;
  int (*setFilter4d)(Filter, int dtype, int format, int, int, int,
                     int) = nullptr;
  int (*createConv)(Conv *) = nullptr;
  int (*destroyConv)(Conv) = nullptr;
  int (*setConv2d)(Conv, int, int, int, int, int, int, int mode,
                   int dtype) = nullptr;
  int (*setGroupCount)(Conv, int) = nullptr;
  int (*setMathType)(Conv, int) = nullptr;
  int (*getAlgorithms)(Handle, Tensor, Filter, Conv, Tensor, int, int *,
                       AlgoPerf *) = nullptr;
  int (*workspaceSize)(Handle, Tensor, Filter, Conv, Tensor, int algo,
                       size_t *) = nullptr;
  int (*forward)(Handle, const void *alpha, Tensor, const void *x, Filter,
                 const void *w, Conv, int algo, void *workspace,
                 size_t workspaceBytes, const void *beta, Tensor,
                 void *y) = nullptr;
  int (*createActivation)(Activation *) = nullptr;
  int (*destroyActivation)(Activation) = nullptr;
  int (*setActivation)(Activation, int mode, int nan, double coef) = nullptr;
  int (*biasActivationForward)(Handle, const void *alpha1, Tensor,
                               const void *x, Filter, const void *w, Conv,
                               int algo, void *workspace, size_t workspaceBytes,
                               const void *alpha2, Tensor zDesc, const void *z,
                               Tensor biasDesc, const void *bias, Activation,
                               Tensor yDesc, void *y) = nullptr;
  const char *(*errorString)(int) = nullptr;          // optional
  void (*lastError)(char *message, size_t) = nullptr; // optional (cuDNN 9)
  /// "CUDNN_STATUS_X" or the number.
  std::string describe(int status) const;
};

/// The cuDNN of this process, loaded on the first call; throws kiln::Error
/// saying why when it cannot be loaded.
const Dnn &loadDnn();

enum class Library { Blas, Dnn };

/// Whether cuBLAS (cuDNN) loads (loadBlas, loadDnn). When it does not, and
/// $KILN_CUBLAS ($KILN_CUDNN) is not "none", says on stderr that the
/// generated stand-ins run instead: ask once, and only when there are some.
bool libraryLoads(Library library);

/// One bound cuda device.
class Context {
public:
  /// Retains the primary context of device `ordinal`; `name` ("cuda:0")
  /// prefixes every error.
  Context(const Driver &driver, int ordinal, std::string name);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  const std::string &name() const { return name_; }
  const Driver &driver() const { return driver_; }
  /// Makes this context current on the calling thread.
  void makeCurrent() const;

  /// Device memory of at least `bytes` (sizes rounded up to 512 bytes; a
  /// freed block of the same rounded size is reused). On out of memory the
  /// cached blocks are freed and the allocation retried once; returns 0 when
  /// that fails too. Other errors throw.
  CUdeviceptr allocate(size_t bytes);
  /// Gives a block back to the cache. The caller has synchronised the
  /// streams that used it.
  void release(CUdeviceptr pointer, size_t bytes);
  /// Frees every cached block.
  void emptyCache();
  /// Bytes held in the cache (freed by kiln, not by the driver).
  size_t cachedBytes() const;
  /// cuMemGetInfo: free bytes on the device.
  size_t freeMemory() const;

  /// Page-locked host memory of at least `bytes` (sizes round up to a
  /// power of two, at least kStageMin), for staging copies to the device;
  /// a released block of the same size is reused. nullptr when the driver
  /// has no more to give (the caller then copies from pageable memory).
  void *pinned(size_t bytes);
  /// Gives a pinned block back; the copy that read it has completed. Kept
  /// for reuse while the pool holds at most kPinnedPoolMax bytes, else
  /// freed.
  void releasePinned(void *block, size_t bytes);
  /// Copies to the device of at least this many bytes go through pinned
  /// staging blocks (smaller ones are not worth the extra host copy).
  static constexpr size_t kStageMin = 64 * 1024;
  /// The most pinned memory one set of streams stages at once (the rest
  /// of its copies go from pageable memory), and the most the pool keeps:
  /// page-locked memory is taken from the whole machine.
  static constexpr size_t kStageMax = size_t(64) << 20;
  static constexpr size_t kPinnedPoolMax = size_t(256) << 20;

  /// A stream from the pool (created when the pool is empty).
  CUstream acquireStream();
  /// Returns a stream to the pool; the caller has synchronised it.
  void releaseStream(CUstream stream);
  /// Waits for `stream`; throws "NAME: WHAT: cuStreamSynchronize failed:
  /// ...".
  void synchronize(CUstream stream, const std::string &what) const;

  /// A new event (no timing) recorded on `stream`, a stream of this
  /// context: it completes when the work enqueued there so far has.
  CUevent record(CUstream stream, const std::string &what) const;
  /// Makes `stream`, a stream of this context, wait for `event` (of any
  /// context) without blocking the calling thread.
  void wait(CUstream stream, CUevent event, const std::string &what) const;
  /// Blocks the calling thread until `event`, of this context, completes.
  void waitHost(CUevent event, const std::string &what) const;
  /// Destroys an event of this context (errors ignored: it runs while
  /// cleaning up).
  void destroyEvent(CUevent event) const;

  // Asynchronous copies on `stream`, a stream of this context.
  void toDevice(CUdeviceptr dst, const void *src, size_t bytes,
                CUstream stream) const;
  void toHost(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) const;
  void withinDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                    CUstream stream) const;
  /// From `src` on `from` to `dst` here, on `stream` (one of this context).
  void fromPeer(CUdeviceptr dst, const Context &from, CUdeviceptr src,
                size_t bytes, CUstream stream) const;

  /// Loads a PTX module (`size` bytes, no NUL inside) with the JIT error
  /// log; `arch` ("sm_80") is for messages. Once per context.
  void loadModule(const char *ptx, size_t size, const std::string &arch);
  /// The entry point `entry` of the loaded module; `what` names the step.
  CUfunction function(const std::string &entry, const std::string &what);
  /// Launches `fn(KilnSlots{slots})` over `threads` threads on `stream`.
  void launch(CUfunction fn, uint64_t threads, std::vector<CUdeviceptr> &slots,
              CUstream stream, const std::string &what) const;

  /// One GEMM launch (plan::CudaKernel::Gemm) on `stream` with the step's
  /// slots; cuBLAS and this context's handle are set up on first use.
  void gemm(const plan::CudaKernel::Gemm &g,
            const std::vector<CUdeviceptr> &slots, CUstream stream,
            const std::string &what);

  /// The descriptors and the algorithm of one conv shape.
  struct ConvSetup {
    Dnn::Tensor x = nullptr, y = nullptr, bias = nullptr;
    Dnn::Filter w = nullptr;
    Dnn::Conv conv = nullptr;
    Dnn::Activation relu = nullptr; // fused convs
    /// The algorithms that fit, in cuDNN's order; the first runs. A fused
    /// conv drops those its call refuses as not supported.
    std::vector<int> algos;
  };
  /// One conv launch (plan::CudaKernel::Conv) on `stream` with the step's
  /// slots; cuDNN and this context's handle are set up on first use, and
  /// each conv's descriptors and algorithm once per shape.
  void conv(const plan::CudaKernel::Conv &c,
            const std::vector<CUdeviceptr> &slots, CUstream stream,
            const std::string &what);

private:
  void check(CUresult result, const char *call, const std::string &what) const;
  /// Destroys cuDNN's handle and descriptors (the context is current).
  void releaseDnn();

  const Driver &driver_;
  int ordinal_;
  std::string name_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;

  mutable std::mutex mutex_; // the cache and the stream pool
  std::multimap<size_t, CUdeviceptr> cache_;
  size_t cached_ = 0;
  std::vector<CUstream> streams_, idle_;
  std::multimap<size_t, void *> pinned_; // released pinned blocks, by size
  size_t pinnedPooled_ = 0;              // their bytes
  std::vector<void *> pinnedAll_;        // every live pinned block

  std::mutex blasMutex_; // the handle follows one stream at a time
  const Blas *blasLibrary_ = nullptr;
  Blas::Handle blas_ = nullptr;

  std::mutex dnnMutex_; // as blasMutex_, for cuDNN's handle
  const Dnn *dnnLibrary_ = nullptr;
  Dnn::Handle dnn_ = nullptr;
  std::map<std::vector<int64_t>, ConvSetup> convs_;
};

} // namespace kiln::cuda

#endif // KILN_RUNTIME_CUDA_H
