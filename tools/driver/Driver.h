//===- Driver.h - what kilnc does, as a library -------------------*- C++
//-*-===//
//
// import ONNX -> compile pipeline -> plan -> C++ per kernel -> system C++
// compiler -> .kiln artifact (manifest, code, weights). kilnc is a thin
// command line over compileModel; tests call it directly.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_DRIVER_H
#define KILN_TOOLS_DRIVER_H

#include "codegen/Nvrtc.h"
#include "codegen/Toolchain.h"
#include "kiln/safetensors.h"

#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}
namespace llvm {
class raw_ostream;
}

namespace kiln {

enum class EmitKind { MLIR, Cpp, Cuda, Ptx, Dot, Artifact };

struct CompileOptions {
  std::string input;  // .onnx file; with `model`, only names the model
  std::string output; // "-" for stdout (text kinds only)
  /// A model already in memory, compiled instead of reading `input`.
  const onnx::ModelProto *model = nullptr;
  /// A safetensors file whose tensors replace or supply initializers
  /// (kilnc --weights; see applyWeights), keys remapped as `weightOptions`
  /// says. Only for a model read from `input`.
  std::string weights;
  SafetensorsOptions weightOptions;
  /// When set, an artifact is stored here instead of written to `output`.
  std::vector<char> *artifact = nullptr;
  /// When non-empty, an artifact written to `output` is signed with this
  /// key: an HMAC-SHA256 in OUTPUT.sig (runtime/Signature.h).
  std::string signingKey;
  /// Where diagnostics go, without the "kilnc: " prefix (default: stderr,
  /// with it).
  llvm::raw_ostream *diagnostics = nullptr;
  EmitKind emit = EmitKind::Artifact;
  bool printIRAfterAll = false;
  std::vector<std::string> inputShapes; // NAME=D0xD1...
  /// NAME=K: a sequence graph input's length (kiln compiles sequences of a
  /// fixed length).
  std::vector<std::string> sequenceLengths;
  /// Optional graph inputs compiled as having no value.
  std::vector<std::string> emptyOptionals;
  /// The devices placement may use; the first is the default, where graph
  /// inputs arrive and (unless outputDevice says otherwise) outputs leave.
  std::vector<std::string> devices = {"cpu"};
  /// "single", "auto", "data:K" or "pipeline:K" (kilnc --placement).
  std::string placement = "single";
  /// Micro-batches for pipeline:K.
  unsigned microbatches = 1;
  /// NAME=D split dims for data:K (default 0; -1 replicates the input).
  std::vector<std::string> splitDims;
  /// A pins file (kilnc --pin), DEVICE=FILE.json profile overrides.
  std::string pins;
  std::vector<std::string> profiles;
  std::string outputDevice;
  /// Write the final placement as pins rules to this file.
  std::string savePlacement;
  /// Print the placement table to stdout.
  bool printPlacement = false;
  /// Show stages and kernel counts on stderr (kilnc: when it is a terminal).
  bool progress = false;
  CxxOptions cxx;
  CudaOptions cuda;
};

/// The device list of CompileOptions from kilnc's --device and --devices:
/// `device` (when given) first, then the others; "cpu" when both are empty.
std::vector<std::string> devicesWithDefault(const std::string &device,
                                            std::vector<std::string> devices);

/// Compiles per `options`; diagnostics go to stderr. Fails without writing
/// `output` on any error.
mlir::LogicalResult compileModel(const CompileOptions &options);

} // namespace kiln

#endif // KILN_TOOLS_DRIVER_H
