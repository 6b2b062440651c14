"""Shape arithmetic folded at import keeps static dims static.

Exporters compute pads and reshape targets with small integer subgraphs.
When the batch is symbolic, the entries that depend only on static dims must
still fold to constants, or every dim after them becomes a run-time one (and
every kernel after them a generic one sized at run time). torch's export of
F.pad, as Swin's window partition uses it, reorders the pads with a
reshape, a backward Slice over a matrix and a Transpose: those are folded
too. References: numpy.
"""

import unittest

import numpy as np
from onnx import TensorProto, helper as h, numpy_helper

import kiln_testing as kt


def const(name, values):
    return h.make_node("Constant", [], [name], name=name,
                       value=numpy_helper.from_array(np.array(values, np.int64)))


def padded_model():
    """y = pad(x, H and W up to a multiple of 7) * 2, x: [N, 10, 10, 4],
    the pads computed as torch's exporter writes F.pad (channels-last)."""
    nodes = [
        h.make_node("Shape", ["x"], ["shape"], name="shape"),
        const("one", 1), const("two", 2), const("seven", 7),
        h.make_node("Gather", ["shape", "one"], ["h"], name="gather_h"),
        h.make_node("Gather", ["shape", "two"], ["w"], name="gather_w"),
        # (7 - d % 7) % 7 for d = H, W
        h.make_node("Mod", ["h", "seven"], ["h7"], name="h7"),
        h.make_node("Sub", ["seven", "h7"], ["hs"], name="hs"),
        h.make_node("Mod", ["hs", "seven"], ["pad_b"], name="pad_b"),
        h.make_node("Mod", ["w", "seven"], ["w7"], name="w7"),
        h.make_node("Sub", ["seven", "w7"], ["ws"], name="ws"),
        h.make_node("Mod", ["ws", "seven"], ["pad_r"], name="pad_r"),
        const("zero1", [0]), const("axes0", [0]),
        h.make_node("Unsqueeze", ["pad_r", "axes0"], ["pad_r1"], name="u_r"),
        h.make_node("Unsqueeze", ["pad_b", "axes0"], ["pad_b1"], name="u_b"),
        # torch's pad list (last dim first): 0, 0, 0, pad_r, 0, pad_b
        h.make_node("Concat", ["zero1", "zero1", "zero1", "pad_r1", "zero1", "pad_b1"],
                    ["given"], name="given", axis=0),
        const("two_more", [2]),
        h.make_node("ConstantOfShape", ["two_more"], ["rest"], name="rest",
                    value=numpy_helper.from_array(np.array([0], np.int64))),
        h.make_node("Concat", ["given", "rest"], ["flat"], name="flat", axis=0),
        const("pairs_shape", [-1, 2]),
        h.make_node("Reshape", ["flat", "pairs_shape"], ["pairs"], name="pairs"),
        const("start", [-1]), const("end", [-(2 ** 63) + 1]), const("step", [-1]),
        h.make_node("Slice", ["pairs", "start", "end", "axes0", "step"], ["reversed"],
                    name="reverse"),
        h.make_node("Transpose", ["reversed"], ["begin_end"], name="begin_end",
                    perm=[1, 0]),
        const("flat_shape", [-1]),
        h.make_node("Reshape", ["begin_end", "flat_shape"], ["pads"], name="pads"),
        h.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
        h.make_node("Add", ["padded", "padded"], ["y"], name="double"),
    ]
    graph = h.make_graph(
        nodes, "pad", [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10, 10, 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 14, 14, 4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def strided_target_model():
    """y = reshape(x, target), x: [N, 6, 4]; target [N, 4, 6] read from a
    3x2 matrix of the shape's entries by a Slice over both axes (rows
    backwards, every other column) and a 3-D Transpose."""
    nodes = [
        h.make_node("Shape", ["x"], ["shape"], name="shape"),
        const("keep", [0, 1, 2]),
        h.make_node("Gather", ["shape", "keep"], ["n64"], name="gather"),
        const("fill", [4, 6, 6, 4, 4, 6]),
        h.make_node("Concat", ["fill", "n64"], ["nine"], name="nine", axis=0),
        const("grid", [3, 1, 3]),
        h.make_node("Reshape", ["nine", "grid"], ["cube"], name="cube"),
        h.make_node("Transpose", ["cube"], ["turned"], name="turned", perm=[2, 1, 0]),
        const("square", [3, 3]),
        h.make_node("Reshape", ["turned", "square"], ["m"], name="m"),
        # m = [[4, 4, n], [6, 4, 6], [6, 6, 4]]; rows 2 and 0, columns
        # backwards: [[4, 6, 6], [n, 4, 4]].
        const("starts", [2, 2]), const("ends", [-(2 ** 63) + 1, -(2 ** 63) + 1]),
        const("axes", [1, 0]), const("steps", [-1, -2]),
        h.make_node("Slice", ["m", "starts", "ends", "axes", "steps"], ["picked"],
                    name="picked"),
        const("flat_shape", [-1]),
        h.make_node("Reshape", ["picked", "flat_shape"], ["flat"], name="flat"),
        const("first3", [3, 0, 1]),
        h.make_node("Gather", ["flat", "first3"], ["target"], name="target"),
        h.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    graph = h.make_graph(
        nodes, "target", [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


class ShapeFolding(kt.KilnTestCase):
    def compile_model(self, model, name):
        """The artifact and kilnc's IR of `model`."""
        path = self.path(name + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        proc = kt.kilnc(path, "--emit=mlir")
        kt.assert_success(self, proc)
        artifact, compiled = self.compile(path, name + ".kiln")
        kt.assert_success(self, compiled)
        return artifact, proc.stdout

    def test_torch_style_pads_fold_with_a_symbolic_batch(self):
        artifact, mlir = self.compile_model(padded_model(), "torch_pad")
        # Every dim but the batch is static after the pad, and no kernel
        # computes integers (the pads are a constant).
        self.assertIn('-> (tensor<?x14x14x4xf32, #kiln.device<cpu>> {kiln.name = "y"})', mlir)
        self.assertNotRegex(mlir, r"kiln.kernel\([^)]*\) -> \(tensor<[0-9x]*xi64")
        for n in (1, 3):
            x = np.random.default_rng(n).standard_normal((n, 10, 10, 4)).astype(np.float32)
            (y,), _ = self.run_artifact(artifact, [x], out_name="pad_%d" % n)
            np.testing.assert_array_equal(y, 2 * np.pad(x, ((0, 0), (0, 4), (0, 4), (0, 0))))

    def test_slices_over_several_axes_and_transposes_fold(self):
        artifact, mlir = self.compile_model(strided_target_model(), "strided_target")
        self.assertIn("tensor<?x4x6xf32, #kiln.device<cpu>> {kiln.name = \"y\"}", mlir)
        for n in (1, 2):
            x = np.arange(n * 24, dtype=np.float32).reshape(n, 6, 4)
            (y,), _ = self.run_artifact(artifact, [x], out_name="target_%d" % n)
            np.testing.assert_array_equal(y, x.reshape(n, 4, 6))

    def test_slice_with_steps_but_no_axes(self):
        # Omitted axes with steps given: the steps are not read as axes
        # (the folder once reversed nothing and returned an empty tensor).
        nodes = [const("m", [[1, 2, 3], [4, 5, 6]]), const("s", [-1]),
                 const("e", [-(2 ** 63) + 1]), const("st", [-1]),
                 h.make_node("Slice", ["m", "s", "e", "", "st"], ["r"], name="reverse"),
                 const("f", [-1]), h.make_node("Reshape", ["r", "f"], ["y"], name="flat")]
        graph = h.make_graph(nodes, "omitted", [],
                             [h.make_tensor_value_info("y", TensorProto.INT64, [6])])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
        artifact, _ = self.compile_model(model, "omitted_axes")
        (y,), _ = self.run_artifact(artifact, [], out_name="omitted_axes")
        np.testing.assert_array_equal(y, [4, 5, 6, 1, 2, 3])


if __name__ == "__main__":
    unittest.main()
