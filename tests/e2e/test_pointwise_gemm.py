"""GEMMs of K at most 16 with one A for the whole batch and 2^20
multiply-adds or more run through the prelude's AVX-512 blocks
(kiln_pointwise_tiles) where the CPU has AVX-512, else through oneDNN: 1x1
convs of 3 to 16 input channels (the weight is A, 40 to 100 output
channels: remainders of the 6-row blocks), planes whose width is no multiple
of 16 (each tile's last vector masked), with and without a bias, a ReLU6
(Clip), a ReLU or nothing after, at batches 1 and 3 through one artifact;
and a Gemm with a bias, which the GEMM accumulates onto (A the activation,
N of 333). Convs of K 32 or of 24 output channels stay with oneDNN and
check the same way.

Reference: torch.nn.functional.conv2d and numpy, in float64.
"""

import unittest

import numpy as np

import kiln_testing as kt


class PointwiseGemm(kt.KilnTestCase):
    CASES = [
        # name, input channels, output channels, (h, w), bias, activation
        ("k16_m96_clip", 16, 96, (28, 28), True, "Clip"),
        ("k3_m100_relu", 3, 100, (61, 59), True, "Relu"),
        ("k16_m40_plain", 16, 40, (41, 43), False, None),
        ("k32_onednn", 32, 64, (28, 28), True, "Clip"),
        ("k16_m24_onednn", 16, 24, (64, 50), True, None),
    ]

    def test_1x1_convs(self):
        torch = kt.import_or_skip("torch")
        for name, c, m, (hh, ww), bias, act in self.CASES:
            with self.subTest(case=name):
                rng = np.random.default_rng(len(name) + c)
                model, w, b = kt.conv_model(name, c, m, (hh, ww), 1, (1, 1),
                                            (0, 0, 0, 0), rng, bias=bias,
                                            act=act)
                path, cpp = self.emit_cpp(model, name)
                kernels = cpp[cpp.index("//===--- kiln_k0"):]
                self.assertIn("kiln_sgemm", kernels, kernels[:3000])
                artifact, proc = self.compile(path, name + ".kiln")
                kt.assert_success(self, proc)
                self.check_conv(torch, artifact, name, rng, (c, hh, ww), w,
                                b if bias else None, (1, 1), (0, 0, 0, 0),
                                act=act)

    def test_gemm_with_bias(self):
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(11)
        m, k, n = 256, 13, 333
        w = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal(n).astype(np.float32)
        graph = h.make_graph(
            [h.make_node("Gemm", ["a", "w", "c"], ["y"])], "gemm",
            [h.make_tensor_value_info("a", T.FLOAT, [m, k])],
            [h.make_tensor_value_info("y", T.FLOAT, None)],
            [nh.from_array(w, "w"), nh.from_array(c, "c")])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        path, cpp = self.emit_cpp(model, "gemm")
        kernels = cpp[cpp.index("//===--- kiln_k0"):]
        # The bias is the GEMM's starting value: it accumulates onto it.
        self.assertRegex(kernels, r"kiln_sgemm\(.*, true\)", kernels[:3000])
        artifact, proc = self.compile(path, "gemm.kiln")
        kt.assert_success(self, proc)
        a = rng.standard_normal((m, k)).astype(np.float32)
        want = a.astype(np.float64) @ w + c
        (got,), _ = self.run_artifact(artifact, [a], out_name="gemm")
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
