"""Multi-device plans end to end (docs/devices.md): placement by pins, by the
cost model (--placement=auto) and by capability fallback; what kilnc reports
about a placement (--print-placement, --save-placement, --emit=dot); and how
kiln-run binds the plan's device roles (--bind, --device, --device-memory).

`sim:N` devices run the same C++ kernels as the cpu, so every multi-device
result here must be bit-identical to a plain cpu compile of the same model;
the cpu results themselves are checked against numpy and onnxruntime.

The main model is a small MLP, x f32[4,16] -> Gemm(32) -> Relu -> Gemm(24) ->
Relu -> Gemm(8); the cost-model tests use examples/mlp.onnx (784-256-256-10)
at batch 8, where the Gemms are big enough for a fast device to pay off.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import unittest

import numpy as np

# Also importable as tests/e2e/test_devices.py (not only through discover -s).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_testing as kt  # noqa: E402

SEED = 0
BATCH = 4
# (ONNX node name, op type) of the small MLP, in graph order.
NODES = [("/fc1/Gemm", "gemm"), ("/act1/Relu", "relu"), ("/fc2/Gemm", "gemm"),
         ("/act2/Relu", "relu"), ("/fc3/Gemm", "gemm")]
DIMS = [16, 32, 24, 8]  # x, fc1, fc2, fc3 widths
# Gemm -> sim:0, then a node-name regex rule -> sim:1.
PINS = {"rules": [{"op": "Gemm", "device": "sim:0"},
                  {"node": "/act2/.*", "device": "sim:1"}]}
PINNED = {"/fc1/Gemm": "sim:0", "/act1/Relu": "cpu", "/fc2/Gemm": "sim:0",
          "/act2/Relu": "sim:1", "/fc3/Gemm": "sim:0"}
DEVICE_RE = r"(?:cpu|sim:\d+|cuda:\d+|cuda:auto)"
HEADER = 20  # .kiln: magic, version, manifest size, manifest CRC, manifest


# -- model and reference --------------------------------------------------

def make_mlp(seed=SEED):
    """(model, weights as [(w, b), ...]) of the small Gemm/Relu MLP."""
    from onnx import TensorProto, helper as h, numpy_helper as nh
    rng = np.random.default_rng(seed)
    layers, inits, nodes = [], [], []
    src = "x"
    for i in range(3):
        w = (rng.standard_normal((DIMS[i], DIMS[i + 1])) / np.sqrt(DIMS[i])).astype(np.float32)
        b = rng.standard_normal(DIMS[i + 1]).astype(np.float32) * np.float32(0.1)
        layers.append((w, b))
        inits += [nh.from_array(w, "w%d" % (i + 1)), nh.from_array(b, "b%d" % (i + 1))]
        out = "y" if i == 2 else "h%d" % (i + 1)
        nodes.append(h.make_node("Gemm", [src, "w%d" % (i + 1), "b%d" % (i + 1)], [out],
                                 name="/fc%d/Gemm" % (i + 1)))
        if i < 2:
            nodes.append(h.make_node("Relu", [out], ["r%d" % (i + 1)],
                                     name="/act%d/Relu" % (i + 1)))
            src = "r%d" % (i + 1)
    graph = h.make_graph(
        nodes, "mlp", [h.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, DIMS[0]])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH, DIMS[-1]])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 8)
    return model, layers


def numpy_mlp(x, layers):
    a = np.asarray(x, np.float64)
    for i, (w, b) in enumerate(layers):
        a = a @ w.astype(np.float64) + b.astype(np.float64)
        if i < len(layers) - 1:
            a = np.maximum(a, 0)
    return a


def onnxruntime_run(path, x):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def expected_copies(devices, input_device="cpu", output_device="cpu"):
    """Copies a linear chain needs: one per change of device along
    input -> op 0 -> ... -> op n-1 -> output."""
    chain = [input_device] + list(devices) + [output_device]
    return sum(1 for a, b in zip(chain, chain[1:]) if a != b)


# -- reading kilnc's reports ----------------------------------------------

def parse_size(text):
    """'640 B', '1.1 KiB', '2.0 MiB' -> bytes (as shown, i.e. rounded)."""
    m = re.fullmatch(r"([0-9.]+) ?(B|KiB|MiB|GiB)", text.strip())
    if not m:
        raise AssertionError("not a size: %r" % text)
    scale = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}[m.group(2)]
    return float(m.group(1)) * scale


def parse_placement(text):
    """--print-placement's report as {"ops": [(index, op, node, device)],
    "copies": (count, bytes), "copy_rows": [(what, src, dst, bytes)],
    "devices": {name: {"ops", "busy_us", "copies_in", "weights", "peak"}}}."""
    ops, copy_rows, devices = [], [], {}
    copies = None
    section = None
    for line in text.splitlines():
        if re.match(r"#\s+op\s+ONNX node\s+device", line):
            section = "ops"
            continue
        m = re.match(r"copies: (\d+), (.+)$", line)
        if m:
            copies = (int(m.group(1)), parse_size(m.group(2)))
            section = "copies"
            continue
        if re.match(r"device\s+ops\s+est\. busy us", line):
            section = "devices"
            continue
        if not line.strip():
            continue
        if section == "ops":
            m = re.match(r"(\d+)\s+(\S+)\s+(\S.*?)\s+(%s)\s+([0-9.]+)$" % DEVICE_RE, line)
            if m:
                ops.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
        elif section == "copies":
            m = re.match(r"\s+(\S.*?)\s+(%s)\s+->\s+(%s)\s+([0-9.]+ ?[KMG]?i?B)\s+[0-9.]+ us$"
                         % (DEVICE_RE, DEVICE_RE), line)
            if m:
                copy_rows.append((m.group(1), m.group(2), m.group(3), parse_size(m.group(4))))
        elif section == "devices":
            m = re.match(r"(%s)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+ ?[KMG]?i?B)\s+"
                         r"([0-9.]+ ?[KMG]?i?B)\s+([0-9.]+ ?[KMG]?i?B)$" % DEVICE_RE, line)
            if m:
                devices[m.group(1)] = {
                    "ops": int(m.group(2)), "busy_us": float(m.group(3)),
                    "copies_in": parse_size(m.group(4)), "weights": parse_size(m.group(5)),
                    "peak": parse_size(m.group(6))}
    return {"ops": ops, "copies": copies, "copy_rows": copy_rows, "devices": devices}


def op_devices(placement):
    return {node: device for _, _, node, device in placement["ops"]}


def parse_dot(text):
    """(clusters {label: [node ids]}, edges [(src, dst, attributes or '')])."""
    clusters, edges = {}, []
    current = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            current = []
            continue
        if current is not None:
            m = re.match(r'label="([^"]*)";$', s)
            if m:
                clusters[m.group(1)] = current
                continue
            if s == "}":
                current = None
                continue
            m = re.match(r"(\w+) \[", s)
            if m:
                current.append(m.group(1))
            continue
        m = re.match(r"(\w+) -> (\w+)(?: \[(.*)\])?;$", s)
        if m:
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
    return clusters, edges


def read_manifest(path):
    with open(path, "rb") as f:
        data = f.read()
    size = struct.unpack_from("<I", data, 12)[0]
    return json.loads(data[HEADER:HEADER + size])


class _DeviceTestCase(kt.KilnTestCase):
    """The small MLP, its input, references and a cpu-only artifact."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        model, cls.layers = make_mlp()
        cls.onnx_path = cls.save_model(model, "mlp.onnx")
        rng = np.random.default_rng(SEED + 1)
        cls.x = rng.standard_normal((BATCH, DIMS[0])).astype(np.float32)
        cls.x_file = cls.save_npy(cls.x, "x.npy")
        cls.pins_file = cls.write_json("pins.json", PINS)
        cls._compiled = {}
        cls._reference = None

    @classmethod
    def write_json(cls, name, obj):
        path = cls.path(name)
        with open(path, "w") as f:
            if isinstance(obj, str):
                f.write(obj)
            else:
                json.dump(obj, f)
        return path

    def compiled(self, key, *options, model=None):
        """Compiles once per class; returns (artifact, CompletedProcess) and
        fails the calling test when kilnc fails."""
        if key not in self._compiled:
            self._compiled[key] = self.compile(model or self.onnx_path, key + ".kiln",
                                               "--print-placement", *options)
        artifact, proc = self._compiled[key]
        kt.assert_success(self, proc)
        self.assertTrue(artifact and os.path.isfile(artifact), "kilnc wrote no artifact")
        return artifact, proc

    def run_raw(self, artifact, *options, x_file=None, label=None):
        """Runs `artifact` with kiln-run `options`; returns the output array."""
        label = label or "out_%d" % len(os.listdir(self.tmp))
        out_dir = self.path(label)
        shutil.rmtree(out_dir, ignore_errors=True)
        proc = kt.kiln_run(artifact, x_file or self.x_file, *options, "--output-dir", out_dir)
        kt.assert_success(self, proc)
        path = os.path.join(out_dir, "output_0.npy")
        self.assertTrue(os.path.isfile(path), "no output_0.npy\n" + kt.describe(proc))
        self.assertFalse(os.path.exists(os.path.join(out_dir, "output_1.npy")))
        return np.load(path)

    def cpu_reference(self):
        """Output of the plain cpu compile (itself checked against numpy)."""
        if self._reference is None:
            artifact, proc = self.compiled("cpu_only")
            out = self.run_raw(artifact, label="cpu_only_out")
            expected = numpy_mlp(self.x, self.layers)
            np.testing.assert_allclose(out, expected, rtol=1e-5,
                                       atol=1e-5 * float(np.abs(expected).max()))
            type(self)._reference = out
        return self._reference

    def assert_bit_identical(self, got, what):
        ref = self.cpu_reference()
        self.assertEqual(got.dtype, ref.dtype, what)
        self.assertEqual(got.shape, ref.shape, what)
        if got.tobytes() != ref.tobytes():
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
            self.fail("%s: not bit-identical to the cpu-only compile (max |diff| %.3g)"
                      % (what, diff))


class PinnedPlacementTest(_DeviceTestCase):
    """--pin rules, and what --print-placement / --save-placement / --emit=dot
    say about the resulting plan."""

    def pinned(self):
        return self.compiled("pinned", "--pin", self.pins_file)

    # 1. pins ------------------------------------------------------------

    def test_pinned_mlp_matches_cpu_numpy_and_onnxruntime(self):
        artifact, _ = self.pinned()
        got = self.run_raw(artifact, label="pinned_out")
        self.assert_bit_identical(got, "Gemm on sim:0, /act2/ on sim:1")
        expected = numpy_mlp(self.x, self.layers)
        atol = 1e-5 * float(np.abs(expected).max())
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol)
        self.assertGreater(float(np.std(got)), 1e-2, "degenerate outputs")
        try:
            ort_out = onnxruntime_run(self.onnx_path, self.x)
        except ImportError:
            kt.note("onnxruntime is not importable: compared with numpy only")
            return
        np.testing.assert_allclose(ort_out, expected, rtol=1e-5, atol=atol)
        np.testing.assert_allclose(got, ort_out, rtol=1e-5, atol=atol)

    def test_artifact_records_device_roles(self):
        artifact, _ = self.pinned()
        manifest = read_manifest(artifact)
        names = [d["name"] for d in manifest["devices"]]
        self.assertEqual(sorted(names), ["cpu", "sim:0", "sim:1"])
        self.assertEqual(manifest["devices"][0]["name"], "cpu", "the default device is role 0")
        kernels = [s for s in manifest["steps"] if "kernel" in s]
        copies = [s for s in manifest["steps"] if "copy" in s]
        placed = {s["nodes"]: names[s["device"]] for s in kernels}
        self.assertEqual(placed, PINNED)
        self.assertEqual(len(copies), expected_copies(PINNED[n] for n, _ in NODES))
        for step in copies:
            src, dst = (manifest["values"][v] for v in step["copy"])
            self.assertNotEqual(src["device"], dst["device"], step)
            self.assertEqual((src["dtype"], src["shape"]), (dst["dtype"], dst["shape"]), step)
        for step in kernels:  # a kernel's args all live on its device
            for v in step["args"]:
                value = manifest["values"][v]
                while value.get("kind") == "alias":
                    value = manifest["values"][value["of"]]
                self.assertEqual(value["device"], step["device"], step)

    # 2. --print-placement -------------------------------------------------

    def test_print_placement_of_pinned_plan(self):
        _, proc = self.pinned()
        placement = parse_placement(proc.stdout)
        self.assertEqual([(node, op) for _, op, node, _ in placement["ops"]], NODES,
                         proc.stdout)
        self.assertEqual(op_devices(placement), PINNED, proc.stdout)

        count, _ = placement["copies"]
        self.assertGreater(count, 0, proc.stdout)
        self.assertEqual(count, expected_copies(PINNED[n] for n, _ in NODES), proc.stdout)
        self.assertEqual(len(placement["copy_rows"]), count, proc.stdout)
        pairs = [(src, dst) for _, src, dst, _ in placement["copy_rows"]]
        self.assertEqual(sorted(pairs), sorted([
            ("cpu", "sim:0"), ("sim:0", "cpu"), ("cpu", "sim:0"), ("sim:0", "sim:1"),
            ("sim:1", "sim:0"), ("sim:0", "cpu")]), proc.stdout)
        # The input copy moves x (f32[4,16]) and the output copy y (f32[4,8]).
        first, last = placement["copy_rows"][0], placement["copy_rows"][-1]
        self.assertIn("x", first[0])
        self.assertEqual(first[3], BATCH * DIMS[0] * 4, proc.stdout)
        self.assertEqual(last[2], "cpu", proc.stdout)
        self.assertEqual(last[3], BATCH * DIMS[-1] * 4, proc.stdout)

        devices = placement["devices"]
        self.assertEqual(sorted(devices), ["cpu", "sim:0", "sim:1"], proc.stdout)
        self.assertEqual({d: r["ops"] for d, r in devices.items()},
                         {"cpu": 1, "sim:0": 3, "sim:1": 1}, proc.stdout)
        # All weights belong to the Gemms, on sim:0.
        weight_bytes = sum(w.nbytes + b.nbytes for w, b in self.layers)
        self.assertAlmostEqual(devices["sim:0"]["weights"], weight_bytes,
                               delta=0.05 * weight_bytes)
        self.assertEqual(devices["cpu"]["weights"], 0, proc.stdout)
        self.assertEqual(devices["sim:1"]["weights"], 0, proc.stdout)
        # Copies in: cpu gets fc1's and fc3's outputs, sim:1 fc2's.
        self.assertEqual(devices["cpu"]["copies_in"], BATCH * (DIMS[1] + DIMS[3]) * 4)
        self.assertEqual(devices["sim:1"]["copies_in"], BATCH * DIMS[2] * 4)

    def test_print_placement_of_cpu_only_plan(self):
        _, proc = self.compiled("cpu_only")
        placement = parse_placement(proc.stdout)
        self.assertEqual([(node, op) for _, op, node, _ in placement["ops"]], NODES,
                         proc.stdout)
        self.assertEqual(set(op_devices(placement).values()), {"cpu"}, proc.stdout)
        self.assertEqual(placement["copies"], (0, 0), proc.stdout)
        self.assertEqual(placement["copy_rows"], [], proc.stdout)
        self.assertEqual(list(placement["devices"]), ["cpu"], proc.stdout)
        self.assertEqual(placement["devices"]["cpu"]["ops"], len(NODES))
        self.assertEqual(placement["devices"]["cpu"]["copies_in"], 0)

    # 3. --save-placement round trip ----------------------------------------

    def test_saved_placement_round_trips(self):
        saved = self.path("saved.json")
        _, first = self.compiled("save", "--pin", self.pins_file, "--save-placement", saved)
        with open(saved) as f:
            rules = json.load(f)
        rules = rules["rules"] if isinstance(rules, dict) else rules
        self.assertEqual(len(rules), len(NODES), rules)
        self.assertEqual({r["node"]: r["device"] for r in rules},
                         {re.escape(n): d for n, d in PINNED.items()}, rules)

        artifact, again = self.compiled("from_saved", "--pin", saved)
        a, b = parse_placement(first.stdout), parse_placement(again.stdout)
        self.assertEqual(b["ops"], a["ops"], again.stdout)
        self.assertEqual(b["copies"], a["copies"])
        self.assertEqual([r[:3] for r in b["copy_rows"]], [r[:3] for r in a["copy_rows"]])
        self.assertEqual(b["devices"].keys(), a["devices"].keys())
        self.assert_bit_identical(self.run_raw(artifact, label="from_saved_out"),
                                  "recompiled from --save-placement")

    def test_edited_saved_placement_moves_the_node(self):
        saved = self.path("saved_for_edit.json")
        self.compiled("save_for_edit", "--pin", self.pins_file, "--save-placement", saved)
        with open(saved) as f:
            doc = json.load(f)
        rules = doc["rules"] if isinstance(doc, dict) else doc
        moved = [r for r in rules if r["node"] == re.escape("/fc3/Gemm")]
        self.assertEqual(len(moved), 1, rules)
        moved[0]["device"] = "sim:1"
        edited = self.write_json("edited.json", doc)

        artifact, proc = self.compiled("edited", "--pin", edited)
        placement = parse_placement(proc.stdout)
        want = dict(PINNED, **{"/fc3/Gemm": "sim:1"})
        self.assertEqual(op_devices(placement), want, proc.stdout)
        self.assertEqual(placement["copies"][0], expected_copies(want[n] for n, _ in NODES),
                         proc.stdout)
        devices = placement["devices"]
        self.assertEqual({d: r["ops"] for d, r in devices.items()},
                         {"cpu": 1, "sim:0": 2, "sim:1": 2}, proc.stdout)
        w3, b3 = self.layers[2]
        self.assertAlmostEqual(devices["sim:1"]["weights"], w3.nbytes + b3.nbytes,
                               delta=0.05 * (w3.nbytes + b3.nbytes))
        self.assert_bit_identical(self.run_raw(artifact, label="edited_out"),
                                  "edited placement")

    # 4. --emit=dot -----------------------------------------------------------

    def emit_dot(self, key, *options):
        path = self.path(key + ".dot")
        proc = kt.kilnc(self.onnx_path, "--emit=dot", "-o", path, *options)
        kt.assert_success(self, proc)
        with open(path) as f:
            return f.read()

    def check_dot(self, text, placement):
        clusters, edges = parse_dot(text)
        used = set(op_devices(placement).values()) | {"cpu"}  # x and y live on cpu
        self.assertEqual(set(clusters), used, text)
        self.assertEqual(len(re.findall(r"subgraph cluster_", text)), len(used), text)
        device_of = {n: d for d, members in clusters.items() for n in members}
        # Each kernel sits in the cluster of the device its ONNX node is on.
        for node, device in op_devices(placement).items():
            kernel = re.findall(r'(\w+) \[label="kernel \d+\\n([^"]*)"\]', text)
            ids = [k for k, label in kernel if node in label.split(",")]
            self.assertEqual(len(ids), 1, (node, text))
            self.assertEqual(device_of[ids[0]], device, (node, text))
        copy_edges = 0
        for src, dst, attrs in edges:
            self.assertIn(src, device_of, text)
            self.assertIn(dst, device_of, text)
            is_copy = re.search(r'label="copy [^"]*"', attrs) is not None
            self.assertEqual(is_copy, device_of[src] != device_of[dst],
                             "edge %s -> %s [%s]\n%s" % (src, dst, attrs, text))
            copy_edges += is_copy
        self.assertEqual(copy_edges, placement["copies"][0], text)
        return text

    def test_dot_of_pinned_plan(self):
        _, proc = self.pinned()
        placement = parse_placement(proc.stdout)
        text = self.check_dot(self.emit_dot("pinned", "--pin", self.pins_file), placement)
        self.assertGreater(text.count("copy "), 0)

    def test_dot_of_cpu_only_plan(self):
        _, proc = self.compiled("cpu_only")
        text = self.check_dot(self.emit_dot("cpu_only"), parse_placement(proc.stdout))
        self.assertNotIn("copy", text)

    def test_dot_parses_with_graphviz(self):
        dot = shutil.which("dot")
        if not dot:
            kt.note("skipping the graphviz check: 'dot' is not installed")
            self.skipTest("graphviz 'dot' is not installed")
        for key, options in (("gv_pinned", ("--pin", self.pins_file)), ("gv_cpu", ())):
            self.emit_dot(key, *options)
            proc = subprocess.run([dot, "-Tsvg", "-o", os.devnull, self.path(key + ".dot")],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    # 8. --output-device --------------------------------------------------------

    def test_output_device_sim(self):
        for key, options in (("out_sim", ()), ("out_sim_pinned", ("--pin", self.pins_file))):
            with self.subTest(options=options):
                artifact, proc = self.compiled(key, "--output-device", "sim:0", *options)
                manifest = read_manifest(artifact)
                names = [d["name"] for d in manifest["devices"]]
                out_value = manifest["values"][manifest["outputs"][0]["value"]]
                self.assertEqual(names[out_value["device"]], "sim:0", manifest["outputs"])
                placement = parse_placement(proc.stdout)
                devs = [PINNED[n] if options else "cpu" for n, _ in NODES]
                self.assertEqual(placement["copies"][0],
                                 expected_copies(devs, output_device="sim:0"), proc.stdout)
                self.assertIn("sim:0", placement["devices"])
                self.assert_bit_identical(self.run_raw(artifact, label=key + "_run"),
                                          "--output-device sim:0 " + " ".join(options))
                # Read back from sim:0 whichever device the role is bound to.
                self.assert_bit_identical(
                    self.run_raw(artifact, "--bind", "sim:0=sim:5", label=key + "_run5"),
                    "--output-device sim:0, bound to sim:5")


class RuntimeBindingTest(_DeviceTestCase):
    """kiln-run binding the pinned plan's roles (0 cpu, 1 sim:0, 2 sim:1)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.artifact, cls.compile_proc = cls.compile(cls.onnx_path, "pinned.kiln",
                                                     "--pin", cls.pins_file)

    def setUp(self):
        kt.assert_success(self, self.compile_proc)

    def test_roles(self):
        names = [d["name"] for d in read_manifest(self.artifact)["devices"]]
        self.assertEqual(names, ["cpu", "sim:0", "sim:1"],
                         "the options below assume this role order")

    def test_bindings_give_identical_outputs(self):
        for options in (("--bind", "1=cpu"), ("--bind", "sim:0=sim:7"), ("--device", "sim:3"),
                        ("--device", "cpu"), ("--bind", "0=sim:2", "--bind", "2=sim:2"),
                        ("--device", "sim:3", "--bind", "sim:1=cpu"),
                        ("--device-memory", "sim:0=64M", "--device-memory", "sim:1=1M")):
            with self.subTest(options=options):
                got = self.run_raw(self.artifact, *options, label="bind")
                self.assert_bit_identical(got, " ".join(options))

    def test_repeated_multi_device_runs_are_identical(self):
        proc = kt.kiln_run(self.artifact, self.x_file, "--bench", "20")
        kt.assert_success(self, proc)
        self.assertRegex(proc.stdout, r"latency over 20 runs")
        m = re.search(r"peak device memory: (.*)", proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        for device in ("cpu", "sim:0", "sim:1"):
            self.assertRegex(m.group(1), r"\b%s \d+ bytes" % re.escape(device))
        for i in range(5):
            self.assert_bit_identical(self.run_raw(self.artifact, label="rep"), "run %d" % i)

    def run_fails(self, *options, expected=()):
        out_dir = self.path("should_not_exist")
        proc = kt.kiln_run(self.artifact, self.x_file, *options, "--output-dir", out_dir)
        kt.assert_clean_failure(self, proc, *expected)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "output_0.npy")),
                         "outputs written by a failed run")
        self.assertNotIn("Traceback", proc.stderr)
        return proc

    def test_device_memory_too_small(self):
        self.run_fails("--device-memory", "sim:0=1K", expected=("out of memory", "sim:0"))
        # The cap follows the concrete device the role is bound to.
        self.run_fails("--bind", "sim:0=sim:1", "--device-memory", "sim:1=4K",
                       expected=("out of memory", "sim:1"))

    def test_bind_unknown_role(self):
        proc = self.run_fails("--bind", "9=cpu", expected=("'9'", "role"))
        for name in ("cpu", "sim:0", "sim:1"):  # it lists the roles there are
            self.assertIn(name, proc.stderr)
        self.run_fails("--bind", "sim:5=cpu", expected=("sim:5", "role"))

    def test_bind_to_cuda_without_backend(self):
        self.run_fails("--bind", "1=cuda:0", expected=("cuda:0", "cuda backend"))
        self.run_fails("--device", "cuda:0", expected=("cuda:0", "cuda backend"))

    def test_bad_binding_syntax(self):
        self.run_fails("--bind", "1=tpu:0", expected=("tpu:0", ("unknown device", "invalid")))
        self.run_fails("--bind", "1", expected=("--bind",))
        self.run_fails("--device-memory", "sim:0=lots", expected=("--device-memory", "lots"))


class AutoPlacementTest(_DeviceTestCase):
    """--placement=auto and device profiles."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.big = os.path.join(kt.KILN_SOURCE, "examples", "mlp.onnx")
        cls.fast = cls.write_json("fast.json", {"peak_gflops": 5000, "memory_gbps": 500})
        cls.no_gemm = cls.write_json("no_gemm.json", {"unsupported_ops": ["gemm"]})
        rng = np.random.default_rng(SEED + 2)
        cls.xb = rng.standard_normal((8, 784)).astype(np.float32)
        cls.xb_file = cls.save_npy(cls.xb, "xb.npy")
        cls._big_reference = None

    def big_compiled(self, key, *options):
        if not os.path.isfile(self.big):
            self.skipTest("examples/mlp.onnx not found under KILN_SOURCE=%s" % kt.KILN_SOURCE)
        return self.compiled(key, "--input-shape", "x=8x784", *options, model=self.big)

    def big_reference(self):
        if self._big_reference is None:
            artifact, _ = self.big_compiled("big_cpu")
            out = self.run_raw(artifact, x_file=self.xb_file, label="big_cpu_out")
            try:
                ref = onnxruntime_run(self.big, self.xb)
                self.assertLess(kt.rel_l2(out, ref), 1e-5)
            except ImportError:
                kt.note("onnxruntime is not importable: examples/mlp.onnx is not checked")
            type(self)._big_reference = out
        return self._big_reference

    def latency(self, proc):
        m = re.search(r"auto placement: estimated latency ([0-9.]+) us", proc.stderr)
        self.assertIsNotNone(m, kt.describe(proc))
        return float(m.group(1))

    def test_default_profiles_keep_everything_on_cpu(self):
        artifact, proc = self.big_compiled("auto_default", "--placement=auto",
                                           "--devices", "cpu,sim:0")
        placement = parse_placement(proc.stdout)
        self.assertEqual(len(placement["ops"]), 9, proc.stdout)
        self.assertEqual(set(op_devices(placement).values()), {"cpu"}, proc.stdout)
        self.assertEqual(placement["copies"][0], 0, proc.stdout)
        self.assertEqual(placement["devices"].get("sim:0", {"ops": 0})["ops"], 0)
        got = self.run_raw(artifact, x_file=self.xb_file, label="auto_default_out")
        self.assertEqual(got.tobytes(), self.big_reference().tobytes())

    def test_fast_profile_moves_the_gemms(self):
        _, slow = self.big_compiled("auto_default", "--placement=auto",
                                    "--devices", "cpu,sim:0")
        artifact, proc = self.big_compiled("auto_fast", "--placement=auto",
                                           "--devices", "cpu,sim:0",
                                           "--device-profile", "sim:0=" + self.fast)
        placed = op_devices(parse_placement(proc.stdout))
        # The two big Gemms (784x256 and 256x256 weights) must move; fc3
        # (256x10) may stay, its output copy would cost more than it saves.
        self.assertEqual(placed["/fc1/Gemm"], "sim:0", proc.stdout)
        self.assertEqual(placed["/fc2/Gemm"], "sim:0", proc.stdout)
        self.assertGreater(parse_placement(proc.stdout)["copies"][0], 0)
        self.assertLess(self.latency(proc), self.latency(slow))
        manifest = read_manifest(artifact)
        names = [d["name"] for d in manifest["devices"]]
        # A kernel lists every node it computes (the Gemm's epilogue too).
        on = {node: names[s["device"]] for s in manifest["steps"] if "kernel" in s
              for node in s["nodes"].split(",")}
        self.assertEqual(on["/fc1/Gemm"], "sim:0")
        got = self.run_raw(artifact, x_file=self.xb_file, label="auto_fast_out")
        self.assertEqual(got.tobytes(), self.big_reference().tobytes(),
                         "auto placement on sim:0 is not bit-identical to cpu")

    def test_pin_splitting_a_fused_kernel(self):
        # /Erf sits inside the fused GELU kernel; pinning it alone splits it.
        pins = self.write_json("erf.json", {"rules": [{"node": "/Erf", "device": "sim:0"}]})
        artifact, proc = self.big_compiled("erf_pinned", "--pin", pins)
        placed = op_devices(parse_placement(proc.stdout))
        self.assertEqual(placed.pop("/Erf"), "sim:0", proc.stdout)
        self.assertEqual(set(placed.values()), {"cpu"}, proc.stdout)
        on_sim = self.run_raw(artifact, x_file=self.xb_file, label="erf_sim")
        on_cpu = self.run_raw(artifact, "--device", "cpu", x_file=self.xb_file,
                              label="erf_cpu")
        self.assertEqual(on_sim.tobytes(), on_cpu.tobytes())
        self.assertLess(kt.rel_l2(on_sim, self.big_reference()), 1e-6)

    # 6. capability fallback --------------------------------------------------

    def test_unsupported_op_falls_back_to_cpu(self):
        pins = self.write_json("gemm_relu_sim0.json", {"rules": [
            {"op": "Gemm", "device": "sim:0"}, {"op": "Relu", "device": "sim:0"}]})
        artifact, proc = self.compiled("fallback", "--devices", "cpu,sim:0", "--pin", pins,
                                       "--device-profile", "sim:0=" + self.no_gemm)
        placed = op_devices(parse_placement(proc.stdout))
        self.assertEqual(placed, {n: ("cpu" if op == "gemm" else "sim:0") for n, op in NODES},
                         proc.stdout)
        notes = [l for l in proc.stderr.splitlines() if "note" in l]
        for node, op in NODES:
            mentioned = [l for l in notes if node in l]
            if op == "gemm":
                self.assertEqual(len(mentioned), 1, proc.stderr)
                self.assertIn("sim:0", mentioned[0])
                self.assertIn("gemm", mentioned[0].lower())
                self.assertIn("cpu", mentioned[0])
            else:
                self.assertEqual(mentioned, [], proc.stderr)
        self.assert_bit_identical(self.run_raw(artifact, label="fallback_out"), "fallback")

    def test_only_unsupported_ops_pinned(self):
        pins = self.write_json("gemm_sim0.json", {"rules": [{"op": "Gemm", "device": "sim:0"}]})
        _, proc = self.compiled("fallback_all", "--devices", "cpu,sim:0", "--pin", pins,
                                "--device-profile", "sim:0=" + self.no_gemm)
        placement = parse_placement(proc.stdout)
        self.assertEqual(set(op_devices(placement).values()), {"cpu"}, proc.stdout)
        self.assertEqual(placement["copies"][0], 0, proc.stdout)
        self.assertIn("/fc1/Gemm", proc.stderr)
        self.assertIn("sim:0 cannot run", proc.stderr)

    def test_bad_device_profiles(self):
        bad = self.write_json("bad_profile.json", "{not json")
        for options, expected in (
                (("--device-profile", "sim:0=" + self.path("missing_profile.json")),
                 ("missing_profile.json", ("no such file", "cannot read"))),
                (("--device-profile", "sim:0=" + bad), ("bad_profile.json",)),
                (("--device-profile", "sim:0"), ("sim:0", "DEVICE=FILE"))):
            with self.subTest(options=options):
                proc = kt.kilnc(self.onnx_path, "-o", self.path("bad_profile.kiln"),
                                "--devices", "cpu,sim:0", *options)
                kt.assert_clean_failure(self, proc, *expected)
                self.assertFalse(os.path.exists(self.path("bad_profile.kiln")))


class PlacementErrorTest(_DeviceTestCase):
    """kilnc refusing bad placement requests, cleanly and writing nothing."""

    def compile_fails(self, *options, expected=()):
        out = self.path("error.kiln")
        proc = kt.kilnc(self.onnx_path, "-o", out, *options)
        kt.assert_clean_failure(self, proc, *expected)
        self.assertFalse(os.path.exists(out), "kilnc wrote an artifact anyway")
        return proc

    def pins(self, name, text):
        return self.write_json(name, text)

    def test_malformed_pins_json(self):
        path = self.pins("truncated_pins.json", '{"rules": [{"op": "Gemm",')
        self.compile_fails("--pin", path, expected=("truncated_pins.json", "json"))

    def test_pins_not_a_rule_list(self):
        path = self.pins("dict_rules.json", '{"rules": {}}')
        self.compile_fails("--pin", path, expected=("dict_rules.json", "rules"))

    def test_unknown_device_in_pin(self):
        path = self.pins("tpu.json", {"rules": [{"op": "Gemm", "device": "tpu:0"}]})
        self.compile_fails("--pin", path, expected=("tpu.json", "tpu:0", "device"))

    def test_bad_regex_in_pin(self):
        path = self.pins("regex.json", {"rules": [{"node": "/fc1/(Gemm", "device": "sim:0"}]})
        self.compile_fails("--pin", path, expected=("regex.json", "/fc1/(Gemm",
                                                    ("pattern", "regex")))

    def test_incomplete_or_unknown_rule_fields(self):
        for rule, expected in (({"op": "Gemm"}, "device"),
                               ({"device": "sim:0"}, ("'op'", "'node'")),
                               ({"op": "Gemm", "device": "sim:0", "nod": "x"}, "nod")):
            with self.subTest(rule=rule):
                path = self.pins("rule.json", {"rules": [rule]})
                self.compile_fails("--pin", path, expected=("rule.json", expected))

    def test_rule_matching_nothing_warns(self):
        path = self.pins("conv.json", {"rules": [{"op": "Conv", "device": "sim:0"}]})
        artifact, proc = self.compiled("conv_pin", "--pin", path)
        self.assertRegex(proc.stderr, r"warning: .*Conv.*matched no op", kt.describe(proc))
        self.assertEqual(set(op_devices(parse_placement(proc.stdout)).values()), {"cpu"})

    def test_missing_pins_file(self):
        self.compile_fails("--pin", self.path("no_such_pins.json"),
                           expected=("no_such_pins.json",
                                     ("no such file", "cannot read", "cannot open")))

    def test_parallel_strategies_need_enough_devices(self):
        for strategy in ("--placement=pipeline:3", "--placement=data:3", "--placement=data:0"):
            with self.subTest(strategy=strategy):
                self.compile_fails(strategy, "--devices", "cpu,sim:0",
                                   expected=(strategy.split("=")[1], "--devices"))

    def test_parallel_strategies_need_a_symbolic_batch(self):
        # This MLP was exported with a fixed batch of 4: it cannot be
        # re-specialised for chunks of it.
        self.compile_fails("--placement=data:2", "--devices", "sim:0,sim:1",
                           expected=("symbolic",))

    def test_unknown_placement_strategy(self):
        proc = self.compile_fails("--placement=bogus", expected=("bogus",))
        self.assertNotIn("not implemented", proc.stderr, "'bogus' is no strategy at all")

    def test_unknown_device_options(self):
        for option in ("--device=tpu", "--devices=cpu,tpu:0", "--output-device=bogus"):
            with self.subTest(option=option):
                self.compile_fails(option, expected=(option.split("=")[1].split(",")[-1],
                                                     "device"))

    def test_cuda_pin(self):
        """A Gemm pinned to cuda:0 compiles: its kernels get CUDA entry points
        in a PTX section (their C++ twins stay in the code section)."""
        if not kt.nvrtc_available():
            self.skipTest("no CUDA toolkit (NVRTC) at $KILN_CUDA_HOME or /usr/local/cuda")
        path = self.pins("cuda.json", {"rules": [{"op": "Gemm", "device": "cuda:0"}]})
        out = self.path("cuda_pin.kiln")
        proc = kt.kilnc(self.onnx_path, "--pin", path, "-o", out)
        kt.assert_success(self, proc)
        manifest = read_manifest(out)
        self.assertEqual(manifest["target"]["cuda_arch"], "sm_80")
        self.assertIn("ptx", [s["name"] for s in manifest["sections"]])
        roles = [d["name"] for d in manifest["devices"]]
        self.assertEqual(sorted(roles), ["cpu", "cuda:0"])
        cuda_role = roles.index("cuda:0")
        kernels = [s for s in manifest["steps"] if "kernel" in s]
        for step in kernels:
            on_cuda = step["device"] == cuda_role
            self.assertEqual("cuda" in step, on_cuda, step)
            if on_cuda:
                cuda = step["cuda"]
                self.assertEqual(cuda["slots"], len(step["args"]) + len(cuda["scratch"]))
                self.assertTrue(all(l["entry"].startswith(step["kernel"] + "_p")
                                    for l in cuda["launches"] if "entry" in l), cuda)
                # A Gemm's product runs through cuBLAS.
                self.assertEqual(sum("gemm" in l for l in cuda["launches"]), 1, cuda)
        self.assertEqual(sum("cuda" in s for s in kernels), 3, kernels)  # three Gemms
        # The placement itself can be inspected.
        proc = kt.kilnc(self.onnx_path, "--pin", path, "--print-placement", "--emit=mlir",
                        "-o", os.devnull)
        kt.assert_success(self, proc)
        placement = parse_placement(proc.stdout)
        self.assertEqual(op_devices(placement),
                         {n: ("cuda:0" if op == "gemm" else "cpu") for n, op in NODES},
                         proc.stdout)
        self.assertIn("cuda:0", placement["devices"])
        self.assertGreater(placement["copies"][0], 0)
        dot = kt.kilnc(self.onnx_path, "--pin", path, "--emit=dot", "-o", "-")
        kt.assert_success(self, dot)
        self.assertIn('label="cuda:0"', dot.stdout)

class ParallelPlacementTest(kt.KilnTestCase):
    """--placement=data:K and pipeline:K on examples/mlp.onnx (symbolic batch
    N): every split must give the single-device compile's result. Not to the
    bit: a split runs each Gemm on fewer rows, and oneDNN's sgemm (which the
    cpu kernels call when it loads) blocks its sums by the matrix sizes, so
    within 1e-6 relative L2."""

    MODEL = os.path.join(kt.KILN_SOURCE, "examples", "mlp.onnx")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._cpu = {}

    def x_file(self, batch):
        rng = np.random.default_rng(batch)
        return self.save_npy(rng.standard_normal((batch, 784)).astype(np.float32),
                             "x%d.npy" % batch)

    def run_artifact(self, artifact, batch, label):
        out_dir = self.path(label)
        proc = kt.kiln_run(artifact, self.x_file(batch), "--output-dir", out_dir)
        kt.assert_success(self, proc)
        return np.load(os.path.join(out_dir, "output_0.npy"))

    def cpu(self, batch):
        if batch not in self._cpu:
            artifact, proc = self.compile(self.MODEL, "cpu%d.kiln" % batch,
                                          "--input-shape", "x=%dx784" % batch)
            kt.assert_success(self, proc)
            out = self.run_artifact(artifact, batch, "cpu%d" % batch)
            self.assertEqual(out.shape, (batch, 10))
            type(self)._cpu[batch] = out
        return self._cpu[batch]

    def parallel(self, batch, *options):
        name = "par%d_%d" % (batch, abs(hash(options)) % 100000)
        artifact, proc = self.compile(self.MODEL, name + ".kiln", "--input-shape",
                                      "x=%dx784" % batch, "--print-placement", *options)
        kt.assert_success(self, proc)
        out = self.run_artifact(artifact, batch, name)
        ref = self.cpu(batch)
        self.assertEqual(out.shape, ref.shape)
        self.assertLess(kt.rel_l2(out, ref), 1e-6,
                        "%s at batch %d differs from the cpu compile" % (options, batch))
        return proc

    def gemm_devices(self, proc):
        """Device of each gemm row of --print-placement, in order."""
        return re.findall(r"^\d+\s+gemm\s+\S+\s+(\S+)", proc.stdout, re.M)

    def slice_rows(self, proc):
        return re.findall(r"^\d+\s+slice\s+data-parallel/scatter/x/(\d+)\s+(\S+)",
                          proc.stdout, re.M)

    def test_data_parallel_uneven_batch(self):
        # torch.chunk(5, 2) -> 3 + 2: one replica (3 gemms) per device.
        proc = self.parallel(5, "--devices", "sim:0,sim:1", "--placement=data:2")
        self.assertEqual(self.gemm_devices(proc), ["sim:0"] * 3 + ["sim:1"] * 3)
        self.assertEqual(self.slice_rows(proc), [("0", "sim:0"), ("1", "sim:0")])

    def test_data_parallel_three_devices_from_the_host(self):
        # 7 -> 3 + 3 + 1, the input scattered from the cpu, gathered there.
        proc = self.parallel(7, "--devices", "cpu,sim:0,sim:1", "--placement=data:3")
        self.assertEqual(self.gemm_devices(proc),
                         ["cpu"] * 3 + ["sim:0"] * 3 + ["sim:1"] * 3)
        self.assertRegex(proc.stdout, r"concat\s+data-parallel/gather/0\s+cpu")

    def test_data_parallel_fewer_chunks_than_devices(self):
        # torch.chunk(5, 4) gives 2 + 2 + 1: three replicas, not four.
        proc = self.parallel(5, "--devices", "sim:0,sim:1,sim:2,sim:3", "--placement=data:4")
        self.assertEqual(self.gemm_devices(proc),
                         ["sim:0"] * 3 + ["sim:1"] * 3 + ["sim:2"] * 3)

    def test_data_parallel_output_device(self):
        proc = self.parallel(4, "--devices", "sim:0,sim:1", "--placement=data:2",
                             "--output-device", "cpu")
        self.assertRegex(proc.stdout, r"concat\s+data-parallel/gather/0\s+cpu")

    def test_pipeline_with_microbatches(self):
        proc = self.parallel(5, "--devices", "sim:0,sim:1", "--placement=pipeline:2",
                             "--microbatches", "3")
        devices = self.gemm_devices(proc)
        self.assertEqual(len(devices), 9)  # 3 gemms x 3 micro-batches (2 + 2 + 1)
        # Every micro-batch is cut the same way into two non-empty stages.
        self.assertIn("pipeline stages", proc.stderr)
        self.assertEqual(set(devices), {"sim:0", "sim:1"})
        self.assertEqual(devices[:3], devices[3:6])

    def test_pipeline_single_microbatch(self):
        proc = self.parallel(3, "--devices", "cpu,sim:0", "--placement=pipeline:2")
        self.assertEqual(set(self.gemm_devices(proc)), {"cpu", "sim:0"})

    def test_split_dim_errors(self):
        for option, expected in ((("--split-dim", "y=0"), ("y=0", "names no model input")),
                                 (("--split-dim", "x=2"), ("x", "no dim 2"))):
            with self.subTest(option=option):
                proc = kt.kilnc(self.MODEL, "-o", self.path("bad.kiln"), "--input-shape",
                                "x=4x784", "--devices", "sim:0,sim:1", "--placement=data:2",
                                *option)
                kt.assert_clean_failure(self, proc, *expected)


def make_nonzero_model():
    """x f32[2,8] -> Relu -> (> 0.5) -> NonZero -> idx int64[2,K]; y = 2 *
    GatherND(relu(x), idx^T), f32[K]: K, and so every shape after NonZero,
    depends on the data the plan computes."""
    from onnx import TensorProto, helper as h, numpy_helper as nh
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Greater", ["r", "half"], ["m"], name="greater"),
             h.make_node("NonZero", ["m"], ["idx"], name="nonzero"),
             h.make_node("Transpose", ["idx"], ["t"], perm=[1, 0], name="transpose"),
             h.make_node("GatherND", ["r", "t"], ["g"], name="gather"),
             h.make_node("Mul", ["g", "two"], ["y"], name="mul")]
    inits = [nh.from_array(np.array(0.5, np.float32), "half"),
             nh.from_array(np.array(2.0, np.float32), "two")]
    graph = h.make_graph(nodes, "nonzero", [h.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 8])], [
            h.make_tensor_value_info("idx", TensorProto.INT64, None),
            h.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def numpy_nonzero_model(x):
    r = np.maximum(x, 0)
    return np.array(np.nonzero(r > 0.5), dtype=np.int64), r[r > 0.5] * 2


class DataDependentShapesTest(kt.KilnTestCase):
    """Shapes that depend on data the plan computes (NonZero), in plans that
    span devices or live off the host: the runtime sizes each step as it
    comes, copies between devices included, and reads the data a shape
    depends on back from the device that holds it. Each placement must give
    numpy's result, for inputs whose NonZero counts differ (8 and 0)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        kt.import_or_skip("onnx")
        cls.model = cls.save_model(make_nonzero_model(), "nonzero.onnx")
        rng = np.random.default_rng(SEED)
        cls.inputs = [rng.standard_normal((2, 8)).astype(np.float32),
                      -np.ones((2, 8), np.float32)]

    def check(self, tag, *options, env=None, artifact=None):
        if artifact is None:
            artifact, proc = self.compile(self.model, tag + ".kiln", *options)
            kt.assert_success(self, proc)
        procs = []
        for i, x in enumerate(self.inputs):
            (idx, y), proc = self.run_artifact(artifact, [x], "%s_%d" % (tag, i), env=env)
            procs.append(proc)
            want_idx, want_y = numpy_nonzero_model(x)
            np.testing.assert_array_equal(idx, want_idx)
            self.assertEqual(y.shape, want_y.shape)
            np.testing.assert_array_equal(y, want_y)
        return procs

    def test_cpu_only(self):
        self.check("cpu")

    def test_all_on_a_device(self):
        # The data NonZero's shape depends on lives on sim:0: read back.
        self.check("sim", "--device", "sim:0")

    def test_across_devices_with_copies(self):
        pins = self.path("pins.json")
        with open(pins, "w") as f:
            json.dump({"rules": [{"op": "Relu", "device": "sim:0"},
                                 {"op": "NonZero", "device": "cpu"},
                                 {"op": "Mul", "device": "sim:1"}]}, f)
        self.check("pinned", "--devices", "cpu,sim:0,sim:1", "--pin", pins)

    def test_on_emulated_cuda(self):
        # NonZero and what follows stay on the cpu (dynamic shapes); Relu and
        # Greater run as CUDA kernels, emulated on the host.
        if not kt.nvrtc_available():
            self.skipTest("no CUDA toolkit (NVRTC) at %s" % kt.cuda_home())
        artifact, env = self.cuda_emulated(self.model, "cuda", "--devices",
                                           "cuda:0,cpu")
        env["FAKE_CUDA_REPORT"] = "1"
        for proc in self.check("cuda", env=env, artifact=artifact):
            launches = re.search(r"fake cuda: (\d+) emulated", proc.stderr)
            self.assertIsNotNone(launches, proc.stderr)
            self.assertGreater(int(launches.group(1)), 0, proc.stderr)


if __name__ == "__main__":
    unittest.main()
