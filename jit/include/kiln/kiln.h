//===- kiln/kiln.h - trace, compile and call tensor programs in-process --===//
//
// The compiler as a library (docs/api.md). A C++ callable is traced over
// proxy tensors into a graph, compiled in-process through the same pipeline
// as kilnc, cached on disk, and called like a function:
//
//   kiln::Traced mlp = kiln::trace(
//       [](const kiln::Proxy &x) {
//         auto h = kiln::relu(kiln::linear(x, kiln::parameter("fc1.weight",
//                                                             {256, 784}),
//                                          kiln::parameter("fc1.bias",
//                                          {256})));
//         return kiln::linear(h, kiln::parameter("fc2.weight", {10, 256}),
//                             kiln::parameter("fc2.bias", {10}));
//       },
//       {{"x", {"N", 784}}});
//   kiln::jit::Options options;
//   options.weights = kiln::load_safetensors("mlp.safetensors", {"module."});
//   kiln::Function f = kiln::jit::compile(mlp, options);
//   std::vector<kiln::Tensor> y = f({x});
//
// Tracing runs the callable once, as torch.jit.trace does: C++ control flow
// (loops, ifs) is unrolled into the graph, and only proxy operations are
// recorded. Ops follow PyTorch's names and semantics (broadcasting, type
// promotion, dims that may be negative). Errors throw kiln::Error. The
// example's `{"module."}` is SafetensorsOptions::strip_prefix (in C++20,
// `{.strip_prefix = "module."}`).
//
// This header needs only the C++ standard library; link kiln::kiln.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/runtime.h"
#include "kiln/safetensors.h"
#include "kiln/tensor_io.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

/// A dim of a traced input: a size, or a symbol ("N") bound at each call.
class Dim {
public:
  Dim(int64_t size) : size_(size) {}
  Dim(int size) : size_(size) {}
  Dim(const char *symbol) : size_(-1), symbol_(symbol) {}
  Dim(std::string symbol) : size_(-1), symbol_(std::move(symbol)) {}
  bool isSymbolic() const { return !symbol_.empty(); }
  /// The size; -1 when symbolic.
  int64_t size() const { return size_; }
  const std::string &symbol() const { return symbol_; }
  bool operator==(const Dim &o) const {
    return size_ == o.size_ && symbol_ == o.symbol_;
  }
  bool operator!=(const Dim &o) const { return !(*this == o); }

private:
  int64_t size_;
  std::string symbol_;
};

/// "f32[N,784]".
std::string describe(DType dtype, const std::vector<Dim> &shape);

/// A traced input: `{"x", {"N", 784}}`, f32 unless `dtype` says otherwise.
struct TensorSpec {
  std::string name;
  std::vector<Dim> shape;
  DType dtype = DType::F32;
};

namespace detail {
struct Graph;
}

/// A value being traced. Cheap to copy; valid while its trace runs.
class Proxy {
public:
  DType dtype() const;
  std::vector<Dim> shape() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  /// The size of dim `d` (may be negative): a number or a symbol.
  Dim size(int64_t d) const;

  // PyTorch's tensor methods; each is also a free function below.
  Proxy to(DType dtype) const;
  Proxy reshape(const std::vector<Dim> &shape) const;
  Proxy view(const std::vector<Dim> &shape) const { return reshape(shape); }
  Proxy transpose(int64_t dim0, int64_t dim1) const;
  Proxy permute(const std::vector<int64_t> &dims) const;
  Proxy flatten(int64_t startDim = 0, int64_t endDim = -1) const;
  Proxy unsqueeze(int64_t dim) const;
  Proxy squeeze(int64_t dim) const;
  Proxy sum(const std::vector<int64_t> &dims, bool keepdim = false) const;
  Proxy mean(const std::vector<int64_t> &dims, bool keepdim = false) const;
  Proxy amax(const std::vector<int64_t> &dims, bool keepdim = false) const;
  Proxy softmax(int64_t dim) const;
  Proxy t() const { return transpose(0, 1); }

  // Internal: a value of a trace.
  Proxy(std::shared_ptr<detail::Graph> graph, size_t id)
      : graph_(std::move(graph)), id_(id) {}
  detail::Graph &graph() const { return *graph_; }
  size_t id() const { return id_; }

private:
  std::shared_ptr<detail::Graph> graph_;
  size_t id_ = 0;
};

// Arithmetic, broadcasting with PyTorch's type promotion (true division).
Proxy operator+(const Proxy &a, const Proxy &b);
Proxy operator-(const Proxy &a, const Proxy &b);
Proxy operator*(const Proxy &a, const Proxy &b);
Proxy operator/(const Proxy &a, const Proxy &b);
Proxy operator+(const Proxy &a, double b);
Proxy operator-(const Proxy &a, double b);
Proxy operator*(const Proxy &a, double b);
Proxy operator/(const Proxy &a, double b);
Proxy operator+(double a, const Proxy &b);
Proxy operator-(double a, const Proxy &b);
Proxy operator*(double a, const Proxy &b);
Proxy operator/(double a, const Proxy &b);
Proxy operator-(const Proxy &a);
Proxy pow(const Proxy &a, double exponent);
Proxy maximum(const Proxy &a, const Proxy &b);
Proxy minimum(const Proxy &a, const Proxy &b);
Proxy clamp(const Proxy &x, double min, double max);
// Comparisons give bool tensors.
Proxy eq(const Proxy &a, const Proxy &b);
Proxy gt(const Proxy &a, const Proxy &b);
Proxy lt(const Proxy &a, const Proxy &b);
Proxy where(const Proxy &condition, const Proxy &a, const Proxy &b);

// Elementwise functions.
Proxy relu(const Proxy &x);
Proxy sigmoid(const Proxy &x);
Proxy tanh(const Proxy &x);
Proxy exp(const Proxy &x);
Proxy log(const Proxy &x);
Proxy sqrt(const Proxy &x);
Proxy abs(const Proxy &x);
Proxy erf(const Proxy &x);
/// torch.nn.functional.gelu: approximate "none" (erf) or "tanh".
Proxy gelu(const Proxy &x, const std::string &approximate = "none");
Proxy silu(const Proxy &x);

// Reductions and normalizations (dims may be negative).
Proxy sum(const Proxy &x, const std::vector<int64_t> &dims,
          bool keepdim = false);
Proxy mean(const Proxy &x, const std::vector<int64_t> &dims,
           bool keepdim = false);
Proxy amax(const Proxy &x, const std::vector<int64_t> &dims,
           bool keepdim = false);
Proxy softmax(const Proxy &x, int64_t dim);
Proxy log_softmax(const Proxy &x, int64_t dim);
/// Over the trailing dims `normalizedShape`; weight and bias as given.
Proxy layer_norm(const Proxy &x, const std::vector<int64_t> &normalizedShape,
                 const Proxy &weight, const Proxy &bias, double eps = 1e-5);
/// Inference-mode batch norm over dim 1 with running statistics.
Proxy batch_norm(const Proxy &x, const Proxy &runningMean,
                 const Proxy &runningVar, const Proxy &weight,
                 const Proxy &bias, double eps = 1e-5);

// Contractions.
Proxy matmul(const Proxy &a, const Proxy &b);
/// x @ weight^T (+ bias): torch.nn.functional.linear, weight [out, in].
Proxy linear(const Proxy &x, const Proxy &weight);
Proxy linear(const Proxy &x, const Proxy &weight, const Proxy &bias);
/// NCHW input, OIHW weight; bias may be omitted with conv2d(x, w).
Proxy conv2d(const Proxy &x, const Proxy &weight,
             std::vector<int64_t> stride = {1, 1},
             std::vector<int64_t> padding = {0, 0},
             std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Proxy conv2d(const Proxy &x, const Proxy &weight, const Proxy &bias,
             std::vector<int64_t> stride = {1, 1},
             std::vector<int64_t> padding = {0, 0},
             std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Proxy max_pool2d(const Proxy &x, std::vector<int64_t> kernel,
                 std::vector<int64_t> stride = {},
                 std::vector<int64_t> padding = {0, 0});
Proxy avg_pool2d(const Proxy &x, std::vector<int64_t> kernel,
                 std::vector<int64_t> stride = {},
                 std::vector<int64_t> padding = {0, 0});
/// adaptive_avg_pool2d(x, {1, 1}): the global average.
Proxy adaptive_avg_pool2d(const Proxy &x, std::vector<int64_t> outputSize);
/// Rows of `weight` picked by integer `indices` (torch.nn.functional
/// .embedding).
Proxy embedding(const Proxy &indices, const Proxy &weight);

// Shapes and movement. A reshape may use -1 once and the symbols of the
// trace's inputs ({"N", -1}).
Proxy reshape(const Proxy &x, const std::vector<Dim> &shape);
Proxy transpose(const Proxy &x, int64_t dim0, int64_t dim1);
Proxy permute(const Proxy &x, const std::vector<int64_t> &dims);
Proxy flatten(const Proxy &x, int64_t startDim = 0, int64_t endDim = -1);
Proxy unsqueeze(const Proxy &x, int64_t dim);
Proxy squeeze(const Proxy &x, int64_t dim);
/// x[start:end:step] along `dim` (ends clamp like Python's).
Proxy slice(const Proxy &x, int64_t dim, int64_t start, int64_t end,
            int64_t step = 1);
Proxy cat(const std::vector<Proxy> &xs, int64_t dim);
Proxy to(const Proxy &x, DType dtype);

/// A named parameter of the running trace (like an nn.Module's
/// state_dict key); its value is bound by name at compile time
/// (jit::Options::weights). Called twice with one name, it returns the same
/// value; the shape and dtype must agree.
Proxy parameter(const std::string &name, const std::vector<int64_t> &shape,
                DType dtype = DType::F32);
/// `value` baked into the graph as a constant.
Proxy constant(const Tensor &value);

/// A recorded program.
class Traced {
public:
  const std::vector<TensorSpec> &inputs() const;
  /// The parameters in the order they were first used, as name -> spec.
  const std::vector<TensorSpec> &parameters() const;
  /// The traced graph as a serialized ONNX model (opset 17), parameters as
  /// graph inputs: what jit::compile compiles; kilnc can read it too.
  std::string onnx() const;
  void saveOnnx(const std::string &path) const;
  /// One line per recorded op, for reading.
  std::string str() const;

  explicit Traced(std::shared_ptr<detail::Graph> graph)
      : graph_(std::move(graph)) {}
  const detail::Graph &graph() const { return *graph_; }

private:
  std::shared_ptr<detail::Graph> graph_;
};

namespace detail {
/// Starts a trace with proxies for `inputs`; endTrace records `outputs`.
std::vector<Proxy> beginTrace(const std::vector<TensorSpec> &inputs);
Traced endTrace(const std::vector<Proxy> &inputs,
                const std::vector<Proxy> &outputs);
/// Ends a trace the callable left by throwing.
void abandonTrace();
} // namespace detail

/// Traces `fn` over proxies for `inputs`. `fn` takes one Proxy per input
/// (or one const std::vector<Proxy>&) and returns a Proxy or a
/// std::vector<Proxy>.
template <typename F>
Traced trace(F &&fn, const std::vector<TensorSpec> &inputs) {
  std::vector<Proxy> in = detail::beginTrace(inputs);
  try {
    auto outputs = [&] {
      if constexpr (std::is_invocable_v<F, const std::vector<Proxy> &>)
        return fn(in);
      else if constexpr (std::is_invocable_v<F, const Proxy &>)
        return fn(in.at(0));
      else if constexpr (std::is_invocable_v<F, const Proxy &, const Proxy &>)
        return fn(in.at(0), in.at(1));
      else if constexpr (std::is_invocable_v<F, const Proxy &, const Proxy &,
                                             const Proxy &>)
        return fn(in.at(0), in.at(1), in.at(2));
      else
        static_assert(std::is_invocable_v<F, const std::vector<Proxy> &>,
                      "kiln::trace: fn takes Proxy arguments (up to three) "
                      "or one const std::vector<Proxy>&");
    }();
    if constexpr (std::is_same_v<std::decay_t<decltype(outputs)>, Proxy>)
      return detail::endTrace(in, {outputs});
    else
      return detail::endTrace(in, outputs);
  } catch (...) {
    detail::abandonTrace();
    throw;
  }
}

/// What compiling a Function took.
struct CompileInfo {
  bool cacheHit = false;
  double seconds = 0;    // wall time of jit::compile
  std::string cacheKey;  // hex; empty when the cache is off
  std::string cachePath; // the artifact in the cache, if any
};

/// A compiled program. Calls are thread-safe; copies share one module.
class Function {
public:
  /// Inputs in order, on any device (the plan moves them where it needs
  /// them); outputs in order, in host memory.
  std::vector<Tensor> operator()(const std::vector<Tensor> &inputs) const;
  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  const CompileInfo &info() const { return info_; }
  const Module &module() const { return *module_; }

  Function(std::shared_ptr<Module> module, CompileInfo info)
      : module_(std::move(module)), info_(std::move(info)) {}

private:
  std::shared_ptr<Module> module_;
  CompileInfo info_;
};

namespace jit {

/// kilnc's options, for in-process compiles (see kilnc --help).
struct Options {
  /// The default device (graph inputs arrive and outputs leave there).
  std::string device = "cpu";
  /// More devices placement may use (kilnc --devices).
  std::vector<std::string> devices;
  /// single | auto | pipeline:K | data:K.
  std::string placement = "single";
  unsigned microbatches = 1;
  std::vector<std::string> splitDims; // NAME=D, for data:K
  std::string pins;                   // a pins JSON file
  std::vector<std::string> profiles;  // DEVICE=FILE.json cost profiles
  std::string outputDevice;
  /// NAME=D0xD1... bindings of symbolic input dims.
  std::vector<std::string> inputShapes;
  /// Bound by name: to the trace's parameters, or to an ONNX model's
  /// initializers and inputs (as kilnc --weights does).
  std::map<std::string, Tensor> weights;
  /// For a trace: a parameter without a weight, or a weight naming no
  /// parameter, is an error (like load_state_dict(strict=True)). When false,
  /// unused weights are ignored (missing ones are still an error).
  bool strict = true;
  int optLevel = 3;
  std::string targetCpu = "native";
  std::string cudaArch = "sm_80";
  /// When set, also writes model.onnx, kernels.mlir and kernels.cpp here
  /// (kilnc --emit=mlir/cpp of the same compile).
  std::string dumpDir;
  /// The on-disk cache of compiled artifacts: "" for $KILN_CACHE_DIR, else
  /// ~/.cache/kiln; "none" turns it off. Entries live in <dir>/jit.
  std::string cacheDir;
  /// How the loaded module binds its device roles.
  LoadOptions load;
};

/// Compiles a trace (weights from options.weights) or an ONNX file.
Function compile(const Traced &traced, const Options &options = {});
Function compile(const std::string &onnxPath, const Options &options = {});

/// The cache folder `configured` resolves to ("" when off).
std::string cacheDirectory(const std::string &configured = "");

} // namespace jit

/// A host tensor of `shape` holding `values` (row-major); T is float,
/// double, int32_t, int64_t, uint8_t or int8_t.
template <typename T>
Tensor tensor(const std::vector<int64_t> &shape, const std::vector<T> &values);

} // namespace kiln

#endif // KILN_KILN_H
