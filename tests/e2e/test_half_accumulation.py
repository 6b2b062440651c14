"""float16 and bfloat16 sums accumulate in float32 (issue 42, item 3).

torch and onnxruntime accumulate half-precision reductions, softmax, norms,
matmuls and convs in float32 and round the result once. Accumulated in
float16, ReduceSum over 65,536 values returned -8176 where they return
-47808: past 2,048 a float16 accumulator stops taking in small terms.
Each op here sums thousands of terms, so an accumulator of the narrow type
lands far from the answer, while one of float32 lands within an ulp or two
of the float64 result rounded to the narrow type.

References: numpy in float64 (torch's conv2d in float64) on the same
half-precision inputs; float16 ones also checked to agree with onnxruntime
where it has the kernel.
"""

import unittest

import numpy as np

import kiln_testing as kt

try:
    import ml_dtypes
except ImportError as e:  # pragma: no cover - the venv pins it
    ml_dtypes = None
    IMPORT_ERROR = "ml_dtypes is not installed (%s)" % e


def _vi(name, elem, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, shape)


class HalfAccumulation(kt.KilnTestCase):
    def model(self, elem):
        from onnx import TensorProto as T, helper as h
        nodes = [
            h.make_node("ReduceSum", ["s"], ["sum"], keepdims=0),
            h.make_node("ReduceMean", ["m"], ["mean"], axes=[1], keepdims=0),
            # A sum inside a chain: each row over its sum, and the row of
            # the largest sum (ArgMax of a sum rounded to 11 bits is noise).
            h.make_node("Constant", [], ["axis1"],
                        value=h.make_tensor("axis1", T.INT64, [1], [1])),
            h.make_node("ReduceSum", ["r", "axis1"], ["rsum"], keepdims=1),
            h.make_node("Div", ["r", "rsum"], ["share"]),
            h.make_node("ArgMax", ["rsum"], ["best"], axis=0, keepdims=0),
            h.make_node("MatMul", ["a", "b"], ["mm"]),
            h.make_node("Conv", ["cx", "cw"], ["conv"]),
            h.make_node("GlobalAveragePool", ["p"], ["pool"]),
            h.make_node("Softmax", ["sm"], ["softmax"], axis=-1),
            h.make_node("LayerNormalization", ["ln", "lns"], ["norm"], axis=-1),
        ]
        shapes = dict(s=[65536], m=[3, 20000], r=[8, 8192], a=[4, 8192],
                      b=[8192, 3], cx=[1, 256, 6, 6], cw=[4, 256, 3, 3],
                      p=[1, 2, 64, 64], sm=[2, 8192], ln=[2, 4096], lns=[4096])
        outputs = [("sum", elem), ("mean", elem), ("share", elem),
                   ("best", T.INT64), ("mm", elem), ("conv", elem),
                   ("pool", elem), ("softmax", elem), ("norm", elem)]
        return kt.onnx_model(
            nodes, [_vi(n, elem, s) for n, s in shapes.items()],
            [_vi(n, e, None) for n, e in outputs], 17, ir_version=8), shapes

    def feeds(self, dtype, shapes):
        rng = np.random.default_rng(42)
        f = {}
        f["s"] = rng.standard_normal(shapes["s"]) - 0.7
        f["m"] = rng.standard_normal(shapes["m"]) + 3
        # Row sums about 4,096 apart by 40 per row, order shuffled.
        offsets = rng.permutation(8)[:, None] * 0.005
        f["r"] = rng.uniform(0, 1, shapes["r"]) + offsets
        f["a"] = rng.standard_normal(shapes["a"]) + 0.5
        f["b"] = rng.standard_normal(shapes["b"]) + 0.5
        f["cx"] = rng.standard_normal(shapes["cx"]) + 0.5
        f["cw"] = rng.standard_normal(shapes["cw"]) + 0.5
        f["p"] = rng.standard_normal(shapes["p"]) + 3
        f["sm"] = rng.standard_normal(shapes["sm"])
        # x^2 of the centred values sums past float16's 65,504.
        f["ln"] = rng.standard_normal(shapes["ln"]) * 4 + 20
        f["lns"] = rng.standard_normal(shapes["lns"])
        return [f[n].astype(dtype) for n in shapes]

    def references(self, torch, x):
        s, m, r, a, b, cx, cw, p, sm, ln, lns = [v.astype(np.float64) for v in x]
        rsum = r.sum(axis=1, keepdims=True)
        conv = torch.nn.functional.conv2d(torch.from_numpy(cx),
                                          torch.from_numpy(cw)).numpy()
        e = np.exp(sm - sm.max(axis=-1, keepdims=True))
        mu = ln.mean(axis=-1, keepdims=True)
        var = ((ln - mu) ** 2).mean(axis=-1, keepdims=True)
        norm = (ln - mu) / np.sqrt(var + 1e-5) * lns
        return [s.sum(), m.mean(axis=1), r / rsum, np.argmax(rsum, axis=0),
                a @ b, conv, p.mean(axis=(2, 3), keepdims=True),
                e / e.sum(axis=-1, keepdims=True), norm]

    def check(self, dtype, elem, ulps):
        torch = kt.import_or_skip("torch")
        model, shapes = self.model(elem)
        name = np.dtype(dtype).name
        artifact, proc = self.compile(self.save_model(model, name + ".onnx"),
                                      name + ".kiln")
        kt.assert_success(self, proc)
        x = self.feeds(dtype, shapes)
        got, _ = self.run_artifact(artifact, x, out_name=name)
        want = self.references(torch, x)
        info = (ml_dtypes.finfo if ml_dtypes else np.finfo)(dtype)
        eps, tiny = float(info.eps), float(info.smallest_subnormal)
        names = ["sum", "mean", "share", "best", "mm", "conv", "pool",
                 "softmax", "norm"]
        for n, g, w in zip(names, got, want):
            with self.subTest(dtype=name, output=n):
                w = np.asarray(w)
                self.assertEqual(g.shape, w.shape)
                if n == "best":
                    np.testing.assert_array_equal(g, w)
                    continue
                self.assertEqual(g.dtype, np.dtype(dtype))
                g = g.astype(np.float64)
                # Within `ulps` of the float64 result (rounding it once to
                # the narrow type is half an ulp); subnormals are spaced by
                # the smallest one.
                tol = ulps * np.maximum(eps * np.abs(w), tiny)
                bad = np.abs(g - w) > tol
                self.assertFalse(bad.any(), "%d of %d off, first: got %r want %r"
                                 % (bad.sum(), bad.size, g[bad][:3], w[bad][:3]))

    def test_float16(self):
        from onnx import TensorProto as T
        self.check(np.float16, T.FLOAT16, ulps=2)

    def test_float16_against_onnxruntime(self):
        # The case as onnxruntime computes it.
        from onnx import TensorProto as T, helper as h
        model = kt.onnx_model([h.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
                              [_vi("x", T.FLOAT16, [65536])],
                              [_vi("y", T.FLOAT16, None)], 13, ir_version=8)
        x = (np.random.default_rng(1).standard_normal(65536) - 0.7).astype(
            np.float16)
        (want,) = kt.onnxruntime_outputs(model, [x])
        (got,) = self.run_onnx(model, "sum16", [x])
        self.assertEqual(got.dtype, np.float16)
        self.assertEqual(float(got), float(want))

    def test_float16_on_emulated_cuda(self):
        # The same f32 accumulators in the generated CUDA kernels, run on
        # the host through the fake driver (tests/emu).
        if not kt.nvrtc_available():
            self.skipTest("no CUDA toolkit (NVRTC) at %s" % kt.cuda_home())
        from onnx import TensorProto as T, helper as h
        model = kt.onnx_model(
            [h.make_node("ReduceSum", ["s"], ["sum"], keepdims=0),
             h.make_node("MatMul", ["a", "b"], ["mm"]),
             h.make_node("Softmax", ["sm"], ["softmax"], axis=-1)],
            [_vi("s", T.FLOAT16, [16384]), _vi("a", T.FLOAT16, [2, 4096]),
             _vi("b", T.FLOAT16, [4096, 2]), _vi("sm", T.FLOAT16, [2, 4096])],
            [_vi(n, T.FLOAT16, None) for n in ("sum", "mm", "softmax")], 17,
            ir_version=8)
        rng = np.random.default_rng(3)
        x = [(rng.standard_normal(16384) + 0.7).astype(np.float16),
             (rng.standard_normal((2, 4096)) + 0.5).astype(np.float16),
             (rng.standard_normal((4096, 2)) + 0.5).astype(np.float16),
             rng.standard_normal((2, 4096)).astype(np.float16)]
        artifact, env = self.cuda_emulated(self.save_model(model, "cuda16.onnx"),
                                           "cuda16")
        got, _ = self.run_artifact(artifact, x, out_name="cuda16", env=env)
        s, a, b, sm = [v.astype(np.float64) for v in x]
        e = np.exp(sm - sm.max(axis=-1, keepdims=True))
        want = [s.sum(), a @ b, e / e.sum(axis=-1, keepdims=True)]
        eps, tiny = float(np.finfo(np.float16).eps), 6e-8
        for n, g, w in zip(("sum", "mm", "softmax"), got, want):
            with self.subTest(output=n):
                self.assertEqual(g.dtype, np.float16)
                bad = np.abs(g.astype(np.float64) - w) > 2 * np.maximum(
                    eps * np.abs(w), tiny)
                self.assertFalse(bad.any(), "%d off: got %r want %r" % (
                    bad.sum(), g[bad][:3], w[bad][:3]))

    @unittest.skipIf(ml_dtypes is None, "ml_dtypes is not installed")
    def test_bfloat16(self):
        from onnx import TensorProto as T
        self.check(ml_dtypes.bfloat16, T.BFLOAT16, ulps=2)


if __name__ == "__main__":
    unittest.main()
