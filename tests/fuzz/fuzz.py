#!/usr/bin/env python3
"""kiln's differential graph fuzzer: random valid ONNX graphs through kilnc
and kiln-run, against onnxruntime (or onnx's reference evaluator).

    scripts/fuzz --seed 1 --count 200
    scripts/fuzz --seed 7 --count 100 --symbolic mixed --ops Conv,MaxPool,Relu,Add
    scripts/fuzz --replay fuzz-failures/wrong-s1-g42-static

Graphs are numbered from --start and graph i of seed S is always the same
graph whatever the other options (but --ops and the size limits); up to
--batch graphs of the same opset share one kilnc run. Each graph is checked
static and, with --symbolic, once more with input dims made symbolic,
compiled once and run at several sizes (cases.py). Failures (crash, wrong) are shrunk (shrink.py)
and saved as reproducer folders under --out. Prints `N passed, M failed`,
the classes, and op coverage; exits 1 when a crash or wrong result
occurred, else 0.
"""

import argparse
import collections
import concurrent.futures as cf
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from onnx import helper  # noqa: E402

import cases as C  # noqa: E402
import generate as G  # noqa: E402
import oracle as O  # noqa: E402
import shrink as S  # noqa: E402
from ops import GENERATORS  # noqa: E402

CLASSES = ("crash", "wrong", "compile-error", "run-error", "timeout", "disputed")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripts/fuzz", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Tools: $KILN_BIN (default build/bin). Failures fail: there is no "
               "known-issues list.")
    p.add_argument("--seed", type=int, default=1, help="run seed (default 1)")
    p.add_argument("--count", type=int, default=100, help="graphs to generate (default 100)")
    p.add_argument("--start", type=int, default=0,
                   help="first graph number (default 0; to resume or split a soak)")
    p.add_argument("--jobs", "-j", type=int, default=2, help="parallel workers (default 2)")
    p.add_argument("--symbolic", choices=("none", "some", "all", "mixed"), default="none",
                   help="also check each graph with some / all input dims symbolic, "
                        "or either by a coin (mixed) (default none)")
    p.add_argument("--out", default="fuzz-failures",
                   help="folder for reproducers (default fuzz-failures/)")
    p.add_argument("--ops", default="",
                   help="comma-separated op types (or generator names) to draw from")
    p.add_argument("--max-nodes", type=int, default=40, help="max nodes per graph (default 40)")
    p.add_argument("--max-elems", type=int, default=20000,
                   help="max elements per tensor (default 20000)")
    p.add_argument("--time-budget", type=float, default=0,
                   help="stop starting new graphs after this many seconds (0: none)")
    p.add_argument("--batch", type=int, default=4,
                   help="graphs compiled together in one model (default 4)")
    p.add_argument("--timeout", type=float, default=180,
                   help="seconds per kilnc or kiln-run call (default 180)")
    p.add_argument("--keep-compile-errors", action="store_true",
                   help="also shrink and save compile errors")
    p.add_argument("--no-shrink", action="store_true", help="save failures unshrunk")
    p.add_argument("--shrink-budget", type=float, default=150,
                   help="seconds of shrinking per failure (default 150)")
    p.add_argument("--shrink-limit", type=int, default=2,
                   help="shrink at most this many failures that look alike (same class, "
                        "variant and first differing op); save the rest unshrunk (default 2)")
    p.add_argument("--sanitize", metavar="LIST", default="",
                   help="compile the kernels with kilnc --sanitize=LIST (address,undefined) "
                        "and run them with kiln-run-asan: a read past a tensor is a crash")
    p.add_argument("--replay", nargs="+", metavar="DIR",
                   help="check saved reproducer folders again and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per graph")
    args = p.parse_args(argv)
    args.ops = [o for o in args.ops.split(",") if o] or None
    if args.ops:
        known = set(GENERATORS) | {op for g in GENERATORS.values() for op in g.emits}
        unknown = [o for o in args.ops if o not in known]
        if unknown:
            p.error("unknown op(s) %s; known: %s" % (",".join(unknown), ",".join(sorted(known))))
    return args


def failure_key(case, outcome):
    """What makes two failures look alike before shrinking: the class, the
    variant and, for a wrong result, the op type and dtype of the first
    differing output; for tool failures, the message."""
    variant = case.variant.split("-")[0]
    if outcome.cls != "wrong":
        return (outcome.cls, variant, O.signature(outcome.cls, outcome.message))
    m = re.match(r"output (\d+) ", outcome.message)
    g = case.model.graph
    if not m or int(m.group(1)) >= len(g.output):
        return (outcome.cls, variant, "")
    out = g.output[int(m.group(1))]
    op = next((n.op_type for n in g.node if out.name in n.output), "")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(out.type.tensor_type.elem_type)).name
    what = next((w for w in ("shape", "dtype", "NaN", "not written")
                 if w in outcome.message), "values")
    return (outcome.cls, variant, "%s %s %s" % (what, op, dtype))


# -- work done in the worker processes -----------------------------------------


def make_cases(args, idx, opset, ir):
    """The cases of graph `idx`: static, and symbolic when asked."""
    static = C.static_case(args.seed, idx, opset, ir, args.ops, args.max_nodes,
                           args.max_elems, "g%d_" % idx)
    out = [static]
    if args.symbolic != "none":
        rng = np.random.default_rng([args.seed, idx, 0x73796d])
        mode = args.symbolic if args.symbolic != "mixed" else \
            ("some", "all")[int(rng.integers(2))]
        twin = C.static_case(args.seed, idx, opset, ir, args.ops, args.max_nodes,
                             args.max_elems, "g%ds_" % idx)
        try:
            out.append(C.symbolic_case(twin, mode, rng, "g%ds_" % idx))
        except ValueError:
            pass  # no input dims (scalars only)
    return out


def check_batch_task(args, batch, workdir):
    """Generates and checks graphs `batch`; returns one record per graph:
    (idx, outcome per case, cases of failures, coverage, skip reason). A
    bug of the fuzzer itself skips the batch with the traceback as reason,
    rather than ending the run."""
    try:
        return _check_batch(args, batch, workdir)
    except Exception:
        why = "fuzzer error: " + traceback.format_exc().strip().splitlines()[-1]
        sys.stderr.write("fuzzer error in graphs %s:\n%s" % (batch, traceback.format_exc()))
        return [[idx, [], [], [], why] for idx in batch]


def _check_batch(args, batch, workdir):
    opset, ir = G.pick_opset(args.seed, batch[0])
    records, all_cases, owners = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx in batch:
            try:
                cs = make_cases(args, idx, opset, ir)
            except O.Skip as e:
                records.append([idx, [], [], [], str(e)])
                continue
            except Exception as e:  # a generator bug: say so, do not hide it
                records.append([idx, [], [], [], "generator error: %s" %
                                traceback.format_exception_only(type(e), e)[-1].strip()])
                continue
            records.append([idx, [], [], cs[0].coverage, None])
            for c in cs:
                all_cases.append(c)
                owners.append(len(records) - 1)
        outcomes = O.check_batch(all_cases, workdir, args.timeout) if all_cases else []
    for c, o, r in zip(all_cases, outcomes, owners):
        records[r][1].append((c.variant, o, failure_key(c, o) if o.cls != "pass" else None))
        if o.cls in O.FAILURES or (o.cls == "compile-error" and args.keep_compile_errors):
            records[r][2].append((c, o))
    return records


def shrink_task(args, case, outcome, folder, workdir, why_not=None):
    """Shrinks (unless `why_not` says why not) and saves one failure;
    returns a summary line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original, note, tests = case, "", 0
        if why_not is None:
            alone = O.check_case(case, workdir, args.timeout)
            if O.signature(alone.cls, alone.message) != O.signature(outcome.cls, outcome.message):
                why_not = "alone this graph gives %s (%s); it failed in a batch" % (
                    alone.cls, alone.message)
            else:
                case, outcome, tests = S.shrink(case, outcome, workdir, args.timeout,
                                                budget_s=args.shrink_budget)
        if why_not:
            note = "not shrunk: %s\n" % why_not
        S.write_case(case, outcome, folder, note, original=original)
    return "%s: %d -> %d nodes (%s)" % (
        folder, len(original.model.graph.node), len(case.model.graph.node),
        "%d shrink runs" % tests if not why_not else "not shrunk: " + why_not[:60])


# -- the driver ------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    if args.sanitize:
        # Here and in the workers, however they start.
        os.environ["KILN_FUZZ_SANITIZE"] = args.sanitize
        O.SANITIZE = args.sanitize
    if args.replay:
        return replay(args)
    workdir = tempfile.mkdtemp(prefix="kiln-fuzz-")
    try:
        return fuzz(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def fuzz(args, workdir):
    """Checks the graphs, then shrinks and saves the failures."""
    kilnc, kiln_run = O.tools()
    for tool in (kilnc, kiln_run):
        if not os.access(tool, os.X_OK):
            sys.exit("error: %s not found (set KILN_BIN to the build's bin/ folder)" % tool)
    t0 = time.time()
    idxs = list(range(args.start, args.start + args.count))
    # A batch shares one model, so one opset: graphs are grouped by theirs
    # (which depends only on the seed and the graph number).
    batches, open_ = [], {}
    for i in idxs:
        cur = open_.setdefault(G.pick_opset(args.seed, i), [])
        cur.append(i)
        if len(cur) == args.batch:
            batches.append(open_.pop(G.pick_opset(args.seed, i)))
    batches += list(open_.values())
    counts = collections.Counter()
    skips = collections.Counter()
    messages = collections.defaultdict(list)  # failure key -> examples
    coverage = set()
    failures, to_save, shrunk_keys = [], [], collections.Counter()
    done, next_report = 0, max(1, args.count // 10)
    print("kiln fuzz: seed %d, graphs %d..%d, symbolic %s, %d jobs, tools %s%s"
          % (args.seed, idxs[0], idxs[-1], args.symbolic, args.jobs, os.path.dirname(kilnc),
             ", kernels sanitized (%s)" % args.sanitize if args.sanitize else ""),
          flush=True)
    with cf.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending, queue = set(), list(batches)
        while queue or pending:
            while queue and len(pending) < args.jobs * 2 and not _over(args, t0):
                pending.add(pool.submit(check_batch_task, args, queue.pop(0), workdir))
            if _over(args, t0):
                queue = []
            if not pending:
                break
            finished, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in finished:
                for idx, outs, fails, cov, skip in fut.result():
                    done += 1
                    if skip:
                        counts["skipped"] += 1
                        skips[skip.split(":")[0] + ": " + skip.split(":", 1)[-1].strip()[:90]] += 1
                        continue
                    coverage.update(cov)
                    cls = O.worst([o.cls for _, o, _ in outs])
                    counts[cls] += 1
                    for variant, o, key in outs:
                        if o.cls != "pass":
                            messages[key].append("g%d %s: %s" % (idx, variant, o.message))
                    if cls != "pass" or args.verbose:
                        bad = [(v, o) for v, o, _ in outs if o.cls != "pass"] or \
                            [(v, o) for v, o, _ in outs]
                        print("  g%d %s: %s" % (idx, cls.upper() if cls in O.FAILURES else cls,
                                               "; ".join("%s %s" % (v, o.message[:200])
                                                         for v, o in bad)), flush=True)
                    static_sigs = {O.signature(o.cls, o.message) for c, o in fails
                                   if c.variant == "static"}
                    for case, o in fails:
                        key = failure_key(case, o)
                        # The symbolic twin failing like the static graph
                        # says nothing new: saved, not shrunk.
                        twin = case.variant != "static" and \
                            O.signature(o.cls, o.message) in static_sigs
                        shrunk_keys[key] += not twin
                        folder = os.path.join(args.out, "%s-s%d-g%d-%s" % (
                            o.cls, args.seed, idx, case.variant))
                        failures.append(folder)
                        why_not = ("--no-shrink" if args.no_shrink else
                                   "the static graph fails the same way" if twin else
                                   "--shrink-limit reached for failures like it"
                                   if shrunk_keys[key] > args.shrink_limit else None)
                        to_save.append((case, o, folder, why_not))
                if done >= next_report:
                    next_report += max(1, args.count // 10)
                    el = time.time() - t0
                    print("progress: %d/%d graphs, %d passed, %.2f s/graph"
                          % (done, args.count, counts["pass"], el / done), flush=True)
        # Shrinking comes last, so that it never holds up checking graphs.
        t_check = time.time() - t0
        if to_save:
            print("shrinking and saving %d failures" % len(to_save), flush=True)
        futs = [pool.submit(shrink_task, args, case, o, folder, workdir,
                            why_not or ("--time-budget spent" if _over(args, t0) else None))
                for case, o, folder, why_not in to_save]
        for fut in futs:
            try:
                print("  saved " + fut.result(), flush=True)
            except Exception as e:
                print("  saving a failure failed: %s" % e, flush=True)
    return summary(args, t0, t_check, done, counts, skips, messages, coverage, failures)


def _over(args, t0):
    return args.time_budget and time.time() - t0 > args.time_budget


def summary(args, t0, t_check, done, counts, skips, messages, coverage, failures):
    el = time.time() - t0
    checked = sum(counts[c] for c in ("pass",) + CLASSES)
    print("\n== kiln fuzz: seed %d, %d graphs checked in %.0f s (%.2f s/graph, %d jobs), "
          "symbolic %s; shrinking %.0f s" % (args.seed, done, t_check, t_check / max(1, done),
                                            args.jobs, args.symbolic, el - t_check))
    print("%d passed, %d failed" % (counts["pass"], checked - counts["pass"]))
    print("  " + ", ".join("%s %d" % (c, counts[c]) for c in CLASSES) +
          ", skipped %d" % counts["skipped"])
    # Failures that look alike (failure_key) on one line, with an example.
    for key, examples in sorted(messages.items(), key=lambda kv: (CLASSES.index(kv[0][0]),
                                                                  -len(kv[1]))):
        print("    %s x%d [%s]: %s" % (key[0], len(examples), key[1] if key[0] != "wrong" else
                                      "%s, %s" % (key[1], key[2]), examples[0][:220]))
    for why, n in skips.most_common(5):
        print("    skipped x%d: %s" % (n, why))
    ops = {op for op, _ in coverage}
    print("coverage: %d op types, %d (op, attribute-combination) pairs" % (len(ops), len(coverage)))
    if args.verbose:
        print("  ops: " + " ".join(sorted(ops)))
    if failures:
        print("reproducers under %s/ (%d)" % (args.out, len(failures)))
    return 1 if counts["crash"] or counts["wrong"] else 0


def replay(args):
    """Checks saved reproducer folders again."""
    bad = 0
    workdir = tempfile.mkdtemp(prefix="kiln-fuzz-")
    for folder in args.replay:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case = C.load_case(folder)
            out = O.check_case(case, workdir, args.timeout)
        print("%s: %s%s" % (folder, out.cls, (": " + out.message) if out.message else ""))
        bad += out.cls in O.FAILURES
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
