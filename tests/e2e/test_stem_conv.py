"""Convs over a few input channels with a large window (a network's stem)
run on the CPU by output rows, without im2col (kiln_conv_rows,
codegen/Gemm.h's matchRowsConv): resnet18's 7x7 stride-2 stem, a 5x5
stride-1 conv on one channel with output rows that are no multiple of 16
and 6 channels (not a multiple of 4), mixed strides with asymmetric pads,
an odd input width at stride 2, mobilenet_v2's 3x3 stride-2 stem (9
taps), 40 and 24 output channels (blocks of 32 and partial ones); with the bias and an activation on each tile, or no epilogue.
Batches 1 and 3 through one artifact (symbolic batch), compiled for each
of kiln_testing.CPU_TARGETS and, on x86, for x86-64-v2: each of the three
tiles of kiln_conv_rows runs (channels in vectors of 16 with AVX-512, in
vectors of 8 with AVX2 and FMA, outputs in vectors of 8 otherwise).

Reference: torch.nn.functional.conv2d in float64; onnxruntime for an
unpadded stem into a max pool, batch symbolic (issue 42's crash report).
"""

import unittest

import numpy as np

import kiln_testing as kt


class StemConv(kt.KilnTestCase):
    CASES = [
        # name, c, m, h, w, k, strides, pads (t, l, b, r), bias, activation
        ("resnet_stem", 3, 16, 64, 64, 7, (2, 2), (3, 3, 3, 3), True, "Relu"),
        ("one_channel", 1, 6, 28, 20, 5, (1, 1), (2, 2, 2, 2), False, None),
        ("mixed_strides", 4, 5, 40, 50, 7, (1, 2), (2, 3, 1, 0), True,
         "Sigmoid"),
        ("odd_width", 2, 9, 33, 35, 5, (2, 2), (0, 0, 0, 0), True, None),
        # mobilenet_v2's stem: 9 taps, the fewest that qualify; 33 output
        # columns and 10 channels leave partial tiles beside full ones.
        ("mobilenet_stem", 3, 10, 64, 66, 3, (2, 2), (1, 1, 1, 1), True,
         "Relu"),
        # With AVX-512 the channels go 32 at a time, in two vectors of 16:
        # a full block and a block of 8 (40), one of a vector and a half
        # (24), 14 outputs of a row a tile (29 and 17 columns). With AVX2,
        # 16 at a time in two vectors of 8 (16, 16 and 8; 16 and 8), 6
        # outputs a tile, stored 8 at a time but near a row's end.
        ("two_blocks", 3, 40, 30, 58, 7, (2, 2), (3, 3, 3, 3), True, "Relu"),
        ("vector_and_half", 3, 24, 20, 17, 3, (1, 1), (1, 1, 1, 1), False,
         None),
        # 25 columns: with AVX2 the tile at 18 stores 6 outputs, of 7 left
        # in the row, one by one (8 at a time would write past the row).
        ("one_past_a_tile", 3, 12, 6, 25, 3, (1, 1), (1, 1, 1, 1), True,
         None),
    ]

    # The tile of neither AVX-512 nor AVX2 (no target in CPU_TARGETS has it).
    FALLBACK = (["x86-64-v2"] if "x86-64-v3" in kt.CPU_TARGETS else [])

    def test_stem_convs(self):
        torch = kt.import_or_skip("torch")
        for name, c, m, hh, ww, k, strides, pads, bias, act in self.CASES:
            with self.subTest(case=name):
                rng = np.random.default_rng(len(name))
                model, w, b = kt.conv_model(name, c, m, (hh, ww), k, strides,
                                            pads, rng, bias=bias, act=act)
                path, cpp = self.emit_cpp(model, name)
                kernels = cpp[cpp.index("//===--- kiln_k0"):]
                self.assertTrue("kiln_conv_rows(" in kernels and
                                "kiln_sgemm" not in kernels, kernels[:3000])
                if act is not None or bias:
                    self.assertTrue("kiln_conv_rows_tiles(" in kernels,
                                    kernels[:3000])
                for target, artifact in self.cpu_artifacts(
                        path, name, kt.CPU_TARGETS + self.FALLBACK):
                    self.check_conv(torch, artifact, name + "_" + target,
                                    rng, (c, hh, ww), w,
                                    b if bias else None, strides, pads,
                                    act=act, rtol=1e-4, atol=1e-4)
    def test_unpadded_stem_into_max_pool(self):
        # Issue 42's crash report: Conv(x: [N, 3, 224, 224], w: [64, 3, 3,
        # 3], strides 2, no pads) -> Relu -> MaxPool(3, strides 2), the
        # batch symbolic, died with SIGSEGV in kiln-run at batch 1 (with
        # --input-shape it ran). One symbolic compile per ceil_mode, run
        # at batches 1 and 5 against onnxruntime, for each CPU target.
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(224)
        w = rng.standard_normal((64, 3, 3, 3)).astype(np.float32)
        for ceil in (0, 1):
            model = kt.ort_model(
                [h.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
                 h.make_node("Relu", ["c"], ["r"]),
                 h.make_node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3],
                             strides=[2, 2], ceil_mode=ceil)],
                [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 224, 224])],
                [h.make_tensor_value_info("y", T.FLOAT, ["N", 64, 55, 55])], 17)
            model.graph.initializer.append(nh.from_array(w, "w"))
            name = "stem_pool_%d" % ceil
            path = self.save_model(model, name + ".onnx")
            for target, artifact in self.cpu_artifacts(path, name):
                for n in (1, 5):
                    with self.subTest(ceil_mode=ceil, target=target, batch=n):
                        x = rng.standard_normal((n, 3, 224, 224)).astype(
                            np.float32)
                        (want,) = kt.onnxruntime_outputs(model, [x])
                        (got,), _ = self.run_artifact(
                            artifact, [x], out_name="%s_%s_%d" % (name, target, n))
                        self.assertEqual(got.shape, (n, 64, 55, 55))
                        np.testing.assert_allclose(got, want, rtol=1e-4,
                                                   atol=1e-4)


if __name__ == "__main__":
    unittest.main()
