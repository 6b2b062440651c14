"""3x3 max pools with a pad (or none) run on the CPU through the prelude's
kiln_maxpool3x3 (codegen/CppPool.cpp), straight from the unpadded input:
strides 1 and 2, symmetric, asymmetric and no pads, ceil_mode, planes
narrower than a vector and odd sizes, at batches 1 and 3 through one
artifact (symbolic batch). The inputs hold -inf, +inf and NaN: a window
with a NaN gives NaN, as torch's does. 2x2 windows keep the window's own
loops. Compiled for each of kiln_testing.CPU_TARGETS (AVX-512's vmaxps
with NaNs put back, and without it kiln_maximum).

Reference: torch.nn.functional.max_pool2d in float64.
"""

import unittest

import numpy as np

import kiln_testing as kt


def pool_model(name, c, hw, k, s, pads, ceil):
    from onnx import TensorProto as T, helper as h
    node = h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k],
                       strides=[s, s], pads=list(pads), ceil_mode=int(ceil))
    graph = h.make_graph(
        [node], name,
        [h.make_tensor_value_info("x", T.FLOAT, ["n", c, hw[0], hw[1]])],
        [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def torch_pool(torch, x, k, s, pads, ceil):
    """max_pool2d with ONNX's pads (top, left, bottom, right): the input
    padded with -inf, then no pad."""
    F = torch.nn.functional
    t = torch.from_numpy(x).double()
    padded = F.pad(t, (pads[1], pads[3], pads[0], pads[2]),
                   value=float("-inf"))
    return F.max_pool2d(padded, k, s, ceil_mode=ceil).numpy()


class MaxPool(kt.KilnTestCase):
    CASES = [
        # name, channels, (h, w), kernel, stride, pads (t, l, b, r),
        # ceil_mode, through the prelude
        ("resnet", 8, (112, 112), 3, 2, (1, 1, 1, 1), False, True),
        ("s1_pad", 5, (13, 11), 3, 1, (1, 1, 1, 1), False, True),
        ("s2_nopad", 4, (17, 15), 3, 2, (0, 0, 0, 0), False, True),
        ("s2_asym", 3, (20, 37), 3, 2, (0, 1, 2, 0), False, True),
        ("s2_ceil", 6, (14, 9), 3, 2, (0, 0, 0, 0), True, True),
        ("s1_narrow", 7, (6, 5), 3, 1, (1, 1, 1, 1), False, True),
        ("k2_window", 4, (12, 12), 2, 2, (0, 0, 0, 0), False, False),
    ]

    def test_max_pools(self):
        torch = kt.import_or_skip("torch")
        for name, c, (hh, ww), k, s, pads, ceil, prelude in self.CASES:
            with self.subTest(case=name):
                rng = np.random.default_rng(len(name) + c)
                path, cpp = self.emit_cpp(
                    pool_model(name, c, (hh, ww), k, s, pads, ceil), name)
                kernels = cpp[cpp.index("//===--- kiln_k0"):]
                self.assertEqual("kiln_maxpool3x3<" in kernels, prelude,
                                 kernels[:3000])
                for target, artifact in self.cpu_artifacts(path, name):
                    for n in (1, 3):
                        x = rng.standard_normal(
                            (n, c, hh, ww)).astype(np.float32)
                        flat = x.reshape(-1)
                        picks = rng.choice(flat.size, 6, replace=False)
                        flat[picks[:2]] = np.nan
                        flat[picks[2:4]] = np.inf
                        flat[picks[4:]] = -np.inf
                        want = torch_pool(torch, x, k, s, pads, ceil)
                        (got,), _ = self.run_artifact(
                            artifact, [x],
                            out_name="%s_%s_%d" % (name, target, n))
                        self.assertEqual(got.shape, want.shape)
                        np.testing.assert_array_equal(np.isnan(got),
                                                      np.isnan(want))
                        np.testing.assert_array_equal(
                            got, want.astype(np.float32))


if __name__ == "__main__":
    unittest.main()
