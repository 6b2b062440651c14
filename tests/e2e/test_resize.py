"""Resize against independent references.

torch.nn.functional.interpolate, exported to ONNX, against PyTorch eager:
nearest, bilinear and bicubic (with and without align_corners), downsampling,
and an upsample feeding a conv (the decoder pattern). The exporter gives
constant scales, so the shapes are static and the conv after the resize
compiles as usual. Antialiasing (which torch's exporter lacks), cubic with
exclude_outside and nearest_mode ceil, with scales or sizes given at run time
and static or symbolic input dims, against onnxruntime.
"""

import contextlib
import io
import unittest
import warnings

import numpy as np

import kiln_testing as kt


class ResizeAgainstEager(kt.KilnTestCase):
    @classmethod
    def setUpClass(cls):
        torch = kt.import_or_skip("torch")
        super().setUpClass()
        cls.torch = torch

    def check(self, name, fn, shape, rtol=1e-5, opset=17):
        torch = self.torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.conv = torch.nn.Conv2d(shape[1], 4, 3, padding=1)

            def forward(self, x):
                return fn(self, x)

        model = Model().eval()
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
        path = self.path(name + ".onnx")
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (x,), path, input_names=["x"],
                              output_names=["y"], opset_version=opset, dynamo=False)
        with torch.no_grad():
            want = model(x).numpy()
        artifact, proc = self.compile(path, name + ".kiln")
        kt.assert_success(self, proc)
        (got,), _ = self.run_artifact(artifact, [x.numpy()], out_name=name)
        self.assertEqual(got.shape, want.shape)
        err = kt.rel_l2(got, want)
        self.assertLessEqual(err, rtol, "%s: relative L2 %.3g" % (name, err))

    def test_modes(self):
        F = self.torch.nn.functional
        cases = {
            "nearest_x2": lambda m, x: F.interpolate(x, scale_factor=2, mode="nearest"),
            "nearest_size": lambda m, x: F.interpolate(x, size=(5, 11), mode="nearest"),
            "bilinear": lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                                   align_corners=False),
            "bilinear_corners": lambda m, x: F.interpolate(
                x, size=(13, 9), mode="bilinear", align_corners=True),
            "bicubic": lambda m, x: F.interpolate(x, scale_factor=1.5, mode="bicubic",
                                                  align_corners=False),
            "bilinear_down": lambda m, x: F.interpolate(x, size=(3, 4), mode="bilinear",
                                                        align_corners=False),
            "upsample_conv": lambda m, x: m.conv(
                F.interpolate(x, scale_factor=2, mode="nearest")),
        }
        for name, fn in cases.items():
            with self.subTest(name):
                self.check(name, fn, (2, 3, 6, 8))

    def check_ort(self, name, node_attrs, x, spec, by_sizes, symbolic=False):
        """A one-node Resize model, its scales or sizes a graph input (read at
        run time), against onnxruntime."""
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
        dims = ["N%d" % i for i in range(x.ndim)] if symbolic else list(x.shape)
        spec_name = "sizes" if by_sizes else "scales"
        node = helper.make_node("Resize", ["x", "", "", "sizes"] if by_sizes
                                else ["x", "", "scales"], ["y"], **node_attrs)
        spec_type = TensorProto.INT64 if by_sizes else TensorProto.FLOAT
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
             helper.make_tensor_value_info(spec_name, spec_type, [len(spec)])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        model.ir_version = 9
        path = self.save_model(model, name + ".onnx")
        spec = np.array(spec, dtype=np.int64 if by_sizes else np.float32)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, {"x": x, spec_name: spec})[0]
        artifact, proc = self.compile(path, name + ".kiln")
        kt.assert_success(self, proc)
        (got,), _ = self.run_artifact(artifact, [x, spec], out_name=name)
        self.assertEqual(got.shape, want.shape)
        err = kt.rel_l2(got, want)
        self.assertLessEqual(err, 1e-5, "%s: relative L2 %.3g" % (name, err))

    def test_runtime_scales_against_onnxruntime(self):
        x = np.random.default_rng(2).standard_normal((1, 2, 9, 12)).astype(np.float32)
        cases = [
            ("aa_linear", dict(mode="linear", antialias=1), [1, 1, 0.5, 0.4], False),
            ("aa_cubic", dict(mode="cubic", antialias=1), [1, 2, 4, 5], True),
            ("cubic_exclude", dict(mode="cubic", exclude_outside=1,
                                   cubic_coeff_a=-0.5), [1, 1, 1.7, 0.6], False),
            ("nearest_ceil", dict(mode="nearest", nearest_mode="ceil",
                                  coordinate_transformation_mode="asymmetric"),
             [1, 1, 2.5, 1.5], False),
        ]
        for name, attrs, spec, by_sizes in cases:
            for symbolic in (False, True):
                with self.subTest(name, symbolic=symbolic):
                    self.check_ort(name + ("_sym" if symbolic else ""), attrs, x,
                                   spec, by_sizes, symbolic)

    def test_static_shape_after_constant_scales(self):
        # The conv after the upsample needs static spatial dims: kilnc's IR
        # shows the resize result fully static.
        path = self.path("upsample_conv.onnx")
        if not kt.os.path.exists(path):
            self.test_modes()
        proc = kt.kilnc(path, "--emit=mlir")
        kt.assert_success(self, proc)
        self.assertIn("-> (tensor<2x3x12x16xf32, #kiln.device<cpu>>)", proc.stdout)


if __name__ == "__main__":
    unittest.main()
