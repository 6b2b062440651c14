"""bfloat16, float8 and sub-byte integers against ml_dtypes (numpy's
implementation of them, independent of kiln), bit for bit.

Each case compiles a one-node ONNX model (Cast, QuantizeLinear or an Add on
bfloat16) and feeds it every value that matters: for decoding, all 256 (or
65536) bit patterns; for encoding, every representable value, the midpoints
between neighbours (ties round to even), values just beside the midpoints,
the overflow boundary, subnormals, zeros, Inf and NaN.
"""

import unittest

import numpy as np

import kiln_testing as kt

try:
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # the venv of scripts/setup has both
    ml_dtypes = None
    IMPORT_ERROR = str(e)

FLOAT8 = {
    "float8_e4m3fn": 17, "float8_e4m3fnuz": 18, "float8_e5m2": 19,
    "float8_e5m2fnuz": 20,
}


def cast_model(from_type, to_type, saturate=None):
    attrs = {"to": to_type}
    if saturate is not None:
        attrs["saturate"] = saturate
    node = helper.make_node("Cast", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "cast", [helper.make_tensor_value_info("x", from_type, ["N"])],
        [helper.make_tensor_value_info("y", to_type, ["N"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def encoding_probes(dtype):
    """float32 values probing the rounding of float32 -> dtype."""
    finite = np.arange(256 if np.dtype(dtype).itemsize == 1 else 65536,
                       dtype=np.uint32)
    finite = finite.astype(np.uint8 if np.dtype(dtype).itemsize == 1 else np.uint16)
    with np.errstate(all="ignore"):
        values = finite.view(dtype).astype(np.float64)
    values = np.unique(values[np.isfinite(values)])
    mids = (values[1:] + values[:-1]) / 2
    top = values[-1]
    step = top - values[-2]
    probes = np.concatenate([
        values, mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
        np.nextafter(mids.astype(np.float32), np.float32(-np.inf)),
        [top + step / 2, top + step / 2 * 0.999, top + step, top * 4, 1e30,
         np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30]])
    probes = np.concatenate([probes, -probes])
    with np.errstate(all="ignore"):
        return probes.astype(np.float32)


class NarrowTypeTest(kt.KilnTestCase):
    @classmethod
    def setUpClass(cls):
        if ml_dtypes is None:
            kt.note("skipping: " + IMPORT_ERROR)
            raise unittest.SkipTest(IMPORT_ERROR)
        super().setUpClass()

    def run_cast(self, model, x, name):
        artifact, proc = self.compile(self.save_model(model, name + ".onnx"),
                                      name + ".kiln")
        kt.assert_success(self, proc)
        return self.run_artifact(artifact, [x], out_name=name)[0][0]

    def assert_same_bits(self, got, want, x):
        self.assertEqual(got.dtype, want.dtype)
        g = got.view(np.uint8 if got.itemsize == 1 else np.uint16)
        w = want.view(np.uint8 if want.itemsize == 1 else np.uint16)
        # Any NaN encoding is a NaN; compare the rest bit for bit.
        nan = np.isnan(want.astype(np.float32))
        self.assertTrue(np.array_equal(np.isnan(got.astype(np.float32)), nan))
        bad = (g != w) & ~nan
        self.assertFalse(bad.any(), "first mismatch: x=%r got %r want %r" % (
            x[bad][:5], got[bad][:5], want[bad][:5]) if bad.any() else "")

    def test_float8_encode_matches_ml_dtypes(self):
        for name, code in FLOAT8.items():
            dtype = getattr(ml_dtypes, name)
            x = encoding_probes(dtype)
            for saturate in (1, 0):
                with self.subTest(dtype=name, saturate=saturate):
                    got = self.run_cast(cast_model(TensorProto.FLOAT, code, saturate),
                                        x, "enc_%s_%d" % (name, saturate))
                    want = (numpy_helper.saturate_cast(x, dtype) if saturate
                            else x.astype(dtype))
                    self.assert_same_bits(got, want, x)

    def test_float8_decode_matches_ml_dtypes(self):
        for name, code in FLOAT8.items():
            dtype = getattr(ml_dtypes, name)
            with self.subTest(dtype=name):
                x = np.arange(256, dtype=np.uint8).view(dtype)
                got = self.run_cast(cast_model(code, TensorProto.FLOAT), x,
                                    "dec_" + name)
                want = x.astype(np.float32)
                self.assertTrue(np.array_equal(got, want, equal_nan=True))

    def test_bfloat16_round_trip_and_arithmetic(self):
        x = encoding_probes(ml_dtypes.bfloat16)
        got = self.run_cast(cast_model(TensorProto.FLOAT, TensorProto.BFLOAT16), x,
                            "enc_bf16")
        self.assert_same_bits(got, x.astype(ml_dtypes.bfloat16), x)
        every = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
        back = self.run_cast(cast_model(TensorProto.BFLOAT16, TensorProto.FLOAT),
                             every, "dec_bf16")
        self.assertTrue(np.array_equal(back, every.astype(np.float32), equal_nan=True))
        # An Add on bfloat16 rounds its f32 sum once, as ml_dtypes does.
        rng = np.random.default_rng(0)
        a = rng.standard_normal(1000).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal(1000).astype(ml_dtypes.bfloat16)
        node = helper.make_node("Add", ["a", "b"], ["y"])
        info = lambda n: helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [1000])
        model = helper.make_model(helper.make_graph([node], "add", [info("a"), info("b")],
                                                    [info("y")]),
                                  opset_imports=[helper.make_opsetid("", 21)])
        artifact, proc = self.compile(self.save_model(model, "add.onnx"), "add.kiln")
        kt.assert_success(self, proc)
        got = self.run_artifact(artifact, [a, b], out_name="add")[0][0]
        self.assert_same_bits(got, (a.astype(np.float32) + b.astype(np.float32))
                              .astype(ml_dtypes.bfloat16), a)

    def test_sub_byte_integers_wrap_like_numpy(self):
        x = np.arange(-40, 40, dtype=np.float32)
        for name, code in (("int4", 22), ("uint4", 21), ("int2", 26), ("uint2", 25)):
            dtype = getattr(ml_dtypes, name)
            with self.subTest(dtype=name):
                got = self.run_cast(cast_model(TensorProto.FLOAT, code), x, "to_" + name)
                self.assertEqual(got.dtype, np.dtype(dtype))
                want = x.astype(np.int32).astype(dtype)
                self.assertTrue(np.array_equal(got.astype(np.int32),
                                               want.astype(np.int32)))
                back = self.run_cast(cast_model(code, TensorProto.INT32), want,
                                     "from_" + name)
                self.assertTrue(np.array_equal(back, want.astype(np.int32)))

    def test_quantize_dequantize_int4_per_axis(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((3, 8)).astype(np.float32) * 4
        scale = np.array([0.5, 0.25, 1.0], dtype=np.float32)
        zero = np.array([1, -2, 0], dtype=ml_dtypes.int4)
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
        graph = helper.make_graph(
            nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
            [helper.make_tensor_value_info("q", TensorProto.INT4, [3, 8]),
             helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])],
            initializer=[numpy_helper.from_array(scale, "s"),
                         helper.make_tensor("z", TensorProto.INT4, [3],
                                            zero.astype(np.int8).tolist())])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        artifact, proc = self.compile(self.save_model(model, "qdq.onnx"), "qdq.kiln")
        kt.assert_success(self, proc)
        (q, y), _ = self.run_artifact(artifact, [x], out_name="qdq")
        s, z = scale[:, None], zero.astype(np.int32)[:, None]
        want_q = np.clip(np.rint(x / s) + z, -8, 7)
        self.assertTrue(np.array_equal(q.astype(np.int32), want_q.astype(np.int32)))
        np.testing.assert_allclose(y, (want_q - z) * s, rtol=0, atol=0)

    def test_dynamic_quantize_of_a_constant_input(self):
        # A range of 0 gives the scale 1 / 255 (ONNX's reference), not 0/0.
        from onnx.reference import ReferenceEvaluator
        node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
        graph = helper.make_graph(
            [node], "dql", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
            [helper.make_tensor_value_info("y", TensorProto.UINT8, [6]),
             helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
             helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        path = self.save_model(model, "dql.onnx")
        artifact, proc = self.compile(path, "dql.kiln")
        kt.assert_success(self, proc)
        for name, x in (("zeros", np.zeros(6, np.float32)),
                        ("mixed", np.array([-1, 0, 2, 3.5, -0.25, 1], np.float32))):
            with self.subTest(name):
                got, _ = self.run_artifact(artifact, [x], out_name="dql_" + name)
                want = ReferenceEvaluator(model).run(None, {"x": x})
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g.astype(np.float64),
                                               w.astype(np.float64), rtol=1e-6)


if __name__ == "__main__":
    unittest.main()
