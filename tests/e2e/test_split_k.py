"""1x1 convs of few output channels over many input channels on small
planes (mobilenet_v2's projections: K of 128 or more, at least 128
columns, C of at most 32768 floats, 2^20 multiply-adds or more) at batch 1
split K between the threads (kiln_sgemm_tiles): each thread a partial
product over its share of the input channels, then a share of the
output's steps, partials summed and the epilogue run. By rows where M
splits so (16 rows a thread or more), else by columns; an uneven K (150)
and a plane whose width is no multiple of 16. Batch 3 takes the tiles
path of the same artifact.

Reference: torch.nn.functional.conv2d in float64.
"""

import unittest

import numpy as np

import kiln_testing as kt


class SplitK(kt.KilnTestCase):
    CASES = [
        # name, input channels, output channels, (h, w), activation
        ("k192_m32", 192, 32, (28, 28), "Clip"),
        ("k384_m64", 384, 64, (14, 14), None),
        ("k150_m40_odd", 150, 40, (13, 17), "Relu"),
        ("k144_m24_columns", 144, 24, (20, 20), None),
    ]

    def test_projections(self):
        torch = kt.import_or_skip("torch")
        for name, c, m, (hh, ww), act in self.CASES:
            with self.subTest(case=name):
                rng = np.random.default_rng(len(name) + c)
                model, w, b = kt.conv_model(name, c, m, (hh, ww), 1, (1, 1),
                                            (0, 0, 0, 0), rng, act=act)
                path, cpp = self.emit_cpp(model, name)
                kernels = cpp[cpp.index("//===--- kiln_k0"):]
                self.assertIn("kiln_sgemm_tiles(", kernels, kernels[:3000])
                artifact, proc = self.compile(path, name + ".kiln")
                kt.assert_success(self, proc)
                self.check_conv(torch, artifact, name, rng, (c, hh, ww), w, b,
                                (1, 1), (0, 0, 0, 0), act=act, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
