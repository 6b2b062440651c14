"""Kernels whose GEMM has the images in its rows (codegen/CppImages.cpp): a
MatMul on [n, 128, 256] activations by a weight, its bias and ReLU, the
second MatMul and a residual add (BERT's FFN) are one kernel that, once the
batch passes 8 MiB for its largest tensor (512 KiB an image), runs on groups
of 16 images, the last group what is left. Compiled once with symbolic
batches and run at several, the residual's batch 1 (broadcast) or the
same; also without oneDNN (the kernel's own loops).

Reference: numpy in float64.
"""

import unittest
from unittest import mock

import numpy as np

import kiln_testing as kt


class ImageGroups(kt.KilnTestCase):
    def test_ffn_in_groups(self):
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(51)
        w1 = (rng.standard_normal((256, 1024)) / 16).astype(np.float32)
        b1 = rng.standard_normal(1024).astype(np.float32)
        w2 = (rng.standard_normal((1024, 256)) / 32).astype(np.float32)
        b2 = rng.standard_normal(256).astype(np.float32)
        consts = [nh.from_array(v, k)
                  for k, v in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
        nodes = [
            h.make_node("MatMul", ["x", "w1"], ["u"]),
            h.make_node("Add", ["u", "b1"], ["ub"]),
            h.make_node("Relu", ["ub"], ["r"]),
            h.make_node("MatMul", ["r", "w2"], ["d"]),
            h.make_node("Add", ["d", "b2"], ["db"]),
            h.make_node("Add", ["db", "res"], ["y"]),
        ]
        graph = h.make_graph(
            nodes, "ffn",
            [h.make_tensor_value_info("x", T.FLOAT, ["n", 128, 256]),
             h.make_tensor_value_info("res", T.FLOAT, ["m", 128, 256])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], consts)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        path, cpp = self.emit_cpp(model, "ffn")
        self.assertEqual(cpp.count("// kiln kernel"), 1)
        self.assertIn("Runs kiln_k0_image on groups of images", cpp)
        self.assertIn("n += 16", cpp)
        artifact, proc = self.compile(path, "ffn.kiln")
        kt.assert_success(self, proc)

        def want(x, res):
            u = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
            return u @ w2 + b2 + res

        # 17 and 35 images run as 16 + 1 and 16 + 16 + 3; 8 as one pass.
        for n, m in ((8, 8), (17, 17), (35, 35), (35, 1), (1, 17)):
            with self.subTest(n=n, m=m):
                x = rng.standard_normal((n, 128, 256)).astype(np.float32)
                res = rng.standard_normal((m, 128, 256)).astype(np.float32)
                (got,), _ = self.run_artifact(
                    artifact, [x, res], out_name="ffn_%d_%d" % (n, m))
                ref = want(x, res)
                self.assertEqual(got.shape, ref.shape)
                np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        x = rng.standard_normal((17, 128, 256)).astype(np.float32)
        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
            (loops,), _ = self.run_artifact(artifact, [x, x],
                                            out_name="ffn_none")
        np.testing.assert_allclose(loops, want(x, x), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
