//===- Diagnostics.h - how a compile reports --------------------*- C++-*-===//
//
// The stages' diagnostics as kilnc prints them ("model.onnx: node 'x':
// error: ..."), and the one-line progress it shows on a terminal.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DIAGNOSTICS_H
#define KILN_COMPILER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kiln {

/// "model.onnx: node '/fc1/Gemm'": the file and the ONNX node names a
/// location carries (a fused kernel carries several).
std::string describe(mlir::Location loc);

/// Prints `diag` and its notes to `errs`, each line as
/// PREFIX[WHERE: ]KIND: MESSAGE.
mlir::LogicalResult printDiagnostic(mlir::Diagnostic &diag,
                                    llvm::raw_ostream &errs,
                                    llvm::StringRef prefix);

/// The stage a compile is in, on one line of stderr that each stage
/// overwrites; nothing when disabled.
class Progress {
public:
  explicit Progress(bool enabled) : enabled(enabled) {}
  void stage(const std::string &text) {
    if (enabled)
      llvm::errs() << "\r\033[K[kilnc] " << text;
  }
  void done() {
    if (enabled)
      llvm::errs() << "\r\033[K";
  }

private:
  bool enabled;
};

} // namespace kiln

#endif // KILN_COMPILER_DIAGNOSTICS_H
