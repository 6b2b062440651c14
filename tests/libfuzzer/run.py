#!/usr/bin/env python3
"""Builds and runs kiln's libFuzzer targets (tests/libfuzzer/README.md).

    scripts/fuzz --libfuzzer npy --minutes 5     # fuzz one target
    scripts/fuzz --libfuzzer all --minutes 5     # each target in turn
    scripts/fuzz --libfuzzer all --replay        # seeds and regressions once
    scripts/fuzz --libfuzzer all --replay --seconds 5   # then fuzz briefly

The targets are built with clang-19 into $KILN_LIBFUZZER_BUILD_DIR (default
build-libfuzzer/), configured there on first use. Each target fuzzes a
corpus in that folder (seeded from tests/libfuzzer/corpus/<target>/ and
growing from run to run), reading the committed seeds and regression files
too. A crash is minimized and saved as
tests/libfuzzer/regressions/<target>/<kind>-<sha1>; the exit status is 1
when any target crashed or a replayed file fails. Without clang-19 the exit
status is 77 (ctest: skipped) after saying so.
"""
import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = ["npy", "onnx_pb", "safetensors", "kiln", "onnx_import", "placement_json"]
# The importer's and placement's targets need the dialect and the importer,
# so the whole top-level project is configured once more, with clang-19 and
# sanitizers, in a folder of its own (IMPORTER_DIR under the build folder):
# about 20 CPU-minutes the first time.
IMPORTER_TARGETS = ("onnx_import", "placement_json")
IMPORTER_DIR = "importer"
IMPORTER_FLAGS = ("-fsanitize=fuzzer-no-link,address,undefined "
                  "-fno-sanitize=vptr -fno-sanitize-recover=all "
                  "-fno-omit-frame-pointer -gline-tables-only")
SKIP = 77
# Options for every run: inputs up to 64 KiB (artifacts need room for a
# manifest), no allocation above 2 GiB (a file claiming a huge tensor must be
# refused before the reader allocates it), 10 s per input at most.
COMMON = ["-max_len=65536", "-malloc_limit_mb=2048", "-rss_limit_mb=3072",
          "-timeout=10", "-print_final_stats=1"]


def say(message):
    print(f"[libfuzzer] {message}", flush=True)


def find_clang():
    cxx = os.environ.get("KILN_CLANGXX") or shutil.which("clang++-19")
    cc = os.environ.get("KILN_CLANG") or shutil.which("clang-19")
    if not cxx or not cc:
        return None
    # libFuzzer's runtime comes with libclang-rt-19-dev, not with clang-19.
    try:
        probe = subprocess.run(
            [cxx, "-fsanitize=fuzzer", "-x", "c++", "-", "-o", os.devnull],
            input="extern \"C\" int LLVMFuzzerTestOneInput(const char *, "
                  "unsigned long) { return 0; }", text=True,
            capture_output=True)
    except OSError:
        return None
    if probe.returncode:
        return None
    return cc, cxx


def build(build_dir, targets):
    clang = find_clang()
    if not clang:
        say("SKIPPED: clang-19 with libFuzzer not found (apt-get install "
            "clang-19 libclang-rt-19-dev, as scripts/setup does; or set "
            "KILN_CLANG and KILN_CLANGXX)")
        sys.exit(SKIP)
    jobs = os.environ.get("KILN_LIBFUZZER_JOBS", str(os.cpu_count() or 2))
    runtime = [t for t in targets if t not in IMPORTER_TARGETS]
    if runtime:
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            say(f"configuring {build_dir}")
            subprocess.run(["cmake", "-G", "Ninja", "-S", HERE, "-B", build_dir,
                            f"-DCMAKE_C_COMPILER={clang[0]}",
                            f"-DCMAKE_CXX_COMPILER={clang[1]}"],
                           check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["nice", "-n", "10", "ninja", "-C", build_dir, f"-j{jobs}"]
                       + [f"fuzz_{t}" for t in runtime], check=True,
                       stdout=subprocess.DEVNULL)
    compiler = [t for t in targets if t in IMPORTER_TARGETS]
    if compiler:
        tree = os.path.join(build_dir, IMPORTER_DIR)
        if not os.path.exists(os.path.join(tree, "build.ninja")):
            say(f"configuring {tree} (the whole project, with sanitizers)")
            subprocess.run(["cmake", "-G", "Ninja", "-S", ROOT, "-B", tree,
                            f"-DCMAKE_C_COMPILER={clang[0]}",
                            f"-DCMAKE_CXX_COMPILER={clang[1]}",
                            # -O1 with asserts: MLIR-heavy code compiles
                            # several times faster than at -O3 under the
                            # sanitizers, and kiln's asserts stay on.
                            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1",
                            "-DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir",
                            "-DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py",
                            f"-DCMAKE_CXX_FLAGS={IMPORTER_FLAGS}",
                            "-DKILN_IMPORTER_FUZZER=ON"],
                           check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["nice", "-n", "10", "ninja", "-C", tree, f"-j{jobs}"]
                       + [f"fuzz_{t}" for t in compiler],
                       check=True, stdout=subprocess.DEVNULL)


def binary_of(build_dir, target):
    if target in IMPORTER_TARGETS:
        return os.path.join(build_dir, IMPORTER_DIR, f"fuzz_{target}")
    return os.path.join(build_dir, f"fuzz_{target}")


def files_in(folder):
    return sorted(f for f in glob.glob(os.path.join(folder, "*"))
                  if os.path.isfile(f))


def replay(binary, target):
    """Runs every seed and regression file once; returns the failures."""
    inputs = files_in(os.path.join(HERE, "corpus", target)) + \
        files_in(os.path.join(HERE, "regressions", target))
    failed = []
    # One process for all files is fast; on a failure, find which ones.
    r = subprocess.run([binary] + COMMON + inputs, capture_output=True,
                       text=True)
    if r.returncode:
        for f in inputs:
            one = subprocess.run([binary] + COMMON + [f], capture_output=True,
                                 text=True)
            if one.returncode:
                failed.append(f)
                sys.stderr.write(one.stderr[-4000:])
    say(f"{target}: replayed {len(inputs)} files, "
        f"{len(failed)} failed" + "".join(f"\n  {f}" for f in failed))
    return failed


def stats(output):
    """Execs, execs/s and the last cov/ft figures libFuzzer printed."""
    found = {}
    for key in ("number_of_executed_units", "average_exec_per_sec",
                "new_units_added", "peak_rss_mb"):
        m = re.search(rf"stat::{key}:\s*(\d+)", output)
        if m:
            found[key] = int(m.group(1))
    covs = re.findall(r"cov: (\d+) ft: (\d+)", output)
    if covs:
        found["cov"], found["ft"] = map(int, covs[-1])
    m = re.findall(r"corp: (\d+)/(\S+)", output)
    if m:
        found["corpus"] = f"{m[-1][0]} inputs/{m[-1][1]}"
    return found


def fuzz(binary, target, seconds, build_dir, jobs_env):
    corpus = os.path.join(build_dir, "corpus", target)
    crashes = os.path.join(build_dir, "crashes", target)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    seeds = os.path.join(HERE, "corpus", target)
    regressions = os.path.join(HERE, "regressions", target)
    before = set(files_in(crashes))
    log = os.path.join(build_dir, f"fuzz_{target}.log")
    # A dictionary of the format's tokens, where the target has one.
    dictionary = os.path.join(HERE, f"{target}.dict")
    extra = [f"-dict={dictionary}"] if os.path.exists(dictionary) else []
    cmd = ["nice", "-n", "10", binary] + COMMON + extra + [
        f"-max_total_time={seconds}", f"-artifact_prefix={crashes}/",
        corpus, seeds] + ([regressions] if os.path.isdir(regressions) else [])
    say(f"{target}: fuzzing {seconds} s ({' '.join(cmd[3:])})")
    with open(log, "w") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    output = open(log, errors="replace").read()
    s = stats(output)
    say(f"{target}: " + ", ".join(f"{k}={v}" for k, v in s.items()) +
        f" (log: {log})")
    new = [c for c in files_in(crashes) if c not in before]
    saved = []
    for crash in new:
        saved.append(save_crash(binary, target, crash))
    return saved


def save_crash(binary, target, crash):
    """Minimizes `crash` and saves it under regressions/<target>/."""
    kind = os.path.basename(crash).split("-")[0]  # crash, oom, timeout, leak
    small = crash + ".min"
    subprocess.run([binary] + COMMON + ["-minimize_crash=1", "-runs=20000",
                    f"-exact_artifact_path={small}", crash],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chosen = small if os.path.exists(small) and os.path.getsize(small) else crash
    digest = hashlib.sha1(open(chosen, "rb").read()).hexdigest()
    folder = os.path.join(HERE, "regressions", target)
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, f"{kind}-{digest}")
    shutil.copyfile(chosen, dest)
    r = subprocess.run([binary] + COMMON + [dest], capture_output=True,
                       text=True)
    say(f"{target}: {kind} saved as {os.path.relpath(dest, ROOT)} "
        f"({os.path.getsize(dest)} bytes); first lines of its report:")
    lines = [l for l in r.stderr.splitlines()
             if "ERROR" in l or "#0" in l or "#1 " in l or "#2 " in l
             or "invariant" in l or "terminate" in l or "SUMMARY" in l]
    print("\n".join("    " + l for l in lines[:8]), flush=True)
    return dest


def main():
    p = argparse.ArgumentParser(
        prog="scripts/fuzz --libfuzzer",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=TARGETS + ["all"])
    p.add_argument("--minutes", type=float, help="fuzzing time per target")
    p.add_argument("--seconds", type=float, help="fuzzing time per target")
    p.add_argument("--replay", action="store_true",
                   help="run every seed and regression file once (before "
                        "fuzzing, if a time is given)")
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--no-build", action="store_true",
                   help="use the binaries as they are (e.g. while another "
                        "runner fuzzes from the same build folder)")
    args = p.parse_args()
    targets = TARGETS if args.target == "all" else [args.target]
    build_dir = os.path.abspath(os.environ.get(
        "KILN_LIBFUZZER_BUILD_DIR", os.path.join(ROOT, "build-libfuzzer")))
    if not args.no_build:
        build(build_dir, targets)
    if args.build_only:
        return 0
    seconds = (args.minutes or 0) * 60 + (args.seconds or 0)
    if not args.replay and not seconds:
        seconds = 60
    failed = []
    for target in targets:
        binary = binary_of(build_dir, target)
        if args.replay:
            failed += replay(binary, target)
        if seconds:
            failed += fuzz(binary, target, int(max(1, seconds)), build_dir,
                           None)
    if failed:
        say(f"{len(failed)} failing input(s):" +
            "".join(f"\n  {os.path.relpath(f, ROOT)}" for f in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
