"""Edge cases of the newer ONNX ops, against numpy and torch.

Expand with a shape input of symbolic length shorter than the result rank,
Pow on integers (exact up to 2^53), TopK before opset 10
(k as an attribute), Clip on every integer type (constant and run-time
bounds, int64 bounds past 2^53), Slice stepping back from a start before
the first element, the composite reductions with noop_with_empty_axes
and reductions of rank-0 tensors (found by scripts/fuzz; against
onnxruntime), AffineGrid with align_corners over a one-point axis
(torch's affine_grid), Det of 0x0 matrices, ScatterElements with
indices and updates of different shapes (a compile error), LayerNorm of
constant rows (exactly its bias), Concat inputs whose non-axis sizes
differ at run time and Concat of many inputs, gathers along an axis empty at run time and Expand
to a shape that does not broadcast (run-time errors), an Expand of a
window's result whose dims are 1 at run time, integer arithmetic that
wraps.
"""

import unittest

import numpy as np

import kiln_testing as kt




class OpEdges(kt.KilnTestCase):
    def test_expand_short_symbolic_shape(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Expand", ["x", "s"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [3, 1]),
                   h.make_tensor_value_info("s", T.INT64, ["n"])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], 13)
        x = np.arange(3, dtype=np.float32).reshape(3, 1)
        for shape in ([4], [3, 4], [1, 4]):
            with self.subTest(shape=shape):
                (got,) = self.run_onnx(m, "expand", [x, np.array(shape, np.int64)])
                want = x * np.ones(shape, np.float32)
                np.testing.assert_array_equal(got, want)

    def test_integer_pow(self):
        from onnx import TensorProto as T, helper as h
        for name, dtype, onnx_type in (("i64", np.int64, T.INT64),
                                       ("i32", np.int32, T.INT32),
                                       ("u8", np.uint8, T.UINT8)):
            with self.subTest(name):
                m = kt.onnx_model([h.make_node("Pow", ["a", "b"], ["y"])],
                          [h.make_tensor_value_info("a", onnx_type, [5]),
                           h.make_tensor_value_info("b", onnx_type, [5])],
                          [h.make_tensor_value_info("y", onnx_type, [5])], 15)
                a = np.array([3, 2, 7, 5, 1], dtype=dtype)
                b = np.array([4, 7, 2, 0, 40] if dtype == np.uint8
                             else [19, 30, 3, 0, 40], dtype=dtype)
                (got,) = self.run_onnx(m, "pow" + name, [a, b])
                want = np.power(a, b)
                np.testing.assert_array_equal(got, want)

    def test_integer_clip(self):
        # ONNX allows every numeric type in Clip since opset 12; kiln took
        # floats only ("'kiln.clip' op needs a floating-point element type").
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        big = 2**62 + 1  # not a double
        cases = [(np.int8, T.INT8, -3, 5), (np.uint8, T.UINT8, 3, 200),
                 (np.int16, T.INT16, -300, 300), (np.uint16, T.UINT16, 7, 60000),
                 (np.int32, T.INT32, -5, 8), (np.uint32, T.UINT32, 2, 3000000000),
                 (np.int64, T.INT64, -big, big), (np.uint64, T.UINT64, 1, 2**63 + 3)]
        for dtype, elem, lo, hi in cases:
            info = np.iinfo(dtype)
            x = np.array([info.min, lo - 1, lo, 0 if info.min < 0 else lo + 1,
                          hi, hi + 1 if hi < info.max else hi, info.max], dtype)
            lo_a, hi_a = np.array(lo, dtype), np.array(hi, dtype)
            want = np.minimum(np.maximum(x, lo_a), hi_a)
            vi = lambda n, s: h.make_tensor_value_info(n, elem, s)
            with self.subTest(dtype=np.dtype(dtype).name, bounds="constant"):
                m = kt.onnx_model([h.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                                  [vi("x", [7])], [vi("y", [7])], 13)
                m.graph.initializer.extend([nh.from_array(lo_a, "lo"),
                                            nh.from_array(hi_a, "hi")])
                (got,) = self.run_onnx(m, "clip_c_%s" % np.dtype(dtype).name, [x])
                self.assertEqual(got.dtype, want.dtype)
                np.testing.assert_array_equal(got, want)
            with self.subTest(dtype=np.dtype(dtype).name, bounds="max only"):
                m = kt.onnx_model([h.make_node("Clip", ["x", "", "hi"], ["y"])],
                                  [vi("x", [7])], [vi("y", [7])], 13)
                m.graph.initializer.extend([nh.from_array(hi_a, "hi")])
                (got,) = self.run_onnx(m, "clip_h_%s" % np.dtype(dtype).name, [x])
                np.testing.assert_array_equal(got, np.minimum(x, hi_a))
            with self.subTest(dtype=np.dtype(dtype).name, bounds="run time"):
                m = kt.onnx_model([h.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                                  [vi("x", [7]), vi("lo", []), vi("hi", [])],
                                  [vi("y", [7])], 13)
                (got,) = self.run_onnx(m, "clip_r_%s" % np.dtype(dtype).name,
                                       [x, lo_a, hi_a])
                np.testing.assert_array_equal(got, want)

    def test_slice_back_from_before_the_start(self):
        # ONNX clamps a backward start into [0, n - 1]: start -11 of 9 is 0
        # and takes element 0 (kiln took none). numpy differs here.
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        x = np.arange(9, dtype=np.float32)
        for start, end, step in ((-11, -10, -2), (-20, -30, -1), (-11, -12, -1),
                                 (20, -20, -3), (3, -12, -1)):
            with self.subTest(start=start, end=end, step=step):
                m = kt.ort_model(
                    [h.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
                    [h.make_tensor_value_info("x", T.FLOAT, [9])],
                    [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
                for name, v in (("s", start), ("e", end), ("a", 0), ("t", step)):
                    m.graph.initializer.append(
                        nh.from_array(np.array([v], np.int64), name))
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,) = self.run_onnx(m, "slice_back", [x])
                np.testing.assert_array_equal(got, want)

    def test_views_of_empty_tensors(self):
        # kiln.reshape read a 0 in its shape as "copy the input's dim", so a
        # view of a tensor with a 0-sized dim failed to compile ("reshape
        # copies dim 1 of [0], which has no such dim") or took a wrong size.
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        cases = [
            ("Unsqueeze", [0], [0], {}),
            ("Unsqueeze", [3, 0], [1], {}),
            ("Squeeze", [1, 0, 1], [0], {}),
            ("Flatten", [0], None, {"axis": 1}),
            ("Flatten", [2, 0, 3], None, {"axis": 2}),
            ("Reshape", [3, 0], [0, 3], {"allowzero": 1}),
            ("Tile", [2, 0], [3, 2], {}),
        ]
        for op, shape, arg, attrs in cases:
            with self.subTest(op=op, shape=shape, arg=arg):
                inputs = ["x"] + (["a"] if arg is not None else [])
                m = kt.ort_model(
                    [h.make_node(op, inputs, ["y"], **attrs)],
                    [h.make_tensor_value_info("x", T.FLOAT, shape)],
                    [h.make_tensor_value_info("y", T.FLOAT, None)], 14)
                if arg is not None:
                    m.graph.initializer.append(
                        nh.from_array(np.array(arg, np.int64), "a"))
                x = np.zeros(shape, np.float32)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,) = self.run_onnx(m, "empty_" + op, [x])
                self.assertEqual(got.shape, want.shape)

    def test_cast_to_bool_is_not_zero(self):
        # A cast to bool truncated to the low bit: 64 and 0.5 were false.
        from onnx import TensorProto as T, helper as h
        for np_type, elem, x in (
                (np.int64, T.INT64, np.array([0, 1, 2, 64, -2], np.int64)),
                (np.int32, T.INT32, np.array([0, 1, 2, 256, -4], np.int32)),
                (np.float32, T.FLOAT,
                 np.array([0, -0.0, 0.5, 2, np.nan], np.float32)),
                (np.float16, T.FLOAT16,
                 np.array([0, 0.25, 4, -0.0, 1e-7], np.float16))):
            with self.subTest(dtype=np.dtype(np_type).name):
                m = kt.ort_model(
                    [h.make_node("Cast", ["x"], ["y"], to=T.BOOL)],
                    [h.make_tensor_value_info("x", elem, [5])],
                    [h.make_tensor_value_info("y", T.BOOL, [5])], 13)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,) = self.run_onnx(m, "to_bool", [x])
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(got, x != 0)

    def test_log_sum_exp_does_not_overflow(self):
        # exp(268) is inf in float32: LogSumExp must shift by the max, as
        # onnxruntime does. -inf everywhere stays -inf, an inf stays inf.
        from onnx import TensorProto as T, helper as h
        rows = np.array([[161.5, 267.8, 200.0],
                         [-1e3, -1e3, -1e3],
                         [-np.inf, -np.inf, -np.inf],
                         [np.inf, 1.0, 2.0]], np.float32)
        for keepdims in (0, 1):
            with self.subTest(keepdims=keepdims):
                m = kt.ort_model(
                    [h.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1],
                                 keepdims=keepdims)],
                    [h.make_tensor_value_info("x", T.FLOAT, [4, 3])],
                    [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
                (want,) = kt.onnxruntime_outputs(m, [rows])
                (got,) = self.run_onnx(m, "lse%d" % keepdims, [rows])
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-6)
                self.assertTrue(np.isfinite(got[:2]).all())

    def test_integer_reduce_mean(self):
        # ReduceMean of int32/int64 was a compile error ("mean needs a
        # floating-point element type"); onnxruntime sums in the type and
        # divides truncating toward 0 (-7 / 2 is -3).
        from onnx import TensorProto as T, helper as h
        rng = np.random.default_rng(4)
        for np_type, elem in ((np.int32, T.INT32), (np.int64, T.INT64)):
            x = rng.integers(-50, 50, (3, 5, 4)).astype(np_type)
            for axes, keepdims, shape in (([1], 0, [3, 5, 4]),
                                          ([0, 2], 1, [3, 5, 4]),
                                          ([1], 1, ["a", "b", 4])):
                with self.subTest(dtype=np.dtype(np_type).name, axes=axes,
                                  shape=shape):
                    m = kt.ort_model(
                        [h.make_node("ReduceMean", ["x"], ["y"], axes=axes,
                                     keepdims=keepdims)],
                        [h.make_tensor_value_info("x", elem, shape)],
                        [h.make_tensor_value_info("y", elem, None)], 13)
                    (want,) = kt.onnxruntime_outputs(m, [x])
                    (got,) = self.run_onnx(m, "mean_int", [x])
                    self.assertEqual(got.dtype, want.dtype)
                    np.testing.assert_array_equal(got, want)
            with self.subTest(dtype=np.dtype(np_type).name, axes="run time"):
                m = kt.ort_model(
                    [h.make_node("ReduceMean", ["x", "axes"], ["y"])],
                    [h.make_tensor_value_info("x", elem, [3, 5, 4]),
                     h.make_tensor_value_info("axes", T.INT64, [1])],
                    [h.make_tensor_value_info("y", elem, None)], 18)
                axes = np.array([2], np.int64)
                (want,) = kt.onnxruntime_outputs(m, [x, axes])
                (got,) = self.run_onnx(m, "mean_int_by", [x, axes])
                np.testing.assert_array_equal(got, want)

    def test_softplus_does_not_overflow(self):
        # log(exp(x) + 1) overflowed float16 past x = 11 (inf where
        # onnxruntime gives x) and float32 past 88.
        from onnx import TensorProto as T, helper as h
        for np_type, elem, big in ((np.float16, T.FLOAT16, 14.1),
                                   (np.float32, T.FLOAT, 100.0)):
            x = np.array([-big, -3, -0.5, 0, 0.5, 3, big, -np.inf, np.inf],
                         np_type)
            with self.subTest(dtype=np.dtype(np_type).name):
                m = kt.ort_model([h.make_node("Softplus", ["x"], ["y"])],
                                 [h.make_tensor_value_info("x", elem, [9])],
                                 [h.make_tensor_value_info("y", elem, [9])], 13)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,) = self.run_onnx(m, "softplus", [x])
                tol = 2e-3 if np_type == np.float16 else 1e-6
                np.testing.assert_allclose(got.astype(np.float64),
                                           want.astype(np.float64), rtol=tol,
                                           atol=tol)

    def test_output_viewing_a_released_temp(self):
        # An output that is a view (Squeeze) of a kernel's temp was copied
        # out after the temp went back to the device's cache: under
        # kiln-run-asan a use-after-poison (found by scripts/fuzz
        # --sanitize), and with threads sharing the cache 2 wrong outputs in
        # 16,000 runs of 8 threads (kiln-stress).
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        m = kt.ort_model(
            [h.make_node("GlobalMaxPool", ["x"], ["g"]),
             h.make_node("Gather", ["g", "idx"], ["t"], axis=-1),
             h.make_node("Tanh", ["t"], ["u"]),
             h.make_node("Squeeze", ["u", "ax"], ["y"])],
            [h.make_tensor_value_info("x", T.FLOAT, [2, 1, 16])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        m.graph.initializer.extend([
            nh.from_array(np.array([0, -1, 0], np.int64), "idx"),
            nh.from_array(np.array([-2], np.int64), "ax")])
        x = np.random.default_rng(6).standard_normal((2, 1, 16)).astype(np.float32)
        (want,) = kt.onnxruntime_outputs(m, [x])
        (got,) = self.run_onnx(m, "view_out", [x])
        np.testing.assert_allclose(got, want, rtol=1e-6)

    def test_layer_norm_of_constant_rows(self):
        # The mean of equal float32 values summed in float32 is off by an
        # ulp or more (3 values already), and LayerNormalization multiplies
        # x - mean by 1 / sqrt(epsilon): up to 0.1 where onnxruntime and
        # numpy give exactly B (found by scripts/fuzz). Rows over one axis
        # and over several (the generic loop nest), plus a varied row.
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(7)
        for shape, axis in (([378, 3], -1), ([21, 4, 63], 0), ([2, 33, 24], 1)):
            x = np.full(shape, 34.856693, np.float32)
            # One varied row where there are several rows (the last).
            varied = axis % len(shape) > 0
            if varied:
                x[-1] = rng.standard_normal(shape[1:]).astype(np.float32) * 5 + 30
            scale = rng.standard_normal(shape[axis % len(shape):]).astype(np.float32)
            bias = rng.standard_normal(scale.shape).astype(np.float32)
            with self.subTest(shape=shape, axis=axis):
                m = kt.ort_model(
                    [h.make_node("LayerNormalization", ["x", "s", "b"], ["y"],
                                 axis=axis, epsilon=1e-5)],
                    [h.make_tensor_value_info("x", T.FLOAT, shape)],
                    [h.make_tensor_value_info("y", T.FLOAT, shape)], 17)
                m.graph.initializer.extend([nh.from_array(scale, "s"),
                                            nh.from_array(bias, "b")])
                (got,) = self.run_onnx(m, "ln_const", [x])
                axes = tuple(range(axis % len(shape), len(shape)))
                x64 = x.astype(np.float64)
                mean = x64.mean(axis=axes, keepdims=True)
                var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
                want = (x64 - mean) / np.sqrt(var + 1e-5) * scale + bias
                constant = (slice(0, -1 if varied else None),)
                np.testing.assert_array_equal(got[constant],
                                              np.broadcast_to(bias, got[constant].shape))
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    def test_concat_of_run_time_sizes_that_differ(self):
        # Dims other than the axis must agree at run time too; a Concat of
        # [1, 2, 8] and [0, 2, 2] read the second input past its end
        # (onnxruntime skips the empty input; the spec, numpy and torch
        # call it an error, as kiln now does).
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Concat", ["a", "b"], ["y"], axis=2)],
                          [h.make_tensor_value_info("a", T.FLOAT, ["n", 2, "p"]),
                           h.make_tensor_value_info("b", T.FLOAT, ["m", 2, "q"])],
                          [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        artifact, proc = self.compile(self.save_model(m, "concat_rt.onnx"),
                                      "concat_rt.kiln")
        kt.assert_success(self, proc)
        a = np.arange(16, dtype=np.float32).reshape(1, 2, 8)
        b = np.ones((1, 2, 2), np.float32)
        outputs, _ = self.run_artifact(artifact, [a, b], out_name="concat_ok")
        np.testing.assert_array_equal(outputs[0], np.concatenate([a, b], axis=2))
        for shape in ((0, 2, 2), (3, 2, 2)):
            with self.subTest(shape=shape):
                bad = self.save_npy(np.ones(shape, np.float32), "concat_bad.npy")
                proc = kt.kiln_run(artifact, self.save_npy(a, "concat_a.npy"), bad)
                kt.assert_clean_failure(self, proc, "concat inputs 0 and 1 differ in dim 0")

    def test_concat_of_many_inputs(self):
        # A dense block's Concat: 26 inputs of different lengths along the
        # axis, one of them empty, one given twice and one computed in the
        # same kernel (a Relu), with a symbolic batch; and along a middle
        # axis. Each input is copied into its slice (tensor.insert_slice); the
        # emitter once lost the output buffer's name past 24 inserts.
        from onnx import TensorProto as T, helper as h
        sizes = [64] + [32] * 22 + [0, 3, 5]
        names = ["x%d" % i for i in range(len(sizes))]
        nodes = [h.make_node("Relu", ["x1"], ["r"]),
                 h.make_node("Concat", names[:1] + ["r"] + names[2:] + ["x2"],
                             ["y"], axis=1),
                 h.make_node("Concat", ["x2", "x1"], ["z"], axis=2)]
        m = kt.onnx_model(
            nodes,
            [h.make_tensor_value_info(n, T.FLOAT, ["b", c, 4, 3])
             for n, c in zip(names, sizes)],
            [h.make_tensor_value_info("y", T.FLOAT, None),
             h.make_tensor_value_info("z", T.FLOAT, None)], 13)
        rng = np.random.default_rng(7)
        for batch in (1, 3):
            with self.subTest(batch=batch):
                xs = [rng.standard_normal((batch, c, 4, 3)).astype(np.float32)
                      for c in sizes]
                y, z = self.run_onnx(m, "concat_many", xs)
                parts = [xs[0], np.maximum(xs[1], 0)] + xs[2:] + [xs[2]]
                np.testing.assert_array_equal(y, np.concatenate(parts, axis=1))
                np.testing.assert_array_equal(
                    z, np.concatenate([xs[2], xs[1]], axis=2))

    def test_transposes_of_the_last_two_dims(self):
        # Transposes that swap the last two dims run as tiles
        # (kiln_transpose2d): sizes off the tile, a symbolic batch, rank 2 to
        # 4; a transpose fed by a Relu in its kernel; an int32 one (the loops).
        from onnx import TensorProto as T, helper as h
        nodes = [h.make_node("Transpose", ["a"], ["ya"], perm=[0, 1, 3, 2]),
                 h.make_node("Transpose", ["b"], ["yb"], perm=[1, 0]),
                 h.make_node("Relu", ["c"], ["rc"]),
                 h.make_node("Transpose", ["rc"], ["yc"], perm=[0, 2, 1]),
                 h.make_node("Transpose", ["i"], ["yi"], perm=[0, 2, 1])]
        m = kt.onnx_model(
            nodes,
            [h.make_tensor_value_info("a", T.FLOAT, ["n", 3, 37, 20]),
             h.make_tensor_value_info("b", T.FLOAT, [33, 17]),
             h.make_tensor_value_info("c", T.FLOAT, ["n", 128, 64]),
             h.make_tensor_value_info("i", T.INT32, ["n", 5, 7])],
            [h.make_tensor_value_info(n, T.FLOAT if n != "yi" else T.INT32, None)
             for n in ("ya", "yb", "yc", "yi")], 13)
        _, cpp = self.emit_cpp(m, "transposes")
        self.assertEqual(cpp.split("// kiln kernel", 1)[1].count("kiln_transpose2d("), 3)
        rng = np.random.default_rng(9)
        for n in (1, 2):
            with self.subTest(batch=n):
                a = rng.standard_normal((n, 3, 37, 20)).astype(np.float32)
                b = rng.standard_normal((33, 17)).astype(np.float32)
                c = rng.standard_normal((n, 128, 64)).astype(np.float32)
                i = rng.integers(-9, 9, (n, 5, 7)).astype(np.int32)
                ya, yb, yc, yi = self.run_onnx(m, "transposes", [a, b, c, i])
                np.testing.assert_array_equal(ya, a.transpose(0, 1, 3, 2))
                np.testing.assert_array_equal(yb, b.T)
                np.testing.assert_array_equal(yc, np.maximum(c, 0).transpose(0, 2, 1))
                np.testing.assert_array_equal(yi, i.transpose(0, 2, 1))

    def test_gathers_along_an_empty_axis(self):
        # A clamped index into an axis that is 0 at run time still read
        # element 0 (garbage, found by scripts/fuzz); every index is out of
        # range there, which the spec makes an error. Gather, GatherElements
        # and GatherND; with nothing to gather, no error.
        from onnx import TensorProto as T, helper as h
        cases = (("Gather", {"axis": 0}, ["k"], np.array([0], np.int64)),
                 ("GatherElements", {"axis": 0}, ["k", 3], np.zeros((1, 3), np.int64)),
                 ("GatherND", {}, ["k", 1], np.zeros((1, 1), np.int64)))
        empty = [0, 3]
        for op, attrs, ishape, idx in cases:
            with self.subTest(op=op):
                m = kt.onnx_model([h.make_node(op, ["d", "i"], ["y"], **attrs)],
                                  [h.make_tensor_value_info("d", T.FLOAT, ["n", 3]),
                                   h.make_tensor_value_info("i", T.INT64, ishape)],
                                  [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
                artifact, proc = self.compile(self.save_model(m, "g_%s.onnx" % op),
                                              "g_%s.kiln" % op)
                kt.assert_success(self, proc)
                data = np.arange(6, dtype=np.float32).reshape(2, 3)
                (got,), _ = self.run_artifact(artifact, [data, idx], out_name="g_ok_" + op)
                self.assertEqual(got.shape[-1], 3)
                np.testing.assert_array_equal(got.reshape(-1), data[0])
                proc = kt.kiln_run(artifact,
                                   self.save_npy(np.zeros(empty, np.float32), "g_empty.npy"),
                                   self.save_npy(idx, "g_idx.npy"))
                kt.assert_clean_failure(self, proc, "which is empty")
                none = np.zeros([0] + list(idx.shape[1:]), np.int64)
                (got,), _ = self.run_artifact(
                    artifact, [np.zeros(empty, np.float32), none], out_name="g_none_" + op)
                self.assertEqual(got.size, 0)

    def test_expand_that_does_not_broadcast_at_run_time(self):
        # Expand's run-time size was max(shape entry, input dim): right
        # where one is 1, but a dim of 0 against 312 read 312 elements of
        # nothing (found by scripts/fuzz). Dims that do not broadcast are a
        # run-time error now; 1s still broadcast, either way round.
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Expand", ["x", "s"], ["y"])],
                          [h.make_tensor_value_info("x", T.FLOAT, [1, "n"]),
                           h.make_tensor_value_info("s", T.INT64, [2])],
                          [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        artifact, proc = self.compile(self.save_model(m, "expand_rt.onnx"),
                                      "expand_rt.kiln")
        kt.assert_success(self, proc)
        for n, shape in ((1, [3, 4]), (4, [3, 1]), (4, [2, 4]), (0, [2, 1])):
            with self.subTest(n=n, shape=shape):
                x = np.arange(n, dtype=np.float32).reshape(1, n)
                (got,), _ = self.run_artifact(
                    artifact, [x, np.array(shape, np.int64)], out_name="expand_ok")
                np.testing.assert_array_equal(got, x * np.ones(shape, np.float32))
        for n, shape in ((0, [1, 312]), (3, [2, 4])):
            with self.subTest(n=n, shape=shape):
                proc = kt.kiln_run(artifact,
                                   self.save_npy(np.zeros((1, n), np.float32), "ex_x.npy"),
                                   self.save_npy(np.array(shape, np.int64), "ex_s.npy"))
                kt.assert_clean_failure(self, proc, "do not broadcast")
        # Static input dims make the result static, and the kernel has no
        # sizes to compute; it still reads the shape to check it (such a
        # kernel once had data to read and no function to read it in).
        m = kt.onnx_model([h.make_node("Expand", ["x", "s"], ["y"])],
                          [h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                           h.make_tensor_value_info("s", T.INT64, [2])],
                          [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        artifact, proc = self.compile(self.save_model(m, "expand_st.onnx"),
                                      "expand_st.kiln")
        kt.assert_success(self, proc)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for shape in ([2, 3], [1, 3], [2, 1]):
            with self.subTest(static=shape):
                (got,), _ = self.run_artifact(
                    artifact, [x, np.array(shape, np.int64)], out_name="expand_st")
                np.testing.assert_array_equal(got, x)
        proc = kt.kiln_run(artifact, self.save_npy(x, "ex_sx.npy"),
                           self.save_npy(np.array([4, 3], np.int64), "ex_ss.npy"))
        kt.assert_clean_failure(self, proc, "do not broadcast")

    def test_arg_max_min_with_nan(self):
        # The max/min propagate NaN, and NaN == NaN is false, so no element
        # was picked and the index was the axis length (found by
        # scripts/fuzz: ArgMin of a ReduceMean of nothing). NaN is the
        # extreme, as numpy and torch say: the first (or last) NaN.
        from onnx import TensorProto as T, helper as h
        x = np.array([[1, np.nan, 3, np.nan], [np.nan, 4, 0, 2],
                      [2, 5, 1, 5], [np.nan, np.nan, np.nan, np.nan]], np.float32)
        for op, fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
            for last in (0, 1):
                with self.subTest(op=op, select_last_index=last):
                    m = kt.onnx_model(
                        [h.make_node(op, ["x"], ["y"], axis=1, keepdims=0,
                                     select_last_index=last)],
                        [h.make_tensor_value_info("x", T.FLOAT, [4, 4])],
                        [h.make_tensor_value_info("y", T.INT64, None)], 13)
                    (got,) = self.run_onnx(m, "arg_nan", [x])
                    want = fn(x, axis=1) if not last else \
                        3 - fn(x[:, ::-1], axis=1)
                    np.testing.assert_array_equal(got, want)

    def test_arg_max_over_an_empty_axis(self):
        # No index exists; kiln returned the reduction's identity (shape
        # (1,) where onnxruntime gives (0, 1), found by scripts/fuzz).
        # numpy, torch and ONNX's reference raise, and so does kiln now.
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("ArgMin", ["x"], ["y"], axis=0, keepdims=0)],
                          [h.make_tensor_value_info("x", T.FLOAT, ["n", 3])],
                          [h.make_tensor_value_info("y", T.INT64, None)], 13)
        artifact, proc = self.compile(self.save_model(m, "argmin_e.onnx"),
                                      "argmin_e.kiln")
        kt.assert_success(self, proc)
        x = np.array([[3, 1, 2], [0, 5, 2]], np.float32)
        (got,), _ = self.run_artifact(artifact, [x], out_name="argmin_ok")
        np.testing.assert_array_equal(got, x.argmin(0))
        proc = kt.kiln_run(artifact, self.save_npy(np.zeros((0, 3), np.float32),
                                                   "argmin_e.npy"))
        kt.assert_clean_failure(self, proc, "ArgMin", "empty")

    def test_padded_window_of_a_fused_producer_with_symbolic_plane(self):
        # A Div fused into a grouped Conv's padded window, H symbolic: the
        # plane was padded by rows with H written as a constant, which was
        # kDynamic, so no row was written and the Conv read garbage (found
        # by scripts/fuzz --symbolic all).
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(9)
        w = rng.uniform(1, 2, (1, 9, 1, 4)).astype(np.float32)
        k = rng.standard_normal((9, 1, 2, 5)).astype(np.float32)
        m = kt.ort_model(
            [h.make_node("Div", ["x", "w"], ["q"]),
             h.make_node("Conv", ["q", "k"], ["y"], group=9, kernel_shape=[2, 5],
                         pads=[0, 0, 0, 1], strides=[2, 1])],
            [h.make_tensor_value_info("x", T.FLOAT, ["n", 9, "h", 4])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        m.graph.initializer.extend([nh.from_array(w, "w"), nh.from_array(k, "k")])
        artifact, proc = self.compile(self.save_model(m, "pad_plane.onnx"),
                                      "pad_plane.kiln")
        kt.assert_success(self, proc)
        for shape in ((3, 9, 12, 4), (1, 9, 5, 4)):
            with self.subTest(shape=shape):
                x = rng.standard_normal(shape).astype(np.float32)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,), _ = self.run_artifact(artifact, [x], out_name="pad_plane")
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_expand_of_a_window_with_dims_one_at_run_time(self):
        # Conv -> Exp -> Expand to a static [3, 16, 2], N and W symbolic and
        # 1 at run time: the Expand was emitted inside the Conv's loops (as
        # its epilogue), which cover the Conv's [1, 16, 1] only, and 80 of
        # the 96 values were never written (found by scripts/fuzz --symbolic
        # all, g6582 of seed 1).
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(11)
        w = rng.standard_normal((16, 4, 1)).astype(np.float32)
        m = kt.ort_model(
            [h.make_node("Conv", ["x", "w"], ["c"], group=4, kernel_shape=[1], strides=[2]),
             h.make_node("Exp", ["c"], ["e"]),
             h.make_node("Expand", ["e", "s"], ["y"])],
            [h.make_tensor_value_info("x", T.FLOAT, ["n", 16, "w"])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], 13)
        m.graph.initializer.extend([nh.from_array(w, "w"),
                                    nh.from_array(np.array([3, 16, 2], np.int64), "s")])
        artifact, proc = self.compile(self.save_model(m, "window_expand.onnx"),
                                      "window_expand.kiln")
        kt.assert_success(self, proc)
        for shape in ((1, 16, 1), (1, 16, 3), (3, 16, 4)):
            with self.subTest(shape=shape):
                x = rng.standard_normal(shape).astype(np.float32)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,), _ = self.run_artifact(artifact, [x], out_name="window_expand")
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    def test_integer_arithmetic_wraps(self):
        # ONNX integer Add/Sub/Mul wrap, as numpy's and arith's do; the C++
        # was signed arithmetic, undefined on overflow (UBSan found it in
        # the random draws' hashes under ctest sanitize).
        from onnx import TensorProto as T, helper as h
        for dtype, elem in ((np.int32, T.INT32), (np.int64, T.INT64)):
            with self.subTest(dtype=dtype.__name__):
                info = np.iinfo(dtype)
                a = np.array([info.max, info.min, info.max // 3, -7], dtype)
                b = np.array([2, -1, 5, info.min], dtype)
                m = kt.onnx_model(
                    [h.make_node(op, ["a", "b"], [op.lower()]) for op in ("Add", "Sub", "Mul")],
                    [h.make_tensor_value_info("a", elem, [4]),
                     h.make_tensor_value_info("b", elem, [4])],
                    [h.make_tensor_value_info(o, elem, [4]) for o in ("add", "sub", "mul")], 13)
                got = self.run_onnx(m, "wrap_%s" % dtype.__name__, [a, b])
                with np.errstate(over="ignore"):
                    want = [a + b, a - b, a * b]
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)

    def test_composite_reductions_noop_with_empty_axes(self):
        # No axes and noop_with_empty_axes: the map and the finish apply,
        # no sum (ReduceL2 is |x|, ReduceLogSumExp is log(exp(x))).
        from onnx import TensorProto as T, helper as h
        x = np.random.default_rng(2).uniform(0.5, 2, (3, 4)).astype(np.float32)
        for op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                   "ReduceLogSumExp"):
            with self.subTest(op=op):
                m = kt.ort_model(
                    [h.make_node(op, ["x"], ["y"], noop_with_empty_axes=1)],
                    [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                    [h.make_tensor_value_info("y", T.FLOAT, None)], 18)
                (want,) = kt.onnxruntime_outputs(m, [x])
                (got,) = self.run_onnx(m, "noop_" + op, [x])
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    def test_rank0_reductions(self):
        # A rank-0 input reduces over no axes: ReduceMean failed to compile
        # ("'linalg.generic' op with several results").
        from onnx import TensorProto as T, helper as h
        for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceProd"):
            for elem, dtype in ((T.FLOAT, np.float32), (T.FLOAT16, np.float16)):
                with self.subTest(op=op, dtype=np.dtype(dtype).name):
                    m = kt.ort_model(
                        [h.make_node(op, ["x"], ["y"], keepdims=0)],
                        [h.make_tensor_value_info("x", elem, [])],
                        [h.make_tensor_value_info("y", elem, [])], 17)
                    x = np.array(-2.75, dtype)
                    (got,) = self.run_onnx(m, "rank0_%s_%s" % (
                        op, np.dtype(dtype).name), [x])
                    self.assertEqual((got.dtype, got.shape), (x.dtype, ()))
                    self.assertEqual(float(got), -2.75)

    def test_topk_opset9(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1)],
                  [h.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                  [h.make_tensor_value_info("v", T.FLOAT, None),
                   h.make_tensor_value_info("i", T.INT64, None)], 9)
        x = np.array([[1, 5, 3, 5, 0], [9, 8, 7, 6, 10]], np.float32)
        v, i = self.run_onnx(m, "topk9", [x])
        np.testing.assert_array_equal(i, [[1, 3], [4, 0]])
        np.testing.assert_array_equal(v, [[5, 5], [10, 9]])

    def test_affine_grid_one_point(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("AffineGrid", ["t", "s"], ["g"], align_corners=1)],
                  [h.make_tensor_value_info("t", T.FLOAT, [1, 2, 3]),
                   h.make_tensor_value_info("s", T.INT64, [4])],
                  [h.make_tensor_value_info("g", T.FLOAT, None)], 20)
        theta = np.array([[[0.8, 0.1, 0.2], [-0.3, 1.1, 0.05]]], np.float32)
        size = [1, 1, 1, 4]
        (got,) = self.run_onnx(m, "affine", [theta, np.array(size, np.int64)])
        want = torch.nn.functional.affine_grid(
            torch.from_numpy(theta), size, align_corners=True).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    def test_det_empty(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Det", ["x"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [3, 0, 0])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)], 11)
        (got,) = self.run_onnx(m, "det0", [np.zeros((3, 0, 0), np.float32)])
        np.testing.assert_array_equal(got, np.linalg.det(np.zeros((3, 0, 0))))

    def test_scatter_shape_mismatch(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("ScatterElements", ["d", "i", "u"], ["y"])],
                  [h.make_tensor_value_info("d", T.FLOAT, [3, 3]),
                   h.make_tensor_value_info("i", T.INT64, [2, 3]),
                   h.make_tensor_value_info("u", T.FLOAT, [1, 3])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)], 18)
        _, proc = self.compile(self.save_model(m, "scatter.onnx"), "scatter.kiln")
        kt.assert_clean_failure(self, proc, "indices and updates of one shape")


if __name__ == "__main__":
    unittest.main()
