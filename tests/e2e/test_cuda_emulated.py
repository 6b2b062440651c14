"""Models compiled for cuda:0 and run on the fake CUDA driver, their
generated CUDA kernels executed on the host by tests/emu (threads as fibers,
so __syncthreads and warp shuffles behave as on a GPU), against numpy.

The reductions cover each way the CUDA emitter splits one: a thread per
output, a warp per output, and a block per output (shared memory between the
warps); the test checks from the CUDA source that each case takes the path
it is meant to.
"""
import os
import re
import unittest

import numpy as np

import kiln_testing as kt


class CudaEmulatedTest(kt.KilnTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not kt.nvrtc_available():
            raise unittest.SkipTest("no CUDA toolkit (NVRTC) at %s" % kt.cuda_home())
        kt.import_or_skip("onnx")

    def run_emulated(self, tag, nodes, inputs, feeds):
        """Builds the graph, runs it on emulated cuda:0; returns the outputs
        and the CUDA source."""
        from onnx import TensorProto, helper
        graph_inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                        for n, a in zip(inputs, feeds)]
        outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
        # Opset 20: the first with Gelu.
        path = self.save_model(kt.onnx_model(nodes, graph_inputs, outputs, 20),
                               tag + ".onnx")
        artifact, env = self.cuda_emulated(path, tag)
        env["FAKE_CUDA_REPORT"] = "1"
        (y,), proc = self.run_artifact(artifact, list(feeds), tag + ".out", env=env)
        launches = re.search(r"fake cuda: (\d+) emulated", proc.stderr)
        self.assertIsNotNone(launches, proc.stderr)
        self.assertGreater(int(launches.group(1)), 0, proc.stderr)
        with open(self.path(tag + ".cu")) as f:
            return y, f.read()

    def check(self, got, want, tolerance=1e-5):
        self.assertEqual(got.shape, want.shape)
        err = kt.rel_l2(got, want)
        self.assertLessEqual(err, tolerance)
        return err

    def reduce(self, tag, op, shape, axis, keepdims, path, numpy_op):
        from onnx import helper
        rng = np.random.default_rng(len(tag))
        x = rng.standard_normal(shape).astype(np.float32)
        axes = helper.make_tensor("axes", 7, [1], [axis])
        nodes = [helper.make_node("Constant", [], ["axes"], value=axes),
                 helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)]
        y, source = self.run_emulated(tag, nodes, ["x"], [x])
        self.assertIn("(one %s per output)" % path if path != "thread" else
                      "linalg.generic", source)
        if path == "thread":
            self.assertNotIn("per output)", source)
        want = numpy_op(x.astype(np.float64), axis=axis, keepdims=bool(keepdims))
        err = self.check(y, want.astype(np.float32))
        kt.note("%s %s over axis %d of %s (a %s per output): rel L2 %.2e" %
                (tag, op, axis, shape, path, err))

    def test_block_sum(self):
        """20000 terms, 3 outputs: a block each."""
        self.reduce("block_sum", "ReduceSum", (3, 20000), 1, 0, "block", np.sum)

    def test_block_max_keepdims(self):
        self.reduce("block_max", "ReduceMax", (2, 3001), 1, 1, "block", np.max)

    def test_block_mean_outer_axis(self):
        """A reduction over the outer axis: strided reads in each block."""
        self.reduce("block_mean", "ReduceMean", (5000, 4), 0, 0, "block", np.mean)

    def test_warp_sum(self):
        self.reduce("warp_sum", "ReduceSum", (64, 40), 1, 0, "warp", np.sum)

    def test_thread_sum(self):
        """Short rows: a thread per output."""
        self.reduce("thread_sum", "ReduceSum", (300, 7), 1, 1, "thread", np.sum)

    def test_long_softmax(self):
        """Softmax over rows of 5000: its max and its sum are block
        reductions, the rest elementwise phases."""
        from onnx import helper
        x = np.random.default_rng(7).standard_normal((4, 5000)).astype(np.float32) * 4
        y, source = self.run_emulated(
            "softmax", [helper.make_node("Softmax", ["x"], ["y"], axis=1)], ["x"], [x])
        self.assertGreaterEqual(source.count("(one block per output)"), 2, source[:3000])
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        err = self.check(y, (e / e.sum(axis=1, keepdims=True)).astype(np.float32))
        kt.note("softmax over rows of 5000 on emulated cuda:0: rel L2 %.2e" % err)

    def test_concat_copies_each_input_into_its_slice(self):
        # One copy phase per input, into its slice of the result; 26 inputs
        # (a dense block's Concat), one computed by the kernel first.
        from onnx import helper
        rng = np.random.default_rng(3)
        sizes = [16] + [8] * 24 + [3]
        names = ["x%d" % i for i in range(len(sizes))]
        feeds = [rng.standard_normal((2, c, 3, 5)).astype(np.float32)
                 for c in sizes]
        nodes = [helper.make_node("Relu", ["x1"], ["r"]),
                 helper.make_node("Concat", names[:1] + ["r"] + names[2:],
                                  ["y"], axis=1)]
        y, source = self.run_emulated("concat_many", nodes, names, feeds)
        self.assertEqual(source.count("tensor.insert_slice"), len(sizes), source)
        want = np.concatenate([feeds[0], np.maximum(feeds[1], 0)] + feeds[2:],
                              axis=1)
        np.testing.assert_array_equal(y, want)

    def test_gemm_and_layernorm(self):
        """A cuBLAS GEMM feeding a LayerNorm (warp reductions) and an erf
        GELU: library launches and generated phases share slots and
        scratch."""
        from onnx import helper, numpy_helper
        rng = np.random.default_rng(3)
        x = rng.standard_normal((16, 96)).astype(np.float32)
        w = rng.standard_normal((96, 256)).astype(np.float32) / 10
        gamma = rng.standard_normal(256).astype(np.float32)
        beta = rng.standard_normal(256).astype(np.float32)
        nodes = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(a, n))
                 for n, a in (("w", w), ("gamma", gamma), ("beta", beta))]
        nodes += [helper.make_node("MatMul", ["x", "w"], ["h"]),
                  helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["n"],
                                   axis=-1, epsilon=1e-5),
                  helper.make_node("Gelu", ["n"], ["y"])]
        y, source = self.run_emulated("gemm_ln", nodes, ["x"], [x])
        self.assertIn("(one warp per output)", source)
        h = x.astype(np.float64) @ w
        n = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
        n = n * gamma + beta
        from math import erf
        want = n * 0.5 * (1 + np.vectorize(erf)(n / np.sqrt(2)))
        err = self.check(y, want.astype(np.float32), 1e-4)
        kt.note("MatMul, LayerNorm, Gelu on emulated cuda:0: rel L2 %.2e" % err)

    def test_fused_conv(self):
        """Conv + bias + ReLU, then conv + bias + residual + ReLU: with
        --cuda-cudnn-fusion (the default) each is one fused cuDNN call, with
        =false a conv launch and a generated phase; both against
        onnxruntime."""
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(11)
        w1 = rng.standard_normal((8, 4, 3, 3)).astype(np.float32) / 4
        w2 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) / 6
        b1 = rng.standard_normal(8).astype(np.float32)
        b2 = rng.standard_normal(8).astype(np.float32)
        x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c1"], ["r1"]),
                 helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
                 helper.make_node("Add", ["c2", "r1"], ["s"]),
                 helper.make_node("Relu", ["s"], ["y"])]
        graph = helper.make_graph(
            nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(a, n) for n, a in
             (("w1", w1), ("w2", w2), ("b1", b1), ("b2", b2))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        (want,) = kt.onnxruntime_outputs(model, [x])
        path = self.save_model(model, "fused.onnx")
        for fusion, fused in (("true", 2), ("false", 0)):
            with self.subTest(fusion=fusion):
                tag = "fused_" + fusion
                artifact, env = self.cuda_emulated(path, tag, "--cuda-cudnn-fusion=" + fusion)
                env["FAKE_CUDA_REPORT"] = "1"
                (y,), proc = self.run_artifact(artifact, [x], tag + ".out", env=env)
                report = re.search(r"(\d+) convs \((\d+) fused\)", proc.stderr)
                self.assertIsNotNone(report, proc.stderr)
                self.assertEqual((int(report.group(1)), int(report.group(2))), (2, fused))
                err = self.check(y, want)
                self.assertGreater((y == 0).mean(), 0.05)  # the ReLU clamps
                kt.note("conv residual block, cuDNN fusion %s: %d fused convs, "
                        "rel L2 %.2e against onnxruntime" % (fusion, fused, err))

    def test_library_stand_ins(self):
        """Every cuBLAS and cuDNN launch carries a generated stand-in, which
        runs where the library does not load: fused convs (bias, residual,
        ReLU), a grouped, strided and dilated conv, a Gemm with transB, a
        batched MatMul with a transposed operand and an f64 MatMul, run
        through the (fake) libraries, with both turned off
        (KILN_CUBLAS=none KILN_CUDNN=none) and with a cuBLAS that is not
        there; each against onnxruntime."""
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(12)
        consts = {"w1": rng.standard_normal((8, 4, 3, 3)) / 4,
                  "b1": rng.standard_normal(8),
                  "w2": rng.standard_normal((8, 8, 3, 3)) / 6,
                  "b2": rng.standard_normal(8),
                  "w3": rng.standard_normal((6, 4, 3, 3)) / 4,
                  "w4": rng.standard_normal((5, 6 * 5 * 5)) / 8,
                  "b4": rng.standard_normal(5)}
        consts = {n: a.astype(np.float32) for n, a in consts.items()}
        x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
        p = rng.standard_normal((3, 17, 20)).astype(np.float32)
        q = rng.standard_normal((3, 9, 20)).astype(np.float32)
        d = rng.standard_normal((5, 33))
        e = rng.standard_normal((33, 70))
        nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c1"], ["r1"]),
                 helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
                 helper.make_node("Add", ["c2", "r1"], ["s"]),
                 helper.make_node("Relu", ["s"], ["r2"]),
                 helper.make_node("Conv", ["r2", "w3"], ["c3"], group=2, strides=[2, 2],
                                  dilations=[2, 2], pads=[2, 2, 2, 2]),
                 helper.make_node("Flatten", ["c3"], ["f"]),
                 helper.make_node("Gemm", ["f", "w4", "b4"], ["y"], transB=1),
                 helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
                 helper.make_node("MatMul", ["p", "qt"], ["z"]),
                 helper.make_node("MatMul", ["d", "e"], ["de"])]
        value = helper.make_tensor_value_info
        graph = helper.make_graph(
            nodes, "stand_ins",
            [value("x", TensorProto.FLOAT, x.shape), value("p", TensorProto.FLOAT, p.shape),
             value("q", TensorProto.FLOAT, q.shape), value("d", TensorProto.DOUBLE, d.shape),
             value("e", TensorProto.DOUBLE, e.shape)],
            [value(n, t, None) for n, t in (("y", TensorProto.FLOAT), ("z", TensorProto.FLOAT),
                                            ("de", TensorProto.DOUBLE))],
            [numpy_helper.from_array(a, n) for n, a in consts.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        feeds = [x, p, q, d, e]
        want = kt.onnxruntime_outputs(model, feeds)
        artifact, env = self.cuda_emulated(self.save_model(model, "stand_ins.onnx"),
                                           "stand_ins")
        env["FAKE_CUDA_REPORT"] = "1"
        report = re.compile(r"fake cuda: (\d+) emulated kernel launches, (\d+) GEMMs, "
                            r"(\d+) convs")
        notice = "run as generated CUDA kernels instead"
        for mode, blas, dnn, gemms, convs in (("libraries", None, None, 3, 3),
                                              ("none", "none", "none", 0, 0),
                                              ("missing", "/nonexistent/libcublas.so.13",
                                               None, 0, 3)):
            with self.subTest(mode=mode):
                run_env = dict(env)
                for name, library in (("KILN_CUBLAS", blas), ("KILN_CUDNN", dnn)):
                    if library:
                        run_env[name] = library
                got, proc = self.run_artifact(artifact, feeds, "stand_ins_" + mode,
                                              env=run_env)
                counts = report.search(proc.stderr)
                self.assertIsNotNone(counts, proc.stderr)
                self.assertEqual((int(counts.group(2)), int(counts.group(3))),
                                 (gemms, convs), proc.stderr)
                self.assertEqual(proc.stderr.count(notice), int(mode == "missing"),
                                 proc.stderr)
                errs = []
                for g, w in zip(got, want):
                    self.assertEqual(g.dtype, w.dtype)
                    errs.append(self.check(g, w, 1e-12 if w.dtype == np.float64 else 1e-5))
                kt.note("library stand-ins, %s: rel L2 %s against onnxruntime" %
                        (mode, ", ".join("%.2e" % e for e in errs)))


if __name__ == "__main__":
    unittest.main()
