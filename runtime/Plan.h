//===- Plan.h - the manifest's plan, decoded and validated --------*- C++
//-*-===//
//
// The plan of an artifact (docs/devices.md): roles (the devices it was
// compiled for), typed values on those roles, the graph inputs and outputs,
// and the steps in order: kernel calls on one role and copies between roles.
//
// decode() trusts nothing in the manifest: every index is range checked,
// every kernel argument lies on its step's role, a "cuda" launch description
// only on a cuda role's kernel step with consistent slots, a copy keeps dtype
// and shape and changes the role, aliases stay on their source's role, every
// step writes only fresh temps and reads only values computed before it. A plan
// that passes can be run by any schedule that respects its data flow.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PLAN_H
#define KILN_RUNTIME_PLAN_H

#include "kiln/runtime.h"
#include "runtime/Device.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::plan {

/// The kernel ABI: the buffers of a kernel's inputs then its outputs (then,
/// when the kernel has dynamic dims, the dims of all of them).
using KernelFn = void (*)(void **);
/// A kernel's dims function: fills in its outputs' dynamic dims in `dims`
/// (every argument's dims, inputs then outputs) from its inputs' dims, and
/// from the data of the inputs in Step::dimsData (`inputs`: the buffers of
/// the kernel's inputs); returns why the inputs do not fit the kernel, or
/// nullptr.
using DimsFn = const char *(*)(int64_t *dims, void *const *inputs);

using device::Role;

enum class ValueKind { Input, Constant, Temp, Alias };

struct Value {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // -1: a dynamic dim, known at run time
  bool dynamic = false;       // a dim of shape is -1
  /// Aliases: the shape that views the source, per dim a size (0
  /// included), -1 inferred from the element count, or kCopyDim the
  /// source's dim at that index; empty: the value's static shape.
  static constexpr int64_t kCopyDim = -2;
  std::vector<int64_t> reshape;
  ValueKind kind = ValueKind::Temp;
  size_t role = 0;
  size_t nbytes = 0;  // 0 when dynamic
  size_t offset = 0;  // constants: into the weights section
  size_t aliasOf = 0; // aliases: an earlier value
  size_t root = 0;    // the value owning the memory (itself unless an alias)
};

/// How a kernel step on a cuda role runs on a GPU (docs/devices.md): its
/// slots are its args then one device buffer per scratch size; each launch
/// runs entry point `entry` of the ptx section over `threads` threads, or a
/// GEMM through cuBLAS.
struct CudaKernel {
  /// C = A·B + beta·C for each of `batch` matrices through cuBLAS: row-major
  /// A (M×K, or K×M with transA), B (K×N, or N×K with transB) and C (M×N) in
  /// slots a, b, c, consecutive matrices `stride*` elements apart (0: the
  /// same matrix for every batch).
  struct Gemm {
    bool f64 = false;
    uint64_t batch = 1, m = 0, n = 0, k = 0;
    size_t a = 0, b = 0, c = 0;
    bool transA = false, transB = false;
    uint64_t strideA = 0, strideB = 0, strideC = 0;
    double beta = 0;
  };
  /// y = conv(x, w) + beta·y through cuDNN: a 2-D f32 cross-correlation of
  /// NCHW x, zero-padded by `pads` rows (columns) before and after, and w
  /// [M, C/groups, KH, KW] into y, in slots x, w, y; cuDNN's fastest
  /// algorithm whose workspace fits scratch slot `workspace`
  /// (`workspaceBytes`) runs.
  struct Conv {
    int64_t x[4] = {}, w[4] = {}, y[4] = {};
    int64_t pads[2] = {0, 0};
    int64_t strides[2] = {1, 1}, dilations[2] = {1, 1}, groups = 1;
    double beta = 0;
    size_t xSlot = 0, wSlot = 0, ySlot = 0, workspace = 0;
    size_t workspaceBytes = 0;
    /// Fused (cudnnConvolutionBiasActivationForward) when there is a bias:
    /// y = max(conv + bias [+ z], 0) with a per-channel bias and an optional
    /// z shaped like y (ReLU is the only activation).
    std::optional<size_t> biasSlot, zSlot;
  };
  /// An entry point of the ptx section over `threads` threads, a GEMM or a
  /// conv. A GEMM or conv with an entry runs it where its library does not
  /// load (its generated stand-in).
  struct Launch {
    std::string entry;
    uint64_t threads = 0;
    std::optional<Gemm> gemm;
    std::optional<Conv> conv;
    bool library() const { return gemm || conv; }
  };
  size_t slots = 0;
  std::vector<size_t> scratch; // bytes
  std::vector<Launch> launches;
};

struct Step {
  bool isCopy = false;
  std::string kernel; // kernel steps: the symbol
  std::string nodes;  // kernel steps: the ONNX nodes it computes, if known
  KernelFn fn = nullptr;
  DimsFn dims = nullptr; // kernel steps with dynamic dims
  /// The inputs (positions in args) whose data `dims` reads: a shape or
  /// axes given as a tensor.
  std::vector<size_t> dimsData;
  /// The nodes `dims`'s messages name as {node:K} (one dims function can
  /// serve the steps of several kernels of the same code).
  std::vector<std::string> dimsNodes;
  std::vector<size_t> args; // kernels: inputs then outputs; copies: src, dst
  size_t numInputs = 0;     // 1 for copies
  size_t role = 0;          // where it runs: a copy runs on its destination
  /// Kernel steps on a cuda role: the GPU launches (needed only when the
  /// role is bound to a cuda device; checked at load).
  std::optional<CudaKernel> cuda;
  /// "step 3 (kernel 'kiln_k3')", for messages.
  std::string describe(size_t index) const;
};

struct Plan {
  std::vector<Role> roles;
  std::vector<Value> values;
  std::vector<TensorInfo> inputInfo, outputInfo;
  std::vector<PortInfo> inputPorts, outputPorts;
  std::vector<size_t> inputValues, outputValues;
  std::vector<Step> steps;
  /// Per value, the aliases that view it directly (filled at load): a
  /// value's shape or buffer, once known, passes down to them alone.
  std::vector<std::vector<size_t>> views;

  bool dynamic = false; // some value has a dynamic dim
  /// Some step's dims function reads data (a shape given as a tensor, or
  /// its run-time checks of one): shapes are resolved per run, with the
  /// inputs at hand, even when every dim is static.
  bool readsData = false;
  /// Some dims function reads data that a step computes: shapes are known
  /// only as the plan runs, step by step.
  bool lateShapes = false;

  bool hasCopies() const;
  /// "role 1 'sim:0'".
  std::string describeRole(size_t role) const;
};

/// The shapes of one run: per value, and per kernel step with dynamic dims
/// the dims array its functions take.
struct Shapes {
  std::vector<std::vector<int64_t>> of; // per value
  std::vector<size_t> nbytes;           // per value
  std::vector<bool> known;              // per value
  std::vector<std::vector<int64_t>> stepDims;
};

/// The shapes of the inputs (`inputShapes`, already checked against their
/// declared shapes), the constants and the static values, and the views of
/// them.
Shapes startShapes(const Plan &plan,
                   const std::vector<std::vector<int64_t>> &inputShapes);

/// Resolves the shapes of step `index`'s outputs (its dims function, or a
/// copy's source) and the views they allow; `buffers` (per value) holds the
/// data the dims function reads. Throws kiln::Error when the inputs do not
/// fit the kernel (naming the step and its input shapes).
void resolveStep(const Plan &plan, Shapes &shapes, size_t index,
                 const std::vector<void *> &buffers);

/// startShapes, then resolveStep for every step: a run's shapes when they
/// do not depend on data steps compute (!plan.lateShapes).
Shapes resolveShapes(const Plan &plan,
                     const std::vector<std::vector<int64_t>> &inputShapes,
                     const std::vector<void *> &buffers);

/// Decodes and validates manifest["devices", "values", "inputs", "outputs",
/// "steps"]. `weightsSize` is the size of the weights section (none if the
/// artifact has none); `lookup` resolves a kernel or dims symbol (nullptr
/// if absent).
/// Throws kiln::Error (without the file name) or a nlohmann::json exception
/// for a field of the wrong type.
Plan decode(const nlohmann::json &manifest, std::optional<size_t> weightsSize,
            const std::function<KernelFn(const std::string &)> &lookup);

} // namespace kiln::plan

#endif // KILN_RUNTIME_PLAN_H
