"""Where kiln loses to onnxruntime, kernel by kernel.

Runs one model through `kiln-run --profile` and through onnxruntime's own
profiler on the same input, then charges each kiln kernel with the
onnxruntime nodes it fused (by node name: onnxruntime names a fused node
after the op whose output it writes, which kiln's kernel lists among its
nodes) and prints the kernels by how much longer they took than those
nodes. Both sides are minima (kiln, over rounds) or medians (onnxruntime,
over runs) of the per-run sums; onnxruntime's profiler inflates its times
by 5-20%, so the totals are a guide, the per-kernel gaps the point.

  python tests/bench/gaps.py model.onnx model.kiln x.npy [--top 15]

kiln-run comes from $KILN_BIN (default build/bin). Only models of one
input are supported.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def ort_node_times(model, x, threads, runs):
    """Median time (us) per original node name over `runs` profiled runs."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = ort.InferenceSession(model, options,
                                   providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    for _ in range(runs):
        session.run(None, feed)
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    per = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[e["name"][:-len("_kernel_time")]].append(e["dur"])
    times = collections.defaultdict(float)
    for name, durations in per.items():
        durations.sort()
        # A fused node is named after its output: "<node>_output_0[_nchwc]".
        original = re.sub(r"(_output_0)?(_nchwc)?$", "", name)
        # Each node ran `runs` times (once per run); its median run.
        times[original] += durations[len(durations) // 2]
    return times


def kiln_kernel_times(kiln_run, artifact, x_path, rounds):
    """Minimum over `rounds` of each kernel's time (us) in one profiled run,
    with its nodes."""
    best, nodes = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile.json")
        for _ in range(rounds):
            subprocess.run([kiln_run, artifact, x_path, "--bench", "10",
                            "--profile", profile], check=True,
                           capture_output=True)
            with open(profile) as f:
                trace = json.load(f)
            run = collections.defaultdict(float)
            for e in trace["traceEvents"]:
                if e.get("ph") == "X" and "nodes" in e.get("args", {}):
                    key = e["name"] + "|" + e["args"]["nodes"]
                    run[key] += e["dur"]
                    nodes[key] = e["args"]["nodes"].split(",")
            for key, us in run.items():
                best[key] = min(best.get(key, float("inf")), us)
    return best, nodes


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: python tests/bench/gaps.py mnasnet1_0.onnx "
               "mnasnet1_0.kiln mnasnet1_0.b1.x.npy")
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("artifact", help="the model compiled by kilnc")
    parser.add_argument("input", help="its one input, .npy")
    parser.add_argument("--threads", type=int, default=2,
                        help="onnxruntime's intra-op threads (default 2)")
    parser.add_argument("--runs", type=int, default=20,
                        help="profiled onnxruntime runs (default 20)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="profiled kiln runs (default 3)")
    parser.add_argument("--top", type=int, default=15,
                        help="kernels to list (default 15)")
    args = parser.parse_args()
    bin_dir = os.environ.get("KILN_BIN", os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "bin"))
    kiln_run = os.path.join(bin_dir, "kiln-run")
    if not os.access(kiln_run, os.X_OK):
        sys.exit("error: %s is not there (build kiln, or set KILN_BIN)" % kiln_run)
    x = np.load(args.input)
    ort_times = ort_node_times(args.model, x, args.threads, args.runs)
    kiln_times, nodes = kiln_kernel_times(kiln_run, args.artifact, args.input,
                                          args.rounds)
    rows, charged = [], set()
    for key, us in kiln_times.items():
        theirs = sum(ort_times.get(n, 0.0) for n in nodes[key])
        charged.update(nodes[key])
        rows.append((us - theirs, us, theirs, key))
    total_kiln = sum(r[1] for r in rows)
    total_ort = sum(ort_times.values())
    unmatched = sum(t for n, t in ort_times.items() if n not in charged)
    print("kiln kernels %.2f ms, onnxruntime nodes %.2f ms (%.2fx); "
          "onnxruntime nodes matched to no kernel: %.2f ms"
          % (total_kiln / 1e3, total_ort / 1e3,
             total_kiln / max(total_ort, 1e-9), unmatched / 1e3))
    print("%9s %9s %9s  kernel | nodes" % ("gap ms", "kiln ms", "ort ms"))
    for gap, us, theirs, key in sorted(rows, reverse=True)[:args.top]:
        print("%+9.3f %9.3f %9.3f  %s" % (gap / 1e3, us / 1e3, theirs / 1e3,
                                          key[:160]))


if __name__ == "__main__":
    main()
