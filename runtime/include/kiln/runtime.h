//===- kiln/runtime.h - load a .kiln artifact and run it ----------*- C++
//-*-===//
//
// The public C++ API of the kiln runtime. It depends on nothing but the C++
// standard library (no LLVM, no MLIR, no compiler at load time):
//
//   kiln::Module module = kiln::Module::load("model.kiln");
//   std::vector<kiln::Tensor> outputs = module.run({input});
//
// Errors (missing, truncated or corrupted artifacts, wrong input shapes or
// dtypes) throw kiln::Error with a message meant for the user.
// `run` is const and safe to call from several threads at once.
//
// A plan may span several devices (docs/devices.md). Its devices are *roles*
// numbered by the compiler; each is bound to a concrete device at load time,
// by default the one it was compiled for:
//
//   kiln::LoadOptions options;
//   options.bind["1"] = "sim:2";            // or bind["sim:0"] = "sim:2"
//   options.memoryCapacity["sim:2"] = 1 << 20;
//   kiln::Module module = kiln::Module::load("model.kiln", options);
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t {
  F32,
  F64,
  F16,
  I8,
  I16,
  I32,
  I64,
  U8,
  Bool,
  U16,
  U32,
  U64,
  // Narrow types: stored one element per byte (bfloat16: two), converted to
  // float for arithmetic. I4/U4/I2/U2 hold the value sign- or zero-extended.
  BF16,
  F8E4M3FN,
  F8E4M3FNUZ,
  F8E5M2,
  F8E5M2FNUZ,
  I4,
  U4,
  I2,
  U2
};

/// "f32", "i64", ... (the manifest's spelling).
const char *dtypeName(DType dtype);
/// Parses a manifest dtype name; throws Error when unknown.
DType parseDType(const std::string &name);
size_t dtypeSize(DType dtype);
/// Element `i` of `data` (of `dtype`, any type but the 64-bit integers
/// beyond 2^53) as a double, e.g. to print it.
double elementAsDouble(DType dtype, const void *data, size_t i);

/// A dense, row-major tensor on a device: host memory (64-byte aligned) for
/// "cpu" and the host-memory test devices "sim:N", device memory for
/// "cuda:N". Copies share storage.
class Tensor {
public:
  Tensor() = default;
  /// Zero-filled storage for `shape`.
  static Tensor empty(DType dtype, std::vector<int64_t> shape);
  /// Copies `nbytes` from `data`; throws when nbytes does not match.
  static Tensor fromBytes(DType dtype, std::vector<int64_t> shape,
                          const void *data, size_t nbytes);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numElements() const;
  size_t nbytes() const { return numElements() * dtypeSize(dtype_); }
  /// "cpu", "sim:N" or "cuda:N".
  const std::string &device() const { return device_; }
  /// Whether the host can read the data (every device but cuda).
  bool isHost() const { return !home_; }
  /// A copy on `device` ("cpu", "sim:N", "cuda:N", "cuda:auto"), like
  /// torch's Tensor.to (a tensor already there is returned as it is).
  /// Throws kiln::Error for an unknown device, or a cuda device when no
  /// driver or GPU is there.
  Tensor to(const std::string &device) const;
  /// The host data. Throws kiln::Error for a tensor on a cuda device: read
  /// it with .to("cpu").
  void *raw() { return isHost() ? data_.get() : onDevice(); }
  const void *raw() const { return isHost() ? data_.get() : onDevice(); }
  template <typename T> T *data() { return static_cast<T *>(raw()); }
  template <typename T> const T *data() const {
    return static_cast<const T *>(raw());
  }

  /// The device pointer of a cuda tensor (runtime-internal).
  void *devicePointer() const { return data_.get(); }

private:
  [[noreturn]] void *onDevice() const;
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::shared_ptr<uint8_t> data_;
  std::string device_ = "cpu";
  std::shared_ptr<void> home_; // the runtime device of a cuda tensor
};

/// "f32[64,784]".
std::string describe(DType dtype, const std::vector<int64_t> &shape);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

/// A graph input or output as the model declares it: a tensor (one entry of
/// Module::inputs()/outputs()), a sequence of `count` tensors (that many
/// consecutive entries, named NAME[0], NAME[1], ...; kiln compiles
/// sequences of a fixed length), or an optional without a value (no
/// entries). An optional with a value is that value, `optional` set.
struct PortInfo {
  enum class Kind { Tensor, Sequence, None };
  std::string name;
  Kind kind = Kind::Tensor;
  size_t first = 0; // the first entry of inputs()/outputs()
  size_t count = 1;
  bool optional = false;
};

/// How to bind a plan's roles to concrete devices ("cpu", "sim:N", "cuda:N",
/// "cuda:auto"; docs/devices.md). Roles of kind cpu or sim may bind to cpu or
/// any sim:N; cuda roles to cuda:N, cuda:auto, or a host device (running
/// their C++ code).
struct LoadOptions {
  /// Role index ("1") or the name a role was compiled for ("sim:0") ->
  /// device. Applied after `device`; a key naming no role is an error.
  std::map<std::string, std::string> bind;
  /// If non-empty, every role binds to this device.
  std::string device;
  /// Concrete device name ("sim:0", "cpu", "cuda:0"; "cuda:auto" applies to
  /// whichever GPU cuda:auto picks) -> the most bytes the runtime may hold on
  /// it at once (constants uploaded to a device at load, per-run buffers);
  /// running out is a kiln::Error. Unlimited by default; a device no role
  /// binds to is ignored, a name that is no device is an error.
  std::map<std::string, size_t> memoryCapacity;
  /// When non-empty, the artifact must be signed with this secret key
  /// (kilnc --sign-key): its HMAC-SHA256 is checked before any of its code
  /// is loaded, and a missing or wrong signature is a kiln::Error. Loading
  /// an artifact runs its code; its checksums catch corruption, not
  /// tampering.
  std::string signingKey;
  /// The signature (the text of the .sig file kilnc writes). Empty: load()
  /// reads PATH.sig; fromBytes() then needs it here.
  std::string signature;
};

/// One role of a loaded plan and the device it is bound to.
struct DeviceInfo {
  size_t role;
  std::string compiledName; // "sim:0": what the compiler placed it on
  std::string boundName;    // "sim:3": where it runs
};

/// One step of a profiled run: a kernel or a copy.
struct ProfileEvent {
  std::string name;      // "kiln_k3" or "copy"
  std::string nodes;     // the ONNX nodes a kernel computes (may be empty)
  std::string device;    // where it ran ("cpu", "sim:1", "cuda:0")
  double startUs = 0;    // from the start of the run
  double durationUs = 0; // GPU work included: each step is synchronised
};

/// `events` as a Chrome trace (chrome://tracing, ui.perfetto.dev): one slice
/// per event, one track per device.
std::string chromeTrace(const std::vector<ProfileEvent> &events);

/// A loaded artifact. Movable, not copyable.
class Module {
public:
  /// Reads, validates (magic, version, checksums, bounds) and loads `path`,
  /// binding every role to the device it was compiled for.
  static Module load(const std::string &path);
  /// Loads `path`, binding roles as `options` say.
  static Module load(const std::string &path, const LoadOptions &options);
  /// Loads an artifact held in memory (the bytes are copied); `name` stands
  /// for the file name in messages.
  static Module fromBytes(const void *data, size_t size,
                          const LoadOptions &options = {},
                          const std::string &name = "<memory>");
  Module(Module &&) noexcept;
  Module &operator=(Module &&) noexcept;
  ~Module();

  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  /// The graph's inputs and outputs as declared: tensors, sequences and
  /// optionals, each covering its entries of inputs()/outputs().
  const std::vector<PortInfo> &inputPorts() const;
  const std::vector<PortInfo> &outputPorts() const;
  /// Runs the model; inputs in graph-input order, checked against inputs().
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) const;
  /// Runs the model and appends one event per step to `profile`. Every step
  /// waits for its device to finish, so a profiled run is slower than a
  /// plain one where GPU work would overlap.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs,
                          std::vector<ProfileEvent> &profile) const;

  /// The plan's roles, in role order, with the devices they are bound to.
  std::vector<DeviceInfo> devices() const;
  /// Per role: the most bytes the runtime has held at once on the device the
  /// role is bound to (roles sharing a device report the same number).
  /// Constants placed on a device at load count from the start; outputs
  /// handed to the caller do not count.
  std::vector<size_t> peakBytes() const;

  struct Impl;

private:
  explicit Module(std::unique_ptr<Impl> impl);
  static Module load(Tensor file, const std::string &path,
                     const LoadOptions &options);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln

#endif // KILN_RUNTIME_H
