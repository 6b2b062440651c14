"""GEMMs whose N is one past a multiple of 16 (a 7x7 plane: 49 columns),
which the C++ kernels run as two oneDNN calls (all columns but the last,
then the last): MatMul (B as [K, N]), Gemm with transB (B as [N, K]),
batched MatMul, and a conv on a 7x7 plane, against numpy in float64. Other
column counts run as one call and check the same way."""

import unittest

import numpy as np

import kiln_testing as kt

TOLERANCE = 1e-5


class GemmColumnsTest(kt.KilnTestCase):

    def check(self, model, tag, feeds, expected):
        outputs = self.run_onnx(model, tag, feeds)
        self.assertEqual(outputs[0].shape, expected.shape)
        self.assertLess(kt.rel_l2(outputs[0], expected), TOLERANCE, tag)

    def test_matmul(self):
        from onnx import TensorProto, helper
        rng = np.random.default_rng(0)
        for n in (17, 48, 49, 50, 145):
            with self.subTest(n=n):
                a = rng.standard_normal((40, 96), dtype=np.float32)
                b = rng.standard_normal((96, n), dtype=np.float32)
                model = kt.onnx_model(
                    [helper.make_node("MatMul", ["a", "b"], ["y"])],
                    [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                     helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], 13)
                self.check(model, "matmul%d" % n, [a, b],
                           a.astype(np.float64) @ b.astype(np.float64))

    def test_gemm_transposed_b(self):
        from onnx import TensorProto, helper
        rng = np.random.default_rng(1)
        for n in (33, 49):
            with self.subTest(n=n):
                a = rng.standard_normal((24, 64), dtype=np.float32)
                b = rng.standard_normal((n, 64), dtype=np.float32)
                model = kt.onnx_model(
                    [helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
                    [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                     helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], 13)
                self.check(model, "gemmt%d" % n, [a, b],
                           a.astype(np.float64) @ b.astype(np.float64).T)

    def test_batched_matmul(self):
        from onnx import TensorProto, helper
        rng = np.random.default_rng(2)
        a = rng.standard_normal((3, 20, 32), dtype=np.float32)
        b = rng.standard_normal((3, 32, 49), dtype=np.float32)
        model = kt.onnx_model(
            [helper.make_node("MatMul", ["a", "b"], ["y"])],
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
             helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], 13)
        self.check(model, "bmm49", [a, b],
                   np.matmul(a.astype(np.float64), b.astype(np.float64)))

    def test_conv_on_7x7(self):
        """A 1x1 conv (a GEMM on the input as it is) and a 3x3 one (im2col)
        with 7x7 outputs, 2 images, with a bias, against numpy."""
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(3)
        x = rng.standard_normal((2, 32, 7, 7), dtype=np.float32)
        for k in (1, 3):
            with self.subTest(k=k):
                w = rng.standard_normal((48, 32, k, k), dtype=np.float32)
                bias = rng.standard_normal(48, dtype=np.float32)
                pad = k // 2
                model = kt.onnx_model(
                    [helper.make_node("Conv", ["x", "w", "bias"], ["y"],
                                      pads=[pad] * 4)],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], 13)
                model.graph.initializer.extend([numpy_helper.from_array(w, "w"),
                                                numpy_helper.from_array(bias, "bias")])
                xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
                ref = np.zeros((2, 48, 7, 7))
                for i in range(k):
                    for j in range(k):
                        ref += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + 7, j:j + 7],
                                         w[:, :, i, j].astype(np.float64))
                ref += bias.astype(np.float64)[None, :, None, None]
                self.check(model, "conv7x7k%d" % k, [x], ref)


if __name__ == "__main__":
    unittest.main()
