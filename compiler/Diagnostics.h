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

#include <chrono>
#include <string>
#include <utility>
#include <vector>

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
/// overwrites (when shown), with the seconds it has taken so far; and the
/// wall time of every stage, for kilnc --time-stages. A stage is named by
/// `name`; calls with the name of the running stage only update its detail
/// (a kernel count), so its time keeps accruing.
class Progress {
public:
  explicit Progress(bool show) : show(show) {}
  void stage(const std::string &name, const std::string &detail = "");
  /// Ends the running stage and clears the line.
  void done();
  /// Each stage's name and wall seconds, in the order they first ran.
  const std::vector<std::pair<std::string, double>> &times() const {
    return seconds;
  }

private:
  void accrue();

  bool show;
  std::string current;
  std::chrono::steady_clock::time_point since; // the running stage's start
  std::vector<std::pair<std::string, double>> seconds;
};

} // namespace kiln

#endif // KILN_COMPILER_DIAGNOSTICS_H
