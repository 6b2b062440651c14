#!/usr/bin/env python3
"""ONNX node conformance runner for kiln.

Runs every node test case that the installed onnx package generates
(onnx.backend.test.case.node.collect_testcases: model, inputs and expected
outputs; the onnx wheel does not ship onnx/backend/test/data/node) through
kilnc and kiln-run, and compares the outputs with the expected ones using the
ONNX backend test rules: same number of outputs, same dtype and shape, values
within rtol 1e-3 / atol 1e-7 for floating point (NaN equals NaN), exact for
integers and booleans.

Tests whose outputs are random (the generators, Bernoulli, Dropout in
training mode with a nonzero ratio) cannot match the reference's draws: their
outputs are checked for dtype, shape and finiteness, and outputs whose
expected values are all 0 or 1 (Bernoulli draws, masks) for holding only 0
and 1. kiln's generators are checked statistically in tests/e2e.

Each case is written out the way onnx's `backend-test-tools generate-data`
does (CASE/model.onnx, CASE/test_data_set_N/{input,output}_i.pb); the .pb
inputs are passed to kiln-run as they are.

One line per test:
    PASS name
    FAIL name: reason                 (an unexpected failure)
    XFAIL name: reason                (a failure on the expected-failure list)
    XPASS name                        (on the list, but passed: shrink the list)
then the summary line `N passed, M failed, K skipped` (skipped = expected
failures; XPASSes count as passed) and a percentage line.

Exit status: 0 when there is no unexpected failure (with --strict, no XPASS
either), 1 otherwise.

Usually run through scripts/conformance, which picks the venv and the tools:
    scripts/conformance --jobs 2
    scripts/conformance --filter '^test_(add|sub)_' --keep /tmp/conf
    scripts/conformance --symbolic
    scripts/conformance --write-expected-failures tests/conformance/expected_failures.txt

--symbolic turns every dimension of every graph input into a symbolic one
(dim_param) before compiling, as ONNX-MLIR does, and compiles the model
without binding them: kiln sizes them at run time from the test data. It uses
expected_failures_symbolic.txt by default.
"""

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "emu"))
import cuda_emu  # noqa: E402  (tests/emu: CUDA kernels run on the host)
DEFAULT_EXPECTED = os.path.join(HERE, "expected_failures.txt")
DEFAULT_EXPECTED_SYMBOLIC = os.path.join(HERE, "expected_failures_symbolic.txt")
DEFAULT_EXPECTED_CUDA = os.path.join(HERE, "expected_failures_cuda.txt")

RTOL = 1e-3  # the ONNX backend node-test tolerances
ATOL = 1e-7
MAX_REASON = 100

# Signs that a tool crashed instead of reporting an error.
CRASH_MARKERS = ("Stack dump", "Segmentation", "Aborted", "core dumped",
                 "terminate called", "Assertion", "PLEASE submit a bug report",
                 "AddressSanitizer", "UndefinedBehaviorSanitizer")

HEADER = """\
# ONNX node conformance: tests kiln is expected to fail today.
#
# One test per line: `test_name  # reason`, sorted by name. Read by
# tests/conformance/run.py (scripts/conformance): a listed test that fails is
# reported as XFAIL and counted as skipped; a listed test that passes is
# reported as XPASS (an error only with --strict) and should be removed.
# This file must only shrink: fix kiln rather than adding a test here.
# Regenerate after fixes with
#   scripts/conformance --write-expected-failures FILE
# (tests not run because of --filter keep their current entries).
"""


# ---------------------------------------------------------------------------
# Collecting and writing the cases


def collect_cases():
    from onnx.backend.test.case import node as node_cases
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return node_cases.collect_testcases(None)


def sample_cases(cases, share, seed):
    """A fixed share of `cases` that still covers every op type they use:
    per op type, the first case by name that uses it, then every other case
    whose hash of (seed, name) falls in `share`. Deterministic on any machine
    (no Python hash randomisation), so a CI budget names the same tests."""
    import hashlib

    def ops(case):
        return {(n.domain or "ai.onnx", n.op_type) for n in case.model.graph.node}

    def picked(name):
        digest = hashlib.sha256(("%d:%s" % (seed, name)).encode()).digest()
        return int.from_bytes(digest[:8], "big") < share * 2.0 ** 64

    covered, keep = set(), set()
    for case in sorted(cases, key=lambda c: c.name):
        new = ops(case) - covered
        if new or picked(case.name):
            keep.add(case.name)
            covered |= ops(case)
    return [c for c in cases if c.name in keep]


def _value_kind(value_info):
    t = value_info.type
    for kind in ("tensor_type", "sequence_type", "map_type", "optional_type",
                 "sparse_tensor_type"):
        if t.HasField(kind):
            return kind[:-len("_type")]
    return "unknown"


def _serialize(value, value_info):
    """A data value as a serialized proto, like onnx's generate-data."""
    from onnx import TensorProto, numpy_helper
    kind = _value_kind(value_info)
    if kind == "map":
        return numpy_helper.from_dict(value, value_info.name).SerializeToString()
    if kind == "sequence":
        return numpy_helper.from_list(value, value_info.name).SerializeToString()
    if kind == "optional":
        return numpy_helper.from_optional(value, value_info.name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(np.asarray(value), value_info.name).SerializeToString()


def _shape_of(value):
    from onnx import TensorProto
    if isinstance(value, TensorProto):
        return tuple(value.dims)
    if isinstance(value, (np.ndarray, np.generic)):
        return tuple(np.shape(value))
    return None


def _tensor_type(type_proto):
    """The tensor type inside a tensor, sequence or optional type, or None."""
    while True:
        if type_proto.HasField("tensor_type"):
            return type_proto.tensor_type
        if type_proto.HasField("sequence_type"):
            type_proto = type_proto.sequence_type.elem_type
        elif type_proto.HasField("optional_type"):
            type_proto = type_proto.optional_type.elem_type
        else:
            return None


def make_symbolic(model):
    """Makes every dimension of every tensor graph input (and of the tensors
    in sequence and optional inputs) symbolic, in place. Dimension names are
    unique per input and axis."""
    for inp in model.graph.input:
        tensor = _tensor_type(inp.type)
        if tensor is None or not tensor.HasField("shape"):
            continue
        for axis, dim in enumerate(tensor.shape.dim):
            dim.Clear()
            dim.dim_param = "%s_d%d" % (re.sub(r"\W", "_", inp.name) or "in", axis)


def value_args(graph, inputs, symbolic):
    """kilnc arguments for the inputs that are not plain tensors: the length
    of each sequence (--sequence-length), each optional given no value
    (--empty-optional), and the shapes of sequence elements (their rank is
    often not in the model; dims are `?` in symbolic mode)."""
    args = []
    for info, value in zip(graph.input, inputs):
        kind = _value_kind(info)
        if kind == "optional" and value is None:
            args.append("--empty-optional=" + info.name)
            continue
        if not isinstance(value, list):
            continue
        args.append("--sequence-length=%s=%d" % (info.name, len(value)))
        for i, element in enumerate(value):
            shape = np.shape(element)
            dims = ["?" if symbolic else str(d) for d in shape]
            args.append("--input-shape=%s[%d]=%s" % (info.name, i, "x".join(dims) or "scalar"))
    return args


RANDOM_OPS = {"RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Bernoulli", "Multinomial"}


def draws_random(model, inputs):
    """Whether the model's outputs are random draws for these inputs."""
    values = {i.name: v for i, v in zip(model.graph.input, inputs)}
    for node in model.graph.node:
        if node.op_type in RANDOM_OPS:
            return True
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2]:
            mode = values.get(node.input[2])
            ratio = values.get(node.input[1], 0.5) if node.input[1] else 0.5
            if mode is not None and bool(np.asarray(mode).all()) and \
                    np.asarray(ratio).item() != 0:
                return True
    return False


def write_case(case, case_dir, symbolic):
    """Writes the case; returns the task for a worker."""
    model = case.model
    if symbolic:
        import onnx
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        make_symbolic(model)
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    graph = case.model.graph
    data_sets = []
    for n, (inputs, outputs) in enumerate(case.data_sets):
        ds_dir = os.path.join(case_dir, "test_data_set_%d" % n)
        os.makedirs(ds_dir, exist_ok=True)
        in_paths, shapes = [], []
        for j, value in enumerate(inputs):
            path = os.path.join(ds_dir, "input_%d.pb" % j)
            with open(path, "wb") as f:
                f.write(_serialize(value, graph.input[j]))
            in_paths.append(path)
            kind = _value_kind(graph.input[j])
            shapes.append((graph.input[j].name, _shape_of(value) if kind == "tensor" else None))
        out_paths = []
        for j, value in enumerate(outputs):
            path = os.path.join(ds_dir, "output_%d.pb" % j)
            with open(path, "wb") as f:
                f.write(_serialize(value, graph.output[j]))
            out_paths.append(path)
        data_sets.append((in_paths, shapes, out_paths))
    # Sequence lengths and empty optionals are compiled in: from the first
    # data set (the suite's cases have one).
    return dict(name=case.name, dir=case_dir, data_sets=data_sets,
                kilnc_args=value_args(graph, case.data_sets[0][0], symbolic)
                if case.data_sets else [],
                random=any(draws_random(case.model, inputs)
                           for inputs, _ in case.data_sets),
                output_kinds=[_value_kind(o) for o in graph.output],
                rtol=case.rtol, atol=case.atol, symbolic=symbolic)


# ---------------------------------------------------------------------------
# Running one case (in a worker process)

_CONFIG = {}


def _init_worker(config):
    _CONFIG.update(config)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C


def _short(text, limit=MAX_REASON):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def error_line(stderr, case_dir):
    """The first error line of a tool's stderr, without the tool name, the
    model path and the node name: `kilnc: DIR/model.onnx: node 'n': error: X`
    gives `X`."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    pick = next((l for l in lines if "error" in l.lower()), lines[0] if lines else "")
    if not pick:
        return "(no message on stderr)"
    m = re.search(r"\berror:\s*(.*)", pick)
    text = m.group(1) if m else pick
    text = text.replace(case_dir + os.sep, "").replace(case_dir, "")
    return text.strip() or pick.strip()


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return "signal %d" % -code


def _exec(argv, timeout, env=None):
    """Runs argv (in `env`, else this environment); retries a few times when
    the binary is briefly missing (being rebuilt). Returns (CompletedProcess
    or None, seconds, error)."""
    start = time.monotonic()
    for attempt in range(4):
        try:
            # A session of its own, so that a timeout also ends the C++
            # compiler kilnc may have started.
            with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, errors="replace", env=env,
                                  start_new_session=True) as p:
                try:
                    stdout, stderr = p.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):
                        os.killpg(p.pid, signal.SIGKILL)
                    p.communicate()
                    return None, time.monotonic() - start, "timed out after %gs" % timeout
            proc = subprocess.CompletedProcess(argv, p.returncode, stdout, stderr)
            return proc, time.monotonic() - start, None
        except OSError as e:
            if attempt == 3:
                return None, time.monotonic() - start, "cannot run %s: %s" % (argv[0], e)
            time.sleep(2 + 3 * attempt)


def _check_tool(tool, proc, err, argv, case_dir, result):
    """None when the tool succeeded; else the failure reason (recording
    crashes in result)."""
    if proc is None:
        if err.startswith("timed out"):
            result["timeout"] = " ".join(shlex.quote(a) for a in argv)
        return "%s: %s" % (tool, err)
    code = proc.returncode
    markers = [m for m in CRASH_MARKERS if m in proc.stderr or m in proc.stdout]
    if code not in (0, 1) or markers:
        how = ("killed by %s" % _signal_name(code)) if code < 0 else "exit code %d" % code
        if markers:
            how += ", crash output (%s)" % markers[0]
        result["crash"] = dict(tool=tool, how=how,
                               command=" ".join(shlex.quote(a) for a in argv),
                               stderr=proc.stderr[-2000:])
        return "%s crashed: %s: %s" % (tool, how, error_line(proc.stderr, case_dir))
    if code != 0:
        return "%s: %s" % (tool, error_line(proc.stderr, case_dir))
    return None


def _load_expected_value(path, kind):
    """The expected value of an output: an array, a list of arrays (a
    sequence) or None (an optional with no value)."""
    import onnx
    from onnx import numpy_helper
    proto = {"tensor": onnx.TensorProto, "sequence": onnx.SequenceProto,
             "optional": onnx.OptionalProto}[kind]()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    if kind == "tensor":
        return numpy_helper.to_array(proto)
    if kind == "sequence":
        return numpy_helper.to_list(proto)
    return numpy_helper.to_optional(proto)


def _read_output(base):
    """What kiln-run wrote for one output (BASE.npy, folder BASE/ of 0.npy,
    1.npy..., or an empty BASE.none): an array, a list or None."""
    if os.path.exists(base + ".npy"):
        return np.load(base + ".npy", allow_pickle=False)
    if os.path.isdir(base):
        count = len(os.listdir(base))
        return [np.load(os.path.join(base, "%d.npy" % e), allow_pickle=False)
                for e in range(count)]
    if os.path.exists(base + ".none"):
        return None
    raise FileNotFoundError(base + ".npy")


def _what(value):
    if value is None:
        return "no value"
    if isinstance(value, list):
        return "a sequence of %d" % len(value)
    return "a tensor"


def _compare_output(i, base, expected_path, kind, task):
    """None when kiln-run's output i (at BASE...) matches; else the reason."""
    if kind not in ("tensor", "sequence", "optional"):
        return "output %d is a %s, which kiln-run cannot write" % (i, kind)
    try:
        got = _read_output(base)
    except Exception as e:
        return "output %d: cannot read kiln-run's output: %s" % (i, e)
    want = _load_expected_value(expected_path, kind)
    if (got is None) != (want is None) or isinstance(got, list) != isinstance(want, list):
        return "output %d: kiln-run wrote %s, expected %s" % (i, _what(got), _what(want))
    if want is None:
        return None
    if isinstance(want, list):
        if len(got) != len(want):
            return "output %d: kiln-run wrote %s, expected %s" % (i, _what(got), _what(want))
        pairs = list(zip(got, want))
    else:
        pairs = [(got, want)]
    for e, (g, w) in enumerate(pairs):
        if task.get("random"):
            reason = compare_random(i, g, w)
        else:
            reason = compare(i, g, w, task["rtol"], task["atol"])
        if reason:
            return reason + (" (element %d)" % e if isinstance(want, list) else "")
    return None


def compare_random(i, got, want):
    """compare() for random draws: dtype, shape, finiteness, 0/1 values."""
    if got.shape != want.shape:
        return "output %d: shape %s != expected %s" % (i, list(got.shape), list(want.shape))
    if got.dtype != want.dtype:
        return "output %d: dtype %s != expected %s" % (i, got.dtype, want.dtype)
    if got.dtype.kind == "f" and not np.isfinite(got).all():
        return "output %d: a random draw is not finite" % i
    if want.size and np.isin(want, [0, 1]).all() and not np.isin(got, [0, 1]).all():
        return "output %d: a 0/1 draw holds other values" % i
    return None


def compare(i, got, want, rtol, atol):
    """None when output i matches; else the reason."""
    if got.shape != want.shape:
        return "output %d: shape %s != expected %s" % (i, list(got.shape), list(want.shape))
    if want.dtype == object:
        if got.dtype != object and got.dtype.kind not in "US":
            return "output %d: dtype %s != expected string" % (i, got.dtype)
        ok = np.array_equal(got.astype(object), want)
        return None if ok else "output %d: string values differ" % i
    if got.dtype != want.dtype:
        return "output %d: dtype %s != expected %s" % (i, got.dtype, want.dtype)
    if want.size == 0:
        return None
    if want.dtype.kind in "biuS" or want.dtype == np.bool_:
        bad = got != want
        if not bad.any():
            return None
        return "output %d: %d/%d elements differ (exact compare), first at %s: %s != %s" % (
            i, int(bad.sum()), want.size, [int(k) for k in np.argwhere(bad)[0]],
            got[bad].flat[0], want[bad].flat[0])
    out, ref = got, want
    if want.dtype.name == "bfloat16":
        rtol = max(rtol, 2 ** -6)
    if want.dtype.kind not in "fc":  # bfloat16 / float8 / ... from ml_dtypes
        out, ref = got.astype(np.float32), want.astype(np.float32)
    with np.errstate(all="ignore"):
        close = np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            return None
        bad = ~close
        o = out.astype(np.complex128 if out.dtype.kind == "c" else np.float64)
        r = ref.astype(o.dtype)
        diff = np.abs(o - r)[bad]
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else float("nan")
        rel = diff / np.abs(r[bad])
        max_rel = float(rel[np.isfinite(rel)].max()) if np.isfinite(rel).any() else float("nan")
    return "output %d: %d/%d values differ (max abs diff %.3g, max rel diff %.3g)" % (
        i, int(bad.sum()), want.size, max_abs, max_rel)


def run_case(task):
    kilnc = os.path.join(_CONFIG["bin"], "kilnc")
    kiln_run = os.path.join(_CONFIG["bin"], "kiln-run")
    timeout = _CONFIG["timeout"]
    case_dir = task["dir"]
    result = dict(name=task["name"], ok=False, reason=None, compile_s=0.0, run_s=0.0,
                  dir=case_dir)
    start = time.monotonic()
    try:
        result["reason"] = _run_case(task, kilnc, kiln_run, timeout, result)
        result["ok"] = result["reason"] is None
    except Exception as e:  # a bug in this runner, not in kiln
        result["reason"] = "runner error: %s: %s" % (type(e).__name__, e)
    result["total_s"] = time.monotonic() - start
    if result["ok"] and not _CONFIG["keep"]:
        shutil.rmtree(case_dir, ignore_errors=True)
    return result


def _extract_section(artifact, name, path):
    """Writes the artifact's section `name` (runtime/Artifact.h's format) to
    `path`, nothing when it has none; None or why the file is unreadable."""
    with open(artifact, "rb") as f:
        data = f.read()
    if len(data) < 20 or data[:8] != b"KILNART\0":
        return "%s: not a kiln artifact" % artifact
    size = int.from_bytes(data[12:16], "little")
    try:
        manifest = json.loads(data[20:20 + size])
    except ValueError as e:
        return "%s: unreadable manifest: %s" % (artifact, e)
    for section in manifest.get("sections", []):
        if section.get("name") == name:
            with open(path, "wb") as f:
                f.write(data[section["offset"]:section["offset"] + section["size"]])
    return None


def _compile_case(task, kilnc, timeout, result, artifact):
    """kilnc (and, for --cuda-compile, ptxas); None or why it failed."""
    case_dir = task["dir"]
    cuda_compile = _CONFIG.get("cuda_compile")
    out = os.path.join(case_dir, "model.ptx") if cuda_compile else artifact
    argv = [kilnc, os.path.join(case_dir, "model.onnx"), "-o", out]
    if _CONFIG.get("device"):
        argv.append("--device=" + _CONFIG["device"])
    if cuda_compile or _CONFIG.get("cuda_emulate"):
        # Kernels with shapes known only at run time fall back to the cpu
        # (cuda kernels are static); every other one must assemble.
        argv += ["--devices=%s,cpu" % _CONFIG["device"]]
    if cuda_compile:
        argv.append("--emit=ptx")
    elif _CONFIG.get("cuda_emulate"):
        argv.append("--save-cuda=" + os.path.join(case_dir, "model.cu"))
    argv += task["kilnc_args"] + (_CONFIG.get("kilnc_args") or [])
    proc, secs, err = _exec(argv, timeout)
    result["compile_s"] = secs
    result["compile_cmd"] = " ".join(shlex.quote(a) for a in argv)
    reason = _check_tool("kilnc", proc, err, argv, case_dir, result)
    if reason:
        return reason
    if not os.path.isfile(out):
        return "kilnc: exited 0 but wrote no output"
    if cuda_compile:
        argv = [_CONFIG["ptxas"], "-arch=" + _CONFIG["ptxas_arch"], out, "-o", os.devnull]
        proc, secs, err = _exec(argv, timeout)
        result["compile_s"] += secs
        return _check_tool("ptxas", proc, err, argv, case_dir, result)
    if _CONFIG.get("cuda_emulate"):
        if _CONFIG.get("ptxas"):
            # The artifact's PTX assembles for a real GPU too, so one compile
            # checks what --cuda-compile would.
            ptx = os.path.join(case_dir, "model.ptx")
            reason = _extract_section(artifact, "ptx", ptx)
            if reason:
                return reason
            if os.path.isfile(ptx):
                argv = [_CONFIG["ptxas"], "-arch=" + _CONFIG["ptxas_arch"], ptx, "-o", os.devnull]
                proc, secs, err = _exec(argv, timeout)
                result["compile_s"] += secs
                reason = _check_tool("ptxas", proc, err, argv, case_dir, result)
                if reason:
                    return reason
        # The same kernels as CUDA C (kilnc --save-cuda), built for the host
        # (tests/emu).
        start = time.monotonic()
        reason = cuda_emu.build(os.path.join(case_dir, "model.cu"),
                                os.path.join(case_dir, "model.emu.so"))
        result["compile_s"] += time.monotonic() - start
        if reason:
            return reason
    if _CONFIG.get("save_artifacts"):
        shutil.copyfile(artifact, os.path.join(_CONFIG["save_artifacts"], task["name"] + ".kiln"))
    return None


def _run_case(task, kilnc, kiln_run, timeout, result):
    case_dir = task["dir"]
    artifact = os.path.join(case_dir, "model.kiln")
    prebuilt = _CONFIG.get("prebuilt")
    if prebuilt:
        # Compiled elsewhere (e.g. here for a GPU machine without kilnc).
        artifact = os.path.join(prebuilt, task["name"] + ".kiln")
        if not os.path.isfile(artifact):
            return "no prebuilt artifact %s" % artifact
    else:
        reason = _compile_case(task, kilnc, timeout, result, artifact)
        if reason or _CONFIG.get("compile_only"):
            return reason
    env = None
    if _CONFIG.get("cuda_emulate"):
        env = cuda_emu.environment(_CONFIG["bin"], os.path.join(case_dir, "model.emu.so"))
        if _CONFIG.get("cuda_stand_ins"):
            env.update(KILN_CUBLAS="none", KILN_CUDNN="none")
    for n, (in_paths, _, out_paths) in enumerate(task["data_sets"]):
        out_dir = os.path.join(case_dir, "out_%d" % n)
        shutil.rmtree(out_dir, ignore_errors=True)
        argv = [kiln_run, artifact, *in_paths, "--output-dir", out_dir,
                *(_CONFIG.get("kiln_run_args") or [])]
        proc, secs, err = _exec(argv, timeout, env)
        result["run_s"] += secs
        reason = _check_tool("kiln-run", proc, err, argv, case_dir, result)
        if reason:
            return reason
        got_count = 0
        while any(os.path.exists(os.path.join(out_dir, "output_%d%s" % (got_count, ext)))
                  for ext in (".npy", "", ".none")):
            got_count += 1
        if got_count != len(out_paths):
            return "kiln-run wrote %d output(s), expected %d" % (got_count, len(out_paths))
        prefix = "data set %d: " % n if len(task["data_sets"]) > 1 else ""
        for i, path in enumerate(out_paths):
            reason = _compare_output(i, os.path.join(out_dir, "output_%d" % i), path,
                                     task["output_kinds"][i], task)
            if reason:
                return prefix + reason
    return None


# ---------------------------------------------------------------------------
# Expected failures


def read_expected(path):
    """{name: reason}; missing file gives {}."""
    entries = {}
    if not path or not os.path.exists(path):
        return entries
    with open(path) as f:
        for line in f:
            body, _, comment = line.partition("#")
            name = body.strip()
            if name:
                entries[name.split()[0]] = comment.strip()
    return entries


def write_expected(path, failures, previous, ran):
    """failures: {name: reason} of this run; entries of `previous` for tests
    not run this time are kept."""
    entries = {n: r for n, r in previous.items() if n not in ran}
    entries.update(failures)
    with open(path, "w") as f:
        f.write(HEADER)
        for name in sorted(entries):
            reason = _short(entries[name].replace("#", "no.")) if entries[name] else ""
            f.write(("%s  # %s\n" % (name, reason)) if reason else name + "\n")
    return len(entries)


def group_reason(reason):
    """Reason with test-specific details removed, for counting."""
    r = re.sub(r"\b(input|output|initializer|value|tensor) '[^']*'", r"\1 '*'", reason)
    r = re.sub(r"\b\d+/\d+ (values|elements)", r"N/M \1", r)
    r = re.sub(r"\(max abs diff [^)]*\)", "", r)
    r = re.sub(r"first at .*", "", r)
    r = re.sub(r"shape \[[^\]]*\] != expected \[[^\]]*\]", "shape != expected", r)
    r = re.sub(r"\(\d+ nodes?\)", "", r)
    r = re.sub(r"type #\d+", "type #N", r)
    return r.strip()


# ---------------------------------------------------------------------------
# Main


def _display(path):
    path = os.path.abspath(path)
    return os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else path


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Runs ONNX's node test cases through kilnc and kiln-run.")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="tests run in parallel (default: number of cores, %(default)s)")
    p.add_argument("--filter", metavar="REGEX",
                   help="only tests whose name matches REGEX (re.search)")
    p.add_argument("--sample", type=float, metavar="SHARE",
                   help="run a fixed share (0 < SHARE <= 1) of the selected tests: every "
                        "op type's first test by name, then the rest chosen by a hash of "
                        "--seed and the test's name, so a seed always picks the same tests")
    p.add_argument("--seed", type=int, default=0,
                   help="with --sample: which tests the hash picks (default %(default)s)")
    p.add_argument("--list-only", action="store_true",
                   help="print the selected test names and exit")
    p.add_argument("--keep", metavar="DIR",
                   help="write the cases and artifacts into DIR and keep them "
                        "(default: a temporary folder; passing cases are deleted)")
    p.add_argument("--expected-failures", metavar="FILE",
                   help="expected-failure list (default: tests/conformance/"
                        "expected_failures.txt, or expected_failures_symbolic.txt "
                        "with --symbolic)")
    p.add_argument("--write-expected-failures", metavar="FILE",
                   help="write this run's failures as a new expected-failure list")
    p.add_argument("--symbolic", action="store_true",
                   help="make every input dimension symbolic, sized only at "
                        "run time")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="per-command timeout in seconds (default %(default)s)")
    p.add_argument("--strict", action="store_true",
                   help="XPASS (a listed test passing) also makes the run fail")
    p.add_argument("--bin", default=os.environ.get("KILN_BIN") or os.path.join(REPO, "build", "bin"),
                   help="folder holding kilnc and kiln-run (default: $KILN_BIN or build/bin)")
    p.add_argument("--slowest", type=int, default=10, metavar="N",
                   help="list the N slowest tests at the end (default %(default)s, 0: none)")
    p.add_argument("--top-reasons", type=int, default=15, metavar="N",
                   help="list the N most common failure reasons (default %(default)s)")
    p.add_argument("--device", metavar="D",
                   help="compile for device D (kilnc --device), e.g. cuda:0")
    p.add_argument("--kilnc-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG to kilnc too (repeatable), e.g. --kilnc-arg=--target-cpu=x86-64-v3")
    p.add_argument("--kiln-run-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG to kiln-run too (repeatable), e.g. --kiln-run-arg=--bind=0=cpu "
                        "(the C++ twins of kernels compiled for --device cuda:0)")
    p.add_argument("--compile-only", action="store_true",
                   help="stop after kilnc: a test passes when it compiles")
    p.add_argument("--save-artifacts", metavar="DIR",
                   help="copy each compiled artifact to DIR/NAME.kiln (to run elsewhere "
                        "with --prebuilt)")
    p.add_argument("--skip-expected-failures", action="store_true",
                   help="leave out the tests on the expected-failure list")
    p.add_argument("--prebuilt", metavar="DIR",
                   help="run DIR/NAME.kiln instead of compiling (no kilnc needed)")
    p.add_argument("--cuda-compile", action="store_true",
                   help="compile every test not on the expected-failure list for "
                        "--device (default cuda:0) to PTX (kilnc --emit=ptx) and "
                        "assemble it with ptxas for --ptxas-arch; nothing runs")
    p.add_argument("--cuda-emulate", action="store_true",
                   help="compile every test not on the expected-failure list for "
                        "--device (default cuda:0) and run it on the fake CUDA driver, "
                        "which runs the generated CUDA kernels on the host (tests/emu); "
                        "the artifact's PTX is assembled with ptxas as in --cuda-compile")
    p.add_argument("--cuda-stand-ins", action="store_true",
                   help="with --cuda-emulate: run the GEMM and conv launches as their "
                        "generated stand-ins instead of through the (fake) cuBLAS and "
                        "cuDNN (KILN_CUBLAS=none KILN_CUDNN=none)")
    p.add_argument("--ptxas-arch", default="sm_90",
                   help="GPU for ptxas in --cuda-compile and --cuda-emulate (default %(default)s)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="do not print PASS and XFAIL lines")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = sys.stdout

    def say(line=""):
        out.write(line + "\n")
        out.flush()

    import onnx
    t0 = time.monotonic()
    cases = collect_cases()
    names = [c.name for c in cases]
    selected = cases
    if args.filter:
        rx = re.compile(args.filter)
        selected = [c for c in cases if rx.search(c.name)]
    if args.sample is not None and not 0 < args.sample <= 1:
        say("error: --sample %g is not in (0, 1]" % args.sample)
        return 2
    say("found %d ONNX node test cases (onnx %s); selected %d%s" % (
        len(cases), onnx.__version__, len(selected),
        " (symbolic input shapes)" if args.symbolic else ""))
    if args.list_only:
        for c in selected:
            say(c.name)
        return 0

    ptxas = None
    if args.cuda_compile:
        args.device = args.device or "cuda:0"
        args.compile_only = True
        home = os.environ.get("KILN_CUDA_HOME") or "/usr/local/cuda"
        ptxas = os.path.join(home, "bin", "ptxas")
        lib = os.path.join(home, "lib64")
        if not (os.access(ptxas, os.X_OK) and os.path.isdir(lib) and
                any(n.startswith("libnvrtc.so") for n in os.listdir(lib))):
            say("skipped: no CUDA toolkit with NVRTC and ptxas at %s (set KILN_CUDA_HOME)" % home)
            return 77
    if args.cuda_stand_ins and not args.cuda_emulate:
        say("error: --cuda-stand-ins needs --cuda-emulate")
        return 2
    if args.cuda_emulate:
        args.device = args.device or "cuda:0"
        home = os.environ.get("KILN_CUDA_HOME") or "/usr/local/cuda"
        lib = os.path.join(home, "lib64")
        if not (os.path.isdir(lib) and any(n.startswith("libnvrtc.so") for n in os.listdir(lib))):
            say("skipped: no CUDA toolkit with NVRTC at %s (set KILN_CUDA_HOME)" % home)
            return 77
        ptxas = os.path.join(home, "bin", "ptxas")
        if not os.access(ptxas, os.X_OK):
            say("note: no ptxas at %s: the PTX is not assembled" % home)
            ptxas = None
        if not os.path.isfile(os.path.join(args.bin, "libkiln-fake-cuda.so")):
            say("error: no libkiln-fake-cuda.so in %s (build the tests)" % args.bin)
            return 1
    needed = ("kiln-run",) if args.prebuilt else ("kilnc",) if args.compile_only \
        else ("kilnc", "kiln-run")
    for tool in needed:
        path = os.path.join(args.bin, tool)
        for _ in range(3):
            if os.path.isfile(path) and os.access(path, os.X_OK):
                break
            time.sleep(3)
        else:
            say("error: %s not found or not executable (tools folder: %s; set KILN_BIN)"
                % (tool, args.bin))
            return 1

    expected_path = args.expected_failures
    if expected_path is None:
        expected_path = DEFAULT_EXPECTED
        if args.symbolic and os.path.exists(DEFAULT_EXPECTED_SYMBOLIC):
            expected_path = DEFAULT_EXPECTED_SYMBOLIC
        if args.cuda_emulate:
            expected_path = DEFAULT_EXPECTED_CUDA
    if args.expected_failures and not os.path.exists(expected_path):
        say("error: expected-failure list %s does not exist" % expected_path)
        return 1
    expected = read_expected(expected_path)
    stale = sorted(set(expected) - set(names))
    if args.cuda_compile or args.cuda_emulate or args.skip_expected_failures:
        # cuda-compile and cuda-emulate: only what passes on the cpu must
        # also compile (and run) for cuda; cuda-emulate's own list says what
        # fails there on top.
        on_cpu = read_expected(DEFAULT_EXPECTED) if args.cuda_emulate else expected
        left_out = [c for c in selected if c.name in on_cpu]
        selected = [c for c in selected if c.name not in on_cpu]
        say("%d tests (%d on the expected-failure list left out)%s" % (
            len(selected), len(left_out),
            ", ptxas -arch=" + args.ptxas_arch if args.cuda_compile else
            ", CUDA kernels emulated on the host" if args.cuda_emulate else ""))
    if args.sample is not None:
        # After the expected failures are left out, so that each op type's
        # representative is a case that runs.
        sampled = sample_cases(selected, args.sample, args.seed)
        say("sample: %d of these %d tests (share %g, seed %d, every op type kept)" % (
            len(sampled), len(selected), args.sample, args.seed))
        selected = sampled
    if args.save_artifacts:
        os.makedirs(args.save_artifacts, exist_ok=True)

    if args.keep:
        work = os.path.abspath(args.keep)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="kiln-conformance-")
    tasks = [write_case(c, os.path.join(work, c.name), args.symbolic) for c in selected]

    config = dict(bin=os.path.abspath(args.bin), timeout=args.timeout, keep=bool(args.keep),
                  device=args.device, kilnc_args=args.kilnc_arg,
                  kiln_run_args=args.kiln_run_arg,
                  compile_only=args.compile_only, cuda_compile=args.cuda_compile,
                  cuda_emulate=args.cuda_emulate, cuda_stand_ins=args.cuda_stand_ins,
                  ptxas=ptxas, ptxas_arch=args.ptxas_arch,
                  save_artifacts=args.save_artifacts and os.path.abspath(args.save_artifacts),
                  prebuilt=args.prebuilt and os.path.abspath(args.prebuilt))
    results = []
    counts = dict(PASS=0, FAIL=0, XFAIL=0, XPASS=0)
    interrupted = False
    pool = multiprocessing.Pool(max(1, args.jobs), _init_worker, (config,))
    try:
        for r in pool.imap(run_case, tasks, chunksize=1):
            results.append(r)
            listed = r["name"] in expected
            if r["ok"]:
                status = "XPASS" if listed else "PASS"
                line = "%s %s" % (status, r["name"])
            else:
                status = "XFAIL" if listed else "FAIL"
                line = "%s %s: %s" % (status, r["name"], r["reason"].splitlines()[0])
            counts[status] += 1
            if not (args.quiet and status in ("PASS", "XFAIL")):
                say(line)
        pool.close()
    except KeyboardInterrupt:
        interrupted = True
        pool.terminate()
    pool.join()
    wall = time.monotonic() - t0
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if interrupted:
        say("interrupted after %d of %d tests" % (len(results), len(tasks)))

    failures = {r["name"]: _short(r["reason"].splitlines()[0]) for r in results if not r["ok"]}
    if args.write_expected_failures:
        n = write_expected(args.write_expected_failures, failures, expected,
                           {r["name"] for r in results})
        say("wrote %d expected failures to %s" % (n, args.write_expected_failures))

    # Reports.
    if failures and args.top_reasons:
        tally = {}
        for reason in failures.values():
            key = group_reason(reason)
            tally[key] = tally.get(key, 0) + 1
        say("")
        say("top failure reasons (failed + expected failures):")
        for key, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:args.top_reasons]:
            say("  %5d  %s" % (n, key))
    if args.slowest and results:
        say("")
        say("slowest tests (compile + run seconds):")
        for r in sorted(results, key=lambda r: -r["total_s"])[:args.slowest]:
            say("  %7.2fs  %s (compile %.2fs, run %.2fs)" % (
                r["total_s"], r["name"], r["compile_s"], r["run_s"]))
    crashes = [r for r in results if "crash" in r]
    if crashes:
        say("")
        say("CRASHES (%d): kiln exited with a signal or an unexpected code" % len(crashes))
        for r in crashes:
            c = r["crash"]
            say("  %s: %s %s" % (r["name"], c["tool"], c["how"]))
            say("    reproduce: %s%s --filter '^%s$' --keep DIR  then  %s" % (
                os.path.join(REPO, "scripts", "conformance"),
                " --symbolic" if args.symbolic else "", r["name"],
                c["command"].replace(work, "DIR")))
    timeouts = [r for r in results if "timeout" in r]
    if timeouts:
        say("")
        say("TIMEOUTS (%d):" % len(timeouts))
        for r in timeouts:
            say("  %s: %s" % (r["name"], r["timeout"].replace(work, "DIR")))
    if counts["XPASS"]:
        say("")
        say("%d test(s) on the expected-failure list passed (XPASS); remove them from %s"
            % (counts["XPASS"], _display(expected_path)))
    if stale:
        say("")
        say("%d test(s) on the expected-failure list do not exist in this onnx: %s" % (
            len(stale), " ".join(stale[:20]) + (" ..." if len(stale) > 20 else "")))

    passed = counts["PASS"] + counts["XPASS"]
    total = len(results)
    say("")
    random_names = {t["name"] for t in tasks if t.get("random")}
    random_passed = sum(1 for r in results if r["ok"] and r["name"] in random_names)
    if random_passed:
        say("%d of the passes are random draws, checked for dtype, shape and "
            "value domain only" % random_passed)
    say("wall time %.1fs, %d jobs, expected-failure list: %s (%d entries)" % (
        wall, args.jobs, _display(expected_path)
        if os.path.exists(expected_path) else "(none)", len(expected)))
    say("%d passed, %d failed, %d skipped" % (passed, counts["FAIL"], counts["XFAIL"]))
    say("%.1f%% passed (%d of %d tests run; %d found)" % (
        100.0 * passed / total if total else 0.0, passed, total, len(cases)))
    bad = counts["FAIL"] > 0 or interrupted or (args.strict and counts["XPASS"] > 0)
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        sys.exit(1)
