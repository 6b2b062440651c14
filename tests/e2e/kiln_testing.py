"""Shared helpers for kiln's end-to-end tests (stdlib unittest only).

The tools come from $KILN_BIN (the build's bin/ folder holding kilnc and
kiln-run); $KILN_SOURCE is the source tree (for examples/). When the tools are
missing every test class is skipped with the reason printed once.

    KILN_BIN=build/bin KILN_SOURCE=. $VENV/bin/python -m unittest discover \
        -v -s tests/e2e -p "test_*.py"

Optional: KILN_E2E_KEEP=1 keeps the temporary folders (their paths are
printed), KILN_E2E_TIMEOUT overrides the per-command timeout in seconds.
KILN_E2E_SANITIZE=address,undefined compiles every kernel with kilnc
--sanitize=... and runs artifacts with bin/kiln-run-asan (ctest -L
sanitize): a kernel reading past a tensor then fails the test.
"""

import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

KILN_BIN = os.environ.get("KILN_BIN", "")
KILN_SOURCE = os.environ.get(
    "KILN_SOURCE",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TIMEOUT = float(os.environ.get("KILN_E2E_TIMEOUT", "300"))
SANITIZE = os.environ.get("KILN_E2E_SANITIZE", "")
KEEP = os.environ.get("KILN_E2E_KEEP", "") not in ("", "0")

# Signs that a tool crashed instead of reporting an error.
CRASH_MARKERS = ("Stack dump", "Segmentation", "Aborted", "core dumped",
                 "terminate called", "Assertion", "PLEASE submit a bug report",
                 "AddressSanitizer", "UndefinedBehaviorSanitizer")

_printed = set()


def note(message):
    """Prints `message` to stderr once per process (unittest's -v output)."""
    if message in _printed:
        return
    _printed.add(message)
    sys.stderr.write("\n[kiln e2e] " + message + "\n")
    sys.stderr.flush()


def tool(name):
    return os.path.join(KILN_BIN, name)


def missing_tools_reason():
    """Why the tools cannot be used, or None when they can."""
    if not KILN_BIN:
        return "KILN_BIN is not set (point it at the build's bin/ folder)"
    for name in ("kilnc", "kiln-run"):
        path = tool(name)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return "%s not found or not executable (KILN_BIN=%s)" % (name, KILN_BIN)
    return None


def cuda_home():
    return os.environ.get("KILN_CUDA_HOME") or "/usr/local/cuda"


def nvrtc_available():
    """Whether kilnc can compile cuda kernels here (it dlopens NVRTC)."""
    lib = os.path.join(cuda_home(), "lib64")
    return os.path.isdir(lib) and any(n.startswith("libnvrtc.so") for n in os.listdir(lib))


def require_tools():
    reason = missing_tools_reason()
    if reason:
        note("skipping: " + reason)
        raise unittest.SkipTest(reason)


def _run(argv, cwd=None, timeout=None, env=None):
    try:
        return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True,
                              text=True, errors="replace", env=env,
                              timeout=timeout or TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("timed out after %ss: %s" % (e.timeout, " ".join(map(str, argv))))
    except OSError as e:  # e.g. the binary is being rebuilt right now
        raise AssertionError("cannot run %s: %s" % (argv[0], e))


def kilnc(*args, cwd=None, timeout=None):
    """Runs kilnc with `args` (and --sanitize under KILN_E2E_SANITIZE);
    returns the CompletedProcess."""
    extra = ["--sanitize=" + SANITIZE] if SANITIZE else []
    return _run([tool("kilnc"), *args, *extra], cwd=cwd, timeout=timeout)


def kiln_run(*args, cwd=None, timeout=None, env=None):
    """Runs kiln-run with `args` (in `env`, else this environment; the
    sanitized kiln-run-asan under KILN_E2E_SANITIZE); returns the
    CompletedProcess."""
    if SANITIZE:
        env = dict(os.environ if env is None else env)
        # Leaks at exit are not what this run looks for.
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        return _run([tool("kiln-run-asan"), *args], cwd=cwd, timeout=timeout,
                    env=env)
    return _run([tool("kiln-run"), *args], cwd=cwd, timeout=timeout, env=env)


def describe(proc):
    return "command: %s\nexit code: %s\nstdout:\n%s\nstderr:\n%s" % (
        " ".join(map(str, proc.args)), proc.returncode, proc.stdout[-4000:],
        proc.stderr[-4000:])


def crash_markers(proc):
    return [m for m in CRASH_MARKERS if m in proc.stderr or m in proc.stdout]


def assert_clean_failure(test, proc, *expected, case_sensitive=False):
    """A failing run must exit with 1 (not a signal or another code), without
    crash output, and say something on stderr that contains every string of
    `expected` (each may also be a tuple of alternatives)."""
    test.assertGreaterEqual(proc.returncode, 0,
                            "killed by signal %d\n%s" % (-proc.returncode, describe(proc)))
    test.assertEqual(proc.returncode, 1, "expected exit code 1\n" + describe(proc))
    test.assertEqual(crash_markers(proc), [], "crash output\n" + describe(proc))
    test.assertTrue(proc.stderr.strip(), "no error message on stderr\n" + describe(proc))
    text = proc.stderr if case_sensitive else proc.stderr.lower()
    for item in expected:
        options = item if isinstance(item, tuple) else (item,)
        found = any((o if case_sensitive else o.lower()) in text for o in options)
        test.assertTrue(found, "stderr does not mention %s\n%s" % (
            " or ".join(repr(o) for o in options), describe(proc)))


def assert_success(test, proc):
    test.assertEqual(proc.returncode, 0, describe(proc))
    test.assertEqual(crash_markers(proc), [], describe(proc))


def rel_l2(a, ref):
    """||a - ref|| / ||ref|| in float64 (an absolute norm when ref is 0)."""
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        raise AssertionError("shape %s != reference shape %s" % (a.shape, ref.shape))
    den = np.linalg.norm(ref)
    num = np.linalg.norm(a - ref)
    return float(num / den) if den > 0 else float(num)


def import_torch_and_make_mlp():
    """(torch, examples/make_mlp.py as a module); unittest.SkipTest saying why
    when either is missing."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - environment problem
        note("skipping: torch is not importable: %s" % e)
        raise unittest.SkipTest("torch is not importable: %s" % e)
    examples = os.path.join(KILN_SOURCE, "examples")
    if not os.path.isfile(os.path.join(examples, "make_mlp.py")):
        raise unittest.SkipTest("examples/make_mlp.py not found under "
                                "KILN_SOURCE=%s" % KILN_SOURCE)
    sys.path.insert(0, examples)
    try:
        import make_mlp
    finally:
        sys.path.remove(examples)
    return torch, make_mlp


def save_safetensors(path, tensors):
    """Writes {name: numpy array} in the safetensors format (an 8-byte
    little-endian header size, a JSON header, the data), independently of
    kiln's own writer."""
    codes = {np.float32: "F32", np.float16: "F16", np.float64: "F64",
             np.int64: "I64", np.int32: "I32", np.uint8: "U8"}
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": codes[array.dtype.type],
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


# The CPU targets the prelude's kernels are checked for: the machine's own
# (AVX-512 where it has it) and, on x86-64, AVX2 alone (x86-64-v3), whose
# kernels take other paths (vectors of 8, the window's own loops).
CPU_TARGETS = ["native"] + (["x86-64-v3"] if platform.machine() in
                            ("x86_64", "AMD64") else [])


def import_or_skip(name):
    """The module `name`, or a SkipTest saying why it is not importable."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as e:
        note("skipping: %s is not importable: %s" % (name, e))
        raise unittest.SkipTest("%s is not importable: %s" % (name, e))


def conv_model(name, c, m, hw, k, strides, pads, rng, group=1, bias=True,
               act=None):
    """A one-Conv ONNX model (opset 17) on x [n, c, h, w] with a symbolic
    batch, its weight [m, c / group, kh, kw] (k is kh = kw, or a pair) and
    bias [m] drawn from `rng`, then `act` (None, "Relu", "Sigmoid" or "Clip"
    to [0, 6]). Returns the model, the weight and the bias (drawn even when
    unused)."""
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    kh, kw = (k, k) if np.isscalar(k) else k
    w = rng.standard_normal((m, c // group, kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    consts = [nh.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias:
        consts.append(nh.from_array(b, "b"))
        inputs.append("b")
    nodes = [h.make_node("Conv", inputs, ["y" if act is None else "s"],
                         kernel_shape=[kh, kw], strides=list(strides),
                         pads=list(pads), group=group)]
    if act == "Clip":
        consts += [nh.from_array(np.array(0, np.float32), "lo"),
                   nh.from_array(np.array(6, np.float32), "hi")]
        nodes.append(h.make_node("Clip", ["s", "lo", "hi"], ["y"]))
    elif act is not None:
        nodes.append(h.make_node(act, ["s"], ["y"]))
    graph = h.make_graph(
        nodes, name,
        [h.make_tensor_value_info("x", T.FLOAT, ["n", c, hw[0], hw[1]])],
        [h.make_tensor_value_info("y", T.FLOAT, None)], consts)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    return model, w, b


def torch_conv(torch, x, w, b, strides, pads, group=1, act=None):
    """conv_model's output in float64 by torch: x padded (pads top, left,
    bottom, right), the conv, then `act`."""
    F = torch.nn.functional
    t = torch.from_numpy
    padded = F.pad(t(x).double(), (pads[1], pads[3], pads[0], pads[2]))
    y = F.conv2d(padded, t(w).double(), None if b is None else t(b).double(),
                 stride=tuple(strides), groups=group)
    if act == "Relu":
        y = y.relu()
    elif act == "Sigmoid":
        y = y.sigmoid()
    elif act == "Clip":
        y = y.clamp(0, 6)
    return y.numpy()


def onnx_model(nodes, inputs, outputs, opset, ir_version=None, name="test"):
    """A one-graph ONNX model of `nodes` at default-domain `opset`."""
    from onnx import helper
    graph = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        m.ir_version = ir_version
    return m


def ort_model(*args):
    """onnx_model() at the IR version onnxruntime 1.31 reads."""
    return onnx_model(*args, ir_version=8)


def onnxruntime_outputs(model, feeds):
    """The outputs onnxruntime (CPU) gives for `feeds`, in graph-input
    order; skips the test without onnxruntime."""
    ort = import_or_skip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, feeds)))


class KilnTestCase(unittest.TestCase):
    """Skips without tools; gives each class a temporary folder `cls.tmp`."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        require_tools()
        cls.tmp = tempfile.mkdtemp(prefix="kiln-e2e-%s-" % cls.__name__)
        if KEEP:
            note("keeping %s" % cls.tmp)
        else:
            cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)

    @classmethod
    def path(cls, *parts):
        return os.path.join(cls.tmp, *parts)

    @classmethod
    def save_model(cls, model, name):
        import onnx
        path = cls.path(name)
        onnx.save(model, path)
        return path

    @classmethod
    def save_npy(cls, array, name):
        path = cls.path(name)
        # np.array(..., order="C") keeps 0-d arrays 0-d (ascontiguousarray
        # would make them 1-d).
        np.save(path, np.array(array, order="C"))
        return path

    def emit_cpp(self, model, tag):
        """Saves `model` as tmp/TAG.onnx and returns (its path, the C++ kilnc
        generates for it), asserting that kilnc succeeds."""
        path = self.save_model(model, tag + ".onnx")
        cpp = kilnc(path, "--emit=cpp")
        assert_success(self, cpp)
        return path, cpp.stdout

    @classmethod
    def compile(cls, model_path, out_name, *extra):
        """Compiles `model_path` to tmp/out_name. Returns (artifact path or None,
        CompletedProcess)."""
        out = cls.path(out_name)
        proc = kilnc(model_path, "-o", out, *extra)
        return (out if proc.returncode == 0 else None), proc

    def cpu_artifacts(self, model_path, name, targets=None):
        """Compiles `model_path` for each of `targets` (by default
        CPU_TARGETS; each must succeed); yields (target, artifact path)."""
        for target in CPU_TARGETS if targets is None else targets:
            artifact, proc = self.compile(model_path,
                                          "%s_%s.kiln" % (name, target),
                                          "--target-cpu=" + target)
            assert_success(self, proc)
            yield target, artifact

    def check_conv(self, torch, artifact, tag, rng, shape, w, b, strides,
                   pads, group=1, act=None, scale=1.0, rtol=1e-5, atol=1e-5):
        """Runs `artifact` (a conv_model of input [n] + shape) at batches 1
        and 3 on random inputs (times `scale`) and compares its output
        with torch_conv's."""
        for n in (1, 3):
            x = (rng.standard_normal((n,) + tuple(shape)) * scale).astype(
                np.float32)
            want = torch_conv(torch, x, w, b, strides, pads, group=group,
                              act=act)
            (got,), _ = self.run_artifact(artifact, [x],
                                          out_name="%s_%d" % (tag, n))
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)

    def run_onnx(self, model, tag, inputs):
        """Compiles `model` (must succeed) and runs it on `inputs`; returns
        its outputs."""
        artifact, proc = self.compile(self.save_model(model, tag + ".onnx"),
                                      tag + ".kiln")
        assert_success(self, proc)
        outputs, _ = self.run_artifact(artifact, inputs, out_name=tag)
        return outputs

    def cuda_emulated(self, model_path, name, *extra):
        """Compiles `model_path` for cuda:0 (kilnc `extra` too) into NAME.kiln
        and its CUDA kernels for the host (tests/emu); returns the artifact
        and the environment in which kiln-run runs it on the fake driver,
        every generated kernel executed on the CPU."""
        emu = os.path.join(KILN_SOURCE, "tests", "emu")
        if emu not in sys.path:
            sys.path.insert(0, emu)
        import cuda_emu
        source = self.path(name + ".cu")
        artifact, proc = self.compile(model_path, name + ".kiln", "--device",
                                      "cuda:0", "--save-cuda", source, *extra)
        assert_success(self, proc)
        library = self.path(name + ".emu.so")
        reason = cuda_emu.build(source, library)
        self.assertIsNone(reason, reason)
        return artifact, cuda_emu.environment(os.path.dirname(tool("kilnc")), library)

    def run_artifact(self, artifact, inputs, out_name=None, options=(), env=None):
        """Runs `artifact` on `inputs` (arrays, or strings passed as given,
        e.g. file paths or NAME=FILE) with kiln-run `options` (in `env`, else
        this environment) and returns its outputs as arrays, in graph-output
        order. Fails the test when kiln-run fails."""
        out_name = out_name or "out_%s" % self.id().rsplit(".", 1)[-1]
        out_dir = self.path(out_name)
        shutil.rmtree(out_dir, ignore_errors=True)
        args = []
        for i, value in enumerate(inputs):
            if isinstance(value, str):
                args.append(value)
            else:
                args.append(self.save_npy(value, "%s_in%d.npy" % (out_name, i)))
        proc = kiln_run(artifact, *args, *options, "--output-dir", out_dir, env=env)
        assert_success(self, proc)
        outputs = []
        i = 0
        while os.path.exists(os.path.join(out_dir, "output_%d.npy" % i)):
            outputs.append(np.load(os.path.join(out_dir, "output_%d.npy" % i)))
            i += 1
        return outputs, proc
