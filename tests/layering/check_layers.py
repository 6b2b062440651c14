#!/usr/bin/env python3
"""Checks kiln's include layering: no layer includes a layer above it.

The layers, lowest first: runtime (no LLVM/MLIR), ir, frontend and passes
(side by side), codegen, compiler, then jit and tools. codegen may read
the contract lowering states for it (passes/lowering/KernelShapes.h) and
nothing else of passes/. Prints every offending include and exits 1.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# For each folder: the top-level folders of this repository it may include.
ALLOWED = {
    "runtime": {"runtime"},
    "ir": {"ir"},
    "frontend": {"frontend", "ir", "runtime"},
    "passes": {"passes", "ir", "runtime"},
    "codegen": {"codegen", "ir", "runtime", "passes/lowering/KernelShapes.h"},
    "compiler": {"compiler", "codegen", "passes", "frontend", "ir", "runtime"},
    "jit": {"jit", "compiler", "codegen", "passes", "frontend", "ir", "runtime"},
}
FOLDERS = ("runtime", "ir", "frontend", "passes", "codegen", "compiler",
           "jit", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# The runtime builds without LLVM and MLIR.
NO_LLVM = {"runtime"}


def allowed(folder, target):
    for entry in ALLOWED[folder]:
        if target == entry or target.startswith(entry.rstrip("/") + "/"):
            return True
    return False


def main():
    problems = []
    for folder in ALLOWED:
        for base, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if not name.endswith((".cpp", ".h", ".inc")):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if folder in NO_LLVM and target.startswith(("llvm/", "mlir/")):
                            problems.append("%s:%d: the runtime includes %s" % (rel, number, target))
                            continue
                        top = target.split("/")[0]
                        if top not in FOLDERS:
                            continue  # a system, LLVM, MLIR or generated header
                        if not allowed(folder, target):
                            problems.append("%s:%d: %s/ includes %s" % (rel, number, folder, target))
    for p in problems:
        print(p)
    if problems:
        print("%d include(s) against the layering (tests/layering/check_layers.py)" % len(problems))
        return 1
    print("layering: every include of %s follows the layers" % ", ".join(sorted(ALLOWED)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
