//===- Diagnostics.cpp - how a compile reports ----------------------------===//

#include "compiler/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <vector>

using namespace mlir;

namespace kiln {

std::string describe(Location loc) {
  std::string file;
  std::vector<std::string> nodes;
  loc->walk([&](Location l) {
    if (auto f = dyn_cast<FileLineColLoc>(l)) {
      if (file.empty())
        file = f.getFilename().str() +
               (f.getLine() ? ":" + std::to_string(f.getLine()) : "");
    } else if (auto n = dyn_cast<NameLoc>(l)) {
      std::string quoted = "'" + n.getName().str() + "'";
      if (!llvm::is_contained(nodes, quoted))
        nodes.push_back(quoted);
    }
    return WalkResult::advance();
  });
  std::string text = file;
  if (!nodes.empty())
    text += (text.empty() ? "" : ": ") +
            std::string(nodes.size() == 1 ? "node " : "nodes ") +
            llvm::join(nodes, ", ");
  return text;
}

LogicalResult printDiagnostic(Diagnostic &diag, llvm::raw_ostream &errs,
                              llvm::StringRef prefix) {
  auto print = [&](Location loc, DiagnosticSeverity severity,
                   const std::string &message) {
    const char *kind = severity == DiagnosticSeverity::Error     ? "error"
                       : severity == DiagnosticSeverity::Warning ? "warning"
                                                                 : "note";
    std::string where = describe(loc);
    errs << prefix << (where.empty() ? "" : where + ": ") << kind << ": "
         << message << "\n";
  };
  print(diag.getLocation(), diag.getSeverity(), diag.str());
  for (Diagnostic &note : diag.getNotes())
    print(note.getLocation(), note.getSeverity(), note.str());
  return success();
}

void Progress::accrue() {
  if (current.empty())
    return;
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
          .count();
  for (auto &[name, total] : seconds)
    if (name == current) {
      total += elapsed;
      return;
    }
  seconds.emplace_back(current, elapsed);
}

void Progress::stage(const std::string &name, const std::string &detail) {
  auto now = std::chrono::steady_clock::now();
  if (name != current) {
    accrue();
    current = name;
    since = now;
  }
  if (!show)
    return;
  // The seconds so far: a compile that seems stuck shows where it is.
  double elapsed = std::chrono::duration<double>(now - since).count();
  llvm::errs() << "\r\033[K[kilnc] " << name
               << (detail.empty() ? "" : " " + detail);
  if (elapsed >= 1)
    llvm::errs() << llvm::format(" (%.0f s)", elapsed);
}

void Progress::done() {
  accrue();
  current.clear();
  if (show)
    llvm::errs() << "\r\033[K";
}

} // namespace kiln
