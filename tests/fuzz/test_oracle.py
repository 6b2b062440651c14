"""The oracle's comparison rules, on hand-made graphs and answers: what it
forgives (a comparison on the float edge, seen directly or through the ops
below it) and what it must still call wrong (the same answers where the
comparison is not on an edge)."""

import os
import sys
import unittest

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402


def _model(nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])


def _problems(model, feeds, got):
    expected, values, _ = oracle.reference(model, feeds)
    return oracle.compare(model, got, expected, values)


# Or(Greater(x, 0), Greater(Transpose(x), 0) transposed back), then Not:
# an edge reaches the output only through boolean ops and data movement.
BOOLEAN = _model(
    [helper.make_node("Greater", ["x", "zero"], ["g"]),
     helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
     helper.make_node("Greater", ["xt", "zero"], ["gt"]),
     helper.make_node("Transpose", ["gt"], ["gtt"], perm=[1, 0]),
     helper.make_node("Or", ["g", "gtt"], ["o"]),
     helper.make_node("Not", ["o"], ["y"])],
    [("x", TensorProto.FLOAT, [2, 3]), ("zero", TensorProto.FLOAT, [])],
    [("y", TensorProto.BOOL)])

# Where(Greater(x, t), a, b): a float output chosen by a comparison.
SELECT = _model(
    [helper.make_node("Greater", ["x", "t"], ["g"]),
     helper.make_node("Where", ["g", "a", "b"], ["y"])],
    [("x", TensorProto.FLOAT, [4]), ("t", TensorProto.FLOAT, []),
     ("a", TensorProto.FLOAT, [4]), ("b", TensorProto.FLOAT, [4])],
    [("y", TensorProto.FLOAT)])


class EdgesThroughOps(unittest.TestCase):
    def boolean_feeds(self, first):
        x = np.array([[first, 1.0, -1.0], [2.0, -2.0, 3.0]], np.float32)
        return {"x": x, "zero": np.zeros((), np.float32)}

    def test_flipped_edge_through_or_not_transpose_passes(self):
        feeds = self.boolean_feeds(1e-9)  # within float tolerance of 0
        expected, _, _ = oracle.reference(BOOLEAN, feeds)
        got = expected[0].copy()
        got[0, 0] = not got[0, 0]
        self.assertEqual(_problems(BOOLEAN, feeds, [got]), [])

    def test_flipped_answer_off_the_edge_is_wrong(self):
        feeds = self.boolean_feeds(1e-9)
        expected, _, _ = oracle.reference(BOOLEAN, feeds)
        got = expected[0].copy()
        got[1, 2] = not got[1, 2]  # x = 3: far from the edge
        self.assertEqual(len(_problems(BOOLEAN, feeds, [got])), 1)

    def test_no_edge_anywhere_is_wrong(self):
        feeds = self.boolean_feeds(0.5)
        expected, _, _ = oracle.reference(BOOLEAN, feeds)
        got = expected[0].copy()
        got[0, 0] = not got[0, 0]
        self.assertEqual(len(_problems(BOOLEAN, feeds, [got])), 1)

    def select_feeds(self, x0):
        return {"x": np.array([x0, 5.0, -5.0, 7.0], np.float32),
                "t": np.array(1.0, np.float32),
                "a": np.full(4, 10.0, np.float32), "b": np.full(4, -10.0, np.float32)}

    def test_where_of_edge_comparison_passes(self):
        feeds = self.select_feeds(1.0 + 2e-8)
        expected, _, _ = oracle.reference(SELECT, feeds)
        got = expected[0].copy()
        got[0] = -got[0]
        self.assertEqual(_problems(SELECT, feeds, [got]), [])

    def test_where_off_the_edge_is_wrong(self):
        feeds = self.select_feeds(1.0 + 2e-8)
        expected, _, _ = oracle.reference(SELECT, feeds)
        got = expected[0].copy()
        got[1] = -got[1]
        self.assertEqual(len(_problems(SELECT, feeds, [got])), 1)


# AveragePool whose window (3 x 5 with the dilation) outgrows a 1 x 1 input
# padded by 1 row: the spec's output size is negative in W, which onnx's
# ReferenceEvaluator rejects; onnxruntime truncates to shape (1, 1, 1, 0).
POOL = _model(
    [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                      dilations=[1, 2], pads=[0, 0, 1, 0], strides=[3, 3])],
    [("x", TensorProto.FLOAT, ["n", "c", "h", "w"])], [("y", TensorProto.FLOAT)], 19)


class SizesTheSpecRejects(unittest.TestCase):
    def opinion(self, feeds, others):
        import types
        expected, values, engine = oracle.reference(POOL, feeds)
        got = [np.zeros((1, 1, 0, 0), np.float32)]
        problems = oracle.compare(POOL, got, expected, values)
        self.assertEqual(len(problems), 1)
        run = types.SimpleNamespace(engine=engine, feeds=feeds, expected=expected,
                                    values=values)
        return oracle._second_opinion(POOL, run, got, problems, None, others)

    def test_rejected_here_but_run_elsewhere_is_disputed(self):
        small = {"x": np.ones((1, 1, 1, 1), np.float32)}
        fits = {"x": np.ones((1, 1, 6, 12), np.float32)}
        wrong, disputed = self.opinion(small, [fits])
        self.assertEqual(wrong, [])
        self.assertIn("rejects these sizes", disputed[0])

    def test_rejected_everywhere_stays_wrong(self):
        small = {"x": np.ones((1, 1, 1, 1), np.float32)}
        wrong, disputed = self.opinion(small, [small])
        self.assertEqual(len(wrong), 1)
        self.assertEqual(disputed, [])

if __name__ == "__main__":
    unittest.main()
