"""Acceptance: the example MLP (Linear-ReLU-Linear-GELU-Linear, 784-1024-1024-10)
exported from PyTorch compiles with kilnc, runs with kiln-run and matches
PyTorch eager and onnxruntime within 1e-5 relative L2.

Exports: TorchScript (dynamo=False, opset 17, via examples/make_mlp.py), the
default dynamo exporter (dynamo=True, as a user calls it, and with the weights
embedded), and a dynamic-batch TorchScript export, compiled once with its
batch symbolic (run at several batches) and bound with --input-shape.
"""

import contextlib
import io
import logging
import os
import unittest
import warnings

import numpy as np

import kiln_testing as kt

TOLERANCE = 1e-5
BATCH = 64
DYN_BATCH = 8
SEED = 0


def _quiet():
    """Silences the exporters' progress prints and warnings."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    for name in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript"):
        logger = logging.getLogger(name)
        old = logger.level
        logger.setLevel(logging.ERROR)
        stack.callback(logger.setLevel, old)
    return stack


class MLPTest(kt.KilnTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch, make_mlp = kt.import_torch_and_make_mlp()
        cls.torch = torch
        torch.set_num_threads(1)
        cls.make_mlp = make_mlp

        # The static export; export() seeds the weights, so the eager model
        # below is the one that was exported.
        cls.static_onnx = cls.path("mlp_static.onnx")
        with _quiet():
            cls.model = make_mlp.export(cls.static_onnx, BATCH, False, SEED)
        cls.model.eval()
        gen = torch.Generator().manual_seed(1234)
        cls.x = torch.randn(BATCH, 784, generator=gen)
        with torch.no_grad():
            cls.expected = cls.model(cls.x).numpy()
        cls.x_np = cls.x.numpy().astype(np.float32)
        cls.x_file = cls.save_npy(cls.x_np, "x.npy")
        cls._artifacts = {}
        cls._exports = {}

    # -- helpers ---------------------------------------------------------

    def artifact(self, key, onnx_path, *extra):
        """Compiles once per class (cached); fails the calling test if kilnc fails."""
        if key not in self._artifacts:
            out, proc = self.compile(onnx_path, key + ".kiln", *extra)
            self._artifacts[key] = (out, proc)
        out, proc = self._artifacts[key]
        kt.assert_success(self, proc)
        self.assertTrue(os.path.isfile(out), "kilnc wrote no artifact")
        return out

    def onnxruntime(self, onnx_path, x):
        try:
            import onnxruntime as ort
        except ImportError:
            self.skipTest("onnxruntime is not importable")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(onnx_path, options,
                                       providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return session.run(None, {name: x})[0]

    def check_against(self, got, ref, what):
        self.assertEqual(got.dtype, np.float32, what)
        self.assertEqual(got.shape, ref.shape, what)
        self.assertTrue(np.all(np.isfinite(got)), what + ": non-finite outputs")
        err = kt.rel_l2(got, ref)
        kt.note("%s: rel L2 %.3g" % (what, err))
        self.assertLess(err, TOLERANCE, "%s: relative L2 error %.3g" % (what, err))

    def check_model(self, onnx_path, artifact, x, label):
        """Runs `artifact` on x; compares with eager and with onnxruntime."""
        with self.torch.no_grad():
            eager = self.model(self.torch.from_numpy(x)).numpy()
        outputs, _ = self.run_artifact(artifact, [x], out_name="out_" + label)
        self.assertEqual(len(outputs), 1, "the MLP has one output")
        self.check_against(outputs[0], eager, label + " vs PyTorch eager")
        ort_out = self.onnxruntime(onnx_path, x)
        # The reference itself must agree with eager, or the comparison is moot.
        self.assertLess(kt.rel_l2(ort_out, eager), TOLERANCE,
                        "onnxruntime disagrees with eager on " + label)
        self.check_against(outputs[0], ort_out, label + " vs onnxruntime")
        return outputs[0]

    def export_dynamo(self, key, **kwargs):
        """torch.onnx.export(..., dynamo=True); skips when the exporter fails."""
        if key not in self._exports:
            path = self.path(key + ".onnx")
            try:
                with _quiet():
                    self.torch.onnx.export(self.model, (self.x,), path,
                                           input_names=["x"], output_names=["logits"],
                                           dynamo=True, **kwargs)
                self._exports[key] = (path, None)
            except Exception as e:  # noqa: BLE001 - any exporter failure
                reason = "the dynamo exporter fails here: %s: %s" % (
                    type(e).__name__, str(e).splitlines()[0] if str(e) else "")
                self._exports[key] = (None, reason)
        path, reason = self._exports[key]
        if reason:
            kt.note("skipping %s: %s" % (key, reason))
            self.skipTest(reason)
        return path

    # -- TorchScript export (opset 17) -----------------------------------

    def test_torchscript_export_matches_eager_and_onnxruntime(self):
        import onnx
        model = onnx.load(self.static_onnx)
        self.assertEqual([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")], [17])
        artifact = self.artifact("static", self.static_onnx)
        got = self.check_model(self.static_onnx, artifact, self.x_np, "torchscript")
        # Sanity check that the comparison has teeth: the outputs are not
        # degenerate (all equal / all zero).
        self.assertGreater(float(np.std(got)), 1e-3)

    def test_repeated_runs_are_identical(self):
        artifact = self.artifact("static", self.static_onnx)
        a, _ = self.run_artifact(artifact, [self.x_file], out_name="rep_a")
        b, _ = self.run_artifact(artifact, [self.x_file], out_name="rep_b")
        np.testing.assert_array_equal(a[0], b[0])

    def test_profile_writes_one_slice_per_step(self):
        # --profile: a Chrome trace with one complete event per kernel,
        # named by the kernel symbol and carrying the ONNX nodes, and a
        # summary of the slowest steps on stdout.
        import json
        artifact = self.artifact("static", self.static_onnx)
        trace_path = self.path("mlp_profile.json")
        proc = kt.kiln_run(artifact, self.x_file, "--profile", trace_path)
        kt.assert_success(self, proc)
        with open(trace_path) as f:
            trace = json.load(f)
        slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertGreater(len(slices), 1)
        self.assertEqual(len({e["name"] for e in slices}), len(slices))
        for e in slices:
            self.assertRegex(e["name"], r"^kiln_k\d+$")
            self.assertGreaterEqual(e["dur"], 0)
            self.assertEqual(e["args"]["device"], "cpu")
        nodes = ",".join(e["args"].get("nodes", "") for e in slices)
        for node in ("/fc1/Gemm", "/fc2/Gemm", "/fc3/Gemm"):
            self.assertIn(node, nodes)
        # Steps run one after another on one thread: the slices do not overlap.
        slices.sort(key=lambda e: e["ts"])
        for a, b in zip(slices, slices[1:]):
            self.assertLessEqual(a["ts"] + a["dur"], b["ts"] + 1e-3)
        self.assertRegex(proc.stdout, r"profile: %d steps, [0-9.]+ ms in steps" % len(slices))
        self.assertRegex(proc.stdout, r"\n +[0-9.]+ ms +[0-9.]+% +kiln_k\d+ +cpu ")

    def test_profile_to_an_unwritable_path_fails_cleanly(self):
        artifact = self.artifact("static", self.static_onnx)
        proc = kt.kiln_run(artifact, self.x_file, "--profile",
                           self.path("no/such/dir/profile.json"))
        kt.assert_clean_failure(self, proc, "cannot write the profile")

    def test_tensorproto_input_gives_the_same_result(self):
        from onnx import numpy_helper
        artifact = self.artifact("static", self.static_onnx)
        pb = self.path("x.pb")
        with open(pb, "wb") as f:
            f.write(numpy_helper.from_array(self.x_np, "x").SerializeToString())
        from_npy, _ = self.run_artifact(artifact, [self.x_file], out_name="npy_in")
        from_pb, _ = self.run_artifact(artifact, [pb], out_name="pb_in")
        np.testing.assert_array_equal(from_pb[0], from_npy[0])

    def test_input_bound_by_graph_input_name(self):
        # The exporter named the graph input "x"; kiln-run must accept x=FILE
        # and print the real input/output names.
        artifact = self.artifact("static", self.static_onnx)
        outputs, proc = self.run_artifact(artifact, ["x=" + self.x_file], out_name="named")
        self.check_against(outputs[0], self.expected, "x=FILE vs eager")
        self.assertIn("logits", proc.stdout)

    def test_wrong_batch_is_rejected(self):
        artifact = self.artifact("static", self.static_onnx)
        x = self.save_npy(self.x_np[:DYN_BATCH], "x_small.npy")
        proc = kt.kiln_run(artifact, x)
        kt.assert_clean_failure(self, proc, "f32[64,784]", "[8,784]")

    # -- dynamo exporter ---------------------------------------------------

    def test_dynamo_export_default_options(self):
        # Exactly what a user writes: torch.onnx.export(m, (x,), path,
        # dynamo=True). With torch >= 2.9 this stores the weights in an
        # external file next to the model (external_data=True by default).
        path = self.export_dynamo("dynamo_default")
        artifact = self.artifact("dynamo_default", path)
        self.check_model(path, artifact, self.x_np, "dynamo (default options)")

    def test_dynamo_export_embedded_weights(self):
        path = self.export_dynamo("dynamo_embedded", external_data=False)
        artifact = self.artifact("dynamo_embedded", path)
        self.check_model(path, artifact, self.x_np, "dynamo (external_data=False)")

    # -- dynamic batch -----------------------------------------------------

    @classmethod
    def dynamic_onnx(cls):
        if not hasattr(cls, "_dynamic_onnx"):
            path = cls.path("mlp_dynamic.onnx")
            with _quiet():
                cls.make_mlp.export(path, BATCH, True, SEED)
            cls._dynamic_onnx = path
        return cls._dynamic_onnx

    def test_dynamic_batch_export_is_symbolic(self):
        import onnx
        dims = onnx.load(self.dynamic_onnx()).graph.input[0].type.tensor_type.shape.dim
        self.assertEqual(dims[0].dim_param, "N")
        self.assertEqual(dims[1].dim_value, 784)

    def test_dynamic_batch_with_input_shape(self):
        path = self.dynamic_onnx()
        artifact = self.artifact("dynamic8", path, "--input-shape", "x=%dx784" % DYN_BATCH)
        x8 = np.ascontiguousarray(self.x_np[DYN_BATCH:2 * DYN_BATCH])
        got = self.check_model(path, artifact, x8, "dynamic batch bound to 8")
        self.assertEqual(got.shape, (DYN_BATCH, 10))
        # The bound artifact takes exactly batch 8.
        proc = kt.kiln_run(artifact, self.x_file)
        kt.assert_clean_failure(self, proc, "f32[8,784]")

    def test_dynamic_batch_compiles_once_for_any_batch(self):
        # No --input-shape: N stays symbolic and one artifact runs at every
        # batch, each checked against eager and onnxruntime.
        path = self.dynamic_onnx()
        artifact = self.artifact("dynamic_any", path)
        for batch in (1, 3, BATCH):
            x = np.ascontiguousarray(self.x_np[:batch])
            got = self.check_model(path, artifact, x, "symbolic batch at %d" % batch)
            self.assertEqual(got.shape, (batch, 10))
        # The rank and the static dim are still checked.
        bad = self.save_npy(np.zeros((2, 783), np.float32), "x_bad.npy")
        proc = kt.kiln_run(artifact, bad)
        kt.assert_clean_failure(self, proc, "f32[?,784]", "[2,783]")

    def test_input_shape_for_unknown_input_fails(self):
        out = self.path("dynamic_badname.kiln")
        proc = kt.kilnc(self.dynamic_onnx(), "-o", out, "--input-shape", "nosuchinput=8x784")
        kt.assert_clean_failure(self, proc, "nosuchinput")
        self.assertFalse(os.path.exists(out), "kilnc left an artifact behind")


if __name__ == "__main__":
    unittest.main()
