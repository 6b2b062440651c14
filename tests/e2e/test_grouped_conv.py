"""Grouped convolutions (groups of several channels: ResNeXt, RegNet) on
the CPU, which run as a batch of GEMMs, one per group, over im2col's
windows, against torch: group counts, window sizes, strides, dilations and
pads, with and without bias, a batch fixed at 1 and one sized at run time,
and without oneDNN (the GEMM's loops).

    KILN_BIN=build/bin python -m unittest -v tests/e2e/test_grouped_conv.py
"""
import unittest
from unittest import mock

import numpy as np

import kiln_testing as kt


class GroupedConv(kt.KilnTestCase):
    CASES = [  # c, m, groups, kernel, stride, dilation, pads, bias
        (8, 8, 2, 3, 1, 1, [1, 1, 1, 1], True),
        (32, 64, 4, 3, 2, 1, [1, 1, 1, 1], True),    # ResNeXt-like, strided
        (48, 48, 3, 3, 1, 2, [2, 2, 2, 2], False),   # dilated, no bias
        (24, 12, 6, 1, 1, 1, [0, 0, 0, 0], True),    # 1x1: the input itself
        (16, 32, 8, 1, 2, 1, [0, 0, 0, 0], False),   # 1x1 strided: im2col
        (12, 24, 2, [3, 5], 1, 1, [1, 2, 0, 1], True),  # uneven window, pads
    ]

    def test_grouped_conv_runs_as_gemms_per_group(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        F = torch.nn.functional
        for i, (c, m, groups, k, stride, dilation, pads, bias) in enumerate(self.CASES):
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
                    self.assertIn("kiln_sgemm_runs(" if batch == "n" else "kiln_sgemm(",
                                  kernels)
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


if __name__ == "__main__":
    unittest.main()
