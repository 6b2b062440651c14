"""Grouped convolutions (groups of several channels: ResNeXt, RegNet) on
the CPU against torch. Groups of few taps (channels x window), stride 1 or
2, run by flattened output planes (kiln_conv_rows, which hands groups to
kiln_conv_flat) with their weight packed at compile time, or packed by the
kernel when the weight is a graph input; dilated ones, and groups of more
taps, as a batch of GEMMs, one per group, over im2col's windows. Group
counts, channels per group that do or do not fill a vector, window sizes,
strides, dilations and pads, with and without bias, a batch fixed at 1 and
one sized at run time, and without oneDNN (the GEMM's loops).

    KILN_BIN=build/bin python -m unittest -v tests/e2e/test_grouped_conv.py
"""
import unittest
from unittest import mock

import numpy as np

import kiln_testing as kt


class GroupedConv(kt.KilnTestCase):
    ROWS, GEMM = "kiln_conv_rows(", "kiln_sgemm"
    CASES = [  # c, m, groups, kernel, stride, dilation, pads, bias, way
        (8, 8, 2, 3, 1, 1, [1, 1, 1, 1], True, ROWS),
        (32, 64, 4, 3, 2, 1, [1, 1, 1, 1], True, ROWS),   # ResNeXt-like, strided
        (48, 48, 3, 3, 1, 2, [2, 2, 2, 2], False, GEMM),  # dilated, no bias
        (24, 12, 6, 1, 1, 1, [0, 0, 0, 0], True, ROWS),   # 1x1
        (16, 32, 8, 1, 2, 1, [0, 0, 0, 0], False, ROWS),  # 1x1 strided
        (12, 24, 2, [3, 5], 1, 1, [1, 2, 0, 1], True, ROWS),  # uneven window, pads
        (32, 64, 2, 3, 1, 1, [1, 1, 1, 1], True, ROWS),   # 32 per group: 2 vectors
        (48, 40, 2, 3, 2, 1, [0, 1, 1, 0], True, ROWS),   # 20 per group: a vector and a part
        (26, 39, 13, 3, 1, 1, [1, 1, 1, 1], False, ROWS), # 3 per group
        (144, 32, 2, 3, 1, 1, [1, 1, 1, 1], True, GEMM),  # 72 x 9 taps: GEMMs
    ]

    def test_grouped_conv_runs_as_gemms_per_group(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        F = torch.nn.functional
        for i, (c, m, groups, k, stride, dilation, pads, bias, way) in enumerate(self.CASES):
            kh, kw = (k, k) if isinstance(k, int) else k
            for batch in (1, "n"):
                with self.subTest(c=c, m=m, groups=groups, k=k, stride=stride,
                                  dilation=dilation, batch=batch):
                    rng = np.random.default_rng(100 + i)
                    w = (rng.standard_normal((m, c // groups, kh, kw)) /
                         np.sqrt(c // groups * kh * kw)).astype(np.float32)
                    b = rng.standard_normal(m).astype(np.float32)
                    inits = [nh.from_array(w, "w")] + ([nh.from_array(b, "b")] if bias else [])
                    node = h.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"],
                                       group=groups, kernel_shape=[kh, kw],
                                       strides=[stride] * 2, dilations=[dilation] * 2,
                                       pads=pads)
                    graph = h.make_graph(
                        [node], "grouped",
                        [h.make_tensor_value_info("x", T.FLOAT, [batch, c, 15, 14])],
                        [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
                    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                    tag = "grouped%d_%s" % (i, batch)
                    _, cpp = self.emit_cpp(model, tag)
                    kernels = cpp.split("// kiln kernel", 1)[1]
                    self.assertIn(way, kernels)
                    if way == self.ROWS:  # no im2col GEMM beside it
                        self.assertNotIn(self.GEMM, kernels.split("kiln_conv_rows(", 1)[1])
                    path = self.save_model(model, tag + ".onnx")
                    artifact, proc = self.compile(path, tag + ".kiln")
                    kt.assert_success(self, proc)
                    for n in ((1,) if batch == 1 else (1, 3)):
                        x = rng.standard_normal((n, c, 15, 14)).astype(np.float32)
                        xt = F.pad(torch.from_numpy(x), (pads[1], pads[3], pads[0], pads[2]))
                        want = F.conv2d(xt, torch.from_numpy(w),
                                        torch.from_numpy(b) if bias else None,
                                        stride=stride, dilation=dilation,
                                        groups=groups).numpy()
                        (got,), _ = self.run_artifact(artifact, [x], "%s_%d" % (tag, n))
                        self.assertEqual(got.shape, want.shape)
                        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
                            (loops,), _ = self.run_artifact(artifact, [x],
                                                            "%s_%d_none" % (tag, n))
                        np.testing.assert_allclose(loops, want, rtol=1e-4, atol=1e-4)

    def test_grouped_conv_of_a_weight_input_packs_it_in_the_kernel(self):
        """A weight that is a graph input gets no panels at compile time:
        kiln_conv_flat packs each block of channels itself."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        F = torch.nn.functional
        c, m, groups = 32, 48, 2
        node = h.make_node("Conv", ["x", "w"], ["y"], group=groups, kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1])
        graph = h.make_graph(
            [node], "grouped_input",
            [h.make_tensor_value_info("x", T.FLOAT, ["n", c, 7, 9]),
             h.make_tensor_value_info("w", T.FLOAT, [m, c // groups, 3, 3])],
            [h.make_tensor_value_info("y", T.FLOAT, None)])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        _, cpp = self.emit_cpp(model, "grouped_input")
        call = cpp.split("// kiln kernel", 1)[1].split("!kiln_conv_rows(", 1)[1]
        self.assertIn("nullptr", call.split(")", 1)[0])  # no panels
        path = self.save_model(model, "grouped_input.onnx")
        artifact, proc = self.compile(path, "grouped_input.kiln")
        kt.assert_success(self, proc)
        rng = np.random.default_rng(7)
        for n in (1, 2):
            x = rng.standard_normal((n, c, 7, 9)).astype(np.float32)
            w = rng.standard_normal((m, c // groups, 3, 3)).astype(np.float32) / 12
            want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1,
                            groups=groups).numpy()
            (got,), _ = self.run_artifact(artifact, [x, w], "grouped_input_%d" % n)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
