"""Einsum against numpy.einsum: explicit and implicit outputs, ellipses,
diagonals, several operands, with static and symbolic input dims."""

import unittest

import numpy as np

import kiln_testing as kt


CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),                 # implicit output: ik
    ("...ij,...jk->...ik", [(2, 3, 2, 4), (3, 4, 5)]),
    ("ii->i", [(4, 4)]),                          # diagonal
    ("bii", [(2, 3, 3)]),                         # implicit, summed diagonal
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij->", [(3, 5)]),
    ("Ij,jk", [(2, 3), (3, 4)]),                  # implicit, uppercase: Ik
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
]


class EinsumAgainstNumpy(kt.KilnTestCase):
    def test_equations(self):
        from onnx import TensorProto, helper
        rng = np.random.default_rng(0)
        for n, (equation, shapes) in enumerate(CASES):
            for symbolic in (False, True):
                with self.subTest(equation, symbolic=symbolic):
                    names = ["x%d" % i for i in range(len(shapes))]
                    inputs = [
                        helper.make_tensor_value_info(
                            name, TensorProto.FLOAT,
                            ["%s_%d" % (name, d) for d in range(len(s))] if symbolic
                            else list(s))
                        for name, s in zip(names, shapes)]
                    node = helper.make_node("Einsum", names, ["y"], equation=equation)
                    graph = helper.make_graph(
                        [node], "einsum", inputs,
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
                    model = helper.make_model(
                        graph, opset_imports=[helper.make_opsetid("", 12)])
                    tag = "e%d%s" % (n, "s" if symbolic else "")
                    artifact, proc = self.compile(self.save_model(model, tag + ".onnx"),
                                                  tag + ".kiln")
                    kt.assert_success(self, proc)
                    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
                    (got,), _ = self.run_artifact(artifact, xs, out_name=tag)
                    want = np.einsum(equation, *[x.astype(np.float64) for x in xs])
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
