"""Reductions over the last axis fused with the elementwise ops around them
(softmax, layer normalisation), which the C++ kernel runs row by row with
vectorized sums and maxima, compiled once with a symbolic batch and run at
several sizes.

References: torch (softmax, layer_norm) and numpy.
"""

import unittest

import numpy as np

import kiln_testing as kt


def tensor(name, elem, dims):
    from onnx import helper as h
    return h.make_tensor_value_info(name, elem, dims)


class RowKernels(kt.KilnTestCase):
    def compiled(self, model, tag):
        path, cpp = self.emit_cpp(model, tag)
        artifact, proc = self.compile(path, tag + ".kiln")
        kt.assert_success(self, proc)
        return artifact, cpp.split("// kiln kernel", 1)[1]

    def run_at(self, artifact, tag, inputs):
        outputs, _ = self.run_artifact(artifact, inputs, out_name=tag)
        return outputs

    def test_softmax_and_layer_norm_run_row_by_row(self):
        """Softmax over the last axis of [n, 4, 37, 37] and a layer
        normalisation of [n, 37, 64] spelled as the PyTorch exporter spells
        them (ReduceMax, Sub, Exp, ReduceSum, Div; ReduceMean, Sub, Pow,
        ReduceMean, Add, Sqrt, Div, Mul, Add): each is one kernel with one
        loop over rows, its sums and maxima vectorized (rows of 37 leave a
        remainder); a NaN in a row makes that row NaN, as in torch."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(3)
        gamma = rng.standard_normal(64).astype(np.float32)
        beta = rng.standard_normal(64).astype(np.float32)
        consts = [nh.from_array(gamma, "gamma"), nh.from_array(beta, "beta"),
                  nh.from_array(np.array(2.0, np.float32), "two"),
                  nh.from_array(np.array(1e-5, np.float32), "eps"),
                  nh.from_array(np.array([-1], np.int64), "last")]
        nodes = [
            h.make_node("ReduceMax", ["x"], ["m"], axes=[-1], keepdims=1),
            h.make_node("Sub", ["x", "m"], ["s"]),
            h.make_node("Exp", ["s"], ["e"]),
            h.make_node("ReduceSum", ["e", "last"], ["z"], keepdims=1),
            h.make_node("Div", ["e", "z"], ["p"]),
            h.make_node("ReduceMean", ["u"], ["mu"], axes=[-1], keepdims=1),
            h.make_node("Sub", ["u", "mu"], ["c"]),
            h.make_node("Pow", ["c", "two"], ["c2"]),
            h.make_node("ReduceMean", ["c2"], ["var"], axes=[-1], keepdims=1),
            h.make_node("Add", ["var", "eps"], ["ve"]),
            h.make_node("Sqrt", ["ve"], ["sd"]),
            h.make_node("Div", ["c", "sd"], ["nrm"]),
            h.make_node("Mul", ["nrm", "gamma"], ["g"]),
            h.make_node("Add", ["g", "beta"], ["ln"]),
        ]
        graph = h.make_graph(
            nodes, "rows", [tensor("x", T.FLOAT, ["n", 4, 37, 37]),
                            tensor("u", T.FLOAT, ["n", 37, 64])],
            [tensor("p", T.FLOAT, None), tensor("ln", T.FLOAT, None)], consts)
        # ReduceMax and ReduceMean take their axes as an attribute up to
        # opset 17 (ReduceSum as an input from opset 13 on).
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        artifact, kernels = self.compiled(model, "rows")
        self.assertEqual(kernels.count("// rows:"), 2, kernels)
        self.assertIn("omp simd reduction(kiln_max", kernels)
        self.assertIn("omp simd reduction(+", kernels)
        for n in (1, 3):
            x = (rng.standard_normal((n, 4, 37, 37)) * 4).astype(np.float32)
            u = rng.standard_normal((n, 37, 64)).astype(np.float32)
            x[-1, 2, 5, 11] = np.nan
            p, ln = self.run_at(artifact, "rows_%d" % n, [x, u])
            want_p = torch.softmax(torch.from_numpy(x), -1).numpy()
            want_ln = torch.nn.functional.layer_norm(
                torch.from_numpy(u), (64,), torch.from_numpy(gamma),
                torch.from_numpy(beta), 1e-5).numpy()
            self.assertTrue(np.isnan(p[-1, 2, 5]).all())
            np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(ln, want_ln, rtol=1e-4, atol=1e-5)

    def test_rows_read_at_another_row_fall_back(self):
        """x - max(y) with x [n, 16] and y [m, 16], both symbolic: when m is 1
        and n is not, every row of x reads the one row of max(y), so the
        kernel's rows guard fails and its loops run op by op; when m equals
        n, row by row."""
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(4)
        last = nh.from_array(np.array([-1], np.int64), "last")
        nodes = [h.make_node("ReduceMax", ["y", "last"], ["m"], keepdims=1),
                 h.make_node("Sub", ["x", "m"], ["s"]),
                 h.make_node("ReduceSum", ["s", "last"], ["z"], keepdims=1),
                 h.make_node("Mul", ["s", "z"], ["out"])]
        graph = h.make_graph(
            nodes, "broadcast_rows", [tensor("x", T.FLOAT, ["n", 16]),
                                      tensor("y", T.FLOAT, ["m", 16])],
            [tensor("out", T.FLOAT, None)], [last])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
        artifact, kernels = self.compiled(model, "broadcast_rows")
        self.assertIn("// rows:", kernels)
        for n, m in ((5, 1), (5, 5), (1, 1)):
            x = rng.standard_normal((n, 16)).astype(np.float32)
            y = rng.standard_normal((m, 16)).astype(np.float32)
            (got,) = self.run_at(artifact, "broadcast_rows_%d_%d" % (n, m), [x, y])
            s = x - y.max(-1, keepdims=True)
            np.testing.assert_allclose(got, s * s.sum(-1, keepdims=True),
                                       rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
