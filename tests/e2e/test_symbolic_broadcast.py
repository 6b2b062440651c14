"""Symbolic dims that are 1 at run time broadcast (issue 42, item 2).

A `?` dim may turn out 1 at run time and then repeats against the other
operand's size, whether that size is static or symbolic too. Each model is
compiled once with every input dim symbolic (or some static) and run at
several sizes, 1s among them, against onnxruntime: the elementwise ops that
broadcast (arithmetic, comparisons, logic, Where, PRelu), their fusions
into a chain and into a following reduction (which read past a buffer's
end when a loop took the static size of the other operand), and MatMul's
batch dims.

Exporters leave batch and sequence dims symbolic, so this is the common case.
"""

import unittest

import numpy as np

import kiln_testing as kt


def _vi(name, elem, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, shape)


class SymbolicBroadcast(kt.KilnTestCase):
    # Shapes of (a, b) against one artifact: each side 1 in some dims.
    PAIRS = [((1, 4), (3, 4)), ((3, 1), (3, 4)), ((1, 1), (3, 4)),
             ((3, 4), (1, 1)), ((3, 4), (3, 4)), ((1, 4), (3, 1)),
             ((5, 1), (1, 7))]

    def check(self, model, tag, feeds_list):
        """Compiles `model` once and runs it on each set of feeds, against
        onnxruntime."""
        path = self.save_model(model, tag + ".onnx")
        artifact, proc = self.compile(path, tag + ".kiln", "-O1")
        kt.assert_success(self, proc)
        for i, feeds in enumerate(feeds_list):
            want = kt.onnxruntime_outputs(model, feeds)
            got, _ = self.run_artifact(artifact, feeds,
                                       out_name="%s_%d" % (tag, i))
            self.assertEqual(len(got), len(want))
            shapes = [f.shape for f in feeds]
            for j, (g, w) in enumerate(zip(got, want)):
                with self.subTest(case=tag, shapes=shapes, output=j):
                    self.assertEqual(g.shape, w.shape)
                    self.assertEqual(g.dtype, w.dtype)
                    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)

    def elementwise_model(self, b_shape):
        """Every broadcasting elementwise op on a: [p, q] and b (b_shape,
        symbolic or static), each an output."""
        from onnx import TensorProto as T, helper as h
        nodes = [
            h.make_node("Add", ["a", "b"], ["add"]),
            h.make_node("Sub", ["a", "b"], ["sub"]),
            h.make_node("Mul", ["a", "b"], ["mul"]),
            h.make_node("Div", ["a", "b"], ["div"]),
            h.make_node("Abs", ["a"], ["abs_a"]),
            h.make_node("Pow", ["abs_a", "b"], ["pow"]),
            h.make_node("Max", ["a", "b"], ["max"]),
            h.make_node("Min", ["a", "b"], ["min"]),
            h.make_node("PRelu", ["a", "b"], ["prelu"]),
            h.make_node("Greater", ["a", "b"], ["gt"]),
            h.make_node("Less", ["a", "b"], ["lt"]),
            h.make_node("Equal", ["a", "b"], ["eq"]),
            h.make_node("Xor", ["gt", "lt"], ["xor"]),
            h.make_node("Where", ["xor", "a", "b"], ["where"]),
            # A chain whose every step broadcasts, and a reduction after it.
            h.make_node("Add", ["mul", "a"], ["chain"]),
            h.make_node("Cast", ["chain"], ["chain_i"], to=T.INT32),
            h.make_node("ReduceMax", ["chain_i"], ["rmax"], keepdims=0),
            h.make_node("ReduceSum", ["sub"], ["rsum"], keepdims=1),
        ]
        outputs = ["add", "sub", "mul", "div", "pow", "max", "min", "prelu",
                   "gt", "eq", "where", "chain", "rmax", "rsum"]
        return kt.ort_model(
            nodes, [_vi("a", T.FLOAT, ["p", "q"]), _vi("b", T.FLOAT, b_shape)],
            [_vi(o, {"gt": T.BOOL, "eq": T.BOOL, "rmax": T.INT32}.get(o, T.FLOAT),
                 None) for o in outputs], 17)

    def feeds(self, a_shape, b_shape, seed):
        rng = np.random.default_rng(seed)
        a = rng.uniform(-3, 3, a_shape).astype(np.float32)
        # b away from 0 (Div) and with repeats of a's values (Equal).
        b = rng.uniform(0.5, 2, b_shape).astype(np.float32)
        b *= np.where(rng.random(b_shape) < 0.5, -1, 1).astype(np.float32)
        if a.shape == b.shape:
            b.flat[::2] = a.flat[::2]
        return [a, b]

    def test_both_symbolic(self):
        self.check(self.elementwise_model(["r", "s"]), "both",
                   [self.feeds(a, b, i) for i, (a, b) in enumerate(self.PAIRS)])

    def test_static_other_side(self):
        # a: [p, q] symbolic against a static b: the ops' results are static,
        # and a is 1 in some dims at run time.
        pairs = [(a, (3, 4)) for a in ((1, 4), (3, 1), (1, 1), (3, 4))]
        self.check(self.elementwise_model([3, 4]), "static_b",
                   [self.feeds(a, b, i) for i, (a, b) in enumerate(pairs)])

    def test_bool_where_vector(self):
        # The reported case: Where(Xor(a: bool[d0], b: bool[d1]), s: f32[],
        # x: f32[12]) with d0 = d1 = 1 read the condition as 12 elements.
        from onnx import TensorProto as T, helper as h
        model = kt.ort_model(
            [h.make_node("Xor", ["a", "b"], ["c"]),
             h.make_node("Where", ["c", "s", "x"], ["y"])],
            [_vi("a", T.BOOL, ["d0"]), _vi("b", T.BOOL, ["d1"]),
             _vi("s", T.FLOAT, []), _vi("x", T.FLOAT, [12])],
            [_vi("y", T.FLOAT, None)], 17)
        x = np.arange(12, dtype=np.float32)
        s = np.array(7, np.float32)
        runs = [[np.array([True]), np.array([False]), s, x],
                [np.array([True]), np.array([True]), s, x],
                [np.array([True]), np.arange(12) % 3 == 0, s, x],
                [np.arange(12) % 2 == 0, np.array([False]), s, x]]
        self.check(model, "where_vector", runs)

    def test_matmul_batch(self):
        # Batch dims of 1 broadcast in MatMul, either side, symbolic.
        from onnx import TensorProto as T, helper as h
        model = kt.ort_model(
            [h.make_node("MatMul", ["a", "b"], ["y"]),
             h.make_node("Relu", ["y"], ["z"])],
            [_vi("a", T.FLOAT, ["e0", "m", 3]), _vi("b", T.FLOAT, ["e1", 3, "n"])],
            [_vi("z", T.FLOAT, None)], 17)
        rng = np.random.default_rng(5)
        runs = []
        for e0, e1, m, n in ((1, 4, 2, 5), (4, 1, 2, 5), (1, 1, 1, 1),
                             (3, 3, 5, 2), (1, 2, 1, 7)):
            runs.append([rng.standard_normal((e0, m, 3)).astype(np.float32),
                         rng.standard_normal((e1, 3, n)).astype(np.float32)])
        self.check(model, "matmul_batch", runs)


if __name__ == "__main__":
    unittest.main()
