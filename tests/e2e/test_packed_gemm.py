"""Linear layers with a constant weight and a symbolic batch (the MLP's):
the weight is packed at compile time into panels of 16 columns
(kiln-pack-weights, for K and N of 64 or more), which the C++ kernel
streams for up to 16 rows (kiln_sgemm_packed; one row, batch 1, as a
matrix-vector product with four sums over K) and hands to oneDNN above
that. K of 101 (no multiple of 4:
the sums' remainder) and N of 72 (a last panel 8 wide), the weight as
MatMul's [K, N] and as Gemm's transposed [N, K], with the bias and ReLU,
at batches 1, 3, 8 and 17.

Reference: numpy in float64.
"""

import unittest

import numpy as np

import kiln_testing as kt


class PackedGemm(kt.KilnTestCase):
    def test_linear_layers(self):
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(7)
        k, n = 101, 72
        w1 = rng.standard_normal((k, n)).astype(np.float32)
        w2 = rng.standard_normal((n, n)).astype(np.float32)  # [N, K]
        b1 = rng.standard_normal(n).astype(np.float32)
        b2 = rng.standard_normal(n).astype(np.float32)
        consts = [nh.from_array(v, name)
                  for name, v in (("w1", w1), ("w2", w2), ("b1", b1), ("b2", b2))]
        nodes = [
            h.make_node("MatMul", ["x", "w1"], ["u"]),
            h.make_node("Add", ["u", "b1"], ["ub"]),
            h.make_node("Relu", ["ub"], ["r"]),
            h.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1),
        ]
        graph = h.make_graph(
            nodes, "linear",
            [h.make_tensor_value_info("x", T.FLOAT, ["n", k])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], consts)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        path, cpp = self.emit_cpp(model, "linear")
        kernels = cpp.split("// kiln kernel", 1)[1]
        self.assertEqual(kernels.count("kiln_sgemm_packed("), 2, kernels[:3000])
        artifact, proc = self.compile(path, "linear.kiln")
        kt.assert_success(self, proc)
        for batch in (1, 3, 8, 17):
            with self.subTest(batch=batch):
                x = rng.standard_normal((batch, k)).astype(np.float32)
                r = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
                want = r @ w2.T.astype(np.float64) + b2
                (got,), _ = self.run_artifact(
                    artifact, [x], out_name="linear_%d" % batch)
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
