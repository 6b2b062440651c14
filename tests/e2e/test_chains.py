"""Kernels chained to run image by image (codegen/cpu/ChainImages.cpp): a 1x1
conv, a depthwise conv and a projection, each working on every image on its
own, become one CPU kernel whose intermediates are locals of one image when
the batch is large (over 8 MiB for its largest tensor), of the whole batch
otherwise. Compiled once with a symbolic batch and run at several sizes.

Reference: torch (conv2d, clamp).
"""

import unittest
from unittest import mock

import numpy as np

import kiln_testing as kt


def tensor(name, elem, dims):
    from onnx import helper as h
    return h.make_tensor_value_info(name, elem, dims)


class Chains(kt.KilnTestCase):
    def test_inverted_residual_block(self):
        """MobileNetV2's block on [n, 16, 64, 64]: expand to 96 channels
        (1.5 MiB an image) with ReLU6, a 3x3 depthwise conv (stride 1 with
        the residual add, stride 2 without: its projection, 24 channels at
        32x32, is too small to run image by image and stays a kernel of its
        own) with ReLU6, project. At batch 1 the chain runs on the whole
        batch; from as many images as threads on, each thread runs whole
        images and those left over run on all threads in turn (batches 3, 5
        and 8 with 1, 2 and 3 threads: none, some or all images shared out,
        some left over); at batch 8 also without oneDNN (the kernels' own
        GEMM loops)."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        F = torch.nn.functional
        for stride, project, kernels in ((1, 16, 1), (2, 24, 2)):
            with self.subTest(stride=stride):
                rng = np.random.default_rng(40 + stride)
                w1 = (rng.standard_normal((96, 16, 1, 1)) * 0.3).astype(np.float32)
                b1 = rng.standard_normal(96).astype(np.float32)
                w2 = (rng.standard_normal((96, 1, 3, 3)) * 0.3).astype(np.float32)
                b2 = rng.standard_normal(96).astype(np.float32)
                w3 = (rng.standard_normal((project, 96, 1, 1)) * 0.1).astype(np.float32)
                b3 = rng.standard_normal(project).astype(np.float32)
                consts = [nh.from_array(v, k) for k, v in (
                    ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3),
                    ("b3", b3), ("lo", np.array(0, np.float32)),
                    ("hi", np.array(6, np.float32)))]
                nodes = [
                    h.make_node("Conv", ["x", "w1", "b1"], ["e"]),
                    h.make_node("Clip", ["e", "lo", "hi"], ["e6"]),
                    h.make_node("Conv", ["e6", "w2", "b2"], ["d"], group=96,
                                pads=[1, 1, 1, 1], strides=[stride, stride]),
                    h.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
                    h.make_node("Conv", ["d6", "w3", "b3"],
                                ["p" if stride == 1 else "y"]),
                ]
                if stride == 1:
                    nodes.append(h.make_node("Add", ["p", "x"], ["y"]))
                graph = h.make_graph(
                    nodes, "block", [tensor("x", T.FLOAT, ["n", 16, 64, 64])],
                    [tensor("y", T.FLOAT, None)], consts)
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                tag = "block%d" % stride
                path, cpp = self.emit_cpp(model, tag)
                self.assertEqual(cpp.count("// kiln kernel"), kernels)
                self.assertIn("Runs kiln_k0_image on each image", cpp)
                artifact, proc = self.compile(path, tag + ".kiln")
                kt.assert_success(self, proc)
                for n in (1, 3, 5, 8):
                    x = rng.standard_normal((n, 16, 64, 64)).astype(np.float32)
                    t = torch.from_numpy
                    e = F.conv2d(t(x), t(w1), t(b1)).clamp(0, 6)
                    d = F.conv2d(e, t(w2), t(b2), stride=stride, padding=1,
                                 groups=96).clamp(0, 6)
                    want = F.conv2d(d, t(w3), t(b3))
                    if stride == 1:
                        want = want + t(x)
                    want = want.numpy()
                    (got,), _ = self.run_artifact(artifact, [x],
                                                  out_name="%s_%d" % (tag, n))
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                    if n == 8:
                        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
                            (loops,), _ = self.run_artifact(
                                artifact, [x], out_name="%s_none" % tag)
                        np.testing.assert_allclose(loops, want, rtol=1e-4,
                                                   atol=1e-4)
                    for threads in ("1", "2", "3"):
                        if n == 1:
                            break
                        with mock.patch.dict("os.environ",
                                             {"OMP_NUM_THREADS": threads}):
                            (got,), _ = self.run_artifact(
                                artifact, [x], out_name="%s_%d_t%s" % (tag, n, threads))
                        np.testing.assert_allclose(got, want, rtol=1e-4,
                                                   atol=1e-4)


if __name__ == "__main__":
    unittest.main()
