"""RNN, GRU and LSTM against independent references.

torch.nn.RNN/GRU/LSTM (two layers, bidirectional, batch_first, with initial
states), exported to ONNX, against PyTorch eager; GRU and LSTM also with a
symbolic batch (compiled once, run at two batches; their initial states
made from the run-time shape), and a symbolic sequence's error. ONNX LSTM and GRU with
sequence_lens (shorter sequences keep their state and output zeros past
their end, in both directions), peepholes, clip and linear_before_reset,
against onnxruntime (the ONNX reference ignores sequence_lens).
"""

import contextlib
import io
import unittest
import warnings

import numpy as np

import kiln_testing as kt


class RecurrentAgainstEager(kt.KilnTestCase):
    @classmethod
    def setUpClass(cls):
        torch = kt.import_or_skip("torch")
        super().setUpClass()
        cls.torch = torch

    def test_torch_modules(self):
        torch = self.torch
        for kind in ("RNN", "GRU", "LSTM"):
            with self.subTest(kind):
                torch.manual_seed(0)
                cell = getattr(torch.nn, kind)(
                    input_size=5, hidden_size=6, num_layers=2,
                    bidirectional=True, batch_first=True)

                class Model(torch.nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.cell = cell

                    def forward(self, x, h):
                        state = (h, torch.tanh(h)) if kind == "LSTM" else h
                        y, _ = self.cell(x, state)
                        return y

                model = Model().eval()
                gen = torch.Generator().manual_seed(1)
                x = torch.randn(3, 7, 5, generator=gen)
                h = torch.randn(4, 3, 6, generator=gen)
                path = self.path(kind + ".onnx")
                with warnings.catch_warnings(), \
                        contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")
                    torch.onnx.export(model, (x, h), path, input_names=["x", "h"],
                                      output_names=["y"], opset_version=14,
                                      dynamo=False)
                with torch.no_grad():
                    want = model(x, h).numpy()
                artifact, proc = self.compile(path, kind + ".kiln")
                kt.assert_success(self, proc)
                (got,), _ = self.run_artifact(artifact, [x.numpy(), h.numpy()],
                                              out_name=kind)
                self.assertEqual(got.shape, want.shape)
                err = kt.rel_l2(got, want)
                self.assertLessEqual(err, 1e-5, "%s: relative L2 %.3g" % (kind, err))

    def export_symbolic(self, kind, axes):
        """A two-layer bidirectional torch `kind` (batch first, no initial
        state: the exporter builds zeros from the input's run-time shape)
        exported with `axes` of x symbolic; returns the module and path."""
        torch = self.torch
        torch.manual_seed(2)
        cell = getattr(torch.nn, kind)(input_size=5, hidden_size=6,
                                       num_layers=2, bidirectional=True,
                                       batch_first=True)

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = cell

            def forward(self, x):
                return self.cell(x)[0]

        model = Model().eval()
        path = self.path(kind + "_sym.onnx")
        with warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.randn(2, 7, 5),), path,
                              input_names=["x"], output_names=["y"],
                              opset_version=14, dynamo=False,
                              dynamic_axes={"x": axes})
        return model, path

    def test_symbolic_batch(self):
        """Compiled once with the batch symbolic (the sequence unrolled),
        run at batches 1 and 3 against eager."""
        torch = self.torch
        for kind in ("GRU", "LSTM"):
            with self.subTest(kind):
                model, path = self.export_symbolic(kind, {0: "n"})
                artifact, proc = self.compile(path, kind + "_sym.kiln")
                kt.assert_success(self, proc)
                for n in (1, 3):
                    x = torch.randn(n, 7, 5,
                                    generator=torch.Generator().manual_seed(n))
                    with torch.no_grad():
                        want = model(x).numpy()
                    (got,), _ = self.run_artifact(
                        artifact, [x.numpy()], out_name="%s_sym%d" % (kind, n))
                    self.assertEqual(got.shape, want.shape)
                    err = kt.rel_l2(got, want)
                    self.assertLessEqual(err, 1e-5, "%s batch %d: relative L2 "
                                         "%.3g" % (kind, n, err))

    def test_symbolic_sequence_is_named(self):
        """A symbolic sequence length (not unrolled yet) fails with the
        node, the input and its dim."""
        model, path = self.export_symbolic("GRU", {0: "n", 1: "t"})
        _, proc = self.compile(path, "GRU_seq.kiln")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("'GRU' input X has a symbolic dim 0", proc.stderr)
        self.assertIn("--input-shape", proc.stderr)


class RecurrentAgainstOnnxruntime(kt.KilnTestCase):
    def check(self, kind, attrs, peepholes=False):
        import onnxruntime as ort
        from onnx import TensorProto, helper
        rng = np.random.default_rng(0)
        seq, batch, size, hidden = 5, 3, 4, 3
        gates = {"GRU": 3, "LSTM": 4}[kind]
        dirs = 2 if attrs.get("direction") == "bidirectional" else 1
        x = rng.standard_normal((seq, batch, size)).astype(np.float32)
        w = rng.standard_normal((dirs, gates * hidden, size)).astype(np.float32)
        r = rng.standard_normal((dirs, gates * hidden, hidden)).astype(np.float32)
        b = rng.standard_normal((dirs, 2 * gates * hidden)).astype(np.float32)
        lens = np.array([5, 2, 4], dtype=np.int32)
        h0 = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
        feeds = {"x": x, "w": w, "r": r, "b": b, "lens": lens, "h0": h0}
        inputs = ["x", "w", "r", "b", "lens", "h0"]
        outputs = ["y", "yh"]
        if kind == "LSTM":
            feeds["c0"] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
            inputs.append("c0")
            outputs.append("yc")
            if peepholes:
                feeds["p"] = rng.standard_normal((dirs, 3 * hidden)).astype(np.float32)
                inputs.append("p")
        node = helper.make_node(kind, inputs, outputs, hidden_size=hidden, **attrs)
        types = {"lens": TensorProto.INT32}
        graph = helper.make_graph(
            [node], kind.lower(),
            [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT),
                                           list(feeds[n].shape)) for n in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
             for n in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                                  ir_version=8)
        tag = "%s_%s%s" % (kind, attrs.get("direction", "forward"),
                           "_p" if peepholes else "")
        path = self.save_model(model, tag + ".onnx")
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, feeds)
        artifact, proc = self.compile(path, tag + ".kiln")
        kt.assert_success(self, proc)
        got, _ = self.run_artifact(artifact, [feeds[n] for n in inputs], out_name=tag)
        for g, w_ in zip(got, want):
            self.assertEqual(g.shape, w_.shape)
            np.testing.assert_allclose(g, w_, rtol=1e-4, atol=1e-5)

    def test_sequence_lens(self):
        for kind in ("GRU", "LSTM"):
            for direction in ("forward", "reverse", "bidirectional"):
                with self.subTest(kind, direction=direction):
                    self.check(kind, {"direction": direction})

    def test_options(self):
        with self.subTest("lstm peepholes and clip"):
            self.check("LSTM", {"direction": "bidirectional", "clip": 1.5},
                       peepholes=True)
        with self.subTest("gru linear_before_reset"):
            self.check("GRU", {"linear_before_reset": 1})


if __name__ == "__main__":
    unittest.main()
