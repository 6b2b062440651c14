#!/usr/bin/env python3
"""CPU latency benchmark: kiln against onnxruntime, OpenVINO, PyTorch eager
and torch.compile, on the same models, weights and inputs.

    scripts/bench [--models core|broad|NAME,...] [--batches 1,8]
                  [--systems kiln,ort,openvino,eager,compile] [--rounds 5]
                  [--iters K] [--exporter torchscript|dynamo]
                  [--static-shapes] [--baseline DIR]
                  [--bin DIR] [--work DIR] [--json FILE]

Models (tests/bench/zoo.py): "core" is what kiln was tuned on: torchvision
resnet18 and mobilenet_v2 and the BERT-style encoder of
tests/models/export_models.py, and the MLP of examples/make_mlp.py. "broad"
adds 20 models of other families (residual bottlenecks, grouped convs with
and without squeeze-excitation, dense concatenation, inverted residuals with
SE, fire modules, channel shuffle, inception, ConvNeXt, ViT, shifted-window
attention, LSTM, GRU, a GPT-style decoder step with a KV cache, a U-Net and
a detection head with an FPN). All random-init with seed 0; the broad ones
with BatchNorm calibrated on random data and no all-zero layers, so that
their output depends on their input (`python tests/bench/zoo.py` checks
that, and each export against onnxruntime).

Method, per model:
  1. The torch module is exported once to ONNX (--exporter: TorchScript,
     opset 17, 14 for bert; or dynamo) with the batch of every input
     symbolic "N"; its state_dict is saved next to it so every process runs
     the same weights. With --work, exports already there are reused.
  2. kilnc compiles the ONNX once, batch left symbolic (--static-shapes:
     once per batch, with it fixed, as a model exported at one batch size
     would be), with KILN_CACHE_DIR=none (a cold compile); its wall time is
     reported.
  3. Each system runs in its own process for the whole model: a persistent
     worker (this file with --worker, one JSON line per request and reply on
     stdin/stdout) for ort, eager and compile, so torch.compile compiles once
     per batch and the process's peak RSS belongs to that system alone (the
     ort worker never imports torch). kiln is kiln-run itself, started per
     round; its peak RSS is the largest of those runs. Peak RSS is ru_maxrss
     from os.wait4 in a small launcher process that starts the child, since
     a child forked from the benchmark (which holds torch) would inherit its
     high-water mark; the launcher's own (about 9 MiB) is thus a floor.
  4. Per batch, one set of numpy inputs (saved as .npy) is fed to every
     system. Before timing, kiln's first output (kiln-run --output-dir) is
     compared with torch eager's (relative L2); above 1e-4 the row is
     flagged, nothing aborts.
  5. Then R rounds; each round runs every system in turn (kiln, ort,
     openvino, eager, compile; every other round in reverse), each doing 3
     warm-up runs and K timed runs, so drift of a shared, noisy machine
     spreads over all systems; a pause of a second before each turn lets the idle workers'
     spinning threads go to sleep, so no system shares the cores with
     another's. A round's latency is the median of its K runs (kiln: the
     median kiln-run --bench K prints); the reported latency is the median
     of the R round medians, and a ratio kiln/X the median of the R rounds'
     own ratios (kiln and X ran seconds apart within a round, while the
     machine drifts by tens of percent from one minute to the next). The
     first call per batch (where torch.compile compiles) is printed apart.

Threads: ort has 2 intra-op threads, 1 inter-op thread and ORT_ENABLE_ALL;
OpenVINO (CPU plugin) has INFERENCE_NUM_THREADS 2, the f32 inference
precision hint and the LATENCY performance hint, and compiles the model
once per batch with every shape static (its advice for latency);
eager and torch.compile (default inductor backend, dynamic=False) run with
torch.set_num_threads(2); kiln's generated CPU code and oneDNN share one
OpenMP pool with a thread per core (OMP_NUM_THREADS overrides). Times are
host wall clock around one forward call (kiln: around run()). On a loaded
machine every 2-thread system suffers far more than a single thread would
(each waits for its slowest thread): compare the rounds printed as it goes.

The tables come last: kilnc time and peak RSS per model and system, then per
model and batch the median latency of each system, the ratios kiln/ort,
kiln/eager and kiln/compile, and their geometric means per batch. A system
that fails (crash, unsupported op, ...) is reported as failed with the reason.
With --baseline DIR, a second kiln build (DIR holds its kilnc and kiln-run,
e.g. the tree before a change, built elsewhere) runs as the system "base",
compiled and timed the same way in the same rounds, and kiln/base is the
change's effect, measured side by side.
This is a benchmark, not a test: nothing checks the speed, and the exit
status is 0 unless the benchmark itself breaks.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import kiln_testing as kt  # noqa: E402 (rel_l2)

SYSTEMS = ("kiln", "base", "ort", "openvino", "eager", "compile")
KILN_BUILDS = ("kiln", "base")  # systems that are kiln builds (--bin, --baseline)
# Seconds between two systems' turns (see the round loop).
PAUSE = 1.0
EXPORTERS = ("torchscript", "dynamo")
WARMUP = 3  # as kiln-run --bench does
THREADS = 2
TOLERANCE = 1e-4


class Failed(Exception):
    """A system failed; the message is the reason reported."""


def short(text, limit=160):
    """The last non-empty line of `text`, cut to `limit` characters."""
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    line = lines[-1] if lines else "(no message)"
    return line if len(line) <= limit else line[:limit - 3] + "..."


# ---------------------------------------------------------------- torch side

def zoo():
    """tests/bench/zoo.py, imported only where torch may be (it imports
    torch, and the ort and openvino workers must not)."""
    import zoo as z
    return z


def load_module(name, work):
    """The model `name` with the weights saved next to its export."""
    import torch
    module = zoo().build(name)
    module.load_state_dict(torch.load(os.path.join(work, name + ".pt")))
    return module


def export(name, work, exporter):
    """Exports `name` to WORK/name.onnx (batch symbolic) and its weights to
    WORK/name.pt, unless both are there; returns the module."""
    import torch
    onnx_path, pt_path = (os.path.join(work, name + ext) for ext in (".onnx", ".pt"))
    if os.path.exists(onnx_path) and os.path.exists(pt_path):
        print("%s: reusing %s" % (name, onnx_path), flush=True)
        return load_module(name, work)
    module = zoo().build(name)
    zoo().export(name, module, onnx_path, exporter)
    torch.save(module.state_dict(), pt_path)
    print("%s: exported %s (%s exporter)" % (name, onnx_path, exporter), flush=True)
    return module


# -------------------------------------------------------------- worker side

def worker_main(system, name, work):
    """Serves one system on one model: {"cmd": "load", "x": NPY} runs it once
    on that input (torch.compile compiles there); {"cmd": "time", "warmup": W,
    "iters": K} answers K latencies in ms; {"cmd": "quit"} ends."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the libraries print goes to the log, not the protocol
    sys.stdout = sys.stderr

    def reply(**fields):
        proto.write(json.dumps(fields) + "\n")

    try:
        if system == "ort":
            import onnxruntime as ort
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = THREADS
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(os.path.join(work, name + ".onnx"), opts,
                                        providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            bind = lambda xs: (lambda: sess.run(None, dict(zip(names, xs))))
        elif system == "openvino":
            import openvino as ov
            core = ov.Core()
            config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                      "INFERENCE_NUM_THREADS": THREADS}

            def bind(xs):
                # Compiled per batch with every shape static, as OpenVINO
                # advises for latency (its dynamic-shape CPU path is slower).
                model = core.read_model(os.path.join(work, name + ".onnx"))
                model.reshape({p.get_any_name(): list(x.shape)
                               for p, x in zip(model.inputs, xs)})
                request = core.compile_model(model, "CPU", config).create_infer_request()
                feeds = {i: x for i, x in enumerate(xs)}
                return lambda: request.infer(feeds)
        else:
            import torch
            torch.set_num_threads(THREADS)
            torch.set_grad_enabled(False)
            model = load_module(name, work)
            if system == "compile":
                model = torch.compile(model, dynamic=False)

            def bind(xs):
                ts = [torch.from_numpy(x) for x in xs]
                return lambda: model(*ts)
    except Exception as e:
        reply(ok=False, error="setup: %s: %s" % (type(e).__name__, short(e)))
        return
    reply(ok=True)
    run = None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["cmd"] == "quit":
                break
            if req["cmd"] == "load":
                run = bind([np.load(x) for x in req["xs"]])
                start = time.perf_counter()
                run()
                reply(ok=True, first_s=time.perf_counter() - start)
            elif req["cmd"] == "time":
                for _ in range(req["warmup"]):
                    run()
                ms = []
                for _ in range(req["iters"]):
                    start = time.perf_counter()
                    run()
                    ms.append((time.perf_counter() - start) * 1e3)
                reply(ok=True, ms=ms)
        except Exception as e:
            reply(ok=False, error="%s: %s" % (type(e).__name__, short(str(e).split("\n")[0])))


# Linux carries a process's high-water RSS over exec, so a child forked from
# this process (which holds torch) would report at least this process's peak.
# Children are therefore started by a small launcher, which spawns the command
# and, once it has exited, prints its ru_maxrss (KiB) and exit code on stdout.
LAUNCHER = """import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
code = os.waitstatus_to_exitcode(status)
print("\\nmaxrss_kib %d exit %d" % (usage.ru_maxrss, code), flush=True)
sys.exit(1 if code < 0 else code)
"""


def launch(cmd, **kwargs):
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, *cmd],
                            stdout=subprocess.PIPE, text=True, **kwargs)


def launched(proc, output):
    """Waits for the launcher `proc`; returns (the command's output, its
    peak RSS in MiB or None, how it ended)."""
    proc.wait()
    out, _, last = output.rstrip("\n").rpartition("\n")
    m = re.fullmatch(r"maxrss_kib (\d+) exit (-?\d+)", last)
    if not m:  # the launcher itself failed
        return output, None, "launcher exited %d" % proc.returncode
    code = int(m.group(2))
    return out, int(m.group(1)) / 1024.0, (
        "killed by signal %d" % -code if code < 0 else "exited %d" % code)


class Worker:
    """A persistent worker process for one system on one model."""

    def __init__(self, system, name, work):
        self.log = os.path.join(work, "%s.%s.log" % (name, system))
        with open(self.log, "w") as log:
            self.proc = launch([sys.executable, os.path.abspath(__file__), "--worker",
                                system, name, work], stdin=subprocess.PIPE, stderr=log)
        self.reason, self.rss, self.ended = None, None, False
        try:
            self._request(None)
        except Failed as e:
            self.reason = str(e)

    def _request(self, req):
        if self.reason:
            raise Failed(self.reason)
        try:
            if req is not None:
                self.proc.stdin.write(json.dumps(req) + "\n")
                self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line.startswith("{"):  # EOF, or the launcher's report: it ended
            _, self.rss, how = launched(self.proc, line + self.proc.stdout.read())
            self.ended = True
            with open(self.log) as f:
                self.reason = "worker %s: %s (log: %s)" % (how, short(f.read()), self.log)
            raise Failed(self.reason)
        reply = json.loads(line)
        if not reply["ok"]:
            raise Failed(reply["error"])
        return reply

    def load(self, x_paths):
        return self._request(dict(cmd="load", xs=x_paths))["first_s"]

    def round(self, iters):
        return float(np.median(self._request(dict(cmd="time", warmup=WARMUP, iters=iters))["ms"]))

    def close(self):
        if not self.ended:
            try:
                self.proc.stdin.write('{"cmd": "quit"}\n')
                self.proc.stdin.close()
            except OSError:
                pass
            _, self.rss, _ = launched(self.proc, self.proc.stdout.read())
        return self.rss


class Kiln:
    """kiln-run on one artifact, a process per call, with Worker's interface."""

    def __init__(self, bin_dir, artifact, reason=None):
        self.kiln_run = os.path.abspath(os.path.join(bin_dir, "kiln-run"))
        self.artifact, self.reason, self.rss, self.xs = artifact, reason, None, []

    def _run(self, *args):
        if self.reason:
            raise Failed(self.reason)
        proc = launch([self.kiln_run, self.artifact, *self.xs, *args], stderr=subprocess.STDOUT)
        out, rss, how = launched(proc, proc.stdout.read())
        self.rss = max(self.rss or 0.0, rss or 0.0) or None
        if how != "exited 0":
            raise Failed("kiln-run %s: %s" % (how, short(out)))
        return out

    def load(self, x_paths):
        self.xs = x_paths

    def output(self, out_dir):
        self._run("--output-dir", out_dir)
        return np.load(os.path.join(out_dir, "output_0.npy"))

    def round(self, iters):
        out = self._run("--bench", str(iters))
        m = re.search(r"median ([0-9.]+) ms", out)
        if not m:
            raise Failed("no latency in kiln-run's output: %s" % short(out))
        return float(m.group(1))

    def close(self):
        return self.rss  # None: kiln-run never ran


# ---------------------------------------------------------------- main side

def stage_times(stderr):
    """{stage: seconds} from kilnc --time-stages' line, or {}."""
    m = re.search(r"time by stage: (.*) \(total", stderr)
    if not m:
        return {}
    return {name: float(sec) for name, sec in
            re.findall(r"([a-z][a-z ]*?) ([0-9.]+) s(?:, |$)", m.group(1))}


def compile_kiln(bin_dir, onnx_path, artifact, *extra):
    """kilnc, cold; returns (seconds, failure reason or None, stage times:
    {} unless `extra` asks for --time-stages)."""
    env = dict(os.environ, KILN_CACHE_DIR="none")
    start = time.perf_counter()
    try:
        proc = subprocess.run([os.path.join(bin_dir, "kilnc"), onnx_path, "-o", artifact,
                               *extra], env=env, capture_output=True, text=True)
    except OSError as e:
        return None, "kilnc: %s" % e, {}
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        said = "\n".join(l for l in (proc.stderr + proc.stdout).splitlines()
                         if "time by stage:" not in l)
        return seconds, "kilnc exited %d: %s" % (proc.returncode, short(said)), {}
    return seconds, None, stage_times(proc.stderr)


def bench_model(name, args, work):
    import torch
    spec = zoo().BROAD[name]
    module = export(name, work, args.exporter)
    result = dict(kilnc_s=None, rss_mib={}, batches={})
    runners = {}
    builds = [s for s in KILN_BUILDS if s in args.systems]

    def compile_for(system, batch=None):
        """kilnc of build `system` for `batch`, or with the batch symbolic;
        the Kiln runner."""
        bin_dir = args.bin if system == "kiln" else args.baseline
        key = "kilnc_s" if system == "kiln" else "kilnc_s_" + system
        suffix, extra = "" if system == "kiln" else "." + system, []
        if batch is not None:
            suffix += ".b%d" % batch
            for arg, x in zip(spec.input_names, spec.example(batch, seed=0)):
                extra += ["--input-shape", "%s=%s" % (arg, "x".join(map(str, x.shape)))]
        artifact = os.path.join(work, name + suffix + ".kiln")
        if system == "kiln":  # a baseline build may predate the flag
            extra.append("--time-stages")
        seconds, reason, stages = compile_kiln(bin_dir, os.path.join(work, name + ".onnx"),
                                               artifact, *extra)
        if result.get(key) is None and not reason:
            result[key] = seconds
            if stages:
                result["kilnc_stages"] = stages
        slowest = max(stages.items(), key=lambda kv: kv[1]) if stages else None
        print("%s%s: kilnc %s" % (name, suffix, "FAILED: " + reason if reason else
                                  "%.1f s (cold)%s" % (seconds, ", most in %s: %.1f s" %
                                                       slowest if slowest else "")),
              flush=True)
        return Kiln(bin_dir, artifact, reason)

    build_rss = {}
    if not args.static_shapes:
        for system in builds:
            runners[system] = compile_for(system)
    for system in args.systems:
        if system not in KILN_BUILDS:
            runners[system] = Worker(system, name, work)
    iters = result["iters"] = args.iters or spec.iters
    for batch in args.batches:
        for system in builds if args.static_shapes else ():
            if system in runners:
                build_rss[system] = max(build_rss.get(system) or 0.0,
                                        runners[system].close() or 0.0) or None
            runners[system] = compile_for(system, batch)
        xs = spec.example(batch, seed=1)
        x_paths = []
        for arg, x in zip(spec.input_names, xs):
            x_paths.append(os.path.join(work, "%s.b%d.%s.npy" % (name, batch, arg)))
            np.save(x_paths[-1], x.numpy())
        with torch.no_grad():
            ref = zoo().first(module(*xs)).numpy()
        row = dict(rel_l2=None, ms={}, rounds={s: [] for s in args.systems},
                   failed={}, first_s={})
        for system, runner in runners.items():
            try:
                row["first_s"][system] = runner.load(x_paths)
            except Failed as e:
                row["failed"][system] = str(e)
        firsts = ["%s %.2f" % (s, t) for s, t in row["first_s"].items() if t is not None]
        if firsts:  # torch.compile's includes compiling for this batch
            print("%s b%d first call (s): %s" % (name, batch, ", ".join(firsts)), flush=True)
        for system in builds:
            if system not in runners or system in row["failed"]:
                continue
            key = "rel_l2" if system == "kiln" else "rel_l2_" + system
            try:
                out = runners[system].output(os.path.join(work, "%s.b%d.%s.out" % (
                    name, batch, system)))
                row[key] = kt.rel_l2(out, ref) if out.shape == np.shape(ref) else float("inf")
                print("%s b%d: %s vs eager rel L2 %.2e%s" % (
                    name, batch, system, row[key],
                    "  MISMATCH" if row[key] > TOLERANCE else ""), flush=True)
            except Failed as e:
                row["failed"][system] = str(e)
        for r in range(args.rounds):
            line = []
            # Every other round runs the systems in reverse, so that no
            # system always runs first (after the pause) or last.
            for system in (args.systems if r % 2 == 0 else args.systems[::-1]):
                if system in row["failed"]:
                    continue
                # The idle workers' thread pools spin for a while after a
                # run (OpenMP, onnxruntime): let them settle first, or the
                # next system shares the cores with them.
                time.sleep(PAUSE)
                try:
                    ms = runners[system].round(iters)
                except Failed as e:
                    row["failed"][system] = str(e)
                    continue
                row["rounds"][system].append(ms)
                line.append("%s %.3f" % (system, ms))
            print("%s b%d round %d/%d (ms): %s" % (name, batch, r + 1, args.rounds,
                                                  ", ".join(line) or "-"), flush=True)
        for system in args.systems:
            if system in row["failed"]:
                print("%s b%d: %s FAILED: %s" % (name, batch, system, row["failed"][system]),
                      flush=True)
            elif row["rounds"][system]:
                row["ms"][system] = float(np.median(row["rounds"][system]))
        result["batches"][batch] = row
    for system, runner in runners.items():
        result["rss_mib"][system] = runner.close()
    for system, rss in build_rss.items():
        if rss:
            result["rss_mib"][system] = max(rss, result["rss_mib"].get(system) or 0.0)
    return result


def ratio(row, other):
    """kiln/other: the median over rounds of the ratio within each round
    (where the two ran seconds apart), which the machine's drift from round
    to round moves less than a ratio of medians; the ratio of the medians
    when the rounds do not pair up (a system failed partway)."""
    k, o = row["rounds"].get("kiln", []), row["rounds"].get(other, [])
    if k and len(k) == len(o) and all(o):
        return float(np.median([a / b for a, b in zip(k, o)]))
    k, o = row["ms"].get("kiln"), row["ms"].get(other)
    return k / o if k and o else None


def report(results, args):
    """Prints the tables; returns the geometric means {batch: {system: r}}."""
    others = [s for s in SYSTEMS[1:] if s in args.systems]
    fmt = lambda v, f: f % v if v is not None else "-"
    print("\nper model: kilnc wall time (cold), peak RSS (MiB) of each system's process, "
          "and kilnc's slowest stage")
    base = "base" in args.systems
    print("%-19s %9s" % ("model", "kilnc s") + ("%9s" % "base s" if base else "") +
          "".join("%12s" % s for s in args.systems) + "  slowest stage")
    for name, res in results.items():
        stages = res.get("kilnc_stages") or {}
        slowest = max(stages.items(), key=lambda kv: kv[1]) if stages else None
        print("%-19s %9s" % (name, fmt(res["kilnc_s"], "%.1f")) +
              ("%9s" % fmt(res.get("kilnc_s_base"), "%.1f") if base else "") +
              "".join("%12s" % fmt(res["rss_mib"].get(s), "%.0f") for s in args.systems) +
              ("  %s %.1f s" % slowest if slowest else ""))
    print("\nmedian latency (ms) over %d rounds; kiln/X < 1: kiln faster (the "
          "median of the rounds' own ratios); rel L2: kiln vs eager" % args.rounds)
    head = "%-19s %5s" % ("model", "batch") + "".join("%11s" % s for s in args.systems)
    head += "".join("%14s" % ("kiln/" + o) for o in others) if "kiln" in args.systems else ""
    print(head + "%10s" % "rel L2")
    notes, geomean = [], {}
    for batch in args.batches:
        logs = {o: [] for o in others}
        for name, res in results.items():
            row = res["batches"][batch]
            line = "%-19s %5d" % (name, batch)
            for s in args.systems:
                line += "%11s" % ("failed" if s in row["failed"] else fmt(row["ms"].get(s), "%.3f"))
                if s in row["failed"]:
                    notes.append("%s b%d %s failed: %s" % (name, batch, s, row["failed"][s]))
            if "kiln" in args.systems:
                for o in others:
                    r = ratio(row, o)
                    line += "%14s" % fmt(r, "%.2f")
                    if r:
                        logs[o].append(math.log(r))
            err = row["rel_l2"]
            line += "%10s" % fmt(err, "%.1e")
            if err is not None and err > TOLERANCE:
                line += " MISMATCH"
            print(line)
        if "kiln" in args.systems and others:
            geomean[batch] = {o: math.exp(sum(v) / len(v)) if v else None
                              for o, v in logs.items()}
            print("%-19s %5d" % ("geomean", batch) + " " * 11 * len(args.systems) +
                  "".join("%14s" % fmt(geomean[batch][o], "%.2f") for o in others))
    for note in notes:
        print(note)
    return geomean


def parse_args():
    intro, method = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(description=intro, epilog=method,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [v for v in s.split(",") if v]
    z = zoo()
    p.add_argument("--models", type=csv, default=["core"],
                   help="comma-separated models or groups: core (%s; the default), broad "
                        "(core and %s)" % (", ".join(z.CORE),
                                           ", ".join(n for n in z.BROAD if n not in z.CORE)))
    p.add_argument("--exporter", choices=EXPORTERS, default="torchscript",
                   help="how the torch models become ONNX (default %(default)s)")
    p.add_argument("--batches", type=lambda s: [int(b) for b in csv(s)], default=[1, 8],
                   help="comma-separated batch sizes (default: 1,8)")
    p.add_argument("--systems", type=csv,
                   default=[s for s in SYSTEMS if s != "base"],
                   help="comma-separated subset of %s (base: with --baseline, which "
                        "adds it)" % ",".join(SYSTEMS))
    p.add_argument("--rounds", type=int, default=5, help="rounds per model and batch (default: 5)")
    p.add_argument("--static-shapes", action="store_true",
                   help="compile kiln once per batch with that batch fixed (default: once, "
                        "batch symbolic); the kilnc time reported is the first batch's")
    p.add_argument("--iters", type=int, default=None,
                   help="timed runs per round (default: %s)" % ", ".join(
                       "%s %d" % (n, m.iters) for n, m in z.BROAD.items()))
    p.add_argument("--bin", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin")),
                   help="kilnc and kiln-run (default: $KILN_BIN, else build/bin)")
    p.add_argument("--work", help="exports, artifacts, inputs and worker logs "
                   "(default: a temporary folder, removed at the end); exports there are reused")
    p.add_argument("--baseline", metavar="DIR",
                   help="another kiln build's tools folder, run beside kiln as the "
                        "system 'base' (before/after a change)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.baseline:
        for tool in ("kilnc", "kiln-run"):
            if not os.access(os.path.join(args.baseline, tool), os.X_OK):
                p.error("--baseline %s has no %s" % (args.baseline, tool))
        if "base" not in args.systems:
            args.systems.append("base")
    elif "base" in args.systems:
        p.error("the system base needs --baseline DIR")
    args.models = z.expand(args.models)
    for value, known, what in ((args.models, z.BROAD, "model"), (args.systems, SYSTEMS, "system")):
        for v in value:
            if v not in known:
                p.error("unknown %s %s (known: %s)" % (what, v, ", ".join(known)))
    args.systems = [s for s in SYSTEMS if s in args.systems]  # the order of the rounds
    if "openvino" in args.systems:
        try:
            import openvino  # noqa: F401
        except ImportError:
            p.error("the system openvino needs the openvino package: scripts/bench installs "
                    "it (scripts/setup --bench); or leave it out with --systems")
    return args


def main():
    args = parse_args()
    import torch
    torch.set_num_threads(THREADS)
    top = os.path.abspath(args.work or tempfile.mkdtemp(prefix="kiln-bench-"))
    work = os.path.join(top, args.exporter)  # exports are reused per exporter
    os.makedirs(work, exist_ok=True)
    start = time.time()
    results, failed = {}, {}
    try:
        for name in args.models:
            try:
                results[name] = bench_model(name, args, work)
            except Exception as e:  # an export that fails: the other models go on
                failed[name] = "%s: %s" % (type(e).__name__, short(e))
                print("%s: FAILED: %s" % (name, failed[name]), flush=True)
    finally:
        if not args.work:
            shutil.rmtree(top, ignore_errors=True)
    print("\nbenchmark took %.0f s" % (time.time() - start))
    geomean = report(results, args)
    for name, reason in failed.items():
        print("%s: not benchmarked: %s" % (name, reason))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(config=dict(models=args.models, exporter=args.exporter,
                                       batches=args.batches,
                                       systems=args.systems, rounds=args.rounds,
                                       iters=args.iters, warmup=WARMUP, threads=THREADS,
                                       bin=os.path.abspath(args.bin),
                                       baseline=args.baseline and
                                       os.path.abspath(args.baseline)),
                           models=results, failed=failed, geomean=geomean), f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker_main(*sys.argv[2:5]))
    sys.exit(main())
