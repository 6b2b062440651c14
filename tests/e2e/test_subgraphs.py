"""Subgraphs (If, Scan) and the selection ops built on run-time lengths.

Against independent references: onnxruntime for If with a run-time
condition whose branches read outer values, and for Scan with reversed
directions, a state and two scan outputs; onnxruntime for
NonMaxSuppression over 40 random boxes per batch entry and class (ties and
infinite scores included); torch
for MaxPool's indices (max_pool2d with return_indices); numpy for Unique
along an axis. Errors: If whose branches disagree in shape with a run-time
condition.
"""

import unittest

import numpy as np

import kiln_testing as kt


class Subgraphs(kt.KilnTestCase):
    def test_if_runtime_condition_reads_outer_values(self):
        from onnx import TensorProto as T, helper as h
        then = h.make_graph(
            [h.make_node("Mul", ["x", "two"], ["t"])], "then", [],
            [h.make_tensor_value_info("t", T.FLOAT, [2, 3])],
            [h.make_tensor("two", T.FLOAT, [], [2.0])])
        other = h.make_graph(
            [h.make_node("Sub", ["x", "y"], ["e"])], "else", [],
            [h.make_tensor_value_info("e", T.FLOAT, [2, 3])])
        m = kt.ort_model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                   h.make_node("Greater", ["s", "zero"], ["c"]),
                   h.make_node("If", ["c"], ["out"], then_branch=then,
                               else_branch=other)],
                  [h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                   h.make_tensor_value_info("y", T.FLOAT, [2, 3]),
                   h.make_tensor_value_info("zero", T.FLOAT, [])],
                  [h.make_tensor_value_info("out", T.FLOAT, [2, 3])], 13)
        rng = np.random.default_rng(3)
        y = rng.standard_normal((2, 3)).astype(np.float32)
        zero = np.array(0, np.float32)
        for sign in (1, -1):
            with self.subTest(sign=sign):
                x = (sign * np.abs(rng.standard_normal((2, 3)))).astype(np.float32)
                (got,) = self.run_onnx(m, "if", [x, y, zero])
                (want,) = kt.onnxruntime_outputs(m, [x, y, zero])
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    def test_if_branch_shapes_differ(self):
        from onnx import TensorProto as T, helper as h
        then = h.make_graph([h.make_node("Constant", [], ["a"], value_ints=[1, 2])],
                            "then", [], [h.make_tensor_value_info("a", T.INT64, [2])])
        other = h.make_graph([h.make_node("Constant", [], ["b"], value_ints=[3])],
                             "else", [], [h.make_tensor_value_info("b", T.INT64, [1])])
        m = kt.ort_model([h.make_node("If", ["c"], ["out"], then_branch=then,
                               else_branch=other)],
                  [h.make_tensor_value_info("c", T.BOOL, [])],
                  [h.make_tensor_value_info("out", T.INT64, None)], 13)
        _, proc = self.compile(self.save_model(m, "ifshape.onnx"), "ifshape.kiln")
        kt.assert_clean_failure(self, proc, "one type")

    def test_scan_directions_state_and_outputs(self):
        from onnx import TensorProto as T, helper as h
        # state += x_t * w (w from the outer graph); outputs: the state and
        # x_t - state.
        body = h.make_graph(
            [h.make_node("Mul", ["x_t", "w"], ["xw"]),
             h.make_node("Add", ["s_in", "xw"], ["s_out"]),
             h.make_node("Identity", ["s_out"], ["y1"]),
             h.make_node("Sub", ["x_t", "s_out"], ["y2"])],
            "body",
            [h.make_tensor_value_info("s_in", T.FLOAT, [3]),
             h.make_tensor_value_info("x_t", T.FLOAT, [3])],
            [h.make_tensor_value_info("s_out", T.FLOAT, [3]),
             h.make_tensor_value_info("y1", T.FLOAT, [3]),
             h.make_tensor_value_info("y2", T.FLOAT, [3])])
        m = kt.ort_model([h.make_node("Scan", ["s0", "xs"], ["s", "ys1", "ys2"], body=body,
                               num_scan_inputs=1, scan_input_axes=[1],
                               scan_input_directions=[1],
                               scan_output_axes=[0, -1],
                               scan_output_directions=[0, 1])],
                  [h.make_tensor_value_info("s0", T.FLOAT, [3]),
                   h.make_tensor_value_info("xs", T.FLOAT, [3, 5]),
                   h.make_tensor_value_info("w", T.FLOAT, [3])],
                  [h.make_tensor_value_info("s", T.FLOAT, [3]),
                   h.make_tensor_value_info("ys1", T.FLOAT, [5, 3]),
                   h.make_tensor_value_info("ys2", T.FLOAT, [3, 5])], 16)
        rng = np.random.default_rng(4)
        feeds = [rng.standard_normal(3).astype(np.float32),
                 rng.standard_normal((3, 5)).astype(np.float32),
                 rng.standard_normal(3).astype(np.float32)]
        got = self.run_onnx(m, "scan", feeds)
        want = kt.onnxruntime_outputs(m, feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)

    def test_non_max_suppression_random_boxes(self):
        from onnx import TensorProto as T, helper as h
        rng = np.random.default_rng(5)
        batch, classes, n = 2, 3, 40
        corners = rng.uniform(0, 10, (batch, n, 2)).astype(np.float32)
        sizes = rng.uniform(0.5, 4, (batch, n, 2)).astype(np.float32)
        for center in (0, 1):
            with self.subTest(center_point_box=center):
                if center:
                    boxes = np.concatenate([corners, sizes], axis=2)
                else:  # [y1, x1, y2, x2], some corners swapped
                    boxes = np.concatenate([corners, corners + sizes], axis=2)
                    boxes[:, ::3] = boxes[:, ::3][:, :, [2, 3, 0, 1]]
                scores = rng.uniform(0, 1, (batch, classes, n)).astype(np.float32)
                scores[0, 0, :4] = 0.5  # ties
                scores[1, 2, 5], scores[1, 2, 6] = np.inf, -np.inf
                m = kt.ort_model([h.make_node("NonMaxSuppression",
                                       ["b", "s", "m", "iou", "st"], ["sel"],
                                       center_point_box=center)],
                          [h.make_tensor_value_info("b", T.FLOAT, [batch, n, 4]),
                           h.make_tensor_value_info("s", T.FLOAT, [batch, classes, n]),
                           h.make_tensor_value_info("m", T.INT64, [1]),
                           h.make_tensor_value_info("iou", T.FLOAT, [1]),
                           h.make_tensor_value_info("st", T.FLOAT, [1])],
                          [h.make_tensor_value_info("sel", T.INT64, None)], 11)
                feeds = [boxes.astype(np.float32), scores, np.array([7], np.int64),
                         np.array([0.3], np.float32), np.array([0.2], np.float32)]
                (got,) = self.run_onnx(m, "nms%d" % center, feeds)
                (want,) = kt.onnxruntime_outputs(m, feeds)
                self.assertGreater(len(want), 10)
                np.testing.assert_array_equal(got, want)

    def test_max_pool_indices_match_torch(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.ort_model([h.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3],
                               strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)],
                  [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 9, 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, None),
                   h.make_tensor_value_info("i", T.INT64, None)], 12)
        x = np.random.default_rng(6).standard_normal((2, 3, 9, 8)).astype(np.float32)
        y, i = self.run_onnx(m, "poolidx", [x])
        want_y, want_i = torch.nn.functional.max_pool2d(
            torch.from_numpy(x), 3, 2, 1, ceil_mode=True, return_indices=True)
        np.testing.assert_array_equal(y, want_y.numpy())
        # torch counts within each (n, c) plane; ONNX over the whole tensor.
        plane = np.arange(2 * 3).reshape(2, 3, 1, 1) * 9 * 8
        np.testing.assert_array_equal(i, want_i.numpy() + plane)

    def test_unique_along_axis_matches_numpy(self):
        from onnx import TensorProto as T, helper as h
        m = kt.ort_model([h.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], axis=1)],
                  [h.make_tensor_value_info("x", T.INT64, [2, 7])],
                  [h.make_tensor_value_info(o, T.INT64, None)
                   for o in ("y", "idx", "inv", "cnt")], 11)
        x = np.array([[3, 1, 3, 2, 1, 3, 0], [0, 5, 0, 2, 5, 1, 0]], np.int64)
        y, idx, inv, cnt = self.run_onnx(m, "unique", [x])
        want = np.unique(x, axis=1, return_index=True, return_inverse=True,
                         return_counts=True)
        for g, w in zip((y, idx, inv, cnt), want):
            np.testing.assert_array_equal(g, np.asarray(w).reshape(np.shape(g)))


if __name__ == "__main__":
    unittest.main()
