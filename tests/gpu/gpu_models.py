"""Model half of scripts/gpu-check.

prepare (here, with kilnc and torch): exports each model, compiles it for
cuda:0 at each batch, and saves its input and PyTorch eager's output (CPU).
run (on the GPU machine, kiln-run only): runs each artifact on cuda:0,
compares with the saved eager output (relative L2), then times kiln-run
against PyTorch eager on the GPU (CUDA events, median after warm-up) and
prints the table last.

    python3 tests/gpu/gpu_models.py prepare DIR --models mobilenet_v2 --batches 1,32
    python3 tests/gpu/gpu_models.py run DIR --bin DIR/bin
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))

TOLERANCE = 1e-5


def rel_l2(a, ref):
    a = np.asarray(a, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-30))


def prepare(args):
    import torch
    import export_models
    os.makedirs(args.dir, exist_ok=True)
    kilnc = os.path.join(args.kilnc_bin, "kilnc")
    index = []
    for name in args.models.split(","):
        onnx_path = os.path.join(args.dir, name + ".onnx")
        model = export_models.export(name, "torchscript", onnx_path)
        for batch in map(int, args.batches.split(",")):
            stem = "%s.b%d" % (name, batch)
            x = export_models.example(name, batch)
            with torch.no_grad():
                ref = model(x).numpy()
            np.save(os.path.join(args.dir, stem + ".x.npy"), x.numpy())
            np.save(os.path.join(args.dir, stem + ".ref.npy"), ref)
            start = time.time()
            subprocess.run([kilnc, onnx_path, "-o", os.path.join(args.dir, stem + ".kiln"),
                            "--device", "cuda:0", "--target-cpu=x86-64-v3",
                            "--input-shape", export_models.input_shape(name, batch)],
                           check=True)
            print("compiled %s in %.1f s" % (stem, time.time() - start), flush=True)
            index.append(dict(model=name, batch=batch, stem=stem))
        os.remove(onnx_path)
    with open(os.path.join(args.dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)


def torch_latency(name, batch, runs):
    """PyTorch eager on cuda:0 for the same architecture (weights do not
    change the time): median ms over `runs` after warm-up, CUDA events."""
    import torch
    import export_models
    model, _ = export_models.build(name)
    model = model.cuda()
    x = export_models.example(name, batch).cuda()
    times = []
    with torch.no_grad():
        for _ in range(10):
            model(x)
        torch.cuda.synchronize()
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return float(np.median(times)), torch.cuda.max_memory_allocated()


def run(args):
    kiln_run = os.path.join(args.bin, "kiln-run")
    with open(os.path.join(args.dir, "index.json")) as f:
        index = json.load(f)
    rows, failed = [], 0
    for entry in index:
        stem = os.path.join(args.dir, entry["stem"])
        out_dir = stem + ".out"
        proc = subprocess.run([kiln_run, stem + ".kiln", stem + ".x.npy", "--output-dir", out_dir,
                               "--bench", str(args.runs)], capture_output=True, text=True)
        if proc.returncode != 0:
            print("FAIL %s: kiln-run exited %d\n%s%s" % (entry["stem"], proc.returncode,
                                                          proc.stdout, proc.stderr), flush=True)
            failed += 1
            continue
        err = rel_l2(np.load(os.path.join(out_dir, "output_0.npy")), np.load(stem + ".ref.npy"))
        ok = err <= TOLERANCE
        failed += not ok
        m = re.search(r"median ([0-9.]+) ms", proc.stdout)
        kiln_ms = float(m.group(1)) if m else float("nan")
        try:
            eager_ms, eager_mem = torch_latency(entry["model"], entry["batch"], args.runs)
        except Exception as e:  # torch missing or broken there: say so
            print("torch eager for %s failed: %s" % (entry["stem"], e), flush=True)
            eager_ms, eager_mem = float("nan"), 0
        print("%s %s: rel L2 %.2e vs eager (cpu); kiln %.3f ms, torch eager %.3f ms" % (
            "PASS" if ok else "FAIL", entry["stem"], err, kiln_ms, eager_ms), flush=True)
        rows.append((entry["model"], entry["batch"], err, kiln_ms, eager_ms, eager_mem))
    print("\nmodel           batch   rel L2    kiln ms   eager ms  kiln/eager  eager peak MiB")
    for model, batch, err, k, e, mem in rows:
        print("%-15s %5d  %.2e  %9.3f  %9.3f  %10.2f  %14.1f" % (
            model, batch, err, k, e, k / e if e == e and e else float("nan"), mem / 2**20))
    print("kiln ms: kiln-run --bench (host wall time of run(), inputs/outputs copied "
          "to/from the GPU included); eager ms: CUDA events around the forward pass")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("dir")
    a.add_argument("--models", default="mobilenet_v2")
    a.add_argument("--batches", default="1")
    a.add_argument("--kilnc-bin", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin")))
    b = sub.add_parser("run")
    b.add_argument("dir")
    b.add_argument("--bin", required=True)
    b.add_argument("--runs", type=int, default=50)
    args = p.parse_args()
    return prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
