"""Per-op correctness on small models.

OfficialNodeCases: ONNX's own node test cases (onnx.backend.test.case.node,
the generators behind onnx/backend/test/data/node) for the ops kiln supports:
the official model, inputs and expected outputs. Each case is compiled once,
as a subTest of the test method for its op.

BuiltModelCases: models built with onnx.helper for what the official cases do
not cover (other broadcasting patterns, edge values, 1-D and batched MatMul,
Gemm variants, multi-node graphs whose elementwise chains kiln fuses,
multiple outputs, other dtypes), checked against onnxruntime after checking
that onnxruntime and onnx.reference.ReferenceEvaluator agree.

Policy: a case that only uses supported ops on float32 tensors must compile,
run and match. Other dtypes may be rejected by kilnc, but only cleanly (exit
code 1 and a message saying what is not supported); then the case is skipped
with that reason. Anything that compiles must produce the right numbers.
"""

import collections
import contextlib
import io
import math
import os
import re
import unittest
import warnings

import numpy as np

import kiln_testing as kt

SUPPORTED_OPS = ("Add", "Sub", "Mul", "Div", "Relu", "Erf", "Tanh", "Sigmoid",
                 "Exp", "Neg", "Sqrt", "Gelu", "MatMul", "Gemm", "Identity",
                 "Constant")
# Dtypes every supported op must handle; others may be rejected cleanly.
MUST_WORK_DTYPES = {np.dtype(np.float32)}
UNSUPPORTED_MESSAGE = re.compile(r"unsupported|not supported", re.IGNORECASE)


def tolerances(dtype, rtol=None, atol=None):
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return dict(rtol=rtol or 1e-5, atol=atol or 1e-6)
    if dtype == np.float64:
        return dict(rtol=rtol or 1e-12, atol=atol or 1e-12)
    return None  # exact


def first_error_line(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()
    lines = text.strip().splitlines()
    return lines[0] if lines else "(no message)"


class _Summary:
    def __init__(self, title):
        self.title = title
        self.passed = []
        self.failed = []
        self.skipped = []  # (case, reason)

    def report(self):
        lines = ["%s: %d passed, %d failed, %d skipped" % (
            self.title, len(self.passed), len(self.failed), len(self.skipped))]
        for name in self.failed:
            lines.append("  FAILED  %s" % name)
        for name, reason in self.skipped:
            lines.append("  skipped %s: %s" % (name, reason))
        kt.note("\n".join(lines))


class _CaseRunner(kt.KilnTestCase):
    """Shared compile / run / compare logic; subclasses fill `summary`."""

    summary = None

    @classmethod
    def tearDownClass(cls):
        if cls.summary is not None and (cls.summary.passed or cls.summary.failed
                                        or cls.summary.skipped):
            cls.summary.report()
        super().tearDownClass()

    def check_case(self, name, model, inputs, expected, must_work, rtol=None, atol=None):
        """Compiles `model`, runs it on `inputs` and compares every output with
        `expected` (arrays, graph-output order). Skips (via skipTest) when the
        model is rejected cleanly and `must_work` is false."""
        model_path = self.save_model(model, name + ".onnx")
        artifact, proc = self.compile(model_path, name + ".kiln")
        if artifact is None:
            # Whatever the reason, kilnc must not crash.
            kt.assert_clean_failure(self, proc)
            if must_work:
                self.fail("kilnc rejected a float32 model of supported ops:\n"
                          + kt.describe(proc))
            if not UNSUPPORTED_MESSAGE.search(proc.stderr):
                self.fail("kilnc failed without saying what is unsupported:\n"
                          + kt.describe(proc))
            self.skipTest("kilnc: " + first_error_line(proc.stderr).replace(
                self.tmp + os.sep, ""))
        outputs, run_proc = self.run_artifact(artifact, inputs, out_name=name + "_out")
        self.assertEqual(len(outputs), len(expected),
                         "number of outputs\n" + kt.describe(run_proc))
        for i, (got, want) in enumerate(zip(outputs, expected)):
            want = np.asarray(want)
            what = "%s output %d" % (name, i)
            self.assertEqual(got.dtype, want.dtype, what + ": dtype")
            self.assertEqual(got.shape, want.shape, what + ": shape")
            tol = tolerances(want.dtype, rtol, atol)
            if tol is None:
                np.testing.assert_array_equal(got, want, err_msg=what)
            else:
                np.testing.assert_allclose(got, want, err_msg=what, **tol)

    def run_cases(self, cases):
        """cases: iterable of (name, thunk) where thunk() runs the checks."""
        for name, thunk in cases:
            with self.subTest(case=name):
                outcome = "failed"
                try:
                    thunk()
                    outcome = "passed"
                except unittest.SkipTest as e:
                    outcome = "skipped"
                    self.summary.skipped.append((name, str(e)))
                    raise
                finally:
                    if outcome == "passed":
                        self.summary.passed.append(name)
                    elif outcome == "failed":
                        self.summary.failed.append(name)


# ---------------------------------------------------------------------------
# ONNX's official node test cases


def _collect_official_cases():
    """All official node cases (generated in-process); None if unavailable."""
    try:
        from onnx.backend.test.case import node as node_cases
    except ImportError as e:
        return None, "onnx.backend.test.case.node is not importable: %s" % e
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    return cases, None


def _as_array(value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return None


def _classify(case):
    """(op family, skip reason or None, must_work)."""
    nodes = list(case.model.graph.node)
    ops = [n.op_type for n in nodes]
    family = ops[0] if len(set(ops)) == 1 else "multi-node"
    inputs, outputs = case.data_sets[0]
    if any(_as_array(v) is None for v in list(inputs) + list(outputs)):
        return family, "inputs/outputs are not plain tensors (sequence/optional)", False
    if len(case.data_sets) != 1:
        return family, "has %d data sets (expected 1)" % len(case.data_sets), False
    unsupported = sorted(set(ops) - set(SUPPORTED_OPS) - {""})
    if any(n.domain not in ("", "ai.onnx") for n in nodes):
        unsupported.append("non-default domain")
    if unsupported:
        return family, "uses ops kiln does not support: " + ", ".join(unsupported), False
    dtypes = {_as_array(v).dtype for v in list(inputs) + list(outputs)}
    return family, None, dtypes <= MUST_WORK_DTYPES


class OfficialNodeCases(_CaseRunner):

    summary = _Summary("official ONNX node cases")
    _cases = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cases, reason = _collect_official_cases()
        if cases is None:
            kt.note("skipping official ONNX node cases: " + reason)
            raise unittest.SkipTest(reason)
        names = set()
        by_family = collections.defaultdict(list)
        for case in cases:
            nodes = case.model.graph.node
            ops = {n.op_type for n in nodes}
            single = len(nodes) == 1 and nodes[0].op_type in SUPPORTED_OPS
            if single or ops <= set(SUPPORTED_OPS):
                names.add(case.name)
        for case in cases:
            # The function-expanded versions of our ops' cases too, so their
            # (unsupported) ops show up in the skip list.
            expanded = any(case.name.startswith(n + "_expanded") for n in names)
            if case.name in names or expanded:
                family, _, _ = _classify(case)
                by_family[family].append(case)
        cls._cases = by_family
        kt.note("official ONNX node cases selected: %d" % sum(map(len, by_family.values())))

    def run_family(self, family):
        cases = self._cases.get(family, [])
        if not cases:
            self.skipTest("this onnx has no node test cases for %s" % family)

        def make(case):
            def thunk():
                _, reason, must_work = _classify(case)
                if reason:
                    self.skipTest(reason)
                inputs, outputs = case.data_sets[0]
                self.check_case(case.name, case.model,
                                [_as_array(v) for v in inputs],
                                [_as_array(v) for v in outputs], must_work)
            return thunk

        self.run_cases((case.name, make(case)) for case in cases)

    def test_function_expansions_and_multi_node(self):
        self.run_family("multi-node")


def _add_family_test(op):
    def test(self):
        self.run_family(op)
    test.__name__ = "test_official_%s" % op.lower()
    test.__doc__ = None
    setattr(OfficialNodeCases, test.__name__, test)


for _op in SUPPORTED_OPS:
    _add_family_test(_op)


# ---------------------------------------------------------------------------
# Models built here, checked against onnxruntime and the ONNX reference


def _rng(seed):
    return np.random.default_rng(seed)


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


BuiltCase = collections.namedtuple(
    "BuiltCase", "name nodes inputs outputs initializers opset rtol atol expected")


def built(name, nodes, inputs, outputs, initializers=None, opset=17, rtol=None, atol=None,
          expected=None):
    """inputs: list of (name, array); outputs: list of names; initializers:
    list of (name, array); expected: optional function(*input arrays) giving
    the outputs, for when onnxruntime and ReferenceEvaluator are not precise
    enough (both compute float64 Erf in float32)."""
    return BuiltCase(name, nodes, inputs, outputs, initializers or [], opset, rtol, atol,
                     expected)


def _built_cases():
    from onnx import helper as h
    from onnx import numpy_helper as nh
    n = h.make_node
    r = _rng(7)
    cases = []

    # -- broadcasting (float32) --
    cases.append(built("add_bcast_rank_mismatch", [n("Add", ["x", "y"], ["z"])],
                       [("x", _f32(r, 2, 1, 4)), ("y", _f32(r, 3, 1))], ["z"]))
    cases.append(built("sub_scalar_rhs", [n("Sub", ["x", "s"], ["z"])],
                       [("x", _f32(r, 2, 3)), ("s", np.array(0.75, np.float32))], ["z"]))
    cases.append(built("sub_scalar_lhs", [n("Sub", ["s", "x"], ["z"])],
                       [("s", np.array(-1.5, np.float32)), ("x", _f32(r, 2, 3))], ["z"]))
    cases.append(built("mul_both_sides_broadcast", [n("Mul", ["x", "y"], ["z"])],
                       [("x", _f32(r, 4, 1)), ("y", _f32(r, 1, 5))], ["z"]))
    cases.append(built("div_lhs_broadcast", [n("Div", ["x", "y"], ["z"])],
                       [("x", _f32(r, 5)), ("y", (np.abs(_f32(r, 3, 5)) + 0.5))], ["z"]))
    cases.append(built("add_same_input_twice", [n("Add", ["x", "x"], ["z"])],
                       [("x", _f32(r, 3, 4))], ["z"]))
    cases.append(built("mul_size1_dims_both", [n("Mul", ["x", "y"], ["z"])],
                       [("x", _f32(r, 1, 3, 1)), ("y", _f32(r, 2, 1, 4))], ["z"]))

    # -- unary ops at edge values (float32) --
    def unary(op, values, opset=17, **attrs):
        x = np.array(values, np.float32)
        return built("%s_edge_values%s" % (op.lower(), "_" + "_".join(
            "%s_%s" % kv for kv in attrs.items()) if attrs else ""),
            [n(op, ["x"], ["y"], **attrs)], [("x", x)], ["y"], opset=opset)

    cases.append(unary("Relu", [-np.inf, -3.0, -1e-30, 0.0, 1e-30, 2.5, np.inf]))
    cases.append(unary("Neg", [-np.inf, -3.0, 0.0, 2.5, np.inf]))
    cases.append(unary("Sigmoid", [-1000.0, -100.0, -30.0, -1.0, 0.0, 1.0, 30.0, 100.0, 1000.0]))
    cases.append(unary("Exp", [-1000.0, -100.0, -1.0, 0.0, 1.0, 10.0, 88.0, 89.0, np.inf, -np.inf]))
    cases.append(unary("Sqrt", [0.0, 1e-30, 0.25, 2.0, 1e30, np.inf, -1.0]))
    cases.append(unary("Tanh", [-1000.0, -50.0, -10.0, -1e-4, 0.0, 1e-4, 0.5, 10.0, 50.0, 1000.0]))
    cases.append(unary("Erf", [-1000.0, -10.0, -3.0, -1e-3, 0.0, 1e-3, 0.5, 3.0, 10.0, 1000.0]))
    # Dense sweeps for the C++ backend's own f32 exp and erf (a few ulp):
    # every binade exp reaches, down through the subnormal results, and erf
    # from tiny arguments (relative accuracy) to where it is +-1.
    sweep = np.concatenate([np.linspace(-103.9, 88.7, 2001), [np.nan, -87.5, -100.0, -103.0]])
    cases.append(built("exp_sweep_edge_values", [n("Exp", ["x"], ["y"])],
                       [("x", sweep.astype(np.float32))], ["y"], rtol=1e-6, atol=0,
                       expected=lambda x: [np.exp(x.astype(np.float64)).astype(np.float32)]))
    tiny = np.array([1e-30, -1e-20, 3e-8, -1e-5, 2e-3, np.nan], np.float32)
    sweep = np.concatenate([np.linspace(-6, 6, 2001, dtype=np.float32), tiny])
    cases.append(built("erf_sweep_edge_values", [n("Erf", ["x"], ["y"])],
                       [("x", sweep.astype(np.float32))], ["y"], rtol=1e-6, atol=0,
                       expected=lambda x: [np.vectorize(math.erf)(
                           x.astype(np.float64)).astype(np.float32)]))
    wide = np.concatenate([np.linspace(-12, 12, 97), [-1000.0, -100.0, 100.0, 1000.0]])
    cases.append(unary("Gelu", wide, opset=20))
    cases.append(unary("Gelu", wide, opset=20, approximate="tanh"))

    # -- MatMul (float32) --
    cases.append(built("matmul_1d_2d", [n("MatMul", ["a", "b"], ["y"])],
                       [("a", _f32(r, 4)), ("b", _f32(r, 4, 3))], ["y"]))
    cases.append(built("matmul_2d_1d", [n("MatMul", ["a", "b"], ["y"])],
                       [("a", _f32(r, 3, 4)), ("b", _f32(r, 4))], ["y"]))
    cases.append(built("matmul_batch_broadcast_ranks", [n("MatMul", ["a", "b"], ["y"])],
                       [("a", _f32(r, 2, 1, 3, 4)), ("b", _f32(r, 5, 4, 2))], ["y"]))
    cases.append(built("matmul_2d_3d", [n("MatMul", ["a", "b"], ["y"])],
                       [("a", _f32(r, 3, 4)), ("b", _f32(r, 2, 4, 5))], ["y"]))
    cases.append(built("matmul_odd_sizes_constant_rhs", [n("MatMul", ["a", "w"], ["y"])],
                       [("a", _f32(r, 33, 65))], ["y"],
                       initializers=[("w", _f32(r, 65, 17))], atol=1e-5))

    # -- Gemm (float32) --
    cases.append(built("gemm_transA_transB_scalar_C", [
        n("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=-2.0, transA=1, transB=1)],
        [("a", _f32(r, 4, 3)), ("b", _f32(r, 5, 4))], ["y"],
        initializers=[("c", np.array(0.25, np.float32))]))
    cases.append(built("gemm_column_bias", [n("Gemm", ["a", "b", "c"], ["y"])],
                       [("a", _f32(r, 3, 6)), ("b", _f32(r, 6, 4)), ("c", _f32(r, 3, 1))], ["y"]))
    cases.append(built("gemm_1d_bias_transB", [n("Gemm", ["a", "b", "c"], ["y"], transB=1)],
                       [("a", _f32(r, 3, 6)), ("b", _f32(r, 4, 6)), ("c", _f32(r, 4))], ["y"]))
    cases.append(built("gemm_no_C_alpha", [n("Gemm", ["a", "b"], ["y"], alpha=3.0)],
                       [("a", _f32(r, 2, 5)), ("b", _f32(r, 5, 3))], ["y"]))
    cases.append(built("gemm_larger_constant_weights", [
        n("Gemm", ["a", "w", "bias"], ["y"], transB=1)],
        [("a", _f32(r, 67, 129))], ["y"],
        initializers=[("w", _f32(r, 33, 129, scale=0.1)), ("bias", _f32(r, 33))], atol=1e-5))

    # -- Identity / Constant / graph structure (float32) --
    w = _f32(r, 2, 3)
    cases.append(built("identity_of_initializer_and_use", [
        n("Identity", ["w"], ["w_out"]), n("Add", ["x", "w"], ["sum"])],
        [("x", _f32(r, 2, 3))], ["w_out", "sum"], initializers=[("w", w)]))
    cases.append(built("constant_value_attr", [
        n("Constant", [], ["k"], value=nh.from_array(_f32(r, 2, 3), "k")),
        n("Mul", ["x", "k"], ["y"])],
        [("x", _f32(r, 2, 3))], ["y"]))
    cases.append(built("constant_as_graph_output", [
        n("Constant", [], ["k"], value=nh.from_array(_f32(r, 4), "k")),
        n("Relu", ["x"], ["y"])],
        [("x", _f32(r, 4))], ["k", "y"]))
    cases.append(built("outputs_in_reverse_order", [
        n("Relu", ["x"], ["a"]), n("Neg", ["x"], ["b"]), n("Exp", ["x"], ["c"])],
        [("x", _f32(r, 3, 2))], ["c", "b", "a"]))
    cases.append(built("graph_input_is_also_output", [n("Sigmoid", ["x"], ["y"])],
                       [("x", _f32(r, 2, 2))], ["y", "x"]))
    cases.append(built("two_inputs_order_matters", [n("Sub", ["b", "a"], ["y"])],
                       [("a", _f32(r, 3, 3)), ("b", _f32(r, 3, 3))], ["y"]))
    # An elementwise chain kiln fuses, with an intermediate that is also a
    # graph output and values used by several consumers.
    cases.append(built("fused_chain_with_intermediate_output", [
        n("Mul", ["x", "w"], ["t1"]), n("Add", ["t1", "b"], ["t2"]),
        n("Sigmoid", ["t2"], ["s"]), n("Mul", ["t2", "s"], ["swish"]),
        n("Sub", ["swish", "c"], ["d"]), n("Tanh", ["d"], ["z"]),
        n("Div", ["z", "t2"], ["q"])],
        [("x", _f32(r, 3, 4)), ("b", _f32(r, 4))], ["z", "t2", "q"],
        initializers=[("w", _f32(r, 1, 4)), ("c", np.array(0.1, np.float32))]))
    cases.append(built("small_mlp_erf_gelu", [
        n("Gemm", ["x", "w1", "b1"], ["h1"], transB=1), n("Relu", ["h1"], ["r1"]),
        n("MatMul", ["r1", "w2"], ["m2"]), n("Add", ["m2", "b2"], ["h2"]),
        n("Div", ["h2", "sqrt2"], ["d"]), n("Erf", ["d"], ["e"]),
        n("Add", ["e", "one"], ["e1"]), n("Mul", ["h2", "e1"], ["g"]),
        n("Mul", ["g", "half"], ["y"])],
        [("x", _f32(r, 5, 12))], ["y"],
        initializers=[("w1", _f32(r, 16, 12, scale=0.3)), ("b1", _f32(r, 16)),
                      ("w2", _f32(r, 16, 7, scale=0.3)), ("b2", _f32(r, 7)),
                      ("sqrt2", np.array(np.sqrt(2), np.float32)),
                      ("one", np.array(1, np.float32)),
                      ("half", np.array(0.5, np.float32))]))
    # Names that are not C identifiers, and initializers whose names only
    # differ in punctuation (a naive sanitizer maps both to the same symbol);
    # the 40x40 ones are big enough to go to the weights section.
    cases.append(built("awkward_names", [
        n("Add", ["input:0/x.1", "w.a"], ["t"]), n("Mul", ["t", "w_a"], ["out put/0"]),
        n("MatMul", ["xb", "big.a"], ["m1"]), n("MatMul", ["m1", "big_a"], ["m/2"])],
        [("input:0/x.1", _f32(r, 2, 3)), ("xb", _f32(r, 40, 40))], ["out put/0", "m/2"],
        initializers=[("w.a", _f32(r, 2, 3)), ("w_a", _f32(r, 2, 3)),
                      ("big.a", _f32(r, 40, 40, scale=0.2)),
                      ("big_a", _f32(r, 40, 40, scale=0.2))], atol=1e-5))
    cases.append(built("gelu_two_consumers", [
        n("Gelu", ["x"], ["g"]), n("Mul", ["g", "g"], ["sq"]), n("Add", ["g", "x"], ["y"])],
        [("x", _f32(r, 4, 5))], ["sq", "y"], opset=20))

    # -- other dtypes: may be rejected cleanly --
    def arith(suffix, a, b):
        return built("arith_" + suffix, [
            n("Add", ["a", "b"], ["add"]), n("Sub", ["a", "b"], ["sub"]),
            n("Mul", ["a", "b"], ["mul"]), n("Div", ["a", "b"], ["div"])],
            [("a", a), ("b", b)], ["add", "sub", "mul", "div"])

    cases.append(arith("f64_bcast", r.standard_normal((3, 4)),
                       r.standard_normal(4) + 3.0))
    # Non-negative dividends and positive divisors: truncating and flooring
    # division agree (test_div_int32_trunc covers negative operands).
    cases.append(arith("i32", r.integers(0, 100000, (3, 4)).astype(np.int32),
                       r.integers(1, 50, (3, 4)).astype(np.int32)))
    cases.append(arith("i64_wide", r.integers(0, 2 ** 40, (2, 5)).astype(np.int64),
                       r.integers(1, 2 ** 20, (5,)).astype(np.int64)))

    def relu_neg(suffix, x):
        return built("relu_neg_" + suffix, [n("Relu", ["x"], ["r"]), n("Neg", ["x"], ["g"])],
                     [("x", x)], ["r", "g"])

    cases.append(relu_neg("f64", r.standard_normal((3, 4))))
    cases.append(relu_neg("i32", r.integers(-1000, 1000, (3, 4)).astype(np.int32)))
    cases.append(relu_neg("i64", r.integers(-2 ** 40, 2 ** 40, (3, 4)).astype(np.int64)))
    import math
    erf64 = np.vectorize(math.erf, otypes=[np.float64])
    cases.append(built("unary_f64", [
        n("Exp", ["x"], ["e"]), n("Sqrt", ["p"], ["s"]), n("Tanh", ["x"], ["t"]),
        n("Sigmoid", ["x"], ["g"]), n("Erf", ["x"], ["f"])],
        [("x", r.standard_normal((2, 3)) * 2), ("p", np.abs(r.standard_normal((2, 3))))],
        ["e", "s", "t", "g", "f"],
        expected=lambda x, p: [np.exp(x), np.sqrt(p), np.tanh(x), 1 / (1 + np.exp(-x)),
                               erf64(x)]))
    cases.append(built("matmul_f64", [n("MatMul", ["a", "b"], ["y"])],
                       [("a", r.standard_normal((3, 4))), ("b", r.standard_normal((4, 2)))], ["y"],
                       rtol=1e-12, atol=1e-12))
    return cases


def _make_model(case, output_arrays=None):
    from onnx import helper as h
    from onnx import numpy_helper as nh
    import onnx

    def vi(name, array):
        elem = h.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
        return h.make_tensor_value_info(name, elem, list(np.asarray(array).shape))

    inputs = [vi(name, array) for name, array in case.inputs]
    if output_arrays is None:
        outputs = [h.make_tensor_value_info(name, 0, None) for name in case.outputs]
    else:
        outputs = [vi(name, a) for name, a in zip(case.outputs, output_arrays)]
    graph = h.make_graph(case.nodes, case.name, inputs, outputs,
                         [nh.from_array(np.asarray(a), name) for name, a in case.initializers])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", case.opset)],
                         producer_name="kiln-e2e")
    model.ir_version = min(model.ir_version, 10)
    if output_arrays is not None:
        onnx.checker.check_model(model)
    return model


def references(case):
    """Outputs from onnxruntime, checked against ReferenceEvaluator. Returns
    (arrays, None) or (None, reason why there is no trustworthy reference)."""
    from onnx.reference import ReferenceEvaluator
    feeds = {name: np.asarray(a) for name, a in case.inputs}
    if case.expected is not None:
        return [np.asarray(a) for a in case.expected(*feeds.values())], None
    try:
        with np.errstate(all="ignore"):
            ref = ReferenceEvaluator(_make_model(case)).run(None, feeds)
    except Exception as e:  # noqa: BLE001
        ref, ref_error = None, "%s: %s" % (type(e).__name__, e)
    try:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        template = ref if ref is not None else None
        model = _make_model(case, template)
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        rt = session.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        rt, rt_error = None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
    if rt is None and ref is None:
        return None, "no reference can run it (onnxruntime: %s; reference: %s)" % (
            rt_error, ref_error)
    if rt is None or ref is None:
        # One independent reference is still a reference.
        return (rt if rt is not None else [np.asarray(a) for a in ref]), None
    for i, (a, b) in enumerate(zip(rt, ref)):
        a, b = np.asarray(a), np.asarray(b)
        # The references must agree at least as closely as kiln must match.
        tol = tolerances(a.dtype, case.rtol, case.atol)
        ok = a.shape == b.shape and a.dtype == b.dtype and (
            np.array_equal(a, b) if tol is None else
            np.allclose(a, b, equal_nan=True, **tol))
        if not ok:
            return None, "onnxruntime and ReferenceEvaluator disagree on output %d" % i
    return rt, None


class BuiltModelCases(_CaseRunner):

    summary = _Summary("built single-op and small-graph cases")

    def run_built(self, predicate):
        cases = [c for c in _built_cases() if predicate(c)]
        self.assertTrue(cases)

        def make(case):
            def thunk():
                expected, reason = references(case)
                if expected is None:
                    self.skipTest(reason)
                dtypes = {np.asarray(a).dtype for _, a in case.inputs} | {
                    np.asarray(a).dtype for a in expected}
                model = _make_model(case, expected)
                self.check_case(case.name, model, [np.asarray(a) for _, a in case.inputs],
                                expected, dtypes <= MUST_WORK_DTYPES,
                                rtol=case.rtol, atol=case.atol)
            return thunk

        self.run_cases((c.name, make(c)) for c in cases)

    @staticmethod
    def _is_f32(case):
        return all(np.asarray(a).dtype == np.float32 for _, a in case.inputs)

    def test_float32_broadcasting_and_arithmetic(self):
        self.run_built(lambda c: self._is_f32(c) and c.name.split("_")[0] in (
            "add", "sub", "mul", "div"))

    def test_float32_unary_edge_values(self):
        self.run_built(lambda c: self._is_f32(c) and "_edge_values" in c.name)

    def test_float32_matmul_and_gemm(self):
        self.run_built(lambda c: self._is_f32(c) and c.name.split("_")[0] in ("matmul", "gemm"))

    def test_float32_graphs(self):
        self.run_built(lambda c: self._is_f32(c) and c.name.split("_")[0] not in (
            "add", "sub", "mul", "div", "matmul", "gemm") and "_edge_values" not in c.name)

    def test_other_dtypes(self):
        self.run_built(lambda c: not self._is_f32(c))


if __name__ == "__main__":
    unittest.main()
