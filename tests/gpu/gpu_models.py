"""Model half of scripts/gpu-check: everything happens on the machine that
runs it, with its own torch (the GPU machine's python3, or the venv here
for a rehearsal with --device cpu).

    python3 tests/gpu/gpu_models.py WORK --bin BIN [--device cuda:0]
        [--models resnet18,mobilenet_v2,bert] [--batches 1,32] [--runs 50]
        [--systems eager,compile] [--jobs N]

Per model: it is built with random weights from a fixed seed
(tests/models/export_models.py) and exported to ONNX with that torch
(TorchScript exporter, symbolic batch); BIN/kilnc compiles it for --device at
each batch (all compiles in parallel, --jobs at a time). Per model and batch:
  - correctness: kiln-run's output on the device against PyTorch eager on the
    CPU in float32 (relative L2, bar 1e-4);
  - latency, median of --runs after warm-up, the same work for every system:
    the input starts and the output ends in host memory. kiln: kiln-run
    --bench (wall time of run(), which synchronises). Eager and torch.compile
    (default inductor, dynamic=False): CUDA events around copy-in, forward,
    copy-out on a GPU, a wall clock on the CPU; TF32 off for both;
  - peak device memory: kiln's allocator peak as kiln-run prints it, torch's
    max_memory_allocated;
  - on a GPU, kiln once more with KILN_CUBLAS=none KILN_CUDNN=none: the
    generated stand-ins of the GEMM and conv launches, held to the same bar
    and timed ("stand-ins ms").
The table comes last. Exit status 1 when a model fails or misses the bar.
"""
import argparse
import concurrent.futures
import math
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import kiln_testing as kt  # noqa: E402 (rel_l2)

TOLERANCE = 1e-4
WARMUP = 10


def tool(argv, timeout, env=None):
    """CompletedProcess, or a failure string (missing tool, timeout)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s: %s" % (os.path.basename(argv[0]), e)


def compile_one(kilnc, onnx_path, artifact, device, shape):
    start = time.time()
    proc = tool([kilnc, onnx_path, "-o", artifact, "--device", device,
                 "--input-shape", shape], 900)
    if isinstance(proc, str):
        return proc
    if proc.returncode != 0:
        return "kilnc exited %d: %s" % (proc.returncode, (proc.stderr or proc.stdout).strip())
    return time.time() - start


def run_kiln(kiln_run, artifact, x_path, out_dir, runs, device, env=None):
    """(output, median ms, peak bytes on `device` or None), or a failure
    string."""
    proc = tool([kiln_run, artifact, x_path, "--output-dir", out_dir,
                 "--bench", str(runs)], 600, env)
    if isinstance(proc, str):
        return proc
    if proc.returncode != 0:
        return "kiln-run exited %d: %s" % (proc.returncode,
                                           (proc.stderr or proc.stdout).strip())
    m = re.search(r"median ([0-9.]+) ms", proc.stdout)
    peak = re.search(r"peak device memory:.*\b%s ([0-9]+) bytes" % re.escape(device),
                     proc.stdout)
    return (np.load(os.path.join(out_dir, "output_0.npy")),
            float(m.group(1)) if m else float("nan"),
            int(peak.group(1)) if peak else None)


def time_torch(fn, x, device, runs):
    """Median ms of copy-in, fn, copy-out, and the peak device bytes."""
    import torch
    cuda = device.startswith("cuda")

    def step():
        return fn(x.to(device, non_blocking=False)).to("cpu")

    with torch.no_grad():
        for _ in range(WARMUP):
            step()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
        times = []
        for _ in range(runs):
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                start = time.perf_counter()
                step()
                times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times)), (torch.cuda.max_memory_allocated(device) if cuda else None)


def run_stand_ins(args, row, stem, ref):
    """kiln with the GEMM and conv launches' generated stand-ins instead of
    cuBLAS and cuDNN; whether it met the bar."""
    env = dict(os.environ, KILN_CUBLAS="none", KILN_CUDNN="none")
    result = run_kiln(os.path.join(args.bin, "kiln-run"), stem + ".kiln", stem + ".x.npy",
                      stem + ".standin", args.runs, args.device, env)
    what = "%s b%d with the stand-ins" % (row["model"], row["batch"])
    if isinstance(result, str):
        print("FAIL %s: %s" % (what, result), flush=True)
        return False
    out, row["standin"], _ = result
    try:
        err = kt.rel_l2(out, ref)
    except AssertionError as e:  # shapes differ
        print("  %s: %s" % (what, e), flush=True)
        err = float("inf")
    ok = err <= TOLERANCE
    print("%s %s: rel L2 %.2e vs eager (cpu), %s ms" % ("PASS" if ok else "FAIL", what, err,
                                                       ms(row["standin"])), flush=True)
    return ok


def mib(n):
    return "-" if n is None else "%.1f" % (n / 2**20)


def ms(v):
    return "failed" if v is None or v != v else "%.3f" % v


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("work", help="folder for exports, artifacts and outputs")
    p.add_argument("--bin", required=True, help="folder with kilnc and kiln-run")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--systems", default="eager,compile",
                   help="torch systems to time beside kiln (eager, compile)")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    args = p.parse_args()

    import torch
    import export_models
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.work, exist_ok=True)
    models = args.models.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    print("torch %s, device %s" % (torch.__version__, args.device), flush=True)

    start = time.time()
    exported = {}
    for name in models:
        try:
            export_models.export(name, "torchscript", os.path.join(args.work, name + ".onnx"))
            exported[name] = None
        except Exception as e:  # reported per row below
            exported[name] = "export failed: %s" % e
    print("exported %d models in %.1f s" % (len(models), time.time() - start), flush=True)

    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name in models:
            if exported[name]:
                continue
            for batch in batches:
                stem = os.path.join(args.work, "%s.b%d" % (name, batch))
                jobs[(name, batch)] = pool.submit(
                    compile_one, os.path.join(args.bin, "kilnc"),
                    os.path.join(args.work, name + ".onnx"), stem + ".kiln", args.device,
                    export_models.input_shape(name, batch))
    compiled = {key: job.result() for key, job in jobs.items()}
    for name in models:
        for batch in batches:
            compiled.setdefault((name, batch), exported[name])

    rows, failed = [], 0
    for name in models:
        model, _ = export_models.build(name)
        for batch in batches:
            stem = os.path.join(args.work, "%s.b%d" % (name, batch))
            row = dict(model=name, batch=batch, err=None, kiln=None, kiln_peak=None,
                       standin=None)
            rows.append(row)
            x = export_models.example(name, batch)
            with torch.no_grad():
                ref = model(x).numpy()
            np.save(stem + ".x.npy", x.numpy())
            if isinstance(compiled[(name, batch)], str):
                print("FAIL %s b%d: %s" % (name, batch, compiled[(name, batch)]), flush=True)
                failed += 1
            else:
                result = run_kiln(os.path.join(args.bin, "kiln-run"), stem + ".kiln",
                                  stem + ".x.npy", stem + ".out", args.runs, args.device)
                if isinstance(result, str):
                    print("FAIL %s b%d: %s" % (name, batch, result), flush=True)
                    failed += 1
                else:
                    out, row["kiln"], row["kiln_peak"] = result
                    try:
                        row["err"] = kt.rel_l2(out, ref)
                    except AssertionError as e:  # shapes differ
                        print("  %s b%d: %s" % (name, batch, e), flush=True)
                        row["err"] = float("inf")
                    ok = row["err"] <= TOLERANCE
                    failed += not ok
                    row["ok"] = ok
                    print("%s %s b%d: compiled in %.1f s, rel L2 %.2e vs eager (cpu), "
                          "kiln %s ms" % ("PASS" if ok else "FAIL", name, batch,
                                           compiled[(name, batch)], row["err"], ms(row["kiln"])),
                          flush=True)
                if args.device.startswith("cuda"):
                    failed += not run_stand_ins(args, row, stem, ref)
            try:
                on_device = model.to(args.device)
            except Exception as e:  # no such device, out of memory, ...
                print("  torch on %s failed: %s" % (args.device, e), flush=True)
                systems_here, on_device = [], model
            else:
                systems_here = systems
            for system in systems:
                row.setdefault(system, None)
                row.setdefault(system + "_peak", None)
            for system in systems_here:
                try:
                    fn = on_device
                    if system == "compile":
                        fn = torch.compile(on_device, dynamic=False)
                        begin = time.time()
                        with torch.no_grad():
                            fn(x.to(args.device))
                        print("  torch.compile %s b%d: first call %.1f s" % (
                            name, batch, time.time() - begin), flush=True)
                    row[system], row[system + "_peak"] = time_torch(fn, x, args.device, args.runs)
                    print("  %s %s b%d: %s ms" % (system, name, batch, ms(row[system])), flush=True)
                except Exception as e:  # a torch system that breaks is reported, not fatal
                    print("  %s %s b%d failed: %s" % (system, name, batch, e), flush=True)
                    row[system], row[system + "_peak"] = None, None
            model = on_device.to("cpu")

    head = "%-15s %5s  %8s  %10s  %14s" % ("model", "batch", "rel L2", "kiln ms",
                                            "stand-ins ms")
    head += "".join("  %12s" % (s + " ms") for s in systems)
    head += "".join("  %12s" % ("kiln/" + s) for s in systems)
    print("\n" + head + "  peak MiB (kiln" + "".join(", " + s for s in systems) + ")")
    ratios = {s: [] for s in systems}
    for row in rows:
        line = "%-15s %5d  %8s  %10s  %14s" % (
            row["model"], row["batch"], "-" if row["err"] is None else "%.1e" % row["err"],
            ms(row["kiln"]), ms(row["standin"]) if args.device.startswith("cuda") else "-")
        line += "".join("  %12s" % ms(row.get(s)) for s in systems)
        for s in systems:
            k, o = row["kiln"], row.get(s)
            if k and o and k == k and o == o:
                if row.get("ok"):  # rows that miss the bar stay out of the means
                    ratios[s].append(k / o)
                line += "  %12.2f" % (k / o)
            else:
                line += "  %12s" % "-"
        line += "  " + " / ".join([mib(row["kiln_peak"])] + [mib(row.get(s + "_peak"))
                                                           for s in systems])
        print(line)
    print("%-15s %5s  %8s  %10s  %14s" % ("geomean", "", "", "", "") + "".join(
        "  %12s" % "" for _ in systems) + "".join(
        "  %12s" % ("%.2f" % math.exp(sum(map(math.log, r)) / len(r)) if r else "-")
        for r in ratios.values()))
    print("latency: median of %d runs after warm-up, input and output in host memory for "
          "every system; kiln: kiln-run --bench wall time; torch: %s; rel L2 against "
          "PyTorch eager on the cpu (bar %g)" % (
              args.runs, "CUDA events" if args.device.startswith("cuda") else "wall clock",
              TOLERANCE))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
