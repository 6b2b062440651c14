#!/usr/bin/env python3
"""run_if_cpu.py LEVEL BINARY [ARGS...]: runs BINARY when this CPU has the
x86-64 micro-architecture level LEVEL (x86-64-v3, x86-64-v4), else says why
not and exits 77 (ctest's SKIP_RETURN_CODE for these tests).

The prelude's tests are built once per level (tests/unit/PreludeTest.cpp);
a binary built for a level the CPU lacks may die of SIGILL before main, so
neither the build (gtest discovery) nor the test may start it there.
"""
import os
import sys

NEEDS = {
    "x86-64-v3": ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"],
    "x86-64-v4": ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    level, binary = sys.argv[1], sys.argv[2]
    needs = NEEDS["x86-64-v3"] + (NEEDS["x86-64-v4"] if level == "x86-64-v4" else [])
    missing = [f for f in needs if f not in cpu_flags()]
    if missing:
        print("skipped: this CPU lacks %s (%s), which the %s build of %s needs"
              % (level, " ".join(missing), level, os.path.basename(binary)))
        return 77
    os.execv(binary, [binary] + sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
