"""Depthwise 3x3 convs (groups = channels) run on the CPU through the
prelude's kiln_dwconv3x3, straight from the unpadded input, with the plane
sizes as template arguments (codegen/CppGemm.cpp, emitDepthwiseCall):
strides 1 and 2, even and odd planes, symmetric, asymmetric and no pads,
with and without a bias, a ReLU6 (Clip), a ReLU or nothing after, at
batches 1 and 3 through one artifact (symbolic batch). Planes of at most
256 outputs at stride 1 whose rows keep their width run flattened
(kiln_dwconv3x3_flat, on CPUs with AVX-512; rows of 7 keep the window's
own loops without it); those at stride 2 with rows of 24 outputs or more
from each input row split into its even and odd columns (the left edge,
the interior and the right edge each split their own way); the others by
rows. Other windows, at either stride, run with their channels innermost
(kiln_dwconv). Compiled for each of kiln_testing.CPU_TARGETS.

Reference: torch.nn.functional.conv2d in float64.
"""

import re
import unittest

import numpy as np

import kiln_testing as kt


class DepthwiseConv(kt.KilnTestCase):
    CASES = [
        # name, channels, (h, w), stride, pads (t, l, b, r), bias, activation,
        # through the prelude (kiln_dwconv3x3 in the C++)
        ("s1_clip", 16, (14, 14), 1, (1, 1, 1, 1), True, "Clip", True),
        ("s2_clip", 24, (28, 28), 2, (1, 1, 1, 1), True, "Clip", True),
        ("s1_odd", 5, (13, 11), 1, (1, 1, 1, 1), False, "Relu", True),
        ("s2_odd", 6, (15, 17), 2, (1, 1, 1, 1), True, None, True),
        ("s1_asym", 8, (12, 10), 1, (0, 1, 2, 1), True, "Relu", True),
        ("s2_asym", 8, (16, 12), 2, (1, 0, 0, 1), False, "Clip", True),
        ("s1_nopad", 4, (10, 12), 1, (0, 0, 0, 0), True, None, True),
        ("s2_small", 32, (7, 7), 2, (1, 1, 1, 1), True, "Clip", True),
        ("s1_rows_of_7", 32, (7, 7), 1, (1, 1, 1, 1), True, "Clip", True),
        ("s1_7_asym", 12, (7, 7), 1, (0, 1, 2, 1), False, "Relu", True),
        ("s1_large", 8, (20, 18), 1, (1, 1, 1, 1), True, None, True),
        # rows of 24 outputs and more: split into even and odd columns
        ("s2_split", 12, (56, 56), 2, (1, 1, 1, 1), True, "Clip", True),
        ("s2_split_odd", 6, (51, 49), 2, (1, 1, 1, 1), True, None, True),
        ("s2_split_asym", 8, (50, 52), 2, (1, 0, 0, 1), False, "Clip", True),
    ]

    def check_case(self, torch, name, c, hh, ww, k, s, pads, bias, act, routine,
                   present):
        """Compiles and checks one depthwise conv; `routine` must be in its
        C++ when `present`, else not."""
        rng = np.random.default_rng(len(name) + c)
        model, w, b = kt.conv_model(name, c, c, (hh, ww), k, (s, s), pads, rng,
                                    group=c, bias=bias, act=act)
        path, cpp = self.emit_cpp(model, name)
        kernels = cpp[cpp.index("//===--- kiln_k0"):]
        called = re.search(re.escape(routine) + r"(_tiles)?[<(]", kernels)
        self.assertEqual(called is not None, present, kernels[:3000])
        for target, artifact in self.cpu_artifacts(path, name):
            self.check_conv(torch, artifact, name + "_" + target, rng,
                            (c, hh, ww), w, b if bias else None, (s, s), pads,
                            group=c, act=act, scale=3)

    def test_depthwise_convs(self):
        torch = kt.import_or_skip("torch")
        for name, c, (hh, ww), s, pads, bias, act, prelude in self.CASES:
            with self.subTest(case=name):
                self.check_case(torch, name, c, hh, ww, 3, s, pads, bias, act,
                                "kiln_dwconv3x3", prelude)

    OTHER_WINDOWS = [
        # name, channels, (h, w), window (kh, kw), stride, pads, bias,
        # activation
        ("k5_s1_28", 8, (28, 28), (5, 5), 1, (2, 2, 2, 2), True, "Relu"),
        ("k5_s1_wide", 4, (9, 33), (5, 5), 1, (2, 2, 2, 2), False, None),
        ("k7_s1_7", 12, (7, 7), (7, 7), 1, (3, 3, 3, 3), True, None),
        ("k7_s1_odd", 6, (15, 13), (7, 7), 1, (3, 2, 3, 4), False, "Clip"),
        ("k5_s1_14", 8, (14, 14), (5, 5), 1, (2, 2, 2, 2), True, "Relu"),
        ("k5_s2", 8, (28, 28), (5, 5), 2, (2, 2, 2, 2), True, "Clip"),
        # channels past a vector and a part of one; an uneven window
        ("k5_s2_20ch", 20, (14, 14), (5, 5), 2, (2, 2, 2, 2), True, "Relu"),
        ("k3x5_s1_37ch", 37, (9, 10), (3, 5), 1, (1, 2, 1, 2), False, None),
    ]

    def test_other_depthwise_windows(self):
        torch = kt.import_or_skip("torch")
        for name, c, (hh, ww), k, s, pads, bias, act in self.OTHER_WINDOWS:
            with self.subTest(case=name):
                self.check_case(torch, name, c, hh, ww, k, s, pads, bias, act,
                                "kiln_dwconv", True)


if __name__ == "__main__":
    unittest.main()
