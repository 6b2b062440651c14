"""kilnc --weights: a PyTorch checkpoint in safetensors form replaces the
weights an ONNX file was exported with. The checkpoint comes from a
torch.nn.DataParallel model, so its keys carry the "module." prefix that
--strip-prefix removes; results are compared with PyTorch eager running the
checkpoint's weights. The safetensors files are written by this test's own
writer (kiln_testing.save_safetensors), not by kiln.
"""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_testing as kt  # noqa: E402

SIZES = (64, 48, 32, 10)
BATCH = 3
TOLERANCE = 1e-5


class WeightsTest(kt.KilnTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch, make_mlp = kt.import_torch_and_make_mlp()
        cls.torch = torch
        # The ONNX file carries seed-0 weights; the checkpoint seed-7 ones.
        cls.onnx = cls.path("mlp.onnx")
        cls.exported = make_mlp.export(cls.onnx, BATCH, True, 0, SIZES)
        torch.manual_seed(7)
        cls.trained = make_mlp.MLP(SIZES).eval()
        parallel = torch.nn.DataParallel(cls.trained)
        cls.state = {k: v.detach().numpy().copy()
                     for k, v in parallel.state_dict().items()}
        assert all(k.startswith("module.") for k in cls.state), cls.state
        cls.checkpoint = kt.save_safetensors(cls.path("dp.safetensors"),
                                             cls.state)
        gen = torch.Generator().manual_seed(1)
        cls.x = torch.randn(BATCH, SIZES[0], generator=gen)
        with torch.no_grad():
            cls.expected = cls.trained(cls.x).numpy()
            cls.exported_out = cls.exported(cls.x).numpy()

    def run_with(self, name, *flags):
        artifact, proc = self.compile(self.onnx, name + ".kiln", *flags)
        kt.assert_success(self, proc)
        outputs, _ = self.run_artifact(artifact, [self.x.numpy()],
                                       out_name="out_" + name)
        return outputs[0]

    def test_dataparallel_checkpoint_with_strip_prefix(self):
        got = self.run_with("stripped", "--weights", self.checkpoint,
                            "--strip-prefix", "module.")
        err = kt.rel_l2(got, self.expected)
        kt.note("checkpoint weights vs eager: rel L2 %.3g" % err)
        self.assertLess(err, TOLERANCE)
        # The weights really changed: the exported ones give another result.
        self.assertGreater(kt.rel_l2(got, self.exported_out), 1e-2)

    def test_renamed_keys(self):
        renamed = {k[len("module."):]: v for k, v in self.state.items()}
        renamed["head.weight"] = renamed.pop("fc3.weight")
        renamed["head.bias"] = renamed.pop("fc3.bias")
        path = kt.save_safetensors(self.path("renamed.safetensors"), renamed)
        got = self.run_with("renamed", "--weights", path,
                            "--rename", "head.weight=fc3.weight",
                            "--rename=head.bias=fc3.bias")
        self.assertLess(kt.rel_l2(got, self.expected), TOLERANCE)

    def test_prefixed_keys_without_strip_prefix_fail_with_a_hint(self):
        _, proc = self.compile(self.onnx, "prefixed.kiln", "--weights",
                               self.checkpoint)
        kt.assert_clean_failure(self, proc, "module.fc1.weight",
                                "module.fc3.bias", "--strip-prefix module.")

    def test_shape_mismatch_names_key_and_shapes(self):
        bad = {k[len("module."):]: v for k, v in self.state.items()}
        bad["fc2.bias"] = np.zeros(5, np.float32)
        path = kt.save_safetensors(self.path("bad.safetensors"), bad)
        _, proc = self.compile(self.onnx, "bad.kiln", "--weights", path)
        kt.assert_clean_failure(self, proc, "'fc2.bias' is f32[5]",
                                "initializer has shape [%d]" % SIZES[2])

    def test_truncated_checkpoint_fails_cleanly(self):
        with open(self.checkpoint, "rb") as f:
            data = f.read()
        path = self.path("truncated.safetensors")
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
        _, proc = self.compile(self.onnx, "truncated.kiln", "--weights", path,
                               "--strip-prefix", "module.")
        kt.assert_clean_failure(self, proc, "truncated.safetensors",
                                "truncated file")

    def test_strip_prefix_needs_weights(self):
        _, proc = self.compile(self.onnx, "noweights.kiln", "--strip-prefix",
                               "module.")
        kt.assert_clean_failure(self, proc, "--strip-prefix",
                                "--weights, which is not given")


if __name__ == "__main__":
    unittest.main()
